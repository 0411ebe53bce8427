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
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// headerLog keeps the traceparent header of every request a fake got.
type headerLog struct {
	mu  sync.Mutex
	got []string // "METHOD path traceparent"
}

func (l *headerLog) hook(r *http.Request) {
	l.mu.Lock()
	l.got = append(l.got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Traceparent"))
	l.mu.Unlock()
}

func (l *headerLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.got
	l.got = nil
	return out
}

// The adapter's requests, to the control plane and to envd, carry the W3C
// trace context of the portable call that made them: the fake sees a
// traceparent in the caller's trace whose parent is the call's span. A
// call made with no span in its context sends none.
func TestTraceContextReachesTheService(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var log headerLog
	e := newEnvOver(t, memory.New(memory.WithRootFileAccess()), e2bfake.WithRequestHook(log.hook))
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
	if _, err := sb.ReadFile(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	root.End()
	got := log.take()

	spanIDs := map[string]bool{}
	for _, s := range exp.GetSpans() {
		if strings.HasPrefix(s.Name, "sandbox.") {
			spanIDs[s.SpanContext.SpanID().String()] = true
		}
	}
	traceID := root.SpanContext().TraceID().String()
	sawEnvd, sawAPI := false, false
	for _, line := range got {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Errorf("request without traceparent: %s", line)
			continue
		}
		parts := strings.Split(f[2], "-")
		if len(parts) != 4 || parts[0] != "00" || parts[1] != traceID || !spanIDs[parts[2]] {
			t.Errorf("%s %s: traceparent %q, want 00-%s-<a sandbox span>-..", f[0], f[1], f[2], traceID)
		}
		if strings.Contains(f[1], "/sandboxes") {
			sawAPI = true
		} else {
			sawEnvd = true
		}
	}
	if !sawAPI || !sawEnvd {
		t.Errorf("requests seen: %q; want both the control plane's and envd's", got)
	}

	// No span in the context: no header.
	sb2, err := e.client.Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = sb2.Destroy(context.Background())
	for _, line := range log.take() {
		if len(strings.Fields(line)) != 2 {
			t.Errorf("request sent a traceparent with no span in its context: %s", line)
		}
	}
}
