package e2b_test

import (
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// TestConformance runs the portable suite against e2b over e2bfake.
func TestConformance(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Harness{
		NewClient: func(t *testing.T) *sandbox.Client {
			e := newEnv(t)
			return sandbox.NewClient(e.rt)
		},
		Timeout: time.Minute,
	})
}
