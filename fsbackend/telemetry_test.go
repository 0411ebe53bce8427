package fsbackend

import (
	"context"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/provider/memory"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Each file-tool verb is a span with the verb and the sandbox, never a
// path or content, and the portable calls it makes are its children.
func TestFileToolSpans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	sb, err := sandbox.NewClient(memory.New(), sandbox.WithTracerProvider(tp)).Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(sb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const path, content = "/notes-teltest.md", "content-teltest-51"
	if _, err := b.Write(ctx, &backend.WriteRequest{Path: path, Content: content}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Read(ctx, &backend.ReadRequest{Path: path}); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	byID := map[string]tracetest.SpanStub{}
	for _, sp := range spans {
		byID[sp.SpanContext.SpanID().String()] = sp
	}
	seen := map[string]bool{}
	for _, sp := range spans {
		for _, kv := range sp.Attributes {
			if v := kv.Value.Emit(); strings.Contains(v, "teltest") {
				t.Errorf("%s: attribute %s = %q holds a path or content", sp.Name, kv.Key, v)
			}
		}
		if strings.HasPrefix(sp.Name, "fsbackend.") {
			seen[sp.Name] = true
		}
		if sp.Name == "sandbox.upload" {
			if p := byID[sp.Parent.SpanID().String()]; !strings.HasPrefix(p.Name, "fsbackend.") {
				t.Errorf("sandbox.upload's parent is %q, want a fsbackend span", p.Name)
			}
		}
	}
	if !seen["fsbackend.write"] || !seen["fsbackend.read"] {
		t.Errorf("fsbackend spans %v, want write and read", seen)
	}
}
