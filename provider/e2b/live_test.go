package e2b_test

import (
	"os"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// TestLive runs the conformance suite against the real E2B. It needs
// E2B_API_KEY (and optionally E2B_DOMAIN / E2B_API_URL) and is skipped
// without it; it creates and destroys real sandboxes.
func TestLive(t *testing.T) {
	t.Parallel()
	if os.Getenv("E2B_API_KEY") == "" {
		t.Skip("E2B_API_KEY is not set: skipping the tests against the real E2B")
	}
	sandboxtest.Run(t, sandboxtest.Harness{
		NewClient: func(t *testing.T) *sandbox.Client {
			rt, err := e2b.New()
			if err != nil {
				t.Fatal(err)
			}
			return sandbox.NewClient(rt)
		},
		Timeout: 3 * time.Minute,
	})
}
