package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/sberrors"
)

// TestSpecialFilesRefused: a FIFO made by code in the sandbox must not
// block Download or Upload (the host would wait for a writer or reader
// the sandbox never provides, whatever ctx says); both refuse it.
func TestSpecialFilesRefused(t *testing.T) {
	t.Parallel() // its own Runtime; it counts no descriptor of this process
	ctx := context.Background()
	rt := newRuntime(t, WithIsolation(L1))
	sb := mustCreate(ctx, t, sandbox.NewClient(rt), sandbox.CreateOptions{})
	if res := run(ctx, t, sb, "mkfifo fifo && mkdir dir && echo ok"); !strings.Contains(string(res.Stdout), "ok") {
		t.Fatalf("mkfifo: %q %q", res.Stdout, res.Stderr)
	}
	home := sb.Home()
	// bounded runs f with a guard, so that a regression fails rather
	// than hangs the test binary.
	bounded := func(name string, f func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatalf("%s of a FIFO still blocked after 30s", name)
			return nil
		}
	}
	err := bounded("Download", func() error {
		rc, err := rt.Download(ctx, sb.ID(), home+"/fifo")
		if err == nil {
			_, err = io.ReadAll(rc)
			rc.Close()
			return errors.New("download of a FIFO succeeded")
		}
		return err
	})
	if sberrors.CodeOf(err) != sberrors.FailedPrecondition || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Download(fifo) = %v (%v), want FailedPrecondition, not a regular file", err, sberrors.CodeOf(err))
	}
	err = bounded("Upload", func() error {
		return rt.Upload(ctx, sb.ID(), home+"/fifo", strings.NewReader("x"))
	})
	if sberrors.CodeOf(err) != sberrors.FailedPrecondition {
		t.Errorf("Upload(fifo) = %v (%v), want FailedPrecondition", err, sberrors.CodeOf(err))
	}
	if _, err := rt.Download(ctx, sb.ID(), home+"/dir"); !errors.Is(err, sberrors.ErrIsDirectory) {
		t.Errorf("Download(dir) = %v, want ErrIsDirectory", err)
	}
	if err := rt.Upload(ctx, sb.ID(), home+"/dir", strings.NewReader("x")); !errors.Is(err, sberrors.ErrIsDirectory) {
		t.Errorf("Upload(dir) = %v, want ErrIsDirectory", err)
	}
	// Through the portable layer too, and regular files still work.
	if _, err := sb.ReadFile(ctx, "fifo"); sberrors.CodeOf(err) != sberrors.FailedPrecondition {
		t.Errorf("ReadFile(fifo) = %v", err)
	}
	if err := sb.WriteFile(ctx, "file", []byte("data")); err != nil {
		t.Fatal(err)
	}
	if b, err := sb.ReadFile(ctx, "file"); err != nil || string(b) != "data" {
		t.Errorf("ReadFile(file) = %q, %v", b, err)
	}
	if res := run(ctx, t, sb, "test -p fifo && echo fifo"); !strings.Contains(string(res.Stdout), "fifo") {
		t.Errorf("the FIFO was replaced: %q", res.Stdout)
	}
}

// TestAbsoluteLinkInHome: code in the sandbox writes links in its own
// terms ($HOME/a -> $HOME/b); the file methods follow those within the
// home and still refuse any that leads out of it.
func TestAbsoluteLinkInHome(t *testing.T) {
	t.Parallel()
	for _, l := range []Level{L1, L4} {
		t.Run(l.String(), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rt := levelRuntime(t, l)
			sb := mustCreate(ctx, t, sandbox.NewClient(rt), sandbox.CreateOptions{})
			res := run(ctx, t, sb, `echo hi > b && mkdir d && ln -s "$HOME/b" a && ln -s "$HOME/d" dl && ln -s "$HOME/dl/../b" up && ln -s /etc/passwd out && ln -s "$HOME/../.." root && echo ok`)
			if !strings.Contains(string(res.Stdout), "ok") {
				t.Fatalf("setup: %q %q", res.Stdout, res.Stderr)
			}
			if b, err := sb.ReadFile(ctx, "a"); err != nil || string(b) != "hi\n" {
				t.Errorf("ReadFile(a) = %q, %v", b, err)
			}
			if b, err := sb.ReadFile(ctx, "up"); err != nil || string(b) != "hi\n" {
				t.Errorf("ReadFile(up) = %q, %v", b, err)
			}
			if fi, err := sb.Stat(ctx, "a"); err != nil || fi.Size != 3 || fi.LinkTarget != sb.Home()+"/b" {
				t.Errorf("Stat(a) = %+v, %v", fi, err)
			}
			if err := sb.WriteFile(ctx, "dl/new", []byte("x")); err != nil {
				t.Errorf("WriteFile(dl/new): %v", err)
			}
			if err := sb.WriteFile(ctx, "a", []byte("bye")); err != nil {
				t.Errorf("WriteFile(a): %v", err)
			}
			if res := run(ctx, t, sb, "cat b d/new; test -L a && echo link"); string(res.Stdout) != "byexlink\n" {
				t.Errorf("after writes through links: %q", res.Stdout)
			}
			if ents, err := sb.ReadDir(ctx, "dl"); err != nil || len(ents) != 1 {
				t.Errorf("ReadDir(dl) = %v, %v", ents, err)
			}
			if err := sb.Rename(ctx, "dl/new", "dl/renamed"); err != nil {
				t.Errorf("Rename through a link: %v", err)
			}
			if lv := sb.Info().Detail["level"]; strings.HasPrefix(lv, "L3") || strings.HasPrefix(lv, "L4") {
				// The sandbox's root is served: the links lead into it,
				// with its commands' permissions.
				for _, p := range []string{"out", "root/etc/passwd"} {
					want := run(ctx, t, sb, "cat "+p).Stdout
					if b, err := sb.ReadFile(ctx, p); err != nil || !bytes.Equal(b, want) {
						t.Errorf("ReadFile(%s) = %d bytes, %v; the sandbox's cat read %d", p, len(b), err, len(want))
					}
					if err := sb.WriteFile(ctx, p, []byte("x")); sberrors.CodeOf(err) != sberrors.PermissionDenied {
						t.Errorf("WriteFile(%s) = %v, want PermissionDenied", p, err)
					}
				}
				return
			}
			for _, p := range []string{"out", "root/etc/passwd"} {
				if _, err := sb.ReadFile(ctx, p); !errors.Is(err, sberrors.ErrPathEscape) {
					t.Errorf("ReadFile(%s) = %v, want ErrPathEscape", p, err)
				}
				if err := sb.WriteFile(ctx, p, []byte("x")); !errors.Is(err, sberrors.ErrPathEscape) {
					t.Errorf("WriteFile(%s) = %v, want ErrPathEscape", p, err)
				}
			}
		})
	}
}

// TestPathLimitsOnTheRuntime: local, called straight, refuses a path over
// PATH_MAX or a name over NAME_MAX with InvalidArgument and a short
// message, as a system call in a real sandbox would (it served a 5000-byte
// path through os.Root, one name at a time, and answered a 1 MiB one with
// an Internal error of 2 MiB); a directory moved into itself through a
// symbolic link (which the portable layer cannot see) is InvalidArgument
// too, not Internal.
func TestPathLimitsOnTheRuntime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := newRuntime(t, WithIsolation(L1))
	sb := mustCreate(ctx, t, sandbox.NewClient(rt), sandbox.CreateOptions{})
	home := sb.Home()
	deep := home + "/" + strings.Repeat("abcdefghi/", 500)
	for _, p := range []string{deep, home + "/" + strings.Repeat("n", 256), home + "/" + strings.Repeat("x/", 1<<19)} {
		errs := map[string]error{
			"MkdirAll": rt.MkdirAll(ctx, sb.ID(), p),
			"Upload":   rt.Upload(ctx, sb.ID(), p, strings.NewReader("x")),
			"Remove":   rt.Remove(ctx, sb.ID(), p),
			"Rename":   rt.Rename(ctx, sb.ID(), home, p),
		}
		_, errs["Stat"] = rt.Stat(ctx, sb.ID(), p)
		_, errs["ReadDir"] = rt.ReadDir(ctx, sb.ID(), p)
		_, errs["Download"] = rt.Download(ctx, sb.ID(), p)
		for op, err := range errs {
			if sberrors.CodeOf(err) != sberrors.InvalidArgument || len(err.Error()) > 512 {
				msg := ""
				if err != nil {
					msg = err.Error()
				}
				t.Errorf("%s(%d-byte path) = %v, message of %d bytes: %.300s", op, len(p), sberrors.CodeOf(err), len(msg), msg)
			}
		}
		_, err := sb.Exec(ctx, sandbox.Command{Args: []string{"pwd"}, Dir: p})
		if sberrors.CodeOf(err) != sberrors.InvalidArgument || len(err.Error()) > 1024 {
			t.Errorf("Exec(Dir %d bytes) = %v", len(p), err)
		}
	}
	if res := run(ctx, t, sb, "mkdir -p a/in && ln -s a link && echo ok"); !strings.Contains(string(res.Stdout), "ok") {
		t.Fatalf("setup: %q %q", res.Stdout, res.Stderr)
	}
	err := rt.Rename(ctx, sb.ID(), home+"/a", home+"/link/b")
	if sberrors.CodeOf(err) != sberrors.InvalidArgument {
		t.Errorf("Rename(a, link/b) with link -> a = %v (%v), want InvalidArgument", err, sberrors.CodeOf(err))
	}
	err = sb.Rename(ctx, "a", "link/in/c")
	if sberrors.CodeOf(err) != sberrors.InvalidArgument {
		t.Errorf("Sandbox.Rename(a, link/in/c) with link -> a = %v (%v), want InvalidArgument", err, sberrors.CodeOf(err))
	}
	if _, err := rt.Stat(ctx, sb.ID(), home+"/a/in"); err != nil {
		t.Errorf("a/in after the refused renames: %v", err)
	}
}
