package daytona_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/memory"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The adapter's requests carry the W3C trace context of the portable call
// that made them: the fake sees a traceparent in the caller's trace whose
// parent is the call's span, and none for a call without a span.
func TestTraceContextReachesTheService(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	var got []string
	hook := func(r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Traceparent"))
		mu.Unlock()
	}
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}
	e := newEnvOn(t, memory.New(memory.WithRootFileAccess()), []daytonafake.Option{daytonafake.WithRequestHook(hook)})
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	c := sandbox.NewClient(e.rt, sandbox.WithTracerProvider(tp))

	ctx, root := tp.Tracer("test").Start(ctx, "caller")
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, sandbox.Command{Shell: "echo hi"}); err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	root.End()

	spanIDs := map[string]bool{}
	for _, s := range exp.GetSpans() {
		if strings.HasPrefix(s.Name, "sandbox.") {
			spanIDs[s.SpanContext.SpanID().String()] = true
		}
	}
	traceID := root.SpanContext().TraceID().String()
	lines := take()
	if len(lines) == 0 {
		t.Fatal("the fake saw no requests")
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Errorf("request without traceparent: %s", line)
			continue
		}
		parts := strings.Split(f[2], "-")
		if len(parts) != 4 || parts[1] != traceID || !spanIDs[parts[2]] {
			t.Errorf("%s %s: traceparent %q, want 00-%s-<a sandbox span>-..", f[0], f[1], f[2], traceID)
		}
	}

	sb2, err := e.c.Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = sb2.Destroy(context.Background())
	for _, line := range take() {
		if len(strings.Fields(line)) != 2 {
			t.Errorf("request sent a traceparent with no span in its context: %s", line)
		}
	}
}
