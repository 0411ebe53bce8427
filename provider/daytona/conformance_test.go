package daytona_test

import (
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// TestConformance runs the whole suite against daytona over daytonafake.
func TestConformance(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Harness{
		NewClient: func(t *testing.T) *sandbox.Client { return newEnv(t, nil).c },
	})
}
