package memory_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestConformance runs beside the package's other tests: its groups mostly
// wait out timeouts, and the others are quick.
func TestConformance(t *testing.T) {
	t.Parallel()
	sandboxtest.Run(t, sandboxtest.Harness{
		NewClient: func(t *testing.T) *sandbox.Client { return sandbox.NewClient(memory.New()) },
		Skip: map[string]string{
			"Exec/KilledBySignal":   "the fake's shell has no kill and no process to signal; Process/SignalNamed covers Result.Signal",
			"Process/SignalTrapped": "the fake's shell runs no trap handler: a signal always ends its process",
			"Terminal/IsATTY":       "the emulated terminal is no tty: test -t is false (stty size and TERM are checked by Terminal/SizeAndResize)",
		},
	})
}
