package hostrt

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func create(t *testing.T, r *Runtime, env map[string]string) driver.Info {
	t.Helper()
	in, err := r.Create(t.Context(), &driver.CreateRequest{Env: env, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func run(t *testing.T, r *Runtime, id string, c driver.Command) (driver.ExitStatus, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if c.Timeout == 0 {
		c.Timeout = time.Minute
	}
	st, err := r.Exec(t.Context(), id, &c)
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	return st, out.String(), errb.String()
}

func TestExec(t *testing.T) {
	r := New(t.TempDir())
	in := create(t, r, map[string]string{"A": "box", "B": "box"})
	st, out, _ := run(t, r, in.ID, driver.Command{Shell: `echo "$HOME $A $B"; exit 3`, Env: map[string]string{"B": "cmd"}})
	if want := in.Home + " box cmd\n"; st.ExitCode != 3 || out != want {
		t.Errorf("got %+v %q, want exit 3 and %q", st, out, want)
	}
	st, _, stderr := run(t, r, in.ID, driver.Command{Args: []string{"no-such-program-hostrt"}})
	if st.ExitCode != 127 || !strings.Contains(stderr, "not found") {
		t.Errorf("missing program: got %+v %q, want exit 127 and a message", st, stderr)
	}
	if st, _, _ := run(t, r, in.ID, driver.Command{Shell: "sleep 60", Timeout: 50 * time.Millisecond}); !st.TimedOut {
		t.Errorf("got %+v, want TimedOut", st)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.Exec(ctx, in.ID, &driver.Command{Shell: "sleep 60", Timeout: time.Minute, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled ctx: got %v, want context.Canceled", err)
	}
}

func TestErrors(t *testing.T) {
	home := t.TempDir()
	r := NewWithHome(home)
	in := create(t, r, nil)
	if in.Home != home {
		t.Fatalf("home %q, want %q", in.Home, home)
	}
	ctx := t.Context()
	if err := r.Upload(ctx, in.ID, filepath.Join(home, "f"), strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	_, err := r.Stat(ctx, in.ID, filepath.Join(home, "missing"))
	if !errors.Is(err, sberrors.ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: got %v, want ErrNotFound and fs.ErrNotExist", err)
	}
	if _, err := r.Download(ctx, in.ID, home); !errors.Is(err, sberrors.ErrIsDirectory) {
		t.Errorf("Download of a directory: got %v, want ErrIsDirectory", err)
	}
	if _, err := r.ReadDir(ctx, in.ID, filepath.Join(home, "f")); !errors.Is(err, sberrors.ErrNotDirectory) {
		t.Errorf("ReadDir of a file: got %v, want ErrNotDirectory", err)
	}
	if err := r.Destroy(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx, in.ID); !errors.Is(err, sberrors.ErrNotFound) {
		t.Errorf("Get after Destroy: got %v, want ErrNotFound", err)
	}
	if _, err := r.Stat(ctx, in.ID, home); !errors.Is(err, sberrors.ErrNotFound) {
		t.Errorf("Stat after Destroy: got %v, want ErrNotFound", err)
	}
}
