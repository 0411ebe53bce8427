package run

import (
	"testing"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/local"
)

// TestLocal runs the scenarios over provider/local at the default
// isolation level of this host, and at L1 (plain host processes) those
// whose outcome depends on how processes run (all of them when fullRun).
func TestLocal(t *testing.T) {
	for _, name := range []string{"default", "L1"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			var opts []local.Option
			opts = append(opts, local.WithRoot(root))
			var only reach
			if name == "L1" {
				opts = append(opts, local.WithIsolation(local.L1))
				only = viaProcesses
			} else {
				// No scenario needs a way out, and a sandbox off the
				// network starts no network helper (L1 has no choice).
				opts = append(opts, local.WithNetwork(local.NetworkNone))
			}
			runScenarios(t, harness{newRuntime: func(t *testing.T) driver.Runtime {
				rt, err := local.New(opts...)
				if err != nil {
					t.Fatalf("local.New: %v", err)
				}
				t.Cleanup(func() { rt.Close() })
				return rt
			}}, only)
		})
	}
}
