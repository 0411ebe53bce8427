package e2b_test

import (
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// TestConformance runs the portable suite against e2b over e2bfake over
// provider/local, so commands and files are real.
func TestConformance(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Harness{
		NewClient: func(t *testing.T) *sandbox.Client {
			return sandbox.NewClient(newEnv(t).rt)
		},
		Timeout: time.Minute,
	})
}

// TestConformanceMemory runs the suite over provider/memory too: fast, and
// independent of the host's isolation features.
func TestConformanceMemory(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Harness{
		NewClient: func(t *testing.T) *sandbox.Client {
			return sandbox.NewClient(newMemoryEnv(t).rt)
		},
		Timeout: time.Minute,
	})
}
