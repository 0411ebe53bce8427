package session

import (
	"context"

	"github.com/sandboxkit/sandbox/internal/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope of the package's spans.
const scope = "github.com/sandboxkit/sandbox/session"

// span starts the span of a session operation on key: named
// "session.<op>", with the key hashed under a per-process secret (keys
// are often user or conversation ids; see telemetry.Hash), on the Client's tracer provider, so the portable
// calls the operation makes are its children.
func (m *Manager) span(ctx context.Context, op, key string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	var tr trace.Tracer
	if m.c != nil {
		tr = telemetry.Tracer(m.c.TracerProvider(), scope)
	} else {
		tr = telemetry.Tracer(nil, scope)
	}
	return telemetry.Start(ctx, tr, "session."+op, append(attrs, telemetry.KeyHash.String(telemetry.Hash(key)))...)
}
