//go:build linux

package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"golang.org/x/sys/unix"
)

// snapshotHomeMiB is the size of the home BenchmarkLocalFork forks.
const snapshotHomeMiB = 200

// fillHome writes mib MiB into sb's home: 1 MiB files of random bytes
// (incompressible, as installed packages and data mostly are) in 10
// directories.
func fillHome(ctx context.Context, b *testing.B, sb *sandbox.Sandbox, mib int) {
	b.Helper()
	buf := make([]byte, 1<<20)
	for i := range mib {
		_, _ = rand.Read(buf)
		if err := sb.Upload(ctx, fmt.Sprintf("data/d%d/f%03d.bin", i%10, i), bytes.NewReader(buf)); err != nil {
			b.Fatal(err)
		}
	}
}

// fsType names the file system of dir, and whether it reflinks.
func fsType(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "unknown"
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	}
	return fmt.Sprintf("0x%x", st.Type)
}

// BenchmarkLocalFork: Fork of a sandbox with a 200 MiB home into 4
// children against `cp -a` of the same tree 4 times, in the same run.
// Targets: ≤ 0.2× where the root's file system reflinks, ≤ 1.2× where it
// copies (the sub-benchmark's name says which this host has).
func BenchmarkLocalFork(b *testing.B) {
	ctx := context.Background()
	c, rt := localClient(b)
	how := "copy"
	if bytes.Contains([]byte(c.Capabilities().SnapshotNote), []byte("reflinked")) {
		how = "reflink"
	}
	b.Run(fmt.Sprintf("%s/%s-%s/home-%dMiB", levelName(rt), fsType(rt.Root()), how, snapshotHomeMiB), func(b *testing.B) {
		sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		defer sb.Destroy(ctx)
		fillHome(ctx, b, sb, snapshotHomeMiB)
		home := filepath.Join(rt.Root(), sb.ID(), "home")
		var tv, tb []time.Duration
		for b.Loop() {
			// Each side starts with no dirty pages of the other's to
			// write back: on a host that copies, writeback throttling
			// would otherwise charge one side for the other's bytes.
			b.StopTimer()
			unix.Sync()
			b.StartTimer()
			t0 := time.Now()
			kids, err := sb.Fork(ctx, 4, sandbox.ForkOptions{})
			tv = append(tv, time.Since(t0))
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			for _, k := range kids {
				_ = k.Destroy(ctx)
			}
			dst := b.TempDir()
			unix.Sync()
			b.StartTimer()
			t0 = time.Now()
			for i := range 4 {
				if out, err := exec.Command("cp", "-a", home, filepath.Join(dst, fmt.Sprint(i))).CombinedOutput(); err != nil {
					b.Fatalf("cp -a: %v: %s", err, out)
				}
			}
			tb = append(tb, time.Since(t0))
			b.StopTimer()
			_ = os.RemoveAll(dst)
			b.StartTimer()
		}
		b.ReportMetric(ms(median(tv)), "fork-p50-ms")
		b.ReportMetric(ms(median(tb)), "cp4-p50-ms")
		b.ReportMetric(float64(median(tv))/float64(median(tb)), "x-raw")
	})
}

// BenchmarkLocalCreateFromSnapshot: create (until the first exec works)
// from a snapshot of a sandbox with a small home against a plain create,
// interleaved. Target: p50 ≤ 1.5× the plain create.
func BenchmarkLocalCreateFromSnapshot(b *testing.B) {
	ctx := context.Background()
	c, rt := localClient(b)
	b.Run(levelName(rt), func(b *testing.B) {
		src, err := c.Create(ctx, sandbox.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer src.Destroy(ctx)
		for i := range 20 {
			if err := src.WriteFile(ctx, fmt.Sprintf("project/src/m%d.py", i), bytes.Repeat([]byte("x = 1\n"), 500)); err != nil {
				b.Fatal(err)
			}
		}
		snap, err := src.Snapshot(ctx, sandbox.SnapshotOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer c.DeleteSnapshot(ctx, snap.ID)
		one := func(opts sandbox.CreateOptions) time.Duration {
			t0 := time.Now()
			sb, err := c.Create(ctx, opts)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
				b.Fatal(err)
			}
			d := time.Since(t0)
			b.StopTimer()
			_ = sb.Destroy(ctx)
			b.StartTimer()
			return d
		}
		var tv, tb []time.Duration
		for b.Loop() {
			tv = append(tv, one(sandbox.CreateOptions{FromSnapshot: snap.ID}))
			tb = append(tb, one(sandbox.CreateOptions{}))
		}
		b.ReportMetric(ms(median(tv)), "p50-ms")
		b.ReportMetric(ms(median(tb)), "plain-p50-ms")
		b.ReportMetric(float64(median(tv))/float64(median(tb)), "x-raw")
	})
}
