package memory_test

import (
	"testing"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/sberrors"
	"github.com/stretchr/testify/assert"
)

// TestBadOptionNamesIt: New cannot fail, so a Runtime given an invalid
// option fails its calls with an InvalidArgument error naming it.
func TestBadOptionNamesIt(t *testing.T) {
	rt := memory.New(memory.WithClock(nil))
	_, err := rt.Create(t.Context(), &driver.CreateRequest{})
	assert.Equal(t, sberrors.InvalidArgument, sberrors.CodeOf(err), "%v", err)
	assert.ErrorContains(t, err, "WithClock")
	_, _, err = rt.List(t.Context(), &driver.ListRequest{PageSize: 1})
	assert.ErrorContains(t, err, "WithClock")
}
