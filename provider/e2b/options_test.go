package e2b_test

import (
	"testing"

	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/sberrors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadOptionNamesIt: New refuses an invalid option value with an
// InvalidArgument error naming the option.
func TestBadOptionNamesIt(t *testing.T) {
	for name, opt := range map[string]e2b.Option{
		"WithTransport": e2b.WithTransport(nil),
	} {
		rt, err := e2b.New(e2b.WithAPIKey("e2b_0123456789abcdef"), e2b.WithAPIURL("http://127.0.0.1:1"), opt)
		require.Error(t, err, name)
		assert.Nil(t, rt)
		assert.Equal(t, sberrors.InvalidArgument, sberrors.CodeOf(err), "%s: %v", name, err)
		assert.ErrorContains(t, err, name)
	}
}
