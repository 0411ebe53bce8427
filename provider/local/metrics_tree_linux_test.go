package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// nestPastPathMax makes depth directories of 250-byte names under dir,
// relative to directory descriptors (as a sandbox can), so that the
// host path of the deepest passes PATH_MAX, and puts a 64 KiB file at
// the bottom.
func nestPastPathMax(t *testing.T, dir string, depth int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("d", 250)
	for range depth {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		nfd, err := unix.Openat(fd, name, unix.O_DIRECTORY|unix.O_RDONLY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = nfd
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "bottom", unix.O_CREAT|unix.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(f)
	if _, err := unix.Write(f, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
}

// A sandbox nesting its home past PATH_MAX must not make the disk walk
// (and so Metrics) fail, and the file at the bottom is still counted.
func TestTreeBytesDeepTreePastPathMax(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	nestPastPathMax(t, home, 20) // 20*251 > 4096
	t.Cleanup(func() { os.RemoveAll(home) })
	u, err := treeBytes(context.Background(), home)
	if err != nil {
		t.Fatalf("treeBytes on a tree deeper than PATH_MAX: %.200v", err)
	}
	if u.Bytes < 64<<10 || u.Skipped != 0 || u.Capped {
		t.Fatalf("treeBytes = %+v, want at least the 64 KiB file, nothing skipped", u)
	}
}

// Past keepOpen levels the walk closes directories and comes back to
// them by offset: every file is still counted once, with a bounded
// number of descriptors.
func TestTreeBytesVeryDeepCountsEveryLevel(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	// Two siblings per level: after coming back from "d" the walk must
	// still find "f".
	fd, err := unix.Open(home, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	const depth = keepOpen * 3
	for range depth {
		f, err := unix.Openat(fd, "f", unix.O_CREAT|unix.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(f)
		unix.Mkdirat(fd, "d", 0o755)
		nfd, err := unix.Openat(fd, "d", unix.O_DIRECTORY|unix.O_RDONLY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = nfd
	}
	unix.Close(fd)
	w := &treeWalk{ctx: context.Background(), seen: map[inode]bool{}}
	rfd, err := openDirPath(home)
	if err != nil {
		t.Fatal(err)
	}
	d := &dirRef{fd: rfd}
	defer d.close()
	if err := w.dir(d, 0); err != nil {
		t.Fatal(err)
	}
	if w.entries != 2*depth || w.out.Skipped != 0 || w.out.Capped {
		t.Fatalf("walk visited %d entries (%+v), want %d", w.entries, w.out, 2*depth)
	}
}

// countdownCtx reports Canceled once Err has been asked n times: it
// cancels a walk part way through without timing.
type countdownCtx struct {
	context.Context
	n atomic.Int64
}

func (c *countdownCtx) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// A home of many entries in one directory: the walk reads it a batch at
// a time and checks ctx between batches, so a cancelled ctx stops it
// promptly with ctx's error and the host never holds the directory in
// memory.
func TestTreeBytesBigDirHonoursCtx(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 200000 files")
	}
	home := filepath.Join(t.TempDir(), "home")
	big := filepath.Join(home, "big")
	if err := os.MkdirAll(big, 0o755); err != nil {
		t.Fatal(err)
	}
	// Made with one mknodat each, relative to the directory: an open and
	// a close per file, through os.File under -race, took 8 of the test's
	// 11 s.
	const n = 200_000
	d, err := unix.Open(big, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(d)
	name := []byte("f0000000-" + strings.Repeat("x", 40))
	for i := range n {
		for j, k := 7, i; j >= 1; j, k = j-1, k/10 {
			name[j] = byte('0' + k%10)
		}
		if err := unix.Mknodat(d, string(name), unix.S_IFREG|0o644, 0); err != nil {
			t.Fatalf("making file %d of %d: %v", i, n, err)
		}
	}
	walk := func(ctx context.Context) (uint64, time.Duration, error) {
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		t0 := time.Now()
		_, err := treeBytes(ctx, home)
		d := time.Since(t0)
		runtime.ReadMemStats(&ms1)
		return ms1.TotalAlloc - ms0.TotalAlloc, d, err
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"cancelled", cancelled},
		{"cancelled-after-3-batches", &countdownCtx{Context: context.Background()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if c, ok := tc.ctx.(*countdownCtx); ok {
				c.n.Store(4) // the entry check and three batches
			}
			alloc, d, err := walk(tc.ctx)
			t.Logf("err=%v after %v, allocated %d KiB", err, d, alloc>>10)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if alloc > 4<<20 || d > 2*time.Second {
				t.Fatalf("cancelled walk allocated %d KiB in %v: it read the directory whole", alloc>>10, d)
			}
		})
	}
}

// Past maxTreeEntries the walk stops and says its sum is a lower bound.
func TestTreeBytesCappedIsLowerBound(t *testing.T) {
	home := t.TempDir()
	for i := range 50 {
		if err := os.WriteFile(filepath.Join(home, fmt.Sprint(i)), make([]byte, 8192), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	full, err := treeBytes(context.Background(), home)
	if err != nil || full.Capped || full.Bytes < 50*8192 {
		t.Fatalf("uncapped walk = %+v, %v", full, err)
	}
	old := maxTreeEntries
	maxTreeEntries = 10
	t.Cleanup(func() { maxTreeEntries = old })
	capped, err := treeBytes(context.Background(), home)
	if err != nil || !capped.Capped || capped.Bytes >= full.Bytes {
		t.Fatalf("capped walk = %+v, %v; want Capped and less than %d", capped, err, full.Bytes)
	}
}

// An unreadable directory is skipped and counted, never an error, and
// nothing about the host path comes back.
func TestTreeBytesUnreadableSkipped(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every directory")
	}
	home := t.TempDir()
	locked := filepath.Join(home, "locked")
	if err := os.Mkdir(locked, 0o000); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(locked, 0o755) })
	u, err := treeBytes(context.Background(), home)
	if err != nil || u.Skipped != 1 {
		t.Fatalf("treeBytes = %+v, %v; want one skipped entry, no error", u, err)
	}
}
