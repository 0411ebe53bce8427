package daytonafake_test

import (
	"testing"

	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/sberrors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadOptionNamesIt: New panics (as httptest.NewServer does when it
// cannot listen) with an InvalidArgument error naming the bad option, and
// starts no server.
func TestBadOptionNamesIt(t *testing.T) {
	for name, opt := range map[string]daytonafake.Option{
		"WithCreatePolls": daytonafake.WithCreatePolls(-1),
		"WithAPIKey":      daytonafake.WithAPIKey(""),
	} {
		var got any
		func() {
			defer func() { got = recover() }()
			s := daytonafake.New(memory.New(), opt)
			s.Close()
		}()
		err, ok := got.(error)
		require.True(t, ok, "%s: New did not panic with an error: %v", name, got)
		assert.Equal(t, sberrors.InvalidArgument, sberrors.CodeOf(err), "%s: %v", name, err)
		assert.ErrorContains(t, err, name)
	}
}
