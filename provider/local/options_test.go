package local

import (
	"testing"

	"github.com/sandboxkit/sandbox/sberrors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadOptionNamesIt: New refuses invalid option values with one
// InvalidArgument error naming each bad option, before touching the host.
func TestBadOptionNamesIt(t *testing.T) {
	root := t.TempDir()
	rt, err := New(WithRoot(root), WithNetwork("bogus"), WithWarmPool(-1))
	require.Error(t, err)
	assert.Nil(t, rt)
	assert.Equal(t, sberrors.InvalidArgument, sberrors.CodeOf(err))
	assert.ErrorContains(t, err, "WithNetwork")
	assert.ErrorContains(t, err, "WithWarmPool")
	assert.NotContains(t, err.Error(), "WithRoot")
}
