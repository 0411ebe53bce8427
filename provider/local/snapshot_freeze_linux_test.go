//go:build linux

package local

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/stretchr/testify/require"
)

// A snapshot (or fork) whose process dies while the sandbox is frozen
// (SIGKILL, OOM, a crash) does not leave the sandbox frozen for good: the
// next Runtime on the root, and the Runtimes already open, thaw it, so
// that Exec works again within a bound.
func TestSnapshotKilledMidFreezeThaws(t *testing.T) {
	t.Parallel()
	if os.Getenv("LOCAL_TEST_FREEZE") != "" {
		return // the helper side runs in TestSnapshotFreezeHelper
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := t.TempDir()
	rt := newRuntimeAt(t, root)
	c := sandbox.NewClient(rt)
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer sb.Destroy(context.Background())
	r, err := sb.Exec(ctx, sandbox.Command{Shell: "echo alive"})
	require.NoError(t, err)
	require.Equal(t, "alive\n", string(r.Stdout))

	m, err := rt.readMeta(sb.ID())
	require.NoError(t, err)

	// Another process freezes the sandbox for a snapshot and is killed
	// before it thaws it.
	cmd := exec.Command(os.Args[0], "-test.run=^TestSnapshotFreezeHelper$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "LOCAL_TEST_FREEZE="+root, "LOCAL_TEST_ID="+sb.ID())
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	frozen := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "FROZEN ") {
				frozen <- strings.TrimPrefix(sc.Text(), "FROZEN ")
			}
		}
		close(frozen)
	}()
	var how string
	select {
	case h, ok := <-frozen:
		require.True(t, ok, "the helper ended before freezing")
		how = h
	case <-ctx.Done():
		t.Fatal("the helper did not freeze the sandbox")
	}
	if how == "cgroup" {
		require.True(t, m.Cgroups.frozen(), "the helper froze the sandbox's cgroup")
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	killed = true

	// A new Runtime on the root (a restart) runs commands again.
	rt2 := newRuntimeAt(t, root)
	c2 := sandbox.NewClient(rt2)
	sb2, err := c2.Attach(ctx, sb.ID())
	require.NoError(t, err)
	ectx, ecancel := context.WithTimeout(ctx, 10*time.Second)
	defer ecancel()
	start := time.Now()
	r, err = sb2.Exec(ectx, sandbox.Command{Shell: "echo alive"})
	require.NoError(t, err, "Exec through a new Runtime after the snapshotting process died (%s freeze)", how)
	require.Equal(t, "alive\n", string(r.Stdout))
	require.Less(t, time.Since(start), 5*time.Second)
	// So does the Runtime that was open all along, and it says running.
	r, err = sb.Exec(ectx, sandbox.Command{Shell: "echo alive"})
	require.NoError(t, err)
	require.Equal(t, "alive\n", string(r.Stdout))
	in, err := sb.Refresh(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.StateRunning, in.State)
}

// TestSnapshotFreezeHelper is the process TestSnapshotKilledMidFreezeThaws
// kills: it freezes a sandbox as a snapshot does, says so, and waits.
func TestSnapshotFreezeHelper(t *testing.T) {
	root := os.Getenv("LOCAL_TEST_FREEZE")
	if root == "" {
		t.Skip("helper for TestSnapshotKilledMidFreezeThaws")
	}
	ctx := context.Background()
	rt, err := New(WithRoot(root))
	require.NoError(t, err)
	id := os.Getenv("LOCAL_TEST_ID")
	l, err := rt.lock(id)
	require.NoError(t, err)
	m, err := l.read(id)
	require.NoError(t, err)
	_, err = rt.freezeFor(ctx, m)
	require.NoError(t, err)
	how := "signal"
	if m.Cgroups.V2 != "" || m.Cgroups.V1["freezer"] != "" {
		how = "cgroup"
	}
	os.Stdout.WriteString("FROZEN " + how + "\n")
	time.Sleep(time.Minute) // killed here
	l.unlock()
}

// Resume on a sandbox that says running but whose cgroup is frozen (a
// freeze no process owns any more) thaws it.
func TestResumeThawsRunningButFrozen(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt := newRuntime(t)
	c := sandbox.NewClient(rt)
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer sb.Destroy(context.Background())
	_, err = sb.Exec(ctx, sandbox.Command{Shell: "true"})
	require.NoError(t, err)
	m, err := rt.readMeta(sb.ID())
	require.NoError(t, err)
	// The state under test is a cgroup told to freeze that nobody thaws;
	// whether the kernel has finished freezing every task does not matter
	// (on a starved host it once took over a minute), so the wait for it
	// is short and its end is not a failure.
	fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
	ok, err := m.Cgroups.freeze(fctx, true)
	fcancel()
	if !ok {
		t.Skip("no cgroup freezer on this host")
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		require.NoError(t, err)
	}
	if err != nil {
		t.Logf("the cgroup is still freezing after 10 s: %v", err)
	}
	require.NoError(t, sb.Resume(ctx))
	ectx, ecancel := context.WithTimeout(ctx, 10*time.Second)
	defer ecancel()
	r, err := sb.Exec(ectx, sandbox.Command{Shell: "echo alive"})
	require.NoError(t, err, "Exec after Resume of a running sandbox left frozen")
	require.Equal(t, "alive\n", string(r.Stdout))
}

// A tree deeper than the host's PATH_MAX from the root: the snapshot
// either keeps it or fails with a short error that names the file by its
// path in the sandbox, never by the host's state directory.
func TestSnapshotDeepTreeErrorIsShort(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt := newRuntime(t)
	c := sandbox.NewClient(rt)
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer sb.Destroy(context.Background())
	// 40 directories of 200 bytes each: 8 KiB of path, twice PATH_MAX,
	// without making (and removing) thousands of directories.
	name := strings.Repeat("dd", 100)
	r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"python3", "-c", `import os, sys
os.mkdir("deep"); os.chdir("deep")
for i in range(40):
    os.mkdir(sys.argv[1]); os.chdir(sys.argv[1])
open("bottom", "w").write("x")
`, name}})
	require.NoError(t, err)
	require.Equal(t, 0, r.ExitCode, string(r.Stderr))
	snap, err := sb.Snapshot(ctx, sandbox.SnapshotOptions{})
	if err == nil {
		require.NoError(t, c.DeleteSnapshot(ctx, snap.ID))
		return
	}
	t.Logf("snapshot: %v", err)
	require.Less(t, len(err.Error()), 1000, "error length")
	require.NotContains(t, err.Error(), rt.root, "the error names the host's state directory")
	require.Contains(t, err.Error(), "~/deep/"+name[:50])
}
