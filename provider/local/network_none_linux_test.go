package local

import (
	"context"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/sberrors"
)

// TestNetworkNone: a Runtime made WithNetwork(NetworkNone) gives no
// network, and starts no pasta, to a sandbox whose create asks for no
// policy, even when its warm pool holds sandboxes; a create with an
// explicit allow-all gets the isolated network (never a pooled sandbox
// without one), one with an allow-list the egress proxy, and SetNetwork
// opens a sandbox created without one through the proxy.
func TestNetworkNone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := newRuntime(t, WithNetwork(NetworkNone), WithWarmPool(1))
	if l, _ := rt.Level(); l < L3 {
		t.Skipf("this host gives %s, not namespaces", l.Describe())
	}
	c := sandbox.NewClient(rt)
	interfaces := func(sb *sandbox.Sandbox) string {
		t.Helper()
		res, err := sb.Exec(ctx, sandbox.Command{Shell: "grep -c : /proc/net/dev"})
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(res.Stdout))
	}
	pastas := func(sb *sandbox.Sandbox) int {
		t.Helper()
		pids, err := rt.HostPIDs(ctx, sb.ID())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, pid := range pids {
			if isPastaMain(pid) {
				n++
			}
		}
		return n
	}
	waitFor(t, func() bool { return len(rt.pool) == 1 })

	off := mustCreate(ctx, t, c, sandbox.CreateOptions{})
	if d := off.Info().Detail; d["network"] != "off" || !strings.Contains(d["network_note"], "NetworkNone") {
		t.Errorf("no policy: Detail network %q, note %q; want off, naming NetworkNone", d["network"], d["network_note"])
	}
	if got := interfaces(off); got != "1" {
		t.Errorf("no policy: %s interfaces, want only lo", got)
	}
	if n := pastas(off); n != 0 {
		t.Errorf("no policy: %d pasta processes, want none", n)
	}
	if p := off.Info().Network; p == nil || p.Mode != sandbox.NetworkDenyAll {
		t.Errorf("no policy: Info.Network %+v, want deny-all", p)
	}

	// The pool refills with a sandbox without network: an explicit
	// allow-all must not take it.
	waitFor(t, func() bool { return len(rt.pool) == 1 })
	if rt.pasta == "" {
		_, err := c.Create(ctx, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowAll}})
		if sberrors.CodeOf(err) != sberrors.FailedPrecondition || !strings.Contains(err.Error(), "passt") {
			t.Errorf("allow-all without pasta: %v, want FailedPrecondition naming passt", err)
		}
	} else {
		on := mustCreate(ctx, t, c, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowAll}})
		if d := on.Info().Detail; !strings.HasPrefix(d["network"], NetworkIsolated) {
			t.Errorf("explicit allow-all: Detail network %q (%s), want isolated", d["network"], d["network_note"])
		}
		if got := interfaces(on); got == "1" {
			t.Errorf("explicit allow-all: only lo")
		}
		if n := pastas(on); n != 1 {
			t.Errorf("explicit allow-all: %d pasta processes, want 1", n)
		}
	}

	listed := mustCreate(ctx, t, c, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Allow: []string{"example.com"}}})
	if d := listed.Info().Detail; d["egress"] != "proxy" {
		t.Errorf("allow-list: Detail egress %q, network %q; want the proxy", d["egress"], d["network"])
	}
	if err := off.SetNetwork(ctx, sandbox.NetworkPolicy{Allow: []string{"example.com"}}); err != nil {
		t.Errorf("SetNetwork on a sandbox created without network: %v", err)
	}

	// A provider option still picks the network of one sandbox.
	host := mustCreate(ctx, t, c, sandbox.CreateOptions{ProviderOptions: map[string]string{"network": NetworkHost}})
	if got := host.Info().Detail["network"]; got != NetworkHost {
		t.Errorf("network=host option: Detail network %q", got)
	}
	// NoNetwork is the same as no policy.
	if d := mustCreate(ctx, t, c, sandbox.CreateOptions{NoNetwork: true}).Info().Detail; d["network"] != "off" {
		t.Errorf("NoNetwork: Detail network %q", d["network"])
	}
}

// TestNetworkNoneNeedsL2: below L2 a sandbox cannot be kept off the
// network, so a create that would be is refused, naming the level; one
// that asks for the host's network by option is not.
func TestNetworkNoneNeedsL2(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sandbox.NewClient(newRuntime(t, WithNetwork(NetworkNone), WithIsolation(L1)))
	_, err := c.Create(ctx, sandbox.CreateOptions{})
	if sberrors.CodeOf(err) != sberrors.FailedPrecondition || !strings.Contains(err.Error(), "L2") || !strings.Contains(err.Error(), "none") {
		t.Errorf("create at L1 with network none: %v, want FailedPrecondition naming none and L2", err)
	}
	sb := mustCreate(ctx, t, c, sandbox.CreateOptions{ProviderOptions: map[string]string{"network": NetworkHost}})
	if got := sb.Info().Detail["network"]; got != NetworkHost {
		t.Errorf("network=host at L1: Detail network %q", got)
	}
}

// TestNetworkNoneFromURL: the URL parameter network=none is
// WithNetwork(NetworkNone), and a value it does not know is refused,
// naming the three it does.
func TestNetworkNoneFromURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := sandbox.Open(ctx, "local://"+shortTempDir(t)+"?network=none")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if l, _ := c.Runtime().(*Runtime).Level(); l < L2 {
		t.Skipf("this host gives %s: no sandbox can be kept off the network", l.Describe())
	}
	sb := mustCreate(ctx, t, c, sandbox.CreateOptions{})
	if got := sb.Info().Detail["network"]; got != "off" {
		t.Errorf("?network=none: Detail network %q, want off", got)
	}
	_, err = sandbox.Open(ctx, "local://"+shortTempDir(t)+"?network=nothing")
	if sberrors.CodeOf(err) != sberrors.InvalidArgument || !strings.Contains(err.Error(), `"nothing"`) || !strings.Contains(err.Error(), `"none"`) {
		t.Errorf("?network=nothing: %v, want InvalidArgument naming the value and none", err)
	}
}
