package session_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/fsbackend"
	"github.com/sandboxkit/sandbox/session"
)

// Keys may start with "_" or "-" (they only ever become label values),
// up to 128 bytes, and a later manager reattaches to them by label.
func TestAcquireKeysStartingWithUnderscoreOrDash(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	for _, key := range []string{"_a", "-a", "--", "-rf", "_", strings.Repeat("-", 128)} {
		s, err := m.Acquire(context.Background(), key)
		if err != nil {
			t.Errorf("Acquire(%q) = %v, want a session", key, err)
			continue
		}
		if s.Key() != key {
			t.Errorf("Key() = %q, want %q", s.Key(), key)
		}
		// A second manager over the same provider finds it by its label.
		c2 := sandbox.NewClient(rt)
		m2 := session.NewManager(c2, session.Options{})
		t.Cleanup(func() { _ = m2.Close(context.Background()); _ = c2.Close() })
		s2, err := m2.Acquire(context.Background(), key)
		if err != nil || s2.ID() != s.ID() {
			t.Errorf("reattach of %q: %v, %v; want %s", key, s2, err, s.ID())
		}
	}
}

func TestSessionReadDirAndRemoveAreConfined(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, session.Options{})
	ctx := context.Background()
	s := mustAcquire(t, m, "files")
	for _, f := range []string{"a.txt", "dir/b.txt"} {
		if err := s.WriteFile(ctx, f, []byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	// A file outside the workspace, in the home.
	sb := s.Sandbox()
	if err := sb.WriteFile(ctx, "outside.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := sb.MkdirAll(ctx, path.Join(s.Workspace(), fsbackend.MetadataDir)); err != nil {
		t.Fatal(err)
	}

	for _, p := range []string{"", ".", "/", s.Workspace()} {
		if p == "" {
			continue // an empty path is refused, as by ReadFile
		}
		list, err := s.ReadDir(ctx, p)
		if err != nil {
			t.Fatalf("ReadDir(%q): %v", p, err)
		}
		var names []string
		for _, fi := range list {
			names = append(names, path.Base(fi.Path))
		}
		if !slices.Equal(names, []string{"a.txt", "dir"}) {
			t.Errorf("ReadDir(%q) = %v, want [a.txt dir] (the workspace, without the file tools' metadata)", p, names)
		}
	}
	if list, err := s.ReadDir(ctx, "dir"); err != nil || len(list) != 1 || path.Base(list[0].Path) != "b.txt" {
		t.Errorf("ReadDir(dir) = %v, %v", list, err)
	}

	// Escapes are refused before the provider is asked, for both calls.
	for _, p := range []string{"..", "../outside.txt", "dir/../../outside.txt", "", "a\x00b", fsbackend.MetadataDir} {
		if _, err := s.ReadDir(ctx, p); sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("ReadDir(%q) = %v, want InvalidArgument", p, err)
		}
		if err := s.Remove(ctx, p); sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("Remove(%q) = %v, want InvalidArgument", p, err)
		}
	}
	if _, err := s.ReadDir(ctx, "../.."); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("ReadDir(../..) = %v, want ErrPathEscape", err)
	}
	// An absolute path is re-rooted under the workspace: /outside.txt is
	// the workspace's, which does not exist, and the home's file stays.
	if err := s.Remove(ctx, path.Join(sb.Home(), "outside.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove(home/outside.txt) = %v, want not found (re-rooted under the workspace)", err)
	}
	if _, err := sb.Stat(ctx, "outside.txt"); err != nil {
		t.Errorf("the file outside the workspace is gone: %v", err)
	}
	// The workspace itself is not removed.
	for _, p := range []string{".", "/", s.Workspace(), "dir/.."} {
		if err := s.Remove(ctx, p); sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "workspace") {
			t.Errorf("Remove(%q) = %v, want InvalidArgument naming the workspace", p, err)
		}
	}

	if err := s.Remove(ctx, "dir"); err != nil {
		t.Fatalf("Remove(dir): %v", err)
	}
	if err := s.Remove(ctx, "/a.txt"); err != nil {
		t.Fatalf("Remove(/a.txt): %v", err)
	}
	if list, err := s.ReadDir(ctx, "."); err != nil || len(list) != 0 {
		t.Errorf("ReadDir after removing everything = %v, %v", list, err)
	}
	if err := s.Remove(ctx, "a.txt"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Remove of a missing file = %v, want ErrNotFound", err)
	}
}

// Session's relative paths start at the workspace, Sandbox()'s at the
// home: Workspace and Path give the absolute path that both agree on.
func TestSessionAndSandboxPathsMeetThroughWorkspace(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, session.Options{})
	ctx := context.Background()
	s := mustAcquire(t, m, "paths")
	if err := s.WriteFile(ctx, "note.txt", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	sb := s.Sandbox()
	if _, err := sb.ReadFile(ctx, "note.txt"); err == nil && s.Workspace() != sb.Home() {
		t.Error("the Sandbox found the Session's relative path in the home: the two should differ by default")
	}
	abs, err := s.Path("note.txt")
	if err != nil || abs != path.Join(s.Workspace(), "note.txt") {
		t.Fatalf("Path(note.txt) = %q, %v", abs, err)
	}
	if got, err := sb.ReadFile(ctx, abs); err != nil || string(got) != "hi" {
		t.Errorf("Sandbox().ReadFile(Path(note.txt)) = %q, %v", got, err)
	}
	res, err := s.Exec(ctx, sandbox.Command{Args: []string{"cat", "note.txt"}})
	if err != nil || string(res.Stdout) != "hi" {
		t.Errorf("Exec cat note.txt (default dir) = %v, %v", res, err)
	}
}

// The workspace's own absolute path names the workspace, as "." and "/" do.
func TestPathOfTheWorkspaceItself(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, session.Options{})
	s := mustAcquire(t, m, "ws")
	for _, p := range []string{".", "/", s.Workspace(), s.Workspace() + "/"} {
		if got, err := s.Path(p); err != nil || got != s.Workspace() {
			t.Errorf("Path(%q) = %q, %v; want %q", p, got, err, s.Workspace())
		}
	}
}

// TestSessionPathRefusalNamesOpAndPath checks the message of a refused
// path: it names the method the caller called and the path the caller
// gave (as Go's %q shows it), once each, with the sandbox's id once and
// the session's key not standing in for the path.
func TestSessionPathRefusalNamesOpAndPath(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, session.Options{})
	ctx := context.Background()
	const key = "refusal-key"
	s := mustAcquire(t, m, key)
	id := s.Sandbox().ID()
	for _, tc := range []struct {
		op, path string
		call     func(p string) error
	}{
		{"remove", "..", func(p string) error { return s.Remove(ctx, p) }},
		{"readdir", "../x", func(p string) error { _, err := s.ReadDir(ctx, p); return err }},
		{"read", "../x", func(p string) error { _, err := s.ReadFile(ctx, p); return err }},
		{"write", "a/../../x", func(p string) error { return s.WriteFile(ctx, p, []byte("x")) }},
		{"readdir", "bad\nname", func(p string) error { _, err := s.ReadDir(ctx, p); return err }},
		{"remove", ".", func(p string) error { return s.Remove(ctx, p) }},
	} {
		err := tc.call(tc.path)
		var se *sandbox.Error
		if !errors.As(err, &se) || sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Fatalf("%s(%q): %v, want an InvalidArgument *sandbox.Error", tc.op, tc.path, err)
		}
		if se.Op != tc.op || se.Path != tc.path {
			t.Errorf("%s(%q): Op %q, Path %q; want the call's op and path", tc.op, tc.path, se.Op, se.Path)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "sandbox: "+tc.op+" ") {
			t.Errorf("%s(%q): message %q does not start with the op", tc.op, tc.path, msg)
		}
		if q := fmt.Sprintf("%q", tc.path); strings.Count(msg, q) != 1 || strings.Contains(msg, "'"+tc.path+"'") {
			t.Errorf("%s(%q): message %q should show the path as %s exactly once", tc.op, tc.path, msg, q)
		}
		if strings.Count(msg, id) != 1 {
			t.Errorf("%s(%q): message %q should name sandbox %s once", tc.op, tc.path, msg, id)
		}
		if strings.Contains(msg, key) {
			t.Errorf("%s(%q): message %q holds the session key where the path goes", tc.op, tc.path, msg)
		}
		if !strings.Contains(msg, "invalid path") {
			t.Errorf("%s(%q): message %q does not say the path is invalid", tc.op, tc.path, msg)
		}
	}
}
