//go:build linux

package local

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/testpar"
	"github.com/sandboxkit/sandbox/sandboxtest"
	"go.uber.org/goleak"
)

// TestMain runs more tests at once than go test's default of one per CPU:
// the package's parallel tests wait on sandboxes (leases, sweeps, bounded
// waits) far more than they compute. Its tests that count what their
// process holds run in a process of their own (testpar.OwnProcess); those
// that count what the host holds are not parallel.
func TestMain(m *testing.M) {
	Init() // the package's init already dispatched; calling it again is harmless
	testpar.Widen(4)
	goleak.VerifyTestMain(m)
}

// shortTempDir returns a fresh directory, removed at cleanup, whose path
// stays short whatever the test's name: t.TempDir's holds the name, and
// under a long one (a conformance subtest's, run on a Client of its own)
// the root was too long for the unix sockets under it. The directory is
// alone in a parent of its own, which the caller may chmod.
func shortTempDir(t *testing.T) string {
	t.Helper()
	parent, err := os.MkdirTemp("", "sbt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	dir := filepath.Join(parent, "r")
	if err := os.Mkdir(dir, 0o777); err != nil { // as t.TempDir makes it
		t.Fatal(err)
	}
	return dir
}

// newRuntime returns a Runtime on a fresh root, closed at cleanup.
func newRuntime(t *testing.T, opts ...Option) *Runtime {
	t.Helper()
	rt, err := New(append([]Option{WithRoot(shortTempDir(t))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// sameRoot makes a second Client on the root of c's Runtime, as another
// OS process would.
func sameRoot(t *testing.T, c *sandbox.Client) *sandbox.Client {
	rt := c.Runtime().(*Runtime)
	r2, err := New(WithRoot(rt.root), WithIsolation(rt.level))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r2.Close() })
	return sandbox.NewClient(r2)
}

// Groups the other configurations run; the best level runs them all, and
// sandboxtest.FullEnv=1 runs them all everywhere. Each names the groups
// the configuration changes.
var (
	// A pooled sandbox is made before its create options are known, so
	// every group that depends on those options (labels, env, network
	// policy, secrets) or draws many sandboxes from the pool runs again.
	warmPoolGroups = []string{"Lifecycle", "Exec", "Process", "Files", "Concurrency", "Network", "Brokered", "Snapshots"}
	// L2 and L1 confine commands differently (Landlock, a uid of the
	// sandbox's own, no namespaces or cgroup): what commands, files,
	// processes, terminals, snapshots and metrics see changes.
	levelGroups = []string{"Lifecycle", "Exec", "Process", "Files", "Terminal", "Processes", "Snapshots", "Metrics", "Watch"}
	// Under go test -short (the inner loop) each runs fewer: the pool
	// the groups whose create options it must not lose (labels and env,
	// policies, secrets); the levels the commands and files their
	// confinement changes first.
	warmPoolShortGroups = []string{"Lifecycle", "Network", "Brokered"}
	levelShortGroups    = []string{"Exec", "Files"}
)

// TestConformance runs the suite in each configuration, the four at once
// and beside the package's other parallel tests: each has Runtimes, roots
// and an egress upstream of its own, and sandboxtest keeps a subtest that
// loads the host on purpose alone across all of them.
func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("best", func(t *testing.T) {
		t.Parallel()
		up := newConformanceUpstream(t)
		sandboxtest.Run(t, sandboxtest.Harness{NewClient: func(t *testing.T) *sandbox.Client {
			// The suite checks that relays of half-closed connections end
			// (Ports/ServerNeverClosesFreesDescriptors): not after the
			// default 15 s.
			return sandbox.NewClient(newRuntime(t, append(up.options(), WithHalfCloseTimeout(2*time.Second))...))
		}, Egress: up.hooks(), SameProvider: sameRoot, SnapshotSparseSize: 1 << 30})
	})
	t.Run("warm-pool", func(t *testing.T) {
		t.Parallel()
		up := newConformanceUpstream(t) // its handler is one Brokered subtest's at a time
		sandboxtest.Run(t, sandboxtest.Harness{NewClient: func(t *testing.T) *sandbox.Client {
			return sandbox.NewClient(newRuntime(t, append(up.options(), WithWarmPool(2))...))
		}, Egress: up.hooks(), Groups: warmPoolGroups, ShortGroups: warmPoolShortGroups})
	})
	t.Run("L2", func(t *testing.T) {
		t.Parallel()
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
			"Ports/WaitForPortServerDiedOnTakenPort": noListen,
		}, Groups: append(levelGroups, "Ports"), ShortGroups: append(levelShortGroups, "Ports")})
	})
	t.Run("L1", func(t *testing.T) {
		t.Parallel()
		sandboxtest.Run(t, sandboxtest.Harness{NewClient: func(t *testing.T) *sandbox.Client {
			// A root the sandbox's user can reach, so that on a root host
			// commands run unprivileged, as under the default root.
			return sandbox.NewClient(levelRuntime(t, L1))
		}, SameProvider: sameRoot, SnapshotSparseSize: 1 << 30, Groups: levelGroups, ShortGroups: levelShortGroups})
	})
}
