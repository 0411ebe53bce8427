package sandbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// checkOwnership asserts that only an owning handle's Destroy destroys,
// on one client.
func checkOwnership(t *testing.T, c *sandbox.Client) {
	t.Helper()
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"own": "t"}})
	if err != nil {
		t.Fatal(err)
	}
	if !sb.Owned() {
		t.Fatal("a created handle is not Owned")
	}
	att, err := c.Attach(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	if att.Owned() {
		t.Fatal("an attached handle is Owned")
	}
	if err := att.Destroy(ctx); err != nil {
		t.Fatalf("Destroy on an attached handle: %v", err)
	}
	if _, err := sb.Refresh(ctx); err != nil {
		t.Fatalf("Destroy on an attached handle ended the owner's sandbox: %v", err)
	}
	found, created, err := c.GetOrCreate(ctx, sandbox.CreateOptions{Labels: map[string]string{"own": "t"}})
	if err != nil || created || found.Owned() {
		t.Fatalf("GetOrCreate of an existing sandbox: created %v owned %v err %v", created, found != nil && found.Owned(), err)
	}
	_ = found.Destroy(ctx)
	if _, err := sb.Refresh(ctx); err != nil {
		t.Fatalf("Destroy on a found handle ended the sandbox: %v", err)
	}

	// Explicit forms: AttachOptions.Own, and Client.Destroy by id.
	own, err := c.AttachWith(ctx, sb.ID(), sandbox.AttachOptions{Own: true})
	if err != nil || !own.Owned() {
		t.Fatalf("AttachWith Own: owned %v err %v", own != nil && own.Owned(), err)
	}
	sb2, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Refresh(ctx); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Destroy with Own left the sandbox: %v", err)
	}
	if err := c.Destroy(ctx, sb2.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := sb2.Refresh(ctx); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Client.Destroy left the sandbox: %v", err)
	}
	if err := c.Destroy(ctx, sb2.ID()); err != nil {
		t.Fatalf("Client.Destroy of a gone sandbox: %v", err)
	}
	if err := c.Destroy(ctx, "../x"); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Fatalf("Client.Destroy of a bad id: %v", err)
	}
}

func TestOwnedVsAttachedMemory(t *testing.T) {
	t.Parallel()
	c := sandbox.NewClient(memory.New())
	checkOwnership(t, c)
}

func TestOwnedVsAttachedE2BFake(t *testing.T) {
	t.Parallel()
	fake := e2bfake.New(memory.New())
	t.Cleanup(fake.Close)
	rt, err := e2b.New(e2b.WithAPIKey(fake.APIKey()), e2b.WithAPIURL(fake.APIURL()), e2b.WithSandboxURL(fake.SandboxURL()))
	if err != nil {
		t.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	t.Cleanup(func() { _ = c.Close() })
	checkOwnership(t, c)
}

// A panicking transport-reset listener is recovered: the retry still
// happens, the other listeners still run, and the caller's call succeeds.
func TestPanickingResetListenerRecovered(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	defer c.OnTransportReset(func() { panic("listener bug") })()
	defer c.OnTransportReset(func() { ran++ })()
	rt.FailNext(memory.OpExec, 1, sandbox.ErrStaleTransport)
	res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"echo", "ok"}})
	if err != nil || string(res.Stdout) != "ok\n" {
		t.Fatalf("Exec after a stale transport with a panicking listener: %v %v", res, err)
	}
	if ran != 1 {
		t.Fatalf("the other listener ran %d times, want 1", ran)
	}
}
