package session_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A session's operations are spans on the Client's tracer provider, with
// the key hashed, never raw, and the portable calls they make are their
// children.
func TestSessionSpansHashTheKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	m := session.NewManager(sandbox.NewClient(memory.New(), sandbox.WithTracerProvider(tp)), session.Options{})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	const key = "user-4711.conversation-teltest"
	s, err := m.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec(ctx, sandbox.Command{Shell: "echo hi"}); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	byID := map[string]tracetest.SpanStub{}
	names := map[string]bool{}
	for _, sp := range spans {
		byID[sp.SpanContext.SpanID().String()] = sp
		names[sp.Name] = true
		for _, kv := range sp.Attributes {
			if strings.Contains(kv.Value.Emit(), key) {
				t.Errorf("%s: attribute %s holds the raw key", sp.Name, kv.Key)
			}
		}
	}
	for _, want := range []string{"session.acquire", "session.exec", "sandbox.exec"} {
		if !names[want] {
			t.Errorf("no span %s among %v", want, names)
		}
	}
	hashed := false
	for _, sp := range spans {
		switch sp.Name {
		case "session.exec":
			for _, kv := range sp.Attributes {
				if kv.Key == "sandbox.session.key_hash" && len(kv.Value.AsString()) == 32 {
					hashed = true
				}
			}
		case "sandbox.exec":
			if p, ok := byID[sp.Parent.SpanID().String()]; !ok || p.Name != "session.exec" {
				t.Errorf("sandbox.exec's parent is %q, want session.exec", p.Name)
			}
		}
	}
	if !hashed {
		t.Error("session.exec has no key hash")
	}
}
