package sandbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// otelSDK is an SDK tracer and meter provider recording in memory.
type otelSDK struct {
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newOTelSDK(t *testing.T) *otelSDK {
	t.Helper()
	o := &otelSDK{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	o.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(o.spans))
	o.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader))
	t.Cleanup(func() {
		_ = o.tp.Shutdown(context.Background())
		_ = o.mp.Shutdown(context.Background())
	})
	return o
}

// span returns the last recorded span named name.
func (o *otelSDK) span(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	stubs := o.spans.GetSpans()
	for i := len(stubs) - 1; i >= 0; i-- {
		if stubs[i].Name == name {
			return stubs[i]
		}
	}
	t.Fatalf("no span %q among %d", name, len(stubs))
	return tracetest.SpanStub{}
}

// metric returns the metric named name.
func (o *otelSDK) metric(t *testing.T, name string) metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := o.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m
			}
		}
	}
	t.Fatalf("no metric %q", name)
	return metricdata.Metrics{}
}

func attrOf(kvs []attribute.KeyValue, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// A stale transport's single retry is an event on the call's span, and
// counted; the retried call succeeds and its span says so.
func TestTelemetryStaleRetryEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOTelSDK(t)
	rt := memory.New()
	c := sandbox.NewClient(rt, sandbox.WithTracerProvider(o.tp), sandbox.WithMeterProvider(o.mp))
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rt.FailNext(memory.OpExec, 1, sandbox.ErrStaleTransport)
	if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
		t.Fatalf("exec after one stale failure: %v", err)
	}
	sp := o.span(t, "sandbox.exec")
	if len(sp.Events) != 1 || sp.Events[0].Name != sandbox.EventStaleRetry {
		t.Fatalf("exec span events %+v, want one %s", sp.Events, sandbox.EventStaleRetry)
	}
	if v, _ := attrOf(sp.Events[0].Attributes, sandbox.AttrErrorCode); v.AsString() != sandbox.Unavailable.String() {
		t.Errorf("stale retry event code %q, want %s", v.AsString(), sandbox.Unavailable)
	}
	if sp.Status.Code == codes.Error {
		t.Errorf("retried call that succeeded has status %v", sp.Status)
	}
	sum := o.metric(t, sandbox.MetricStaleRetries).Data.(metricdata.Sum[int64])
	if len(sum.DataPoints) != 1 || sum.DataPoints[0].Value != 1 {
		t.Fatalf("%s = %+v, want one point of 1", sandbox.MetricStaleRetries, sum.DataPoints)
	}
	if v, _ := sum.DataPoints[0].Attributes.Value(sandbox.AttrOperation); v.AsString() != "exec" {
		t.Errorf("stale retry counted for %q, want exec", v.AsString())
	}

	// Two stale failures: the call fails with Unavailable, one retry.
	rt.FailNext(memory.OpStat, 2, sandbox.ErrStaleTransport)
	if _, err := sb.Stat(ctx, "."); sandbox.CodeOf(err) != sandbox.Unavailable {
		t.Fatalf("stat after two stale failures: %v", err)
	}
	sp = o.span(t, "sandbox.stat")
	if sp.Status.Code != codes.Error || sp.Status.Description != "Unavailable" || len(sp.Events) != 1 {
		t.Errorf("stat span: status %+v, events %+v; want Error Unavailable and one retry event", sp.Status, sp.Events)
	}
}

// A create the provider refused for a transient reason and retried shows
// the retry as an event with the attempt and the code.
func TestTelemetryCreateRetryEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOTelSDK(t)
	rt := memory.New()
	c := sandbox.NewClient(rt, sandbox.WithTracerProvider(o.tp), sandbox.WithMeterProvider(o.mp))
	defer c.Close()
	rt.FailNext(memory.OpCreate, 1, sandbox.Errorf(sandbox.ResourceExhausted, "rate limited"))
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sp := o.span(t, "sandbox.create")
	if len(sp.Events) != 1 || sp.Events[0].Name != sandbox.EventCreateRetry {
		t.Fatalf("create span events %+v, want one %s", sp.Events, sandbox.EventCreateRetry)
	}
	if v, _ := attrOf(sp.Events[0].Attributes, sandbox.AttrRetryAttempt); v.AsInt64() != 1 {
		t.Errorf("create retry attempt %d, want 1", v.AsInt64())
	}
	if v, _ := attrOf(sp.Attributes, sandbox.AttrSandboxID); v.AsString() != sb.ID() {
		t.Errorf("create span sandbox id %q, want %q", v.AsString(), sb.ID())
	}
	created := o.metric(t, sandbox.MetricSandboxesCreated).Data.(metricdata.Sum[int64])
	if len(created.DataPoints) != 1 || created.DataPoints[0].Value != 1 {
		t.Errorf("%s = %+v, want 1", sandbox.MetricSandboxesCreated, created.DataPoints)
	}
}

// Without WithTracerProvider and WithMeterProvider a Client uses the
// global providers, also when the program sets them after Open.
func TestTelemetryGlobalProvidersByDefault(t *testing.T) {
	ctx := context.Background()
	o := newOTelSDK(t)
	c := sandbox.NewClient(memory.New()) // before the program sets the globals
	defer c.Close()
	prevT, prevM := otel.GetTracerProvider(), otel.GetMeterProvider()
	otel.SetTracerProvider(o.tp)
	otel.SetMeterProvider(o.mp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prevT)
		otel.SetMeterProvider(prevM)
	})
	c2 := sandbox.NewClient(memory.New())
	defer c2.Close()
	for _, c := range []*sandbox.Client{c, c2} {
		o.spans.Reset()
		sb, err := c.Create(ctx, sandbox.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Exec(ctx, sandbox.Command{Shell: "true"}); err != nil {
			t.Fatal(err)
		}
		o.span(t, "sandbox.create")
		o.span(t, "sandbox.exec")
	}
	h := o.metric(t, sandbox.MetricOperationDuration)
	if h.Unit != "s" {
		t.Errorf("%s unit %q, want s", h.Name, h.Unit)
	}
	var execs uint64
	for _, dp := range h.Data.(metricdata.Histogram[float64]).DataPoints {
		if v, _ := dp.Attributes.Value(sandbox.AttrOperation); v.AsString() == "exec" {
			execs += dp.Count
		}
	}
	if execs != 2 {
		t.Errorf("exec duration count %d, want 2 (one per Client)", execs)
	}
}

// A Download's span lasts until the reader is closed and records the
// bytes read; the transferred counter gets them by direction.
func TestTelemetryDownloadSpanEndsAtClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOTelSDK(t)
	c := sandbox.NewClient(memory.New(), sandbox.WithTracerProvider(o.tp), sandbox.WithMeterProvider(o.mp))
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "f", make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	rc, err := sb.Download(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if _, err := rc.Read(buf); err != nil {
		t.Fatal(err)
	}
	for _, s := range o.spans.GetSpans() {
		if s.Name == "sandbox.download" {
			t.Fatal("download span ended before the reader was closed")
		}
	}
	time.Sleep(time.Millisecond)
	rc.Close()
	rc.Close() // a second Close ends nothing more
	n := 0
	for _, s := range o.spans.GetSpans() {
		if s.Name == "sandbox.download" {
			n++
			if v, _ := attrOf(s.Attributes, sandbox.AttrTransferBytes); v.AsInt64() != 100 {
				t.Errorf("download span bytes %d, want 100 (what was read)", v.AsInt64())
			}
		}
	}
	if n != 1 {
		t.Errorf("%d download spans, want 1", n)
	}
	sum := o.metric(t, sandbox.MetricTransferred).Data.(metricdata.Sum[int64])
	got := map[string]int64{}
	for _, dp := range sum.DataPoints {
		v, _ := dp.Attributes.Value(sandbox.AttrTransferDir)
		got[v.AsString()] += dp.Value
	}
	if got["upload"] != 1000 || got["download"] != 100 {
		t.Errorf("transferred %v, want upload 1000, download 100", got)
	}
}
