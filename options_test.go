package sandbox_test

import (
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenBadOptionNamesIt: Open refuses an invalid option value with an
// InvalidArgument error that names the option, before opening anything.
func TestOpenBadOptionNamesIt(t *testing.T) {
	t.Parallel()
	c, err := sandbox.Open(t.Context(), "memory://", sandbox.WithCommandTimeout(-1), sandbox.WithCleanupTimeout(0))
	require.Error(t, err)
	assert.Nil(t, c)
	assert.Equal(t, sandbox.InvalidArgument, sandbox.CodeOf(err))
	assert.ErrorIs(t, err, sandbox.ErrInvalidArgument)
	assert.ErrorContains(t, err, "WithCommandTimeout")
	assert.ErrorContains(t, err, "WithCleanupTimeout")
}

// TestNewClientBadOptionFailsEveryCall: NewClient cannot fail, so a Client
// given an invalid option returns the error naming it from every call,
// and the provider is never asked.
func TestNewClientBadOptionFailsEveryCall(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt, sandbox.WithMaxOutput(0))
	defer c.Close()
	ctx := t.Context()
	check := func(what string, err error) {
		t.Helper()
		assert.Equal(t, sandbox.InvalidArgument, sandbox.CodeOf(err), "%s: %v", what, err)
		assert.ErrorContains(t, err, "WithMaxOutput", what)
	}
	_, err := c.Create(ctx, sandbox.CreateOptions{})
	check("Create", err)
	_, _, err = c.GetOrCreate(ctx, sandbox.CreateOptions{Labels: map[string]string{"k": "v"}})
	check("GetOrCreate", err)
	_, err = c.Attach(ctx, "sb1")
	check("Attach", err)
	for _, err := range c.List(ctx, sandbox.ListOptions{}) {
		check("List", err)
	}
	check("Destroy", c.Destroy(ctx, "sb1"))
	assert.Empty(t, rt.Calls(), "the provider was called")

	// Valid options leave the Client working.
	good := sandbox.NewClient(memory.New(), sandbox.WithMaxOutput(1), sandbox.WithCommandTimeout(1))
	defer good.Close()
	sb, err := good.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, sb.Destroy(ctx))
}
