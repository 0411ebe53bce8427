package session_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

// Every session's sandbox starts from the snapshot in
// Options.Create.FromSnapshot: set up once, start every task from it.
func TestSessionFromSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sandbox.NewClient(memory.New())
	defer c.Close()
	base, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := base.WriteFile(ctx, "workspace/setup.txt", []byte("installed")); err != nil {
		t.Fatal(err)
	}
	snap, err := base.Snapshot(ctx, sandbox.SnapshotOptions{Name: "env"})
	if err != nil {
		t.Fatal(err)
	}
	m := session.NewManager(c, session.Options{Create: sandbox.CreateOptions{FromSnapshot: snap.ID}, ReapInterval: -1})
	defer m.Close(ctx)
	for _, key := range []string{"a", "b"} {
		s := mustAcquire(t, m, key)
		got, err := s.ReadFile(ctx, "setup.txt")
		if err != nil || string(got) != "installed" {
			t.Fatalf("session %s: setup.txt = %q, %v; want the snapshot's file", key, got, err)
		}
		if err := s.WriteFile(ctx, "own.txt", []byte(key)); err != nil {
			t.Fatal(err)
		}
	}
	b := mustAcquire(t, m, "b")
	if _, err := b.ReadFile(ctx, "own.txt"); err != nil {
		t.Fatal(err)
	}
	// A per-call template's sandbox starts from its template.
	r, err := b.Exec(ctx, sandbox.Command{Shell: "cat setup.txt 2>/dev/null || echo none"}, session.WithTemplate("other"))
	if err != nil || string(r.Stdout) != "none\n" {
		t.Fatalf("per-call template: %v, %v", r, err)
	}

	bad := session.NewManager(c, session.Options{Create: sandbox.CreateOptions{Template: "t", FromSnapshot: snap.ID}, ReapInterval: -1})
	defer bad.Close(ctx)
	_, err = bad.Acquire(ctx, "x")
	if sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "FromSnapshot") {
		t.Fatalf("Template with FromSnapshot: %v, want InvalidArgument naming both", err)
	}
	missing := session.NewManager(c, session.Options{Create: sandbox.CreateOptions{FromSnapshot: "snap-gone"}, ReapInterval: -1})
	defer missing.Close(ctx)
	if _, err = missing.Acquire(ctx, "y"); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("missing snapshot: %v, want NotFound", err)
	}
}
