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
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
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

	// Tracing: the same calls through a Client with telemetry on, against
	// one with it off (the global providers with nothing set: a program
	// that did not set up OpenTelemetry), on the same sandbox. Target:
	// no-op and a sampler-off SDK within 1 µs per call; a recording SDK's
	// cost is reported.
	off := c
	neverTP := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	recTP := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(discardProcessor{}))
	recMP := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() {
		_ = neverTP.Shutdown(ctx)
		_ = recTP.Shutdown(ctx)
		_ = recMP.Shutdown(ctx)
	})
	variants := []struct {
		name string
		opts []sandbox.Option
	}{
		{"noop", []sandbox.Option{sandbox.WithTracerProvider(tracenoop.NewTracerProvider()), sandbox.WithMeterProvider(metricnoop.NewMeterProvider())}},
		{"sdk-sampler-off", []sandbox.Option{sandbox.WithTracerProvider(neverTP), sandbox.WithMeterProvider(metricnoop.NewMeterProvider())}},
		{"sdk-recording", []sandbox.Option{sandbox.WithTracerProvider(recTP), sandbox.WithMeterProvider(recMP)}},
	}
	for _, v := range variants {
		on := sandbox.NewClient(rt, v.opts...)
		sbOn, err := on.Attach(ctx, sb.ID())
		if err != nil {
			b.Fatal(err)
		}
		sbOff, err := off.Attach(ctx, sb.ID())
		if err != nil {
			b.Fatal(err)
		}
		cmd := sandbox.Command{Args: []string{"true"}}
		interleaveTracing(b, "tracing/"+v.name+"/exec",
			func() error { _, err := sbOff.Exec(ctx, cmd); return err },
			func() error { _, err := sbOn.Exec(ctx, cmd); return err })
		interleaveTracing(b, "tracing/"+v.name+"/write",
			func() error { return sbOff.WriteFile(ctx, "f", data) },
			func() error { return sbOn.WriteFile(ctx, "f", data) })
	}
}

// discardProcessor is a span processor that drops ended spans: a
// recording SDK without the cost of an exporter.
type discardProcessor struct{}

func (discardProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discardProcessor) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discardProcessor) Shutdown(context.Context) error                  { return nil }
func (discardProcessor) ForceFlush(context.Context) error                { return nil }

// interleaveTracing runs the call with telemetry off and on alternately
// and reports each one's mean and the difference per call.
func interleaveTracing(b *testing.B, name string, off, on func() error) {
	b.Run(name, func(b *testing.B) {
		var toff, ton time.Duration
		n := 0
		timed := func(f func() error) time.Duration {
			t0 := time.Now()
			if err := f(); err != nil {
				b.Fatal(err)
			}
			return time.Since(t0)
		}
		for b.Loop() {
			// Alternate which goes first, so that neither always pays
			// for the garbage the other left.
			if n%2 == 0 {
				toff += timed(off)
				ton += timed(on)
			} else {
				ton += timed(on)
				toff += timed(off)
			}
			n++
		}
		b.ReportMetric(float64(toff.Nanoseconds())/float64(n), "off-ns/op")
		b.ReportMetric(float64(ton.Nanoseconds())/float64(n), "on-ns/op")
		b.ReportMetric(float64(ton-toff)/float64(n), "tracing-ns/op")
	})
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
