package wire

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// headerRT records the headers of the request it gets.
type headerRT struct{ got http.Header }

func (h *headerRT) RoundTrip(req *http.Request) (*http.Response, error) {
	h.got = req.Header.Clone()
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

// Under a global trace-context-and-baggage propagator, Propagate sends
// both and PropagateTrace only the traceparent; with baggage and no span,
// PropagateTrace sends nothing.
func TestPropagateTraceOmitsBaggage(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	m, err := baggage.NewMember("tenant", "acme")
	if err != nil {
		t.Fatal(err)
	}
	bg, err := baggage.New(m)
	if err != nil {
		t.Fatal(err)
	}
	bctx := baggage.ContextWithBaggage(context.Background(), bg)
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled,
	})
	sctx := trace.ContextWithSpanContext(bctx, sc)
	send := func(rt func(http.RoundTripper) http.RoundTripper, ctx context.Context) http.Header {
		t.Helper()
		var h headerRT
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt(&h).RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		if len(req.Header) != 0 {
			t.Errorf("the caller's request was changed: %v", req.Header)
		}
		return h.got
	}
	if h := send(Propagate, sctx); h.Get("Baggage") != "tenant=acme" || h.Get("Traceparent") == "" {
		t.Errorf("Propagate sent %v, want traceparent and the baggage", h)
	}
	if h := send(PropagateTrace, sctx); h.Get("Baggage") != "" || h.Get("Traceparent") == "" {
		t.Errorf("PropagateTrace sent %v, want a traceparent and no baggage", h)
	}
	if h := send(PropagateTrace, bctx); len(h) != 0 {
		t.Errorf("PropagateTrace with no span sent %v, want no headers", h)
	}
}
