package daytona_test

import (
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// TestConformance runs the whole suite against daytona over daytonafake
// over provider/local.
func TestConformance(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Harness{
		NewClient: func(t *testing.T) *sandbox.Client { return newEnv(t, nil).c },
	})
}

// TestConformanceDefaultScratch runs it again over the host test runtime,
// with the scratch directory the real service gets (/tmp/.sandboxkit).
func TestConformanceDefaultScratch(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Harness{
		NewClient: func(t *testing.T) *sandbox.Client { return newHostEnv(t, nil).c },
	})
}
