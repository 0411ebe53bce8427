// Package telemetry holds the span helpers the packages above the
// portable layer (session, run, fsbackend, interp, the MCP server) share,
// so their spans say the same things the same way as the root package's:
// the error's code, never its text; keys hashed, never raw. It uses the
// OpenTelemetry API only.
package telemetry

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"

	"github.com/sandboxkit/sandbox/sberrors"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys of the layered packages' spans (the root package's are
// its Attr* constants).
const (
	// KeyHash is a session key's keyed hash (see Hash): keys are often
	// user or conversation ids, which a trace backend should not hold.
	// It is stable within one process only, so it correlates the spans
	// of one key within a run, not across runs.
	KeyHash = attribute.Key("sandbox.session.key_hash")
	// Tool is the name of an MCP tool or a file-tool verb.
	Tool = attribute.Key("sandbox.tool")
	// Language is an interpreter's language.
	Language = attribute.Key("sandbox.interp.language")
	// RunID is a durable run's id.
	RunID = attribute.Key("sandbox.run.id")
	// SandboxID is the sandbox's id, as the root package records it.
	SandboxID = attribute.Key("sandbox.id")
	// ErrorCode and ErrorType are a failure's code, as the root package
	// records it.
	ErrorCode = attribute.Key("sandbox.error.code")
	ErrorType = attribute.Key("error.type")
)

// Tracer returns the tracer of scope from tp, the global provider when tp
// is nil.
func Tracer(tp trace.TracerProvider, scope string) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(scope)
}

// Start starts an internal span named name with attrs.
func Start(ctx context.Context, tr trace.Tracer, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	ctx, span := tr.Start(ctx, name)
	if len(attrs) > 0 && span.IsRecording() {
		span.SetAttributes(attrs...)
	}
	return ctx, span
}

// End ends span, recording err's code (never its text) when err is not
// nil.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		code := sberrors.CodeOf(err).String()
		span.SetAttributes(ErrorCode.String(code), ErrorType.String(code))
		span.SetStatus(codes.Error, code)
	}
	span.End()
}

// hashKey keys Hash: random, drawn once per process.
var hashKey = func() []byte {
	k := make([]byte, 32)
	// crypto/rand.Read never returns an error: it crashes the program
	// rather than hand out a key that is not random.
	_, _ = rand.Read(k)
	return k
}()

// Hash returns the first 16 bytes, in hex, of the HMAC-SHA256 of s under
// a random key drawn once per process. The same s gives the same hash
// within one process, so the spans of one session key correlate within
// a run; the hash differs from run to run, and without the key (which
// never leaves the process) it cannot be reversed by hashing guesses,
// which an unkeyed hash of a low-entropy id such as a user id or an
// email address could.
func Hash(s string) string {
	m := hmac.New(sha256.New, hashKey)
	m.Write([]byte(s))
	return hex.EncodeToString(m.Sum(nil)[:16])
}
