package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

// A look-up that fails for a transient reason is retried: the restarted
// process reattaches to the key's sandbox instead of failing Acquire.
func TestReattachRetriesTransientLookup(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	ctx := context.Background()
	m1 := session.NewManager(c, session.Options{ReapInterval: -1})
	s1 := mustAcquire(t, m1, "conv")

	m2 := session.NewManager(c, session.Options{})
	defer m2.Close(ctx)
	rt.FailNext(memory.OpList, 2, sandbox.Errorf(sandbox.Unavailable, "memory: list down"))
	s2, err := m2.Acquire(ctx, "conv")
	if err != nil {
		t.Fatalf("Acquire after two transient list failures: %v", err)
	}
	if s2.ID() != s1.ID() || !s2.Adopted() || len(rt.CallsOf(memory.OpCreate)) != 1 {
		t.Fatalf("got %s (adopted %v), creates %d; want to reattach to %s", s2.ID(), s2.Adopted(), len(rt.CallsOf(memory.OpCreate)), s1.ID())
	}
}

// A configuration error in the look-up is not retried.
func TestReattachDoesNotRetryBadRequest(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	rt.FailNext(memory.OpList, 1<<20, sandbox.Errorf(sandbox.PermissionDenied, "memory: bad key"))
	if _, err := m.Acquire(context.Background(), "k"); sandbox.CodeOf(err) != sandbox.PermissionDenied {
		t.Fatalf("Acquire = %v, want PermissionDenied", err)
	}
	if n := len(rt.CallsOf(memory.OpList)); n != 1 {
		t.Fatalf("list calls %d, want 1: a permission error was retried", n)
	}
}

// A paused candidate whose wake fails transiently is woken on a retry; one
// that cannot be woken but still exists paused fails Acquire rather than
// leave two sandboxes for the key.
func TestReattachWake(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	ctx := context.Background()
	m1 := session.NewManager(c, session.Options{ReapInterval: -1})
	s1 := mustAcquire(t, m1, "conv")
	if err := s1.Sandbox().Pause(ctx); err != nil {
		t.Fatal(err)
	}

	m2 := session.NewManager(c, session.Options{ReattachTimeout: time.Second})
	defer m2.Close(ctx)
	rt.FailNext(memory.OpResume, 1<<20, sandbox.Errorf(sandbox.Unavailable, "memory: resume down"))
	if _, err := m2.Acquire(ctx, "conv"); sandbox.CodeOf(err) != sandbox.Unavailable {
		t.Fatalf("Acquire with a sandbox that cannot be woken: %v, want Unavailable", err)
	}
	if n := len(rt.CallsOf(memory.OpCreate)); n != 1 {
		t.Fatalf("creates %d, want 1: a sandbox in an unknown state was replaced", n)
	}

	rt.FailNext(memory.OpResume, 1, sandbox.Errorf(sandbox.Unavailable, "memory: resume down"))
	s2, err := m2.Acquire(ctx, "conv")
	if err != nil {
		t.Fatalf("Acquire after one transient wake failure: %v", err)
	}
	if s2.ID() != s1.ID() || len(rt.CallsOf(memory.OpCreate)) != 1 {
		t.Fatalf("got %s, creates %d; want to reattach to %s", s2.ID(), len(rt.CallsOf(memory.OpCreate)), s1.ID())
	}
}

// Over the E2B fake: a 429 on the list is retried, and the restarted
// process reattaches.
func TestReattachRetriesTransientLookupE2BFake(t *testing.T) {
	t.Parallel()
	fake := e2bfake.New(memory.New())
	t.Cleanup(fake.Close)
	newClient := e2bClientsOn(t, fake)
	ctx := context.Background()
	m1 := session.NewManager(newClient(t), session.Options{ReapInterval: -1})
	s1 := mustAcquire(t, m1, "conv")
	m2 := session.NewManager(newClient(t), session.Options{})
	defer m2.Close(ctx)
	f := fake.Inject(&e2bfake.Fault{Kind: e2bfake.TooManyRequests, Path: "GET /v2/sandboxes", Times: 2})
	s2, err := m2.Acquire(ctx, "conv")
	if err != nil {
		t.Fatalf("Acquire after two 429s on the list: %v", err)
	}
	if s2.ID() != s1.ID() || f.Hits() != 2 {
		t.Fatalf("got %s after %d faults, want to reattach to %s after 2", s2.ID(), f.Hits(), s1.ID())
	}
}

// e2bClientsOn is e2bClients over a fake the test holds, to inject faults.
func e2bClientsOn(t *testing.T, fake *e2bfake.Server) func(t *testing.T) *sandbox.Client {
	return func(t *testing.T) *sandbox.Client {
		rt, err := e2b.New(e2b.WithAPIKey(fake.APIKey()), e2b.WithAPIURL(fake.APIURL()), e2b.WithSandboxURL(fake.SandboxURL()))
		if err != nil {
			t.Fatal(err)
		}
		c := sandbox.NewClient(rt)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
}
