package interp

import (
	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// tracer is the tracer of the package's spans ("interp.<op>", with the
// language and the sandbox; never the code), on the sandbox's Client's
// tracer provider.
func tracer(sb *sandbox.Sandbox) trace.Tracer {
	return telemetry.Tracer(sb.Client().TracerProvider(), "github.com/sandboxkit/sandbox/interp")
}
