package local

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/stretchr/testify/require"
)

// A state record kept in memory is never served after its file changed:
// a write to the state file (here through the lock, as another process
// would) is seen by the next read, as is the removal of the sandbox.
func TestStateCacheSeesWrites(t *testing.T) {
	t.Parallel()
	rt, err := New(WithRoot(t.TempDir()), WithIsolation(L1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })
	ctx := t.Context()
	in, err := rt.Create(ctx, &driver.CreateRequest{Timeout: time.Hour})
	require.NoError(t, err)
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
	_, err = rt.readMeta(in.ID)
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
