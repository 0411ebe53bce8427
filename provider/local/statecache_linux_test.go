package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
	"github.com/stretchr/testify/require"
)

// A state record kept in memory is never served after its file changed:
// a write to the state file (here through the lock, as another process
// would) is seen by the next read, as is the removal of the sandbox.
func TestStateCacheSeesWrites(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rt, in := stateCacheSandbox(t)
	for i := range 5 {
		m, err := rt.readMeta(in.ID) // cached after the first
		require.NoError(t, err)
		end := m.LeaseEnd.Add(time.Duration(i+1) * time.Minute)
		l, err := rt.lockCtx(ctx, in.ID)
		require.NoError(t, err)
		lm, err := l.read(in.ID)
		require.NoError(t, err)
		lm.LeaseEnd = end
		require.NoError(t, l.write(lm))
		l.unlock()
		m, err = rt.readMeta(in.ID)
		require.NoError(t, err)
		require.True(t, m.LeaseEnd.Equal(end), "read %v after writing %v", m.LeaseEnd, end)
	}
	// Another process's Destroy moves the directory away first: the
	// record is gone from then on, though this process forgot nothing.
	_, err := rt.readMeta(in.ID)
	require.NoError(t, err)
	trash := filepath.Join(filepath.Dir(rt.dir(in.ID)), ".trash-"+in.ID)
	require.NoError(t, os.Rename(rt.dir(in.ID), trash))
	_, err = rt.readMeta(in.ID)
	require.Error(t, err)
	require.NoError(t, os.Rename(trash, rt.dir(in.ID)))
	require.NoError(t, rt.Destroy(ctx, in.ID))
	_, err = rt.readMeta(in.ID)
	require.Error(t, err)
}

// An exec on a running sandbox whose record is cached takes the fast path
// (no path walked), and leaves it for the long way whenever that one
// matters: a writer holds the state's lock (a snapshot copying: the call
// waits, bounded by its context), a freeze record appears (a stale one is
// cleared), the sandbox is paused by another process, or its directory is
// moved away.
func TestFastRunningStepsAside(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rt, in := stateCacheSandbox(t)
	id := in.ID
	_, err := rt.running(ctx, id)
	require.NoError(t, err)
	_, ok := rt.fastRunning(id)
	require.True(t, ok, "a running sandbox read once is not on the fast path")

	// A writer (another process's snapshot) holds the lock: no fast path,
	// and the call waits for it within its context.
	l, err := rt.lockCtx(ctx, id)
	require.NoError(t, err)
	_, ok = rt.fastRunning(id)
	require.False(t, ok, "the fast path passed a held lock")
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	_, err = rt.running(short, id)
	cancel()
	require.ErrorContains(t, err, "busy")
	l.unlock()
	_, err = rt.running(ctx, id)
	require.NoError(t, err)

	// A freeze record left by a process that is gone: the call takes the
	// long way, which clears it.
	mark := rt.freezeMarkPath(id)
	require.NoError(t, os.WriteFile(mark, []byte("1 1 cgroup\n"), 0o600))
	_, ok = rt.fastRunning(id)
	require.False(t, ok, "the fast path ignored a freeze record")
	_, err = rt.running(ctx, id)
	require.NoError(t, err)
	require.NoFileExists(t, mark)
	_, err = rt.running(ctx, id)
	require.NoError(t, err)
	_, ok = rt.fastRunning(id)
	require.True(t, ok)

	// Paused by another process (its write through the lock).
	l, err = rt.lockCtx(ctx, id)
	require.NoError(t, err)
	lm, err := l.read(id)
	require.NoError(t, err)
	was := lm.State
	lm.State = driver.StatePaused
	require.NoError(t, l.write(lm))
	l.unlock()
	_, err = rt.running(ctx, id)
	require.ErrorIs(t, err, sberrors.ErrPaused)
	l, err = rt.lockCtx(ctx, id)
	require.NoError(t, err)
	lm, err = l.read(id)
	require.NoError(t, err)
	lm.State = was
	require.NoError(t, l.write(lm))
	l.unlock()
	_, err = rt.running(ctx, id)
	require.NoError(t, err)
	_, ok = rt.fastRunning(id)
	require.True(t, ok)

	// Moved away (as another process's Destroy does first).
	trash := filepath.Join(filepath.Dir(rt.dir(id)), ".trash-"+id)
	require.NoError(t, os.Rename(rt.dir(id), trash))
	_, err = rt.running(ctx, id)
	require.ErrorIs(t, err, sberrors.ErrNotFound)
	require.NoError(t, os.Rename(trash, rt.dir(id)))
	require.NoError(t, rt.Destroy(ctx, id))
	_, err = rt.running(ctx, id)
	require.ErrorIs(t, err, sberrors.ErrNotFound)
}

// stateCacheSandbox makes an L1 sandbox (no agent until a command) in a
// Runtime of its own.
func stateCacheSandbox(t *testing.T) (*Runtime, driver.Info) {
	t.Helper()
	rt, err := New(WithRoot(t.TempDir()), WithIsolation(L1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })
	in, err := rt.Create(t.Context(), &driver.CreateRequest{Timeout: time.Hour})
	require.NoError(t, err)
	return rt, in
}
