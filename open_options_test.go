package sandbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	_ "github.com/sandboxkit/sandbox/provider/memory"
)

// TestOpenAppliesClientOptions: the call bounds given to Open are the ones
// the Client applies to the provider it opened.
func TestOpenAppliesClientOptions(t *testing.T) {
	t.Parallel()
	c, err := sandbox.Open(context.Background(), "memory://",
		sandbox.WithCallTimeouts(sandbox.CallTimeouts{Lookup: 3 * time.Second, ExecGrace: -1}),
		sandbox.WithCommandTimeout(7*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := c.CallTimeouts()
	if got.Lookup != 3*time.Second || got.ExecGrace != -1 || got.Create != sandbox.DefaultCallTimeouts().Create {
		t.Fatalf("CallTimeouts %+v, want Lookup 3s, ExecGrace off, the rest default", got)
	}
	if c.CommandTimeout() != 7*time.Minute {
		t.Fatalf("CommandTimeout %v, want 7m", c.CommandTimeout())
	}
}
