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
func Propagate(rt http.RoundTripper) http.RoundTripper { return propagator{next: rt} }

type propagator struct{ next http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (p propagator) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() && baggage.FromContext(ctx).Len() == 0 {
		return p.next.RoundTrip(req)
	}
	out := req.Clone(ctx)
	h := propagation.HeaderCarrier(out.Header)
	otel.GetTextMapPropagator().Inject(ctx, h)
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
