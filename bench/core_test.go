// Package bench holds the benchmarks of research/local.md §3.2. Each
// benchmark runs its variant and a raw baseline in the same run and reports
// the ratio (b.ReportMetric "x-raw"), so a noisy shared machine moves both.
package bench

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// BenchmarkPortableOverhead measures what the portable layer (validation,
// capture buffers, error wrapping) adds to a small exec and a small file
// write over calling the Runtime directly. Target: the SDK layer is noise
// next to any provider round trip (≤ 25 µs per call).
func BenchmarkPortableOverhead(b *testing.B) {
	ctx := context.Background()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	raw := &driver.Command{Args: []string{"true"}, Dir: memory.Home, Stdout: io.Discard, Stderr: io.Discard, Timeout: time.Minute}
	data := []byte("hello")

	interleave(b, "exec",
		func() error { _, err := rt.Exec(ctx, sb.ID(), raw); return err },
		func() error { _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}}); return err })
	interleave(b, "write",
		func() error { return rt.Upload(ctx, sb.ID(), memory.Home+"/f", bytes.NewReader(data)) },
		func() error { return sb.WriteFile(ctx, "f", data) })
}

// interleave runs baseline and variant alternately in one loop, so load on
// the machine hits both alike, and reports each one's mean, the overhead
// and the ratio variant/baseline.
func interleave(b *testing.B, name string, baseline, variant func() error) {
	b.Run(name, func(b *testing.B) {
		var tb, tv time.Duration
		n := 0
		for b.Loop() {
			t0 := time.Now()
			if err := baseline(); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := variant(); err != nil {
				b.Fatal(err)
			}
			tv += time.Since(t1)
			tb += t1.Sub(t0)
			n++
		}
		b.ReportMetric(float64(tb.Nanoseconds())/float64(n), "raw-ns/op")
		b.ReportMetric(float64(tv.Nanoseconds())/float64(n), "sdk-ns/op")
		b.ReportMetric(float64(tv-tb)/float64(n), "overhead-ns/op")
		b.ReportMetric(float64(tv)/float64(tb), "x-raw")
	})
}

// reportTransfer reports an upload and download benchmark's throughput
// (n transfers of size bytes each), its ratios to the raw baseline timed in
// the same run and the heap peaks: one set of metrics for every provider.
func reportTransfer(b *testing.B, n int, size int64, rawUp, upT, rawDown, downT time.Duration, upHeap, downHeap uint64) {
	mibps := func(d time.Duration) float64 { return float64(n) * float64(size) / (1 << 20) / d.Seconds() }
	b.ReportMetric(mibps(rawUp), "raw-up-MiB/s")
	b.ReportMetric(mibps(upT), "up-MiB/s")
	b.ReportMetric(mibps(rawDown), "raw-down-MiB/s")
	b.ReportMetric(mibps(downT), "down-MiB/s")
	b.ReportMetric(rawUp.Seconds()/upT.Seconds(), "up-x-raw")
	b.ReportMetric(rawDown.Seconds()/downT.Seconds(), "down-x-raw")
	b.ReportMetric(float64(upHeap)/(1<<20), "up-heap-MiB")
	b.ReportMetric(float64(downHeap)/(1<<20), "down-heap-MiB")
}
