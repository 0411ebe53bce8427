package daytona_test

import (
	"testing"

	"github.com/sandboxkit/sandbox/internal/opts/optstest"
	"github.com/sandboxkit/sandbox/provider/daytona"
)

// TestBadOptionNamesIt: New refuses invalid option values with an
// InvalidArgument error naming each bad option.
func TestBadOptionNamesIt(t *testing.T) {
	t.Parallel()
	_, err := daytona.New(daytona.WithAPIKey("dtn_key"), daytona.WithTransport(nil), daytona.WithScratchDir("/tmp/a b;x"))
	optstest.Check(t, "WithTransport", err)
	optstest.Check(t, "WithScratchDir", err)
}
