package session_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

// TestRefresh404OnLiveSandboxKeepsIt: a lease refresh answered NotFound
// (a route the server lacks, a proxy) while Get still finds the sandbox is
// "degraded": the operation runs, the sandbox is kept and not destroyed.
func TestRefresh404OnLiveSandboxKeepsIt(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	ctx := context.Background()
	s := mustAcquire(t, m, "k")
	id := s.ID()
	rt.FailNext(memory.OpSetTimeout, 1, notFound("set-timeout route"))
	res, err := s.Exec(ctx, sandbox.Command{Shell: "echo hi"})
	if err != nil {
		t.Fatalf("Exec after a 404 refresh on a live sandbox: %v", err)
	}
	if string(res.Stdout) != "hi\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
	if n := len(rt.CallsOf(memory.OpDestroy)); n != 0 {
		t.Errorf("%d destroys of a live sandbox", n)
	}
	if rt.Live() != 1 {
		t.Errorf("live = %d, want 1", rt.Live())
	}
	again := mustAcquire(t, m, "k")
	if again.ID() != id {
		t.Errorf("Acquire after the 404 gave %s, want the kept %s", again.ID(), id)
	}
	if n := len(rt.CallsOf(memory.OpCreate)); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
}

// TestRefresh404OnGoneSandboxIsGone: when Get agrees the sandbox is gone,
// the session ends with ErrGone.
func TestRefresh404OnGoneSandboxIsGone(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	ctx := context.Background()
	s := mustAcquire(t, m, "k")
	if err := rt.Destroy(ctx, s.ID()); err != nil {
		t.Fatal(err)
	}
	_, err := s.Exec(ctx, sandbox.Command{Shell: "echo hi"})
	if !errors.Is(err, session.ErrGone) {
		t.Fatalf("Exec on a destroyed sandbox: %v, want ErrGone", err)
	}
}
