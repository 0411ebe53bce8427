// Package unredacted lets this module's own packages run a control command
// whose output they parse (records, counters, ids) without the portable
// layer's secret redaction, which would corrupt it whenever a secret value
// happens to occur in it (a secret "1" in a pid, "abc" in a hex digest).
// The caller gets the redaction Exec would have applied and must apply it
// to any part of the output that reaches a user. Being internal, it is out
// of reach of the module's users, for whom redaction is never optional.
package unredacted

import "context"

// Hook is filled in by Sandbox.Exec for a command run with a context
// from With.
type Hook struct {
	// Redact returns b with the command's secrets (the handle's and its
	// own) replaced, as Exec replaces them in output it redacts.
	Redact func(b []byte) []byte
}

type key struct{}

// With returns ctx asking Sandbox.Exec to capture the command's stdout and
// stderr unredacted and to fill h. Exec honours it only for a command
// without live Stdout and Stderr writers; h.Redact stays nil otherwise.
func With(ctx context.Context, h *Hook) context.Context {
	return context.WithValue(ctx, key{}, h)
}

// From returns the Hook ctx carries, or nil.
func From(ctx context.Context) *Hook {
	h, _ := ctx.Value(key{}).(*Hook)
	return h
}
