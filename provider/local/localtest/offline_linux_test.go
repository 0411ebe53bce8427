package localtest

import (
	"context"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/local"
)

// TestOffline: at L2 or above the runtime's sandboxes are off the network;
// at L1, where no sandbox can be kept off it, a create still succeeds
// (with the host's network) instead of being refused.
func TestOffline(t *testing.T) {
	ctx := context.Background()
	create := func(t *testing.T, opts ...local.Option) (local.Level, map[string]string) {
		t.Helper()
		rt, err := Offline(append([]local.Option{local.WithRoot(t.TempDir())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		c := sandbox.NewClient(rt)
		t.Cleanup(func() { _ = c.Close() })
		sb, err := c.Create(ctx, sandbox.CreateOptions{})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
		l, _ := rt.Level()
		return l, sb.Info().Detail
	}
	t.Run("L1", func(t *testing.T) {
		if _, d := create(t, local.WithIsolation(local.L1)); d["network"] == "off" {
			t.Errorf("at L1: Detail network %q; a sandbox at L1 cannot be off the network", d["network"])
		}
	})
	t.Run("best", func(t *testing.T) {
		l, d := create(t)
		if l < local.L2 {
			t.Skipf("this host gives %s: no sandbox can be kept off the network", l.Describe())
		}
		if d["network"] != "off" {
			t.Errorf("at %s: Detail network %q, want off", l.Describe(), d["network"])
		}
	})
}
