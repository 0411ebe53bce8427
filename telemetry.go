package sandbox

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// InstrumentationName is the name of the OpenTelemetry tracer and meter
// the portable layer records its spans and metrics with (the
// instrumentation scope a backend shows).
const InstrumentationName = "github.com/sandboxkit/sandbox"

// The attribute keys of the spans and metrics of the portable calls.
// Where OpenTelemetry's semantic conventions name the fact (error.type,
// process.exit.code, process.command_line) their key is used.
const (
	AttrProvider         = attribute.Key("sandbox.provider")
	AttrOperation        = attribute.Key("sandbox.operation")
	AttrSandboxID        = attribute.Key("sandbox.id")
	AttrErrorCode        = attribute.Key("sandbox.error.code")
	AttrErrorType        = attribute.Key("error.type")
	AttrCreated          = attribute.Key("sandbox.created")
	AttrExecTimeout      = attribute.Key("sandbox.exec.timeout")
	AttrExitCode         = attribute.Key("process.exit.code")
	AttrExecTimedOut     = attribute.Key("sandbox.exec.timed_out")
	AttrStdoutBytes      = attribute.Key("sandbox.exec.stdout.bytes")
	AttrStderrBytes      = attribute.Key("sandbox.exec.stderr.bytes")
	AttrOutputTruncated  = attribute.Key("sandbox.exec.output.truncated")
	AttrCommandLine      = attribute.Key("process.command_line")
	AttrTransferBytes    = attribute.Key("sandbox.transfer.bytes")
	AttrTransferDir      = attribute.Key("sandbox.transfer.direction")
	AttrRetryAttempt     = attribute.Key("sandbox.retry.attempt")
	AttrRetryDelay       = attribute.Key("sandbox.retry.delay")
	AttrClientInstanceID = attribute.Key("sandbox.client.instance")
)

// The span events of the portable calls.
const (
	// EventStaleRetry marks the single retry after a stale transport:
	// the transport was reset and the call sent again.
	EventStaleRetry = "sandbox.retry.stale"
	// EventCreateRetry marks a create retried after a transient refusal
	// (rate limit, no capacity), with the attempt and the delay.
	EventCreateRetry = "sandbox.retry.create"
)

// The names of the metrics of the portable calls, following the
// OpenTelemetry conventions for client operations ({area}.client.operation.duration
// in seconds, counts in {curly} units, sizes in By).
const (
	MetricOperationDuration  = "sandbox.client.operation.duration"
	MetricOperationErrors    = "sandbox.client.operation.errors"
	MetricSandboxesCreated   = "sandbox.client.sandboxes.created"
	MetricSandboxesDestroyed = "sandbox.client.sandboxes.destroyed"
	MetricSandboxesLive      = "sandbox.client.sandboxes.live"
	MetricTransferred        = "sandbox.client.transferred"
	MetricStaleRetries       = "sandbox.client.stale_retries"
)

// WithTracerProvider sets where the Client's spans go: one span per
// portable call (Create, Exec, Upload, Pause...) with the provider, the
// operation, the sandbox id, the error code of a failure and an event per
// retry. The default (and nil) is the global provider
// (otel.GetTracerProvider), so a program that set up OpenTelemetry gets
// the spans without code; without one set they cost next to nothing.
// Spans never hold command lines, environment values, file contents or
// secrets (see WithTraceCommandLines for the one opt-in).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tp = tp }
}

// WithMeterProvider sets where the Client's metrics go (see the Metric*
// names): call latency by provider and operation, errors by code,
// sandboxes created, destroyed and live, bytes transferred and stale
// retries. The default (and nil) is the global provider
// (otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.mp = mp }
}

// WithTraceCommandLines, when on, records each command's line on its exec
// or start span (process.command_line), with the sandbox's and the
// command's secret values redacted as they are from output. Off by
// default: a command line may quote a credential the library does not
// know to be secret, and a trace backend is seldom as closed as a log.
func WithTraceCommandLines(on bool) Option {
	return func(o *options) { o.cmdLines = on }
}

// TracerProvider returns the provider the Client records its spans with
// (WithTracerProvider, or the global one), so that code built on the
// Client (session, fsbackend, run, interp) adds its spans to the same
// traces.
func (c *Client) TracerProvider() trace.TracerProvider {
	if c == nil || c.tel == nil || c.tel.tp == nil {
		return otel.GetTracerProvider()
	}
	return c.tel.tp
}

// MeterProvider returns the provider the Client records its metrics with
// (WithMeterProvider, or the global one).
func (c *Client) MeterProvider() metric.MeterProvider {
	if c == nil || c.tel == nil || c.tel.mp == nil {
		return otel.GetMeterProvider()
	}
	return c.tel.mp
}

// clientInstances numbers the Clients of the process, for the live
// sandboxes gauge.
var clientInstances atomic.Int64

// telemetry holds a Client's tracer and instruments.
type telemetry struct {
	tp       trace.TracerProvider
	mp       metric.MeterProvider
	tracer   trace.Tracer
	provider string
	cmdLines bool

	duration    metric.Float64Histogram
	errors      metric.Int64Counter
	created     metric.Int64Counter
	destroyed   metric.Int64Counter
	transferred metric.Int64Counter
	stale       metric.Int64Counter
	reg         metric.Registration

	liveMu sync.Mutex
	live   map[string]struct{} // created through the Client and not destroyed through it

	opSets  sync.Map // op → metric.MeasurementOption: the provider and operation
	upSet   metric.MeasurementOption
	downSet metric.MeasurementOption
}

// durationBounds are the histogram's buckets in seconds: from a
// millisecond (an in-memory call) to two minutes (a cold create).
var durationBounds = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// spanStart are the options of every span: calls to a provider are
// client spans.
var spanStart = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

func newTelemetry(provider string, o *options) *telemetry {
	t := &telemetry{tp: o.tp, mp: o.mp, provider: provider, cmdLines: o.cmdLines, live: map[string]struct{}{}}
	if t.tp == nil {
		t.tp = otel.GetTracerProvider()
	}
	if t.mp == nil {
		t.mp = otel.GetMeterProvider()
	}
	t.tracer = t.tp.Tracer(InstrumentationName)
	m := t.mp.Meter(InstrumentationName)
	// An instrument the provider refuses is a no-op one (the API returns
	// one with the error): telemetry must never fail a Client.
	t.duration, _ = m.Float64Histogram(MetricOperationDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of the portable calls, by provider and operation."),
		metric.WithExplicitBucketBoundaries(durationBounds...))
	t.errors, _ = m.Int64Counter(MetricOperationErrors, metric.WithUnit("{error}"),
		metric.WithDescription("Failed portable calls, by provider, operation and error code."))
	t.created, _ = m.Int64Counter(MetricSandboxesCreated, metric.WithUnit("{sandbox}"),
		metric.WithDescription("Sandboxes created through the Client."))
	t.destroyed, _ = m.Int64Counter(MetricSandboxesDestroyed, metric.WithUnit("{sandbox}"),
		metric.WithDescription("Sandboxes destroyed through the Client."))
	t.transferred, _ = m.Int64Counter(MetricTransferred, metric.WithUnit("By"),
		metric.WithDescription("Bytes of files uploaded to and downloaded from sandboxes."))
	t.stale, _ = m.Int64Counter(MetricStaleRetries, metric.WithUnit("{retry}"),
		metric.WithDescription("Calls retried once after a stale transport."))
	live, _ := m.Int64ObservableUpDownCounter(MetricSandboxesLive, metric.WithUnit("{sandbox}"),
		metric.WithDescription("Sandboxes created through a Client and not yet destroyed through it, per Client."))
	if live != nil {
		set := metric.WithAttributeSet(attribute.NewSet(AttrProvider.String(provider),
			AttrClientInstanceID.Int64(clientInstances.Add(1))))
		t.reg, _ = m.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
			t.liveMu.Lock()
			n := len(t.live)
			t.liveMu.Unlock()
			ob.ObserveInt64(live, int64(n), set)
			return nil
		}, live)
	}
	t.upSet = metric.WithAttributeSet(attribute.NewSet(AttrProvider.String(provider), AttrTransferDir.String("upload")))
	t.downSet = metric.WithAttributeSet(attribute.NewSet(AttrProvider.String(provider), AttrTransferDir.String("download")))
	return t
}

// close unregisters the Client's live sandboxes gauge.
func (t *telemetry) close() {
	if t.reg != nil {
		_ = t.reg.Unregister()
	}
}

// opSet returns the metric attributes provider and operation, built once
// per operation.
func (t *telemetry) opSet(op string) metric.MeasurementOption {
	if v, ok := t.opSets.Load(op); ok {
		return v.(metric.MeasurementOption)
	}
	v, _ := t.opSets.LoadOrStore(op, metric.WithAttributeSet(attribute.NewSet(AttrProvider.String(t.provider), AttrOperation.String(op))))
	return v.(metric.MeasurementOption)
}

// spanNames are the span names of the portable calls, built once.
var spanNames sync.Map // op → "sandbox." + op

func spanName(op string) string {
	if v, ok := spanNames.Load(op); ok {
		return v.(string)
	}
	v, _ := spanNames.LoadOrStore(op, "sandbox."+op)
	return v.(string)
}

// call is the span and the clock of one portable call. The zero call
// (from a nil telemetry) records nothing.
type call struct {
	t    *telemetry
	span trace.Span
	op   string
	t0   time.Time
}

// start begins the span of the portable call op on sandbox id (empty
// before a sandbox is known). End it with end, exactly once.
func (t *telemetry) start(ctx context.Context, op, id string) (context.Context, call) {
	ctx, span := t.tracer.Start(ctx, spanName(op), spanStart...)
	if span.IsRecording() {
		span.SetAttributes(AttrProvider.String(t.provider), AttrOperation.String(op))
		if id != "" {
			span.SetAttributes(AttrSandboxID.String(id))
		}
	}
	return ctx, call{t: t, span: span, op: op, t0: time.Now()}
}

// setID records the sandbox id, once a create learnt it.
func (k *call) setID(id string) {
	if id != "" && k.span.IsRecording() {
		k.span.SetAttributes(AttrSandboxID.String(id))
	}
}

// end ends the call's span and records its duration and, for a failure,
// its code: as the span status (code name only, never the error text,
// which may hold a path or a value the caller gave) and the error
// counter.
func (k *call) end(ctx context.Context, err error) {
	if k.t == nil {
		return
	}
	t := k.t
	if err != nil {
		code := CodeOf(err).String()
		if k.span.IsRecording() {
			k.span.SetAttributes(AttrErrorCode.String(code), AttrErrorType.String(code))
			k.span.SetStatus(codes.Error, code)
		}
		k.span.End()
		if t.duration.Enabled(ctx) || t.errors.Enabled(ctx) {
			set := metric.WithAttributeSet(attribute.NewSet(AttrProvider.String(t.provider), AttrOperation.String(k.op),
				AttrErrorType.String(code)))
			t.duration.Record(ctx, time.Since(k.t0).Seconds(), set)
			t.errors.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(AttrProvider.String(t.provider),
				AttrOperation.String(k.op), AttrErrorCode.String(code))))
		}
		return
	}
	k.span.End()
	if t.duration.Enabled(ctx) {
		t.duration.Record(ctx, time.Since(k.t0).Seconds(), t.opSet(k.op))
	}
}

// sandboxCreated counts a sandbox made through the Client.
func (t *telemetry) sandboxCreated(ctx context.Context, id string) {
	t.liveMu.Lock()
	t.live[id] = struct{}{}
	t.liveMu.Unlock()
	t.created.Add(ctx, 1, t.opSet("create"))
}

// sandboxDestroyed counts a sandbox destroyed through the Client.
func (t *telemetry) sandboxDestroyed(ctx context.Context, id string) {
	t.liveMu.Lock()
	delete(t.live, id)
	t.liveMu.Unlock()
	t.destroyed.Add(ctx, 1, t.opSet("destroy"))
}

// transfer counts the bytes of a file transfer, on the metric and on the
// span of the call that moved them.
func (t *telemetry) transfer(ctx context.Context, span trace.Span, upload bool, n int64) {
	if span != nil && span.IsRecording() {
		span.SetAttributes(AttrTransferBytes.Int64(n))
	}
	if n <= 0 {
		return
	}
	set := t.downSet
	if upload {
		set = t.upSet
	}
	t.transferred.Add(ctx, n, set)
}

// staleRetry records the single retry after a stale transport: an event
// on the call's span (found in ctx) and the stale retries counter.
func (t *telemetry) staleRetry(ctx context.Context, op string, cause error) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(EventStaleRetry, trace.WithAttributes(AttrErrorCode.String(CodeOf(cause).String())))
	}
	t.stale.Add(ctx, 1, t.opSet(op))
}

// createRetry records a create retried after a transient refusal.
func (t *telemetry) createRetry(ctx context.Context, attempt int, wait time.Duration, cause error) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(EventCreateRetry, trace.WithAttributes(AttrRetryAttempt.Int(attempt),
			AttrRetryDelay.Float64(wait.Seconds()), AttrErrorCode.String(CodeOf(cause).String())))
	}
}

// execDone records what an exec's span may say about the command: its
// timeout, exit code, bytes of output and whether the capture was capped
// — never its output. With WithTraceCommandLines the line is recorded,
// redacted of secrets.
func (k *call) execDone(p *execPlan, cmd *Command, res *Result) {
	if k.t == nil || !k.span.IsRecording() {
		return
	}
	if p != nil {
		k.span.SetAttributes(AttrExecTimeout.Float64(p.timeout.Seconds()))
		if k.t.cmdLines && cmd != nil {
			k.span.SetAttributes(AttrCommandLine.String(string(redact([]byte(commandLine(cmd)), withQuoted(p.secrets)))))
		}
		if res != nil {
			k.span.SetAttributes(AttrStdoutBytes.Int64(p.out.written()), AttrStderrBytes.Int64(p.err.written()))
		}
	}
	if res != nil {
		k.span.SetAttributes(AttrExitCode.Int(res.ExitCode), AttrExecTimedOut.Bool(res.TimedOut),
			AttrOutputTruncated.Bool(res.StdoutTruncated || res.StderrTruncated))
	}
}

// commandLine is cmd as one line: its Shell text, or its Args quoted
// where they need it.
func commandLine(cmd *Command) string {
	if cmd.Shell != "" {
		return cmd.Shell
	}
	parts := make([]string, len(cmd.Args))
	for i, a := range cmd.Args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`") {
			a = strconv.Quote(a)
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}
