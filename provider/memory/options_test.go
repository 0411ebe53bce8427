package memory_test

import (
	"testing"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/opts/optstest"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// TestBadOptionNamesIt: New cannot fail, so a Runtime given an invalid
// option fails its calls with an InvalidArgument error naming it.
func TestBadOptionNamesIt(t *testing.T) {
	rt := memory.New(memory.WithClock(nil))
	_, err := rt.Create(t.Context(), &driver.CreateRequest{})
	optstest.Check(t, "WithClock", err)
	_, _, err = rt.List(t.Context(), &driver.ListRequest{PageSize: 1})
	optstest.Check(t, "WithClock", err)
}
