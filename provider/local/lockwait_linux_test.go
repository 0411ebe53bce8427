package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/stretchr/testify/require"
)

// A call with a deadline does not wait past it for a sandbox's lock that
// another call holds for long (a snapshot or fork copying the sandbox
// holds it for the whole copy): Get, Exec and Destroy end with the
// deadline, and work again once the lock is free.
func TestLockWaitBoundedByContext(t *testing.T) {
	t.Parallel()
	rt, err := New(WithRoot(t.TempDir()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })
	ctx := t.Context()
	in, err := rt.Create(ctx, &driver.CreateRequest{Timeout: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Destroy(context.Background(), in.ID) })

	// Hold the lock as a snapshot in another process would.
	f, err := os.OpenFile(filepath.Join(rt.dir(in.ID), stateFile), os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))

	const wait = 300 * time.Millisecond
	for name, call := range map[string]func(context.Context) error{
		"get": func(ctx context.Context) error { _, err := rt.Get(ctx, in.ID); return err },
		"exec": func(ctx context.Context) error {
			_, err := rt.Exec(ctx, in.ID, &driver.Command{Args: []string{"true"}, Dir: "/", Stdout: discard{}, Stderr: discard{}, Timeout: time.Minute})
			return err
		},
		"destroy": func(ctx context.Context) error { return rt.Destroy(ctx, in.ID) },
	} {
		cctx, cancel := context.WithTimeout(ctx, wait)
		start := time.Now()
		err := call(cctx)
		took := time.Since(start)
		cancel()
		require.Error(t, err, name)
		require.True(t, errors.Is(err, context.DeadlineExceeded), "%s: %v", name, err)
		require.Less(t, took, 5*(wait+time.Second), "%s waited %v for a lock past its deadline", name, took)
		t.Logf("%s ended after %v: %v", name, took, err)
	}

	require.NoError(t, f.Close()) // releases the lock
	_, err = rt.Get(ctx, in.ID)
	require.NoError(t, err)
}
