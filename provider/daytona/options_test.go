package daytona_test

import (
	"testing"

	"github.com/sandboxkit/sandbox/provider/daytona"
	"github.com/sandboxkit/sandbox/sberrors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadOptionNamesIt: New refuses an invalid option value with an
// InvalidArgument error naming the option.
func TestBadOptionNamesIt(t *testing.T) {
	for name, opt := range map[string]daytona.Option{
		"WithTransport":  daytona.WithTransport(nil),
		"WithScratchDir": daytona.WithScratchDir("/tmp/a b;x"),
	} {
		rt, err := daytona.New(daytona.WithAPIKey("dtn_key"), daytona.WithAPIURL("http://127.0.0.1:1/api"), opt)
		require.Error(t, err, name)
		assert.Nil(t, rt)
		assert.Equal(t, sberrors.InvalidArgument, sberrors.CodeOf(err), "%s: %v", name, err)
		assert.ErrorContains(t, err, name)
	}
}
