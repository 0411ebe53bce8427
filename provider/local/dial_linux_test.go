//go:build linux

package local

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAgentListensTellsBusyFromGone: connect replaces an agent only when
// nobody listens on its socket. A listener that drops connections (what a
// CPU-starved agent does under load) must read as busy, never as gone:
// replacing a live agent kills every command it runs (a fresh-clone CI run
// lost two daytona execs that way at load 90).
func TestAgentListensTellsBusyFromGone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	_, err := net.Dial("unix", filepath.Join(dir, "missing"))
	require.Error(t, err)
	require.False(t, agentListens(err), "a missing socket: %v", err)

	stale := filepath.Join(dir, "stale")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
	_, err = net.Dial("unix", stale)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.False(t, agentListens(err), "a socket nobody listens on: %v", err)

	busy := filepath.Join(dir, "busy")
	bl, err := net.Listen("unix", busy)
	require.NoError(t, err)
	defer bl.Close()
	go func() {
		for {
			c, err := bl.Accept()
			if err != nil {
				return
			}
			c.Close() // dropped unread, as by an agent that gave up on it
		}
	}()
	var dropErr error
	for deadline := time.Now().Add(30 * time.Second); dropErr == nil && time.Now().Before(deadline); {
		c, err := net.Dial("unix", busy)
		if err != nil {
			dropErr = err
			break
		}
		time.Sleep(20 * time.Millisecond) // let the listener drop it
		if _, err := c.Write(make([]byte, 64)); err != nil {
			dropErr = err
		} else if _, err := c.Read(make([]byte, 1)); err != nil && !os.IsTimeout(err) {
			dropErr = err
		}
		c.Close()
	}
	require.Error(t, dropErr, "no dial to the dropping listener failed")
	require.True(t, agentListens(dropErr), "a listener that drops connections reads as gone: %v", dropErr)
}
