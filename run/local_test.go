package run

import (
	"testing"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/provider/local/localtest"
)

// TestLocal runs the scenarios over provider/local at the default
// isolation level of this host, and at L1 (plain host processes) those
// whose outcome depends on how processes run (all of them when fullRun).
func TestLocal(t *testing.T) {
	t.Parallel()
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
			}
			runScenarios(t, harness{newRuntime: func(t *testing.T) driver.Runtime {
				// No scenario needs a way out: off the network where
				// the level allows it (not at L1).
				rt, err := localtest.Offline(opts...)
				if err != nil {
					t.Fatalf("local.New: %v", err)
				}
				t.Cleanup(func() { rt.Close() })
				return rt
			}}, only)
		})
	}
}
