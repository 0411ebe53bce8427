package memory_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
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

// Brokered secrets are recorded without their value: a Handler sees the
// hosts, header and placeholder; env, the files and Get show the
// placeholder at most, even read unredacted.
func TestBrokeredSecretsRecordedWithoutValue(t *testing.T) {
	ctx := context.Background()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	defer c.Close()
	if !c.Capabilities().NetworkPolicy.BrokeredSecrets {
		t.Fatal("memory must accept brokered secrets (recorded, not enforced)")
	}
	const value = "sk-memory-brokered-1618033"
	sb, err := c.Create(ctx, sandbox.CreateOptions{
		Network:         &sandbox.NetworkPolicy{Allow: []string{"api.example.com"}},
		BrokeredSecrets: []sandbox.BrokeredSecret{{Value: value, Hosts: []string{"api.example.com"}, Header: "X-Api-Key", Env: "API_KEY"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ph := sb.Info().BrokeredSecrets[0].Placeholder
	var seen string
	rt.Handle("fetch", func(_ context.Context, call *memory.Call) int {
		s := call.Secrets[0]
		seen = fmt.Sprintf("%v %s %v %v %v", s.Hosts, s.Header, s.Placeholder == ph, s.Value == "", s.Format == "")
		return 0
	})
	if _, err := sb.Exec(ctx, sandbox.Command{Shell: "fetch | cat"}); err != nil {
		t.Fatal(err)
	}
	if seen != "[api.example.com] X-Api-Key true true true" {
		t.Fatalf("a Handler sees %q", seen)
	}
	res, _, err := sb.ExecUnredacted(ctx, sandbox.Command{Shell: "env; echo $API_KEY > /tmp/k; grep -r sk-memory / ; cat /tmp/k"})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Stdout) + string(res.Stderr)
	if strings.Contains(out, value) || !strings.Contains(out, "API_KEY="+ph) {
		t.Fatalf("unredacted output %q: want the placeholder and never the value", out)
	}
	in, err := rt.Get(ctx, sb.ID())
	if err != nil || len(in.Secrets) != 1 || in.Secrets[0].Value != "" || in.Secrets[0].Placeholder != ph {
		t.Fatalf("Get: %+v %v", in.Secrets, err)
	}
}
