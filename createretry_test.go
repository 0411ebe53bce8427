package sandbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/memory"
)

func TestCreateRetriesTransientFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, code := range []sandbox.Code{sandbox.ResourceExhausted, sandbox.Unavailable} {
		rt := memory.New()
		c := sandbox.NewClient(rt)
		rt.FailNext(memory.OpCreate, 2, sandbox.Errorf(code, "memory: no capacity"))
		sb, err := c.Create(ctx, sandbox.CreateOptions{})
		if err != nil {
			t.Fatalf("%v twice, then success: Create = %v", code, err)
		}
		if n := len(rt.CallsOf(memory.OpCreate)); n != 3 || rt.Live() != 1 || !sb.Owned() {
			t.Fatalf("%v: %d create calls, %d live; want 3 and 1", code, n, rt.Live())
		}
	}
}

func TestCreateNeverRetriesConfigurationErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, fail := range []error{
		sandbox.Errorf(sandbox.NotFound, "memory: template missing"),
		sandbox.Errorf(sandbox.PermissionDenied, "memory: bad key"),
		sandbox.Errorf(sandbox.InvalidArgument, "memory: bad resources"),
		errors.Join(sandbox.ErrOutcomeUnknown, errors.New("memory: connection lost after send")),
	} {
		rt := memory.New()
		c := sandbox.NewClient(rt)
		rt.FailNext(memory.OpCreate, 5, fail)
		if _, err := c.Create(ctx, sandbox.CreateOptions{}); err == nil {
			t.Fatalf("%v: Create succeeded", fail)
		}
		if n := len(rt.CallsOf(memory.OpCreate)); n != 1 {
			t.Fatalf("%v: %d create calls, want 1 (never retried)", fail, n)
		}
	}
}

func TestCreateRetryBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := memory.New()
	off := sandbox.NewClient(rt, sandbox.WithCallTimeouts(sandbox.CallTimeouts{CreateRetry: -1}))
	rt.FailNext(memory.OpCreate, 1, sandbox.Errorf(sandbox.Unavailable, "memory: down"))
	if _, err := off.Create(ctx, sandbox.CreateOptions{}); sandbox.CodeOf(err) != sandbox.Unavailable || len(rt.CallsOf(memory.OpCreate)) != 1 {
		t.Fatalf("CreateRetry -1: %v after %d calls, want Unavailable after 1", err, len(rt.CallsOf(memory.OpCreate)))
	}
	// A provider that never has room: Create gives up within the budget
	// with the provider's error.
	rt2 := memory.New()
	c := sandbox.NewClient(rt2)
	rt2.FailNext(memory.OpCreate, 1<<20, sandbox.Errorf(sandbox.ResourceExhausted, "memory: no capacity"))
	bctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.Create(bctx, sandbox.CreateOptions{})
	if !errors.Is(err, sandbox.ErrLimit) {
		t.Fatalf("Create on a provider without capacity: %v", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("Create kept retrying %v past its 3s ctx", took)
	}
	t.Logf("gave up after %d attempts in %v (ctx 3s)", len(rt2.CallsOf(memory.OpCreate)), time.Since(start))
}

func TestCreateRetriesE2BFake429(t *testing.T) {
	t.Parallel()
	fake := e2bfake.New(memory.New())
	t.Cleanup(fake.Close)
	rt, err := e2b.New(e2b.WithAPIKey(fake.APIKey()), e2b.WithAPIURL(fake.APIURL()), e2b.WithSandboxURL(fake.SandboxURL()))
	if err != nil {
		t.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	t.Cleanup(func() { _ = c.Close() })
	f := fake.Inject(&e2bfake.Fault{Kind: e2bfake.TooManyRequests, Path: "POST /v2/sandboxes", Times: 2})
	sb, err := c.Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		t.Fatalf("Create after two 429s: %v", err)
	}
	defer sb.Destroy(context.Background())
	if f.Hits() != 2 || len(fake.Sandboxes()) != 1 {
		t.Fatalf("%d faults hit, %d sandboxes; want 2 and 1", f.Hits(), len(fake.Sandboxes()))
	}
}
