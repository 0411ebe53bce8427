package local

import (
	"context"
	"iter"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// One sandbox taking every inotify watch it can (all L3/L4 sandboxes run
// as one host user, whose watches the kernel counts together) takes only
// its share: another sandbox's Watch still works.
func TestWatchInotifyShareLeavesOtherSandboxes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt := levelRuntime(t, L4)
	share, _ := inotifyShare()
	dirs := "2000"
	if testing.Short() {
		// A share of 300 and 100 directories: the same limit of the
		// sandbox's user namespace, without 2000 directories made and
		// removed (see TestWatchAgentBoundsItsWatches).
		share, dirs = 300, "100"
		rt.inotifyWatches = share
	}
	c := sandbox.NewClient(rt)
	defer c.Close()
	a, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Destroy(context.Background())
	b, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy(context.Background())
	// a adds watches on 2000 directories over and over, in new inotify
	// instances, until the kernel refuses.
	script := `import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
dirs = []
for i in range(int(sys.argv[1])):
    d = "x/%d" % i
    os.makedirs(d, exist_ok=True); dirs.append(d.encode())
n = 0; err = 0
for k in range(200):
    fd = libc.inotify_init1(0)
    if fd < 0:
        err = ctypes.get_errno(); break
    for d in dirs:
        if libc.inotify_add_watch(fd, d, 0x100) < 0:
            err = ctypes.get_errno(); break
        n += 1
    if err: break
open("ready", "w").write("%d %d" % (n, err))
time.sleep(60)
`
	p, err := a.Start(ctx, sandbox.Command{Args: []string{"python3", "-c", script, dirs}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Kill(context.Background()); _, _ = p.Wait(context.Background()) }()
	var held string
	for i := 0; i < 600 && held == ""; i++ {
		// The script creates the file, then writes it: empty is not ready.
		if bs, err := a.ReadFile(ctx, "ready"); err == nil && len(bs) > 0 {
			held = string(bs)
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if held == "" {
		t.Fatal("sandbox a did not finish taking watches")
	}
	n, _ := strconv.ParseUint(strings.Fields(held)[0], 10, 64)
	t.Logf("sandbox a holds %d watches (errno %s); the share is %d", n, strings.Fields(held)[1], share)
	if n > share {
		t.Errorf("sandbox a holds %d inotify watches, over its share %d", n, share)
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	evs, err := b.Watch(wctx, b.Home(), sandbox.WatchOptions{})
	if err != nil {
		t.Fatalf("sandbox b's watch after sandbox a took all the watches it could: %v", err)
	}
	if err := b.WriteFile(ctx, "f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if !waitEvent(ctx, t, evs, "/f") {
		t.Error("sandbox b's watch reported nothing")
	}
}

// At L1 and L2 the sandbox has no user namespace of its own: the agent bounds its
// own watches to the sandbox's share, and a recursive watch over a tree
// with more directories than that fails with ResourceExhausted (rather
// than taking the host user's watches from every other sandbox).
func TestWatchAgentBoundsItsWatches(t *testing.T) {
	t.Parallel()
	rt := levelRuntime(t, L1)
	share, _ := inotifyShare()
	if testing.Short() {
		// The agent's bound is the same with a share of a few hundred,
		// and the tree a few hundred directories, not the host's share
		// (a tenth of a million here): made and removed, those slow
		// every file created after them on a file system without a
		// journal (ext4 passes over the inodes freed in the last minute).
		share = 300
		rt.inotifyWatches = share
	}
	if share > 40000 {
		t.Skipf("the share of inotify watches here is %d directories: too many to make in a test", share)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := sandbox.NewClient(rt)
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"python3", "-c", `import os, sys
for i in range(int(sys.argv[1])):
    os.makedirs("t/%d" % i)
`, strconv.FormatUint(share+100, 10)}})
	mustSucceed(t, "making the tree", r, err)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	_, err = sb.Watch(wctx, filepath.Join(sb.Home(), "t"), sandbox.WatchOptions{Recursive: true})
	if sandbox.CodeOf(err) != sandbox.ResourceExhausted {
		t.Fatalf("recursive watch over %d directories (the share is %d): %v, want ResourceExhausted", share+101, share, err)
	}
	// The failed watch gave its watches back: a small one works.
	evs, err := sb.Watch(wctx, sb.Home(), sandbox.WatchOptions{})
	if err != nil {
		t.Fatalf("a watch after the refused one: %v", err)
	}
	if err := sb.WriteFile(ctx, "f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if !waitEvent(ctx, t, evs, "/f") {
		t.Error("the watch reported nothing")
	}
}

// A directory of many long-named files moved into a recursively watched
// tree is listed at once: the agent sends it in frames under the
// protocol's limit (or an overflow event), and the watch goes on.
func TestWatchBurstKeepsWatchAlive(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := sandbox.NewClient(levelRuntime(t, L4))
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	if err := sb.MkdirAll(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	// 25000 names of 206 bytes: about 6.7 MB of events in one listing,
	// past the protocol's frame and the agent's pending events. The names
	// are hard links to one file: a listing is of names, and 25000 new
	// inodes, made and removed, would slow every file created in the
	// minute after on a file system without a journal (ext4 passes over
	// the inodes freed lately).
	r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"python3", "-c", `import os
os.makedirs("big")
open("big/000000", "w").close()
for i in range(1, 25000):
    os.link("big/000000", "big/%06d%s" % (i, "x"*200))
`}})
	mustSucceed(t, "making the files", r, err)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	evs, err := sb.Watch(wctx, filepath.Join(sb.Home(), "w"), sandbox.WatchOptions{Recursive: true, Buffer: sandbox.MaxWatchBuffer})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, sandbox.Command{Shell: "mv big w/ && sleep 0.5 && touch w/after"}); err != nil {
		t.Fatal(err)
	}
	tctx, tcancel := context.WithTimeout(ctx, 20*time.Second)
	defer tcancel()
	go func() { <-tctx.Done(); wcancel() }()
	n, overflow, after := 0, false, false
	for ev, err := range evs {
		if err != nil {
			if tctx.Err() == nil {
				t.Fatalf("the watch ended with an error after %d events: %v", n, err)
			}
			break
		}
		n++
		overflow = overflow || ev.Kind == sandbox.FileOverflow
		if strings.HasSuffix(ev.Path, "/after") {
			after = true
			break
		}
	}
	t.Logf("%d events, overflow %v", n, overflow)
	if !after {
		t.Fatalf("the watch delivered nothing after the burst (%d events, overflow %v)", n, overflow)
	}
	if n < 1000 && !overflow {
		t.Errorf("only %d events for 25000 files moved in, and no overflow", n)
	}
}

// The sandbox makes a directory in a recursively watched tree and at once
// replaces it by a symbolic link to /etc: the agent never watches or lists
// through the link, so no file of /etc is reported.
func TestWatchDoesNotFollowSymlinkOut(t *testing.T) {
	t.Parallel()
	for _, l := range []Level{L2, L4} {
		t.Run(l.String(), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := sandbox.NewClient(levelRuntime(t, l))
			defer c.Close()
			sb, err := c.Create(ctx, sandbox.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Destroy(context.Background())
			if err := sb.MkdirAll(ctx, "w"); err != nil {
				t.Fatal(err)
			}
			wctx, wcancel := context.WithCancel(ctx)
			defer wcancel()
			evs, err := sb.Watch(wctx, filepath.Join(sb.Home(), "w"), sandbox.WatchOptions{Recursive: true})
			if err != nil {
				t.Fatal(err)
			}
			// Many rounds of the race (a quarter under -short: each
			// round makes four files); the last link is a marker: once
			// it is reported, every earlier event has been.
			rounds := "1000"
			if testing.Short() {
				rounds = "250"
			}
			script := `import os, sys
os.chdir("w")
for i in range(int(sys.argv[1])):
    d = "d%d" % i
    os.mkdir(d); os.rmdir(d); os.symlink("/etc", d)
    d = "e%d" % i
    os.mkdir(d); os.rename(d, d + "x"); os.symlink("/etc", d)
os.symlink("/etc", "done")
`
			r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"python3", "-c", script, rounds}})
			mustSucceed(t, "the race", r, err)
			tctx, tcancel := context.WithTimeout(ctx, 15*time.Second)
			defer tcancel()
			go func() { <-tctx.Done(); wcancel() }()
			var leaked []string
			done := false
			for ev, err := range evs {
				if err != nil {
					break
				}
				base := filepath.Base(ev.Path)
				if base == "passwd" || base == "hostname" || base == "os-release" || base == "hosts" {
					leaked = append(leaked, ev.Path)
				}
				if base == "done" {
					done = true
					break
				}
			}
			if len(leaked) > 0 {
				t.Errorf("the watch reported files of /etc through a symbolic link: %v", leaked[:min(5, len(leaked))])
			}
			if !done {
				t.Error("the watch never reported the marker")
			}
		})
	}
}

// waitEvent reads evs until an event whose path ends in suffix, for up to
// 10 seconds; it reports whether one came. The caller's cancel of the
// watch's context ends the reading.
func waitEvent(ctx context.Context, t *testing.T, evs iter.Seq2[sandbox.FileEvent, error], suffix string) bool {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got := make(chan bool, 1)
	go func() {
		for ev, err := range evs {
			if err != nil {
				got <- false
				return
			}
			if strings.HasSuffix(ev.Path, suffix) {
				got <- true
				return
			}
		}
		got <- false
	}()
	select {
	case ok := <-got:
		return ok
	case <-tctx.Done():
		return false
	}
}

// mustSucceed ends the test when a command failed to run (err, and no
// result) or ran and failed (its exit code and stderr).
func mustSucceed(t *testing.T, what string, r *sandbox.Result, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if r.ExitCode != 0 {
		t.Fatalf("%s: exit %d: %s", what, r.ExitCode, r.Stderr)
	}
}
