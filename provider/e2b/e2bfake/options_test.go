package e2bfake_test

import (
	"testing"

	"github.com/sandboxkit/sandbox/internal/opts/optstest"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// TestBadOptionNamesIt: New panics (as httptest.NewServer does when it
// cannot listen) with an InvalidArgument error naming each bad option,
// and starts no server.
func TestBadOptionNamesIt(t *testing.T) {
	err := optstest.Panicked(func() {
		e2bfake.New(memory.New(), e2bfake.WithMaxLease(0), e2bfake.WithTemplates(), e2bfake.WithClock(nil)).Close()
	})
	for _, name := range []string{"WithMaxLease", "WithTemplates", "WithClock"} {
		optstest.Check(t, name, err)
	}
}
