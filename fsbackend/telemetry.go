package fsbackend

import (
	"context"

	"github.com/sandboxkit/sandbox/internal/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope of the package's spans.
const scope = "github.com/sandboxkit/sandbox/fsbackend"

// span starts the span of one file-tool operation: "fsbackend.<verb>",
// with the verb and the sandbox, on the sandbox's Client's tracer
// provider. Paths, patterns and contents are never recorded.
func (b *FilesystemBackend) span(ctx context.Context, verb string) (context.Context, trace.Span) {
	tr := telemetry.Tracer(b.sb.Client().TracerProvider(), scope)
	return telemetry.Start(ctx, tr, "fsbackend."+verb, telemetry.Tool.String(verb), telemetry.SandboxID.String(b.sb.ID()))
}
