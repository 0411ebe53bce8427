package daytona_test

import (
	"os"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/daytona"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// TestLiveConformance runs the suite against the real Daytona. It needs
// DAYTONA_API_KEY (and optionally DAYTONA_API_URL, DAYTONA_TARGET) and
// creates and deletes real sandboxes.
func TestLiveConformance(t *testing.T) {
	t.Parallel()
	if os.Getenv("DAYTONA_API_KEY") == "" {
		t.Skip("DAYTONA_API_KEY is not set: skipping the tests against the real Daytona")
	}
	sandboxtest.Run(t, sandboxtest.Harness{
		NewClient: func(t *testing.T) *sandbox.Client {
			rt, err := daytona.New()
			if err != nil {
				t.Fatal(err)
			}
			return sandbox.NewClient(rt)
		},
		Timeout: 5 * time.Minute,
	})
}
