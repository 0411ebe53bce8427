package session_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

// checkConfinement asserts the workspace jail of WriteFile, ReadFile and
// Path on one client: refused paths never reach the provider, and an
// absolute path is re-rooted under the workspace as fsbackend does.
func checkConfinement(t *testing.T, c *sandbox.Client) {
	t.Helper()
	ctx := context.Background()
	m := session.NewManager(c, session.Options{})
	defer m.Close(ctx)
	s, err := m.Acquire(ctx, "jail")
	if err != nil {
		t.Fatal(err)
	}
	ws := s.Workspace()
	home := s.Sandbox().Home()
	if err := s.Sandbox().WriteFile(ctx, home+"/secret.txt", []byte("outside")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path   string
		escape bool
	}{
		{"../secret.txt", true},
		{"a/../../secret.txt", true},
		{`..\secret.txt`, true},
		{"bad\x00name", false},
		{"bad\nname", false},
		{"", false},
		{".fsbackend/marks", false},
	} {
		werr := s.WriteFile(ctx, tc.path, []byte("x"))
		_, rerr := s.ReadFile(ctx, tc.path)
		_, perr := s.Path(tc.path)
		for _, err := range []error{werr, rerr, perr} {
			var be *backend.Error
			if sandbox.CodeOf(err) != sandbox.InvalidArgument || !errors.As(err, &be) || be.Code != backend.CodeInvalidPath || !errors.Is(err, fs.ErrInvalid) {
				t.Fatalf("path %q: err = %v, want InvalidArgument wrapping backend.CodeInvalidPath", tc.path, err)
			}
			if errors.Is(err, sandbox.ErrPathEscape) != tc.escape {
				t.Fatalf("path %q: matches ErrPathEscape = %v, want %v (%v)", tc.path, !tc.escape, tc.escape, err)
			}
		}
	}
	if got, err := s.Sandbox().ReadFile(ctx, home+"/secret.txt"); err != nil || string(got) != "outside" {
		t.Fatalf("file outside the workspace: %q %v", got, err)
	}

	// An absolute path is re-rooted; the workspace's own prefix is kept.
	if err := s.WriteFile(ctx, "/etc/x.txt", []byte("rerooted")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Sandbox().ReadFile(ctx, ws+"/etc/x.txt"); err != nil || string(got) != "rerooted" {
		t.Fatalf("re-rooted write: %q %v", got, err)
	}
	if got, err := s.ReadFile(ctx, ws+"/etc/x.txt"); err != nil || string(got) != "rerooted" {
		t.Fatalf("read by the workspace's absolute path: %q %v", got, err)
	}
	if got, err := s.ReadFile(ctx, `etc\x.txt`); err != nil || string(got) != "rerooted" {
		t.Fatalf("read with a backslash: %q %v", got, err)
	}
	if p, err := s.Path("a/./b/../c"); err != nil || p != ws+"/a/c" {
		t.Fatalf("Path = %q %v", p, err)
	}
}

func TestSessionFilesConfinedMemory(t *testing.T) {
	t.Parallel()
	c := sandbox.NewClient(memory.New())
	checkConfinement(t, c)
}

func TestSessionFilesConfinedE2BFake(t *testing.T) {
	t.Parallel()
	checkConfinement(t, e2bClients(t)(t))
}

func TestSessionFilesConfinedRefusedBeforeProvider(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	s := mustAcquire(t, m, "k")
	before := len(rt.Calls())
	_ = s.WriteFile(context.Background(), "../../etc/passwd", []byte("x"))
	if got := rt.Calls()[before:]; len(got) != 0 {
		t.Fatalf("a refused path reached the provider: %v", got)
	}
}

func TestSessionFilesUnconfinedOptOut(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, session.Options{UnconfinedPaths: true})
	s := mustAcquire(t, m, "k")
	ctx := context.Background()
	home := s.Sandbox().Home()
	if err := s.WriteFile(ctx, "../outside.txt", []byte("trusted")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReadFile(ctx, home+"/outside.txt"); err != nil || string(got) != "trusted" {
		t.Fatalf("unconfined read: %q %v", got, err)
	}
	if _, err := s.Path("bad\x00"); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Fatalf("control characters still refused when unconfined: %v", err)
	}
}

// checkReadCap asserts the session's read cap over one client.
func checkReadCap(t *testing.T, c *sandbox.Client) {
	t.Helper()
	ctx := context.Background()
	m := session.NewManager(c, session.Options{MaxReadFile: 100})
	defer m.Close(ctx)
	s, err := m.Acquire(ctx, "cap")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteFile(ctx, "f", make([]byte, 101)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadFile(ctx, "f"); !errors.Is(err, sandbox.ErrLimit) || sandbox.CodeOf(err) != sandbox.ResourceExhausted ||
		!strings.Contains(err.Error(), "101 bytes") {
		t.Fatalf("ReadFile over the session cap: %v", err)
	}
	if _, ok := m.Lookup("cap"); !ok {
		t.Fatal("a read over the cap ended the session")
	}
	if err := s.WriteFile(ctx, "f", make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReadFile(ctx, "f"); err != nil || len(got) != 100 {
		t.Fatalf("ReadFile at the cap: %d %v", len(got), err)
	}
}

func TestSessionReadFileCapMemory(t *testing.T) {
	t.Parallel()
	c := sandbox.NewClient(memory.New())
	checkReadCap(t, c)
}

func TestSessionReadFileCapE2BFake(t *testing.T) {
	t.Parallel()
	checkReadCap(t, e2bClients(t)(t))
}

func TestSessionReadFileCapDefaultsToClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		clientCap, sessionCap int64
		wantOK                bool
	}{{50, 0, false}, {0, 0, true}, {50, -1, true}, {0, 50, false}} {
		c := sandbox.NewClient(memory.New(), sandbox.WithMaxReadFile(tc.clientCap))
		m := session.NewManager(c, session.Options{MaxReadFile: tc.sessionCap})
		s, err := m.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WriteFile(ctx, "f", make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
		_, err = s.ReadFile(ctx, "f")
		if (err == nil) != tc.wantOK {
			t.Fatalf("client cap %d, session cap %d: ReadFile of 100 bytes: %v", tc.clientCap, tc.sessionCap, err)
		}
		_ = m.Close(ctx)
	}
}
