package local

import (
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox/internal/opts/optstest"
)

// TestBadOptionNamesIt: New refuses invalid option values with one
// InvalidArgument error naming each bad option, before touching the host.
func TestBadOptionNamesIt(t *testing.T) {
	_, err := New(WithRoot(t.TempDir()), WithNetwork("bogus"), WithWarmPool(-1))
	optstest.Check(t, "WithNetwork", err)
	optstest.Check(t, "WithWarmPool", err)
	if err != nil && strings.Contains(err.Error(), "WithRoot") {
		t.Errorf("a valid option is named: %v", err)
	}
}
