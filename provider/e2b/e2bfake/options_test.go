package e2bfake_test

import (
	"testing"

	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/sberrors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadOptionNamesIt: New panics (as httptest.NewServer does when it
// cannot listen) with an InvalidArgument error naming the bad option, and
// starts no server.
func TestBadOptionNamesIt(t *testing.T) {
	for name, opt := range map[string]e2bfake.Option{
		"WithMaxLease":  e2bfake.WithMaxLease(0),
		"WithTemplates": e2bfake.WithTemplates(),
		"WithClock":     e2bfake.WithClock(nil),
	} {
		var got any
		func() {
			defer func() { got = recover() }()
			s := e2bfake.New(memory.New(), opt)
			s.Close()
		}()
		err, ok := got.(error)
		require.True(t, ok, "%s: New did not panic with an error: %v", name, got)
		assert.Equal(t, sberrors.InvalidArgument, sberrors.CodeOf(err), "%s: %v", name, err)
		assert.ErrorContains(t, err, name)
	}
}
