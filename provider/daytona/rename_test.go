package daytona_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
)

// A Rename that replaces a file is atomic: a reader polling the
// destination meanwhile always finds a file, the old one or the new one.
// (The move endpoint refuses an existing destination; removing it first
// and moving again left a window in which the file was missing.) Not in
// parallel: its reader polls without pause, keeping a CPU busy, and its
// fifteen rounds ran out of their minute beside the parallel tests.
func TestRenameReplaceIsAtomic(t *testing.T) {
	e := newEnv(t, nil)
	sb := e.create(t)
	ctx := ctxT(t)
	require.NoError(t, sb.WriteFile(ctx, "dst", []byte("v0")))
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var missing, reads int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for rctx.Err() == nil {
			_, err := sb.ReadFile(rctx, "dst")
			if rctx.Err() != nil {
				return
			}
			reads++
			if errors.Is(err, fs.ErrNotExist) {
				missing++
			}
		}
	}()
	const rounds = 15
	for i := 1; i <= rounds; i++ {
		v := fmt.Sprintf("v%d", i)
		require.NoError(t, sb.WriteFile(ctx, "src", []byte(v)))
		require.NoError(t, sb.Rename(ctx, "src", "dst"))
		b, err := sb.ReadFile(ctx, "dst")
		require.NoError(t, err)
		require.Equal(t, v, string(b))
		_, err = sb.Stat(ctx, "src")
		require.ErrorIs(t, err, fs.ErrNotExist, "the source is gone after the rename")
	}
	stop()
	wg.Wait()
	t.Logf("%d reads of the destination during %d replacing renames", reads, rounds)
	assert.Zero(t, missing, "the destination was missing during a replacing rename")
}

// Renaming onto a directory is refused and changes nothing.
func TestRenameOntoDirectoryIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	ctx := ctxT(t)
	require.NoError(t, sb.WriteFile(ctx, "f", []byte("x")))
	require.NoError(t, sb.MkdirAll(ctx, "d"))
	err := sb.Rename(ctx, "f", "d")
	require.Error(t, err)
	assert.Equal(t, sandbox.FailedPrecondition, sandbox.CodeOf(err), "%v", err)
	b, err := sb.ReadFile(ctx, "f")
	require.NoError(t, err)
	assert.Equal(t, "x", string(b))
}
