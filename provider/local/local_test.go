//go:build linux

package local

import (
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/sandboxtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	Init() // the package's init already dispatched; calling it again is harmless
	goleak.VerifyTestMain(m)
}

// newRuntime returns a Runtime on a fresh root, closed at cleanup.
func newRuntime(t *testing.T, opts ...Option) *Runtime {
	t.Helper()
	rt, err := New(append([]Option{WithRoot(t.TempDir())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

func TestConformance(t *testing.T) {
	t.Run("best", func(t *testing.T) {
		sandboxtest.Run(t, sandboxtest.Harness{NewClient: func(t *testing.T) *sandbox.Client {
			return sandbox.NewClient(newRuntime(t))
		}, SnapshotSparseSize: 1 << 30})
	})
	t.Run("warm-pool", func(t *testing.T) {
		sandboxtest.Run(t, sandboxtest.Harness{NewClient: func(t *testing.T) *sandbox.Client {
			return sandbox.NewClient(newRuntime(t, WithWarmPool(2)))
		}})
	})
	t.Run("L2", func(t *testing.T) {
		rt, err := New(WithRoot(t.TempDir()), WithIsolation(L2))
		if err != nil {
			t.Skipf("no L2 here: %v", err)
		}
		rt.Close()
		// At L2 the network is off by default and seccomp refuses every
		// socket but unix ones, so no server can listen for Expose.
		noListen := "at L2 with the network off (the default) seccomp refuses inet sockets, so a server in the sandbox cannot listen"
		sandboxtest.Run(t, sandboxtest.Harness{NewClient: func(t *testing.T) *sandbox.Client {
			return sandbox.NewClient(levelRuntime(t, L2))
		}, Skip: map[string]string{
			"Ports/HTTPServerFileByteExact": noListen, "Ports/StreamingResponse": noListen,
			"Ports/WebSocketEcho": noListen, "Ports/FailsAfterDestroy": noListen,
			"Ports/ConcurrentDownloadsAbandoned": noListen, "Ports/RequiresCredentials": noListen,
			"Ports/ServerNeverClosesFreesDescriptors": noListen, "Ports/ConnectionCapAndIdle": noListen,
		}})
	})
	t.Run("L1", func(t *testing.T) {
		sandboxtest.Run(t, sandboxtest.Harness{NewClient: func(t *testing.T) *sandbox.Client {
			// A root the sandbox's user can reach, so that on a root host
			// commands run unprivileged, as under the default root.
			return sandbox.NewClient(levelRuntime(t, L1))
		}, SnapshotSparseSize: 1 << 30})
	})
}
