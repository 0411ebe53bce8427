package daytonafake_test

import (
	"testing"

	"github.com/sandboxkit/sandbox/internal/opts/optstest"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// TestBadOptionNamesIt: New panics (as httptest.NewServer does when it
// cannot listen) with an InvalidArgument error naming each bad option,
// and starts no server.
func TestBadOptionNamesIt(t *testing.T) {
	t.Parallel()
	err := optstest.Panicked(func() {
		daytonafake.New(memory.New(), daytonafake.WithCreatePolls(-1), daytonafake.WithAPIKey("")).Close()
	})
	optstest.Check(t, "WithCreatePolls", err)
	optstest.Check(t, "WithAPIKey", err)
}
