package daytona_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/daytona"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
)

// A caller without a ctx deadline is not hung by a Daytona API that never
// answers: the Client's default bound ends the call (issue 22 item 6).
func TestDefaultDeadlineEndsHungRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := sandbox.NewClient(e.rt, sandbox.WithCallTimeouts(sandbox.CallTimeouts{Lookup: time.Second, Destroy: time.Second}))
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	for _, tc := range []struct {
		what string
		call func() error
	}{
		{"Attach", func() error { _, err := c.Attach(ctx, sb.ID()); return err }},
		{"Refresh", func() error { _, err := sb.Refresh(ctx); return err }},
	} {
		e.fake.FailNext("GET", "/sandbox/"+sb.ID(), daytonafake.FaultHang)
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- tc.call() }()
		select {
		case err := <-done:
			if sandbox.CodeOf(err) != sandbox.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "WithCallTimeouts") {
				t.Fatalf("%s on a hung API: %v", tc.what, err)
			}
			t.Logf("%s on a hung API returned after %v (bound 1s)", tc.what, time.Since(start))
		case <-time.After(30 * time.Second):
			t.Fatalf("%s on a hung API did not return in 30s", tc.what)
		}
	}
	e.fake.FailNext("GET", "/sandbox", daytonafake.FaultHang)
	for _, err := range c.List(ctx, sandbox.ListOptions{}) {
		if sandbox.CodeOf(err) != sandbox.DeadlineExceeded {
			t.Fatalf("List on a hung API: %v", err)
		}
	}
}

// A create refused with 429 is retried after the Retry-After the throttler
// sent (issue 22 item 3).
func TestCreateRetries429HonouringRetryAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	e.fake.FailNext("POST", "/api/sandbox", daytonafake.Fault429)
	e.fake.FailNext("POST", "/api/sandbox", daytonafake.Fault429)
	start := time.Now()
	sb, err := e.c.Create(ctx, sandbox.CreateOptions{})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Create after two 429s: %v", err)
	}
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	if n := e.fake.Count("POST", "/api/sandbox"); n != 3 {
		t.Fatalf("%d create requests, want 3", n)
	}
	// Each 429 asked for 1 s: the retries waited at least that.
	if took < 2*time.Second {
		t.Fatalf("Create retried after %v, sooner than the two 1s Retry-After", took)
	}
	t.Logf("two 429s with Retry-After 1s: Create took %v", took)
}

// Auto-delete is off by default (a paused sandbox is a stopped one and
// must not vanish), and OptAutoDelete at the recommended value deletes a
// sandbox stopped for an hour (issue 22 item 7).
func TestAutoDeleteOffByDefaultAndOptIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	plain, err := e.c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Destroy(context.Background()) })
	opted, err := e.c.Create(ctx, sandbox.CreateOptions{ProviderOptions: map[string]string{
		daytona.OptAutoDelete: strconv.Itoa(daytona.RecommendedAutoDeleteMinutes)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = opted.Destroy(context.Background()) })
	for _, sb := range []*sandbox.Sandbox{plain, opted} {
		if err := sb.Pause(ctx); err != nil {
			t.Fatal(err)
		}
	}
	e.fake.Advance(time.Duration(daytona.RecommendedAutoDeleteMinutes+1) * time.Minute)
	if in, err := plain.Refresh(ctx); err != nil || in.State != sandbox.StatePaused {
		t.Fatalf("default sandbox after an hour paused: %+v %v, want still paused", in.State, err)
	}
	if _, err := opted.Refresh(ctx); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("sandbox with auto-delete %d after an hour stopped: %v, want deleted", daytona.RecommendedAutoDeleteMinutes, err)
	}
}
