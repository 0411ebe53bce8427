package memory_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// A Handler standing in for a network client sees the policy in force,
// from a plain command and from a shell line, and the change SetNetwork
// made.
func TestHandlerSeesNetworkPolicy(t *testing.T) {
	ctx := context.Background()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	if caps := c.Capabilities(); !caps.NetworkPolicy.NotEnforced || !caps.NetworkUpdate {
		t.Fatalf("memory must say it records policies without enforcing them: %+v", caps.NetworkPolicy)
	}
	sb, err := c.Create(ctx, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Allow: []string{"PyPI.org", "10.0.0.1"}}})
	if err != nil {
		t.Fatal(err)
	}
	rt.Handle("fetch", func(_ context.Context, call *memory.Call) int {
		n := call.Network
		if n == nil {
			fmt.Fprintln(call.Stdout, "none")
			return 0
		}
		allowed := n.Mode == "allow-all" || slices.Contains(n.AllowDomains, call.Args[1])
		fmt.Fprintln(call.Stdout, n.Mode, allowed, n.AllowCIDRs)
		return 0
	})
	for _, tc := range []struct{ cmd sandbox.Command }{
		{sandbox.Command{Args: []string{"fetch", "pypi.org"}}},
		{sandbox.Command{Shell: "fetch pypi.org | cat"}},
	} {
		r, err := sb.Exec(ctx, tc.cmd)
		if err != nil || string(r.Stdout) != "allow-list true [10.0.0.1/32]\n" {
			t.Errorf("%+v: %q %v", tc.cmd, r.Stdout, err)
		}
	}
	if err := sb.SetNetwork(ctx, sandbox.NetworkPolicy{Mode: sandbox.NetworkDenyAll}); err != nil {
		t.Fatal(err)
	}
	r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"fetch", "pypi.org"}})
	if err != nil || string(r.Stdout) != "deny-all false []\n" {
		t.Errorf("after SetNetwork: %q %v", r.Stdout, err)
	}
}
