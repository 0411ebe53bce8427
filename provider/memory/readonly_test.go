package memory_test

import (
	"context"
	"errors"
	"io/fs"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// The system directories are root's: the file API and commands may read
// them but not write them, and the refusal is PermissionDenied.
func TestReadOnlySystemDirs(t *testing.T) {
	ctx := context.Background()
	c := sandbox.NewClient(memory.New())
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	for _, p := range []string{"/etc/passwd", "/usr/x", "/usr/local/bin/tool", "/usr/new/dir/file"} {
		err := sb.WriteFile(ctx, p, []byte("x"))
		if sandbox.CodeOf(err) != sandbox.PermissionDenied || !errors.Is(err, fs.ErrPermission) {
			t.Errorf("WriteFile(%s): %v (code %v), want PermissionDenied", p, err, sandbox.CodeOf(err))
		}
	}
	if err := sb.MkdirAll(ctx, "/etc/app"); sandbox.CodeOf(err) != sandbox.PermissionDenied {
		t.Errorf("MkdirAll(/etc/app): %v, want PermissionDenied", err)
	}
	if err := sb.Remove(ctx, "/usr/bin"); sandbox.CodeOf(err) != sandbox.PermissionDenied {
		t.Errorf("Remove(/usr/bin): %v, want PermissionDenied", err)
	}
	if err := sb.WriteFile(ctx, "f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := sb.Rename(ctx, "f", "/etc/f"); sandbox.CodeOf(err) != sandbox.PermissionDenied {
		t.Errorf("Rename(f, /etc/f): %v, want PermissionDenied", err)
	}
	if _, err := sb.ReadDir(ctx, "/usr"); err != nil {
		t.Errorf("ReadDir(/usr): %v", err)
	}
	// Commands see the same: readable, not writable, owned by root.
	r, err := sb.Exec(ctx, sandbox.Command{Shell: `test -r /etc && test -x /etc && ! test -w /etc && echo ro; ` +
		`touch /etc/x 2>/dev/null || echo touch-refused; mkdir /usr/y 2>/dev/null || echo mkdir-refused; ` +
		`chmod 777 /usr 2>/dev/null || echo chmod-refused; stat -c '%U %u %a' /usr; echo ok > /tmp/w && cat /tmp/w`})
	if err != nil {
		t.Fatal(err)
	}
	want := "ro\ntouch-refused\nmkdir-refused\nchmod-refused\nroot 0 755\nok\n"
	if got := string(r.Stdout); got != want {
		t.Errorf("commands on the system directories:\n got %q\nwant %q (stderr %q)", got, want, r.Stderr)
	}
	for _, p := range []string{"/etc/x", "/usr/y"} {
		if _, err := sb.Stat(ctx, p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after the refused writes: %v", p, err)
		}
	}
}

// WithRootFileAccess gives the file methods root's rights, as E2B's envd
// has: they write the system directories, and what they create is the
// user's; commands still may not write there.
func TestRootFileAccess(t *testing.T) {
	ctx := context.Background()
	c := sandbox.NewClient(memory.New(memory.WithRootFileAccess()))
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	if err := sb.WriteFile(ctx, "/usr/new/x", []byte("x")); err != nil {
		t.Fatalf("WriteFile(/usr/new/x): %v", err)
	}
	if err := sb.MkdirAll(ctx, "/etc/app"); err != nil {
		t.Errorf("MkdirAll(/etc/app): %v", err)
	}
	if err := sb.Rename(ctx, "/usr/new/x", "/etc/x"); err != nil {
		t.Errorf("Rename(/usr/new/x, /etc/x): %v", err)
	}
	if err := sb.Remove(ctx, "/etc/x"); err != nil {
		t.Errorf("Remove(/etc/x): %v", err)
	}
	r, err := sb.Exec(ctx, sandbox.Command{Shell: `stat -c '%U %a' /usr/new; touch /usr/y 2>/dev/null || echo touch-refused`})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(r.Stdout), "user 755\ntouch-refused\n"; got != want {
		t.Errorf("commands: got %q, want %q (stderr %q)", got, want, r.Stderr)
	}
}
