package wire

import (
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Propagate wraps rt so that each request carries the trace context of
// its context to the provider: the W3C traceparent and tracestate headers
// always, and whatever else the program's global propagator
// (otel.GetTextMapPropagator) adds, such as baggage. A request whose
// context holds no span and no baggage goes out as it is; one that does is
// cloned first (a RoundTripper must not change the caller's request).
//
// Use it only for requests to a provider's control-plane API; requests
// to daemons inside a sandbox go through PropagateTrace.
func Propagate(rt http.RoundTripper) http.RoundTripper { return propagator{next: rt} }

// PropagateTrace wraps rt so that each request carries only the W3C trace
// context (traceparent and tracestate) of its context, never baggage or
// anything else the global propagator would add. It is for data-plane
// requests to daemons that run inside the sandbox (E2B's envd, Daytona's
// toolbox): code in the sandbox is untrusted, and baggage often holds the
// caller's user or tenant ids. A request whose context holds no span goes
// out as it is.
func PropagateTrace(rt http.RoundTripper) http.RoundTripper {
	return propagator{next: rt, traceOnly: true}
}

type propagator struct {
	next      http.RoundTripper
	traceOnly bool // inject W3C trace context only, not the global propagator's fields
}

// RoundTrip implements http.RoundTripper.
func (p propagator) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	hasSpan := trace.SpanContextFromContext(ctx).IsValid()
	if !hasSpan && (p.traceOnly || baggage.FromContext(ctx).Len() == 0) {
		return p.next.RoundTrip(req)
	}
	out := req.Clone(ctx)
	h := propagation.HeaderCarrier(out.Header)
	if !p.traceOnly {
		otel.GetTextMapPropagator().Inject(ctx, h)
	}
	propagation.TraceContext{}.Inject(ctx, h)
	return p.next.RoundTrip(out)
}

// CloseIdleConnections closes the idle connections of the transport
// under it, as http.Client.CloseIdleConnections expects.
func (p propagator) CloseIdleConnections() {
	if c, ok := p.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
