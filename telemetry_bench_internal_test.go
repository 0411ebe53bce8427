//go:build linux

package sandbox

import (
	"context"
	"syscall"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

type dropSpans struct{}

func (dropSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (dropSpans) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (dropSpans) Shutdown(context.Context) error                  { return nil }
func (dropSpans) ForceFlush(context.Context) error                { return nil }

// BenchmarkTelemetryCall measures what the telemetry of one portable call
// costs on its own (start, the exec attributes, end, the duration
// metric), without a provider's noise: with the global providers unset,
// no-op providers, an SDK whose sampler is off, and a recording SDK.
func BenchmarkTelemetryCall(b *testing.B) {
	ctx := context.Background()
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	rec := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(dropSpans{}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = never.Shutdown(ctx); _ = rec.Shutdown(ctx); _ = mp.Shutdown(ctx) })
	p := &execPlan{out: &capBuffer{max: 10}, err: &capBuffer{max: 10}}
	cmd := &Command{Args: []string{"true"}}
	res := &Result{}
	for _, v := range []struct {
		name string
		o    options
	}{
		{"global-unset", options{}},
		{"noop", options{tp: tracenoop.NewTracerProvider(), mp: metricnoop.NewMeterProvider()}},
		{"sdk-sampler-off", options{tp: never, mp: metricnoop.NewMeterProvider()}},
		{"sdk-sampler-off+sdk-metrics", options{tp: never, mp: mp}},
		{"sdk-recording", options{tp: rec, mp: mp}},
	} {
		t := newTelemetry("memory", &v.o)
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			c0, n := cpuTime(), 0
			for b.Loop() {
				cctx, tc := t.start(ctx, "exec", "mem-0123456789")
				tc.execDone(p, cmd, res)
				tc.end(cctx, nil)
				n++
			}
			// CPU time, unlike wall time, is not inflated by other
			// processes on a loaded machine (GC work is included).
			b.ReportMetric(float64((cpuTime()-c0).Nanoseconds())/float64(n), "cpu-ns/op")
		})
		t.close()
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
