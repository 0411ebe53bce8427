//go:build linux

package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A snapshot lives under the root: a new Runtime (a restart) lists it and
// creates from it, and neither its sweep nor its reaper removes it, also
// once its sandbox is gone.
func TestSnapshotSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := t.TempDir()
	rt1, err := New(WithRoot(root))
	require.NoError(t, err)
	c1 := sandbox.NewClient(rt1)
	sb, err := c1.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, sb.WriteFile(ctx, "state.txt", []byte("before restart")))
	snap, err := sb.Snapshot(ctx, sandbox.SnapshotOptions{Name: "kept", Labels: map[string]string{"restart": "yes"}})
	require.NoError(t, err)
	require.NoError(t, sb.Destroy(ctx))
	require.NoError(t, c1.Close())

	rt2, err := New(WithRoot(root), WithReapInterval(10*time.Millisecond))
	require.NoError(t, err)
	c2 := sandbox.NewClient(rt2)
	defer c2.Close()
	time.Sleep(100 * time.Millisecond) // let the reaper run
	got, err := c2.GetSnapshot(ctx, snap.ID)
	require.NoError(t, err)
	assert.Equal(t, "kept", got.Name)
	assert.Equal(t, sb.ID(), got.SourceID)
	var ids []string
	for s, err := range c2.ListSnapshots(ctx, sandbox.ListSnapshotsOptions{Labels: map[string]string{"restart": "yes"}}) {
		require.NoError(t, err)
		ids = append(ids, s.ID)
	}
	assert.Equal(t, []string{snap.ID}, ids)
	child, err := c2.Create(ctx, sandbox.CreateOptions{FromSnapshot: snap.ID})
	require.NoError(t, err)
	defer child.Destroy(ctx)
	b, err := child.ReadFile(ctx, "state.txt")
	require.NoError(t, err)
	assert.Equal(t, "before restart", string(b))
	// No sandbox listing shows the snapshots' directory.
	for in, err := range c2.List(ctx, sandbox.ListOptions{}) {
		require.NoError(t, err)
		assert.NotContains(t, in.ID, "snap")
	}
}

// The sandbox's /tmp is writable state too: at L3 and L4 a tmpfs in its
// mount namespace, copied through its agent's root; below, its private
// temporary directory. Hard links stay linked, owners follow the user.
func TestSnapshotKeepsTmpAndLinks(t *testing.T) {
	t.Parallel()
	for _, l := range []Level{L4, L1} {
		t.Run(l.String(), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rt := levelRuntime(t, l)
			c := sandbox.NewClient(rt)
			defer c.Close()
			sb, err := c.Create(ctx, sandbox.CreateOptions{})
			require.NoError(t, err)
			defer sb.Destroy(ctx)
			r, err := sb.Exec(ctx, sandbox.Command{Shell: `printf tmp > "${TMPDIR:-/tmp}/t.txt" && printf one > a && ln a b && mkfifo p && mkdir ro && chmod 500 ro`})
			require.NoError(t, err)
			require.Equal(t, 0, r.ExitCode, "%s", r.Stderr)
			snap, err := sb.Snapshot(ctx, sandbox.SnapshotOptions{})
			require.NoError(t, err)
			defer c.DeleteSnapshot(ctx, snap.ID)
			assert.Contains(t, []string{"reflink", "copy"}, snap.Detail["copy"])
			assert.Contains(t, snap.Detail["kept"], "temporary directory")
			child, err := c.Create(ctx, sandbox.CreateOptions{FromSnapshot: snap.ID})
			require.NoError(t, err)
			defer child.Destroy(ctx)
			r, err = child.Exec(ctx, sandbox.Command{Shell: `cat "${TMPDIR:-/tmp}/t.txt"; echo; stat -c '%h %i' a b | uniq | wc -l; stat -c %h a; test -p p && echo fifo; stat -c %a ro; printf two >> a && cat b; echo; id -u; stat -c %u a`})
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSpace(string(r.Stdout)), "\n")
			require.Len(t, lines, 8, "%q %q", r.Stdout, r.Stderr)
			assert.Equal(t, "tmp", lines[0])
			assert.Equal(t, "1", lines[1], "a and b are one file")
			assert.Equal(t, "2", lines[2])
			assert.Equal(t, "fifo", lines[3])
			assert.Equal(t, "500", lines[4])
			assert.Equal(t, "onetwo", lines[5], "a write through a shows through b")
			assert.Equal(t, lines[6], lines[7], "the files are the new sandbox's user's")
		})
	}
}

// A snapshot of a running sandbox is taken frozen and thawed after: a
// process running through it runs on.
func TestSnapshotFreezesAndThaws(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt := newRuntime(t)
	c := sandbox.NewClient(rt)
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer sb.Destroy(ctx)
	p, err := sb.Start(ctx, sandbox.Command{Shell: "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); echo $i > n; done"})
	require.NoError(t, err)
	defer p.Close()
	m, err := rt.readMeta(sb.ID())
	require.NoError(t, err)
	frozen := make(chan bool, 1)
	// Watch the freezer while the snapshot is taken.
	go func() {
		saw := false
		for range 2000 {
			if b, err := os.ReadFile(filepath.Join(m.Cgroups.V2, "cgroup.events")); err == nil && strings.Contains(string(b), "frozen 1") {
				saw = true
				break
			}
			time.Sleep(50 * time.Microsecond)
		}
		frozen <- saw
	}()
	for range 20 {
		_, err = sb.Snapshot(ctx, sandbox.SnapshotOptions{Labels: map[string]string{"freeze": "1"}})
		require.NoError(t, err)
	}
	if m.Cgroups.V2 != "" {
		assert.True(t, <-frozen, "the sandbox's cgroup was frozen during a snapshot")
	}
	b, err := os.ReadFile(filepath.Join(m.Cgroups.V2, "cgroup.events"))
	if err == nil {
		assert.Contains(t, string(b), "frozen 0", "thawed after")
	}
	in, err := sb.Refresh(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandbox.StateRunning, in.State)
	require.NoError(t, p.Kill(ctx))
	for s, err := range c.ListSnapshots(ctx, sandbox.ListSnapshotsOptions{Labels: map[string]string{"freeze": "1"}}) {
		require.NoError(t, err)
		require.NoError(t, c.DeleteSnapshot(ctx, s.ID))
	}
}

// Full mode is refused naming what the host lacks (the package criu, or
// why criu does not work here); the capabilities say the same.
func TestSnapshotFullNeedsCRIU(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := newRuntime(t)
	caps := rt.Capabilities()
	assert.Equal(t, []driver.SnapshotMode{driver.SnapshotFilesystem}, caps.SnapshotModes)
	missing := fullMissing(rt.probeCRIU())
	t.Logf("this host: %s", caps.SnapshotNote)
	assert.Contains(t, caps.SnapshotNote, "mode full (processes and memory) unavailable: "+missing)
	if _, err := exec.LookPath("criu"); err != nil {
		assert.Contains(t, missing, "Debian package criu")
	} else {
		assert.Contains(t, missing, "CRIU at ")
	}
	c := sandbox.NewClient(rt)
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer sb.Destroy(ctx)
	assert.Equal(t, caps.SnapshotNote, sb.Info().Detail["snapshots"], "Info.Detail says what the host offers")
	_, err = sb.Snapshot(ctx, sandbox.SnapshotOptions{Mode: sandbox.SnapshotFull})
	assert.Equal(t, sandbox.FailedPrecondition, sandbox.CodeOf(err))
	assert.Contains(t, err.Error(), `"full"`)
	assert.Contains(t, err.Error(), missing)
	// The driver refuses it on its own too, naming the mode and the reason.
	_, err = rt.Snapshot(ctx, sb.ID(), &driver.SnapshotRequest{Mode: driver.SnapshotFull})
	assert.Equal(t, sberrors.FailedPrecondition, sberrors.CodeOf(err))
	assert.Contains(t, err.Error(), `snapshot mode "full"`)
	assert.Contains(t, err.Error(), missing)
	// A filesystem snapshot's Detail says the same.
	snap, err := sb.Snapshot(ctx, sandbox.SnapshotOptions{})
	require.NoError(t, err)
	defer c.DeleteSnapshot(ctx, snap.ID)
	assert.Equal(t, "unavailable: "+missing, snap.Detail["full_mode"])
}

// The CRIU probe tells apart a host without criu, a criu that fails its
// check on this kernel (the reason is its first error line), one that
// hangs (bounded), and one that passes.
func TestCheckCRIU(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
		return p
	}
	none := checkCRIU("", time.Second)
	assert.Equal(t, "CRIU is not installed (Debian package criu)", fullMissing(none))

	broken := script("broken", `echo 'Error (criu/vdso.c:381): vdso: Unexpected rt vDSO area bounds' >&2
echo 'Error (criu/crtools.c:260): Could not initialize kernel features detection.' >&2
exit 1`)
	f := checkCRIU(broken, 5*time.Second)
	assert.Equal(t, "vdso: Unexpected rt vDSO area bounds", f.checkErr)
	assert.Contains(t, fullMissing(f), "does not work on this kernel (criu check: vdso: Unexpected rt vDSO area bounds")

	mute := script("mute", "exit 3")
	assert.Equal(t, "exit status 3", checkCRIU(mute, 5*time.Second).checkErr)

	hangs := script("hangs", "exec sleep 60")
	start := time.Now()
	f = checkCRIU(hangs, 200*time.Millisecond)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Contains(t, f.checkErr, "did not finish within 200ms")

	ok := script("ok", "echo 'Looks good.'")
	f = checkCRIU(ok, 5*time.Second)
	assert.Empty(t, f.checkErr)
	assert.Contains(t, fullMissing(f), "passes criu check, but")

	// A check that passes in a container without CAP_SYS_RESOURCE still
	// cannot dump: the capabilities are named.
	f.capsMissing = criuCaps(0x1fffeffffff) // every capability up to 40 but CAP_SYS_RESOURCE
	assert.Equal(t, []string{"CAP_SYS_RESOURCE"}, f.capsMissing)
	assert.Contains(t, fullMissing(f), "needs capabilities this process lacks: CAP_SYS_RESOURCE")
	assert.Empty(t, criuCaps(1<<unix.CAP_CHECKPOINT_RESTORE|1<<unix.CAP_SYS_PTRACE|1<<unix.CAP_SYS_RESOURCE))
	assert.Equal(t, []string{"CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE", "CAP_SYS_PTRACE", "CAP_SYS_RESOURCE"}, criuCaps(0))
}

// A sparse file is copied without its holes: the copy takes no more
// blocks than the original.
func TestCopySparse(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	f, err := os.Create(filepath.Join(src, "big"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(1<<30))
	_, err = f.WriteAt([]byte("middle"), 512<<20)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	cp := newCopier(-1, -1)
	require.NoError(t, cp.tree(context.Background(), src, dst))
	var a, b syscall.Stat_t
	require.NoError(t, syscall.Stat(filepath.Join(src, "big"), &a))
	require.NoError(t, syscall.Stat(filepath.Join(dst, "big"), &b))
	assert.Equal(t, a.Size, b.Size)
	assert.LessOrEqual(t, b.Blocks, a.Blocks+16, "holes stay holes")
	got := make([]byte, 6)
	g, err := os.Open(filepath.Join(dst, "big"))
	require.NoError(t, err)
	defer g.Close()
	_, err = g.ReadAt(got, 512<<20)
	require.NoError(t, err)
	assert.Equal(t, "middle", string(got))
}

// Fork copies straight from the frozen sandbox (no snapshot is left or
// made), and a paused sandbox stays paused.
func TestForkNative(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt := newRuntime(t)
	c := sandbox.NewClient(rt)
	defer c.Close()
	require.True(t, c.Capabilities().NativeFork)
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer sb.Destroy(ctx)
	r, err := sb.Exec(ctx, sandbox.Command{Shell: `printf h > h.txt && printf t > /tmp/t.txt`})
	require.NoError(t, err)
	require.Equal(t, 0, r.ExitCode)
	require.NoError(t, sb.Pause(ctx))
	kids, err := sb.Fork(ctx, 3, sandbox.ForkOptions{Labels: map[string]string{"native": "yes"}})
	for _, k := range kids {
		defer k.Destroy(ctx)
	}
	require.NoError(t, err)
	require.Len(t, kids, 3)
	in, err := sb.Refresh(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandbox.StatePaused, in.State)
	for _, k := range kids {
		assert.Equal(t, "yes", k.Info().Labels["native"])
		r, err := k.Exec(ctx, sandbox.Command{Shell: `cat h.txt /tmp/t.txt`})
		require.NoError(t, err)
		assert.Equal(t, "ht", string(r.Stdout), "%s", r.Stderr)
	}
	n := 0
	for _, err := range c.ListSnapshots(ctx, sandbox.ListSnapshotsOptions{}) {
		require.NoError(t, err)
		n++
	}
	assert.Zero(t, n, "a native fork makes no snapshot")
	_, err = rt.Fork(ctx, "sbx-00000000000000-00000000", 1, &driver.CreateRequest{})
	assert.Equal(t, sberrors.NotFound, sberrors.CodeOf(err))
}

// chain is a chain of depth directories, each named name.
type chain struct {
	depth int
	name  string
}

// deepChain is a chain far deeper than keepOpen and far longer than
// PATH_MAX: 5000 directories named "d", or under -short 200 named with
// 100 bytes each (20,200 bytes of path). The copy walks both alike
// (one name at a time, reopening through ".." below keepOpen); the
// short one makes and removes 15,000 fewer directories, which on a file
// system without a journal slow every file created in the minute after.
func deepChain() chain {
	if testing.Short() {
		return chain{depth: 200, name: strings.Repeat("d", 100)}
	}
	return chain{depth: 5000, name: "d"}
}

// mkChain makes ch under dir, one name at a time (the chain is far longer
// than PATH_MAX), and writes "bottom" in the deepest with content; a hard
// link to it sits at the top. It returns nothing: it fails the test.
func mkChain(t *testing.T, dir string, ch chain, content string) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	require.NoError(t, err)
	for i := range ch.depth {
		require.NoError(t, unix.Mkdirat(fd, ch.name, 0o755), "level %d", i)
		next, err := unix.Openat(fd, ch.name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		require.NoError(t, err)
		unix.Close(fd)
		fd = next
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "bottom", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o640)
	require.NoError(t, err)
	_, err = unix.Write(f, []byte(content))
	require.NoError(t, err)
	unix.Close(f)
	top, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	require.NoError(t, err)
	defer unix.Close(top)
	require.NoError(t, unix.Linkat(fd, "bottom", top, "top-link", 0))
}

// chainBlocks walks the chain mkChain made under dir and returns the bytes
// of the blocks its directories and bottom file use (a file system such
// as tmpfs gives a directory none).
func chainBlocks(t *testing.T, dir string, ch chain) int64 {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	require.NoError(t, err)
	var total int64
	for i := range ch.depth {
		next, err := unix.Openat(fd, ch.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		require.NoError(t, err, "level %d", i)
		unix.Close(fd)
		fd = next
		var st unix.Stat_t
		require.NoError(t, unix.Fstat(fd, &st))
		total += st.Blocks * 512
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	require.NoError(t, unix.Fstatat(fd, "bottom", &st, 0))
	return total + st.Blocks*512
}

// readChain walks the chain mkChain made under dir and returns the
// content of its bottom file and the mode of the deepest directory.
func readChain(t *testing.T, dir string, ch chain) (string, uint32) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	require.NoError(t, err)
	for i := range ch.depth {
		next, err := unix.Openat(fd, ch.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		require.NoError(t, err, "level %d of the copy", i)
		unix.Close(fd)
		fd = next
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &st))
	f, err := unix.Openat(fd, "bottom", unix.O_RDONLY, 0)
	require.NoError(t, err)
	defer unix.Close(f)
	b := make([]byte, 100)
	n, err := unix.Read(f, b)
	require.NoError(t, err)
	return string(b[:n]), st.Mode & 0o7777
}

// A tree far deeper than PATH_MAX (deepChain) survives snapshot and
// restore whole, with its hard link kept, and the copy holds a bounded
// number of descriptors.
func TestSnapshotDeepTree(t *testing.T) {
	t.Parallel() // a Runtime of its own, and mostly copying
	ch := deepChain()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rt := levelRuntime(t, L1)
	c := sandbox.NewClient(rt)
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer sb.Destroy(ctx)
	mkChain(t, rt.home(sb.ID()), ch, "deep down")
	used := chainBlocks(t, rt.home(sb.ID()), ch)
	snap, err := sb.Snapshot(ctx, sandbox.SnapshotOptions{})
	require.NoError(t, err)
	defer c.DeleteSnapshot(ctx, snap.ID)
	assert.GreaterOrEqual(t, snap.Size, used, "the size counts the whole chain (the blocks its directories and file use here)")
	require.NoError(t, sb.Destroy(ctx))
	child, err := c.Create(ctx, sandbox.CreateOptions{FromSnapshot: snap.ID})
	require.NoError(t, err)
	defer child.Destroy(ctx)
	got, mode := readChain(t, rt.home(child.ID()), ch)
	assert.Equal(t, "deep down", got)
	assert.Equal(t, uint32(0o755), mode)
	var a unix.Stat_t
	require.NoError(t, unix.Stat(filepath.Join(rt.home(child.ID()), "top-link"), &a))
	assert.Equal(t, uint64(2), uint64(a.Nlink), "the hard link to the bottom file is kept")
	// The copy in the snapshot itself is whole too.
	got, _ = readChain(t, filepath.Join(rt.snapPath(snap.ID), "home"), ch)
	assert.Equal(t, "deep down", got)
}

// The walk keeps at most keepOpen levels of directories open: a copy of
// a deep chain with a descriptor limit far below its depth (two a level,
// 1024 in all) succeeds.
func TestCopyDeepTreeFewDescriptors(t *testing.T) {
	ch := chain{depth: 3000, name: "d"}
	if testing.Short() {
		ch.depth = 600
	}
	src, dst := t.TempDir(), t.TempDir()
	mkChain(t, src, ch, "x")
	var old unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &old))
	lim := old
	lim.Cur = 1024
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &lim))
	defer unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
	cp := newCopier(-1, -1)
	require.NoError(t, cp.tree(context.Background(), src, dst))
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &old))
	got, _ := readChain(t, dst, ch)
	assert.Equal(t, "x", got)
	assert.Greater(t, diskUsage(dst), int64(0))
	// A failure at the bottom names the file by its path in the sandbox,
	// clipped, never the host's.
	err := newCopier(-1, -1).tree(context.Background(), src, dst)
	require.Error(t, err)
	msg := copyErrText(err, [][2]string{{dst, "~"}})
	assert.Less(t, len(msg), 400, msg)
	assert.True(t, strings.HasPrefix(msg, "open ~/d/d/"), msg)
	assert.True(t, strings.HasSuffix(msg, "/d/bottom: file exists"), msg)
	assert.NotContains(t, msg, dst)
}

// The outcome of `criu check` is reused across programs only for the same
// binary on the same boot: another binary (here one rewritten in place) is
// checked again.
func TestCRIUCheckCacheKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "criu")
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\nexit 1\n"), 0o755))
	k1 := criuKey(p)
	require.NotEmpty(t, k1)
	assert.Equal(t, k1, criuKey(p), "the same binary keeps its key")
	require.NoError(t, os.Chtimes(p, time.Now(), time.Now().Add(time.Hour)))
	assert.NotEqual(t, k1, criuKey(p), "a replaced binary is checked again")
	assert.Empty(t, criuKey(filepath.Join(dir, "missing")))
	cache := filepath.Join(dir, criuCacheFile)
	writeCRIUCache(cache, criuCache{Key: "k", CheckErr: "why"})
	b, err := os.ReadFile(cache)
	require.NoError(t, err)
	assert.JSONEq(t, `{"key":"k","check_err":"why"}`, string(b))
}
