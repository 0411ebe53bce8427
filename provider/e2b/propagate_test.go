package e2b_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/memory"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// With the common global propagator (trace context and baggage) and
// baggage in the caller's context, requests to envd, which runs inside
// the sandbox, carry the traceparent but not the baggage (often user or
// tenant ids); the control-plane API's still get what the global
// propagator adds.
func TestTracePropagationKeepsBaggageFromEnvd(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	var mu sync.Mutex
	var envd, control []http.Header
	var paths []string
	hook := func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(r.URL.Path, "/sandboxes") {
			control = append(control, r.Header.Clone())
			return
		}
		envd = append(envd, r.Header.Clone())
		paths = append(paths, r.Method+" "+r.URL.Path)
	}
	e := newEnvOver(t, memory.New(memory.WithRootFileAccess()), e2bfake.WithRequestHook(hook))
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	c := sandbox.NewClient(e.rt, sandbox.WithTracerProvider(tp))
	m, err := baggage.NewMember("enduser.id", "alice")
	if err != nil {
		t.Fatal(err)
	}
	bg, err := baggage.New(m)
	if err != nil {
		t.Fatal(err)
	}
	ctx, root := tp.Tracer("test").Start(baggage.ContextWithBaggage(context.Background(), bg), "caller")
	defer root.End()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	if err := sb.WriteFile(ctx, "f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.ReadFile(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, sandbox.Command{Shell: "true"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(envd) == 0 || len(control) == 0 {
		t.Fatalf("saw %d envd and %d control-plane requests, want both", len(envd), len(control))
	}
	for i, h := range envd {
		if b := h.Get("Baggage"); b != "" {
			t.Errorf("%s: baggage %q sent into the sandbox", paths[i], b)
		}
		if h.Get("Traceparent") == "" {
			t.Errorf("%s: no traceparent", paths[i])
		}
	}
	sawBaggage := false
	for _, h := range control {
		sawBaggage = sawBaggage || strings.Contains(h.Get("Baggage"), "enduser.id=alice")
	}
	if !sawBaggage {
		t.Error("no control-plane request carried the global propagator's baggage")
	}
}
