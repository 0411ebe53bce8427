package daytona_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
)

// The daemon answers POST /files/folder with 400 and an empty body for
// every failure, so MkdirAll finds out which one it was: a directory the
// sandbox's user may not write is PermissionDenied (it used to be read
// as "a file is in the way"), a file in the way is still ErrNotDirectory.
func TestMkdirAllClassifiesTheDaemons400(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	ctx := ctxT(t)
	r, err := sb.Exec(ctx, sandbox.Command{Shell: "mkdir ro && chmod 555 ro && : > file && ! test -w ro"})
	require.NoError(t, err)
	require.Equal(t, 0, r.ExitCode, "setting up: %s", r.Stderr)

	for _, p := range []string{"ro/sub", "ro/a/b/c"} {
		err = sb.MkdirAll(ctx, p)
		assert.Equal(t, sandbox.PermissionDenied, sandbox.CodeOf(err), "MkdirAll(%s): %v", p, err)
		assert.False(t, errors.Is(err, sandbox.ErrNotDirectory), "MkdirAll(%s): %v matches ErrNotDirectory", p, err)
	}
	for _, p := range []string{"file", "file/sub", "file/a/b"} {
		err = sb.MkdirAll(ctx, p)
		assert.True(t, errors.Is(err, sandbox.ErrNotDirectory), "MkdirAll(%s): %v, want ErrNotDirectory", p, err)
		assert.Equal(t, sandbox.FailedPrecondition, sandbox.CodeOf(err), "MkdirAll(%s): %v", p, err)
	}
	require.NoError(t, sb.MkdirAll(ctx, "ok/a/b"))
}
