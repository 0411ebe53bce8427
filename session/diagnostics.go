package session

import (
	"time"

	"github.com/sandboxkit/sandbox"
)

// Diagnostics describes the sandbox behind a session's results, so that a
// caller can tell from a result alone where it came from: which sandbox
// ran the call, on which provider, whether the fallback template was used,
// whether the sandbox was adopted after a restart, and its lease. Every Result of Exec and Run
// carries the Diagnostics of the sandbox that ran it (with Attempts);
// Session.Diagnostics describes a session's sandbox between calls.
type Diagnostics struct {
	// Key is the session key.
	Key string
	// SandboxID and Provider name the sandbox that ran the call.
	SandboxID, Provider string
	// Template is the template the sandbox came from ("" for the
	// provider's default).
	Template string
	// FallbackTemplateUsed reports that the requested template was
	// missing and Options.FallbackTemplate was used instead.
	FallbackTemplateUsed bool
	// PerCallTemplate is the template a call asked for with WithTemplate
	// or RunOptions.Template when it ran in the session's sandbox for
	// that template rather than its own; "" otherwise.
	PerCallTemplate string
	// Adopted reports that the sandbox was reattached by label after a
	// restart rather than created by this manager.
	Adopted bool
	// Workspace is the absolute path commands run in.
	Workspace string
	// LeaseEnd is when the lease ends as last extended or seen (zero when
	// the provider does not say).
	LeaseEnd time.Time
	// Attempts is how many times the call was sent to the sandbox: 1, or
	// 2 when the provider refused it because the sandbox was paused and it
	// ran again once the sandbox was woken. Zero in Session.Diagnostics.
	Attempts int
}

// Diagnostics returns the session's diagnostics (see Diagnostics). It
// makes no call to the provider.
func (s *Session) Diagnostics() Diagnostics {
	in := s.sb.Info()
	return Diagnostics{
		Key: s.key, SandboxID: s.sb.ID(), Provider: s.m.c.Provider(), Template: s.template,
		FallbackTemplateUsed: !s.usedRequested, PerCallTemplate: s.perCall, Adopted: s.adopted,
		Workspace: s.workspace, LeaseEnd: in.LeaseEnd,
	}
}

// Result is what a Session's Exec and Run return: the command's
// sandbox.Result (its fields read as the Result's own) and the
// Diagnostics of the sandbox that ran the command.
type Result struct {
	*sandbox.Result
	// Diagnostics describes the sandbox that ran the command, as it was
	// when the command returned, and how many attempts the call took.
	Diagnostics Diagnostics
}

// result wraps res (nil stays nil) with s's diagnostics.
func (s *Session) result(res *sandbox.Result, attempts int) *Result {
	if res == nil {
		return nil
	}
	d := s.Diagnostics()
	d.Attempts = attempts
	return &Result{Result: res, Diagnostics: d}
}
