package e2b_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/session"
)

// An empty or unknown state from the API is never read as running.
func TestUnknownStateIsNotRunning(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := t.Context()
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"app": "st"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	for _, st := range []string{"", "snapshotting"} {
		e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.RewriteState, Path: "GET /sandboxes/", State: st})
		in, err := sb.Refresh(ctx)
		if err != nil {
			t.Fatalf("Refresh with state %q: %v", st, err)
		}
		if in.State != sandbox.StateUnknown || in.Detail["state"] != st {
			t.Errorf("Get with state %q: State %q, Detail[state] %q; want unknown, %q", st, in.State, in.Detail["state"], st)
		}
		e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.RewriteState, Path: "GET /v2/sandboxes", State: st})
		n := 0
		for in, err := range e.client.List(ctx, sandbox.ListOptions{Labels: map[string]string{"app": "st"}}) {
			if err != nil {
				t.Fatal(err)
			}
			n++
			if in.State != sandbox.StateUnknown {
				t.Errorf("List with state %q: State %q, want unknown", st, in.State)
			}
		}
		if n != 1 {
			t.Errorf("List with state %q yielded %d sandboxes, want 1", st, n)
		}
	}
	// Asking for the unknown state does not make E2B filter it away.
	e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.RewriteState, Path: "GET /v2/sandboxes", State: "snapshotting"})
	n := 0
	for _, err := range e.client.List(ctx, sandbox.ListOptions{States: []sandbox.State{sandbox.StateUnknown}}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Errorf("List(States: unknown) yielded %d sandboxes, want 1", n)
	}
	// Once the API answers running again, so does Info.
	if in, err := sb.Refresh(ctx); err != nil || in.State != sandbox.StateRunning {
		t.Errorf("Refresh = %v, %v; want running", in.State, err)
	}
}

// The default look-up bound covers a whole List, not each of its pages.
func TestListLookupBoundCoversAllPages(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := t.Context()
	for range 3 {
		sb, err := e.client.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"app": "pages"}})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Destroy(context.Background())
	}
	c := sandbox.NewClient(e.rt, sandbox.WithCallTimeouts(sandbox.CallTimeouts{Lookup: time.Second}))
	e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.SlowAnswer, Path: "GET /v2/sandboxes", Times: 4, Delay: 600 * time.Millisecond})
	start := time.Now()
	var err error
	n := 0
	for _, e := range c.List(context.Background(), sandbox.ListOptions{Labels: map[string]string{"app": "pages"}, PageSize: 1}) {
		if e != nil {
			err = e
			break
		}
		n++
	}
	took := time.Since(start)
	if err == nil {
		t.Fatalf("List of 3 pages answering in 600ms each finished (%d sandboxes, %v) under a 1s look-up bound", n, took)
	}
	if sandbox.CodeOf(err) != sandbox.DeadlineExceeded || !strings.Contains(err.Error(), "1s") {
		t.Errorf("List error = %v, want DeadlineExceeded naming the 1s bound", err)
	}
	// 5× the bound: a loaded host delays the return, not the bound.
	if took > 5*time.Second {
		t.Errorf("List ran %v past a 1s bound", took)
	}
}

// A sandbox in an unknown state is found again by GetOrCreate and by a
// session's reattach, not duplicated.
func TestUnknownStateIsNotDuplicated(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := t.Context()
	m1 := session.NewManager(e.client, session.Options{ReapInterval: -1})
	s1, err := m1.Acquire(ctx, "conv")
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Sandbox().Destroy(context.Background())
	e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.RewriteState, Path: "GET /v2/sandboxes", State: "snapshotting", Times: 100})
	// A second process: it must adopt the sandbox, whatever its state.
	c2 := sandbox.NewClient(e.rt)
	m2 := session.NewManager(c2, session.Options{ReapInterval: -1})
	defer m2.Close(context.Background())
	s2, err := m2.Acquire(ctx, "conv")
	if err != nil {
		t.Fatal(err)
	}
	if s2.ID() != s1.ID() {
		defer s2.Sandbox().Destroy(context.Background())
		t.Fatalf("reattach beside a sandbox in an unknown state made %s, want %s", s2.ID(), s1.ID())
	}
	sb, created, err := c2.GetOrCreate(ctx, sandbox.CreateOptions{Labels: map[string]string{session.DefaultLabelKey: "conv"}})
	if err != nil {
		t.Fatal(err)
	}
	if created || sb.ID() != s1.ID() {
		defer sb.Destroy(context.Background())
		t.Fatalf("GetOrCreate beside a sandbox in an unknown state gave %s (created %v), want %s", sb.ID(), created, s1.ID())
	}
}
