package sandboxtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricembedded "go.opentelemetry.io/otel/metric/embedded"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// The Telemetry group records what a Client emits with the recorder
// below, written against the OpenTelemetry API alone: the suite is a
// library, and the SDK stays out of the core module's non-test code.

// recorder is a TracerProvider and a MeterProvider that keep everything
// they are given.
type recorder struct {
	embedded.TracerProvider
	metricembedded.MeterProvider

	mu        sync.Mutex
	spans     []*recSpan
	points    []recPoint
	callbacks []metric.Callback
}

// recPoint is one measurement: an Add, a Record or an observation.
type recPoint struct {
	name  string
	value float64
	attrs attribute.Set
}

// recEvent is a span event.
type recEvent struct {
	name  string
	attrs []attribute.KeyValue
}

func newRecorder() *recorder { return &recorder{} }

// Tracer implements trace.TracerProvider.
func (r *recorder) Tracer(string, ...trace.TracerOption) trace.Tracer { return recTracer{r: r} }

// Meter implements metric.MeterProvider.
func (r *recorder) Meter(string, ...metric.MeterOption) metric.Meter { return &recMeter{r: r} }

// ended returns the spans ended so far.
func (r *recorder) ended() []*recSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*recSpan
	for _, s := range r.spans {
		s.mu.Lock()
		if s.ended {
			out = append(out, s)
		}
		s.mu.Unlock()
	}
	return out
}

// collect runs the observable instruments' callbacks and returns every
// measurement so far.
func (r *recorder) collect(ctx context.Context) []recPoint {
	r.mu.Lock()
	cbs := append([]metric.Callback(nil), r.callbacks...)
	r.mu.Unlock()
	for _, cb := range cbs {
		_ = cb(ctx, &recObserver{r: r})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recPoint(nil), r.points...)
}

func (r *recorder) add(name string, v float64, attrs attribute.Set) {
	r.mu.Lock()
	r.points = append(r.points, recPoint{name: name, value: v, attrs: attrs})
	r.mu.Unlock()
}

type recTracer struct {
	embedded.Tracer
	r *recorder
}

// Start implements trace.Tracer: the span gets a valid, sampled context
// (a child of ctx's span when there is one), so propagation works.
func (t recTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	cfg := trace.NewSpanStartConfig(opts...)
	parent := trace.SpanContextFromContext(ctx)
	var tid trace.TraceID
	var sid trace.SpanID
	if parent.IsValid() && !cfg.NewRoot() {
		tid = parent.TraceID()
	} else {
		_, _ = rand.Read(tid[:])
	}
	_, _ = rand.Read(sid[:])
	s := &recSpan{r: t.r, name: name, kind: cfg.SpanKind(), parent: parent,
		sc: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})}
	s.attrs = append(s.attrs, cfg.Attributes()...)
	t.r.mu.Lock()
	t.r.spans = append(t.r.spans, s)
	t.r.mu.Unlock()
	return trace.ContextWithSpan(ctx, s), s
}

// recSpan is a recorded span.
type recSpan struct {
	embedded.Span
	r      *recorder
	sc     trace.SpanContext
	parent trace.SpanContext
	kind   trace.SpanKind

	mu         sync.Mutex
	name       string
	attrs      []attribute.KeyValue
	events     []recEvent
	status     codes.Code
	statusDesc string
	ended      bool
}

func (s *recSpan) End(...trace.SpanEndOption) {
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
}

func (s *recSpan) AddEvent(name string, opts ...trace.EventOption) {
	cfg := trace.NewEventConfig(opts...)
	s.mu.Lock()
	s.events = append(s.events, recEvent{name: name, attrs: cfg.Attributes()})
	s.mu.Unlock()
}

func (s *recSpan) AddLink(trace.Link) {}

func (s *recSpan) IsRecording() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ended
}

func (s *recSpan) RecordError(err error, opts ...trace.EventOption) {
	// Recorded as the SDK records it, text included, so that a caller
	// who records an error's text is seen by the secret scan.
	s.AddEvent("exception", append(opts, trace.WithAttributes(attribute.String("exception.message", err.Error())))...)
}

func (s *recSpan) SpanContext() trace.SpanContext { return s.sc }

func (s *recSpan) SetStatus(code codes.Code, desc string) {
	s.mu.Lock()
	s.status, s.statusDesc = code, desc
	s.mu.Unlock()
}

func (s *recSpan) SetName(name string) {
	s.mu.Lock()
	s.name = name
	s.mu.Unlock()
}

func (s *recSpan) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	s.attrs = append(s.attrs, kv...)
	s.mu.Unlock()
}

func (s *recSpan) TracerProvider() trace.TracerProvider { return s.r }

// attr returns the last value set for key, and whether one was.
func (s *recSpan) attr(key attribute.Key) (attribute.Value, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.attrs) - 1; i >= 0; i-- {
		if s.attrs[i].Key == key {
			return s.attrs[i].Value, true
		}
	}
	return attribute.Value{}, false
}

// texts returns every string the span holds: its name, status, every
// attribute and event, as a trace backend would store them.
func (s *recSpan) texts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []string{s.name, s.statusDesc}
	for _, kv := range s.attrs {
		out = append(out, string(kv.Key)+"="+kv.Value.Emit())
	}
	for _, e := range s.events {
		out = append(out, e.name)
		for _, kv := range e.attrs {
			out = append(out, string(kv.Key)+"="+kv.Value.Emit())
		}
	}
	return out
}

func (s *recSpan) String() string {
	return fmt.Sprintf("span %q %v", s.name, s.texts())
}

// recMeter hands out recording instruments for the kinds the portable
// layer uses; the rest are no-ops.
type recMeter struct {
	metricnoop.Meter
	r *recorder
}

func (m *recMeter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return &recInt64Counter{r: m.r, name: name}, nil
}

func (m *recMeter) Int64UpDownCounter(name string, _ ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	return &recInt64UpDown{r: m.r, name: name}, nil
}

func (m *recMeter) Float64Histogram(name string, _ ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return &recFloat64Histogram{r: m.r, name: name}, nil
}

func (m *recMeter) Int64ObservableUpDownCounter(name string, _ ...metric.Int64ObservableUpDownCounterOption) (metric.Int64ObservableUpDownCounter, error) {
	return &recInt64Observable{name: name}, nil
}

func (m *recMeter) Int64ObservableGauge(name string, _ ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	return &recInt64ObservableGauge{name: name}, nil
}

func (m *recMeter) RegisterCallback(f metric.Callback, _ ...metric.Observable) (metric.Registration, error) {
	m.r.mu.Lock()
	m.r.callbacks = append(m.r.callbacks, f)
	i := len(m.r.callbacks) - 1
	m.r.mu.Unlock()
	return &recRegistration{r: m.r, i: i}, nil
}

type recInt64Counter struct {
	metricnoop.Int64Counter
	r    *recorder
	name string
}

func (c *recInt64Counter) Add(_ context.Context, v int64, opts ...metric.AddOption) {
	c.r.add(c.name, float64(v), metric.NewAddConfig(opts).Attributes())
}
func (c *recInt64Counter) Enabled(context.Context) bool { return true }

type recInt64UpDown struct {
	metricnoop.Int64UpDownCounter
	r    *recorder
	name string
}

func (c *recInt64UpDown) Add(_ context.Context, v int64, opts ...metric.AddOption) {
	c.r.add(c.name, float64(v), metric.NewAddConfig(opts).Attributes())
}
func (c *recInt64UpDown) Enabled(context.Context) bool { return true }

type recFloat64Histogram struct {
	metricnoop.Float64Histogram
	r    *recorder
	name string
}

func (h *recFloat64Histogram) Record(_ context.Context, v float64, opts ...metric.RecordOption) {
	h.r.add(h.name, v, metric.NewRecordConfig(opts).Attributes())
}
func (h *recFloat64Histogram) Enabled(context.Context) bool { return true }

type recInt64Observable struct {
	metricnoop.Int64ObservableUpDownCounter
	name string
}

type recInt64ObservableGauge struct {
	metricnoop.Int64ObservableGauge
	name string
}

type recObserver struct {
	metricembedded.Observer
	r *recorder
}

func (o *recObserver) ObserveFloat64(metric.Float64Observable, float64, ...metric.ObserveOption) {}

func (o *recObserver) ObserveInt64(obs metric.Int64Observable, v int64, opts ...metric.ObserveOption) {
	name := ""
	switch x := obs.(type) {
	case *recInt64Observable:
		name = x.name
	case *recInt64ObservableGauge:
		name = x.name
	}
	o.r.add(name, float64(v), metric.NewObserveConfig(opts).Attributes())
}

type recRegistration struct {
	metricembedded.Registration
	r *recorder
	i int
}

func (g *recRegistration) Unregister() error {
	g.r.mu.Lock()
	g.r.callbacks[g.i] = func(context.Context, metric.Observer) error { return nil }
	g.r.mu.Unlock()
	return nil
}
