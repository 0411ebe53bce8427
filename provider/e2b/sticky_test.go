package e2b_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
)

// In a sticky directory (/tmp) the user may add files, and replace or
// remove its own, but not another user's; the adapter reads the sticky
// bit from envd's permission string. Over the local provider the
// sandbox's user is not root and /tmp is 1777.
func TestStickyDirectory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer sb.Destroy(ctx)
	r, err := sb.Exec(ctx, sandbox.Command{Shell: `test -k /tmp && test -w /tmp && [ "$(id -u)" != 0 ]`})
	require.NoError(t, err)
	if r.ExitCode != 0 {
		t.Skip("/tmp here is not a sticky directory the sandbox's non-root user may write")
	}
	require.NoError(t, sb.WriteFile(ctx, "/tmp/mine", []byte("1")))
	require.NoError(t, sb.WriteFile(ctx, "/tmp/mine", []byte("2")))
	require.NoError(t, sb.Rename(ctx, "/tmp/mine", "/tmp/mine2"))
	require.NoError(t, sb.Remove(ctx, "/tmp/mine2"))
	got, err := sb.ReadFile(ctx, "/tmp/mine2")
	assert.Error(t, err, "%q", got)
}
