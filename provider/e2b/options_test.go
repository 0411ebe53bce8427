package e2b_test

import (
	"testing"

	"github.com/sandboxkit/sandbox/internal/opts/optstest"
	"github.com/sandboxkit/sandbox/provider/e2b"
)

// TestBadOptionNamesIt: New refuses an invalid option value with an
// InvalidArgument error naming the option.
func TestBadOptionNamesIt(t *testing.T) {
	t.Parallel()
	_, err := e2b.New(e2b.WithAPIKey("e2b_0123456789abcdef"), e2b.WithAPIURL("http://127.0.0.1:1"), e2b.WithTransport(nil))
	optstest.Check(t, "WithTransport", err)
}
