package session

import "time"

// Diagnostics describes the sandbox behind a session's results, as seed
// 001 attached to every result: which sandbox ran the call, on which
// provider, whether the fallback template was used, whether the sandbox
// was adopted after a restart, and its lease. Take it with
// Session.Diagnostics next to an Exec or Run result; every result of a
// session comes from the sandbox it describes.
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
	// Adopted reports that the sandbox was reattached by label after a
	// restart rather than created by this manager.
	Adopted bool
	// Workspace is the absolute path commands run in.
	Workspace string
	// LeaseEnd is when the lease ends as last extended or seen (zero when
	// the provider does not say).
	LeaseEnd time.Time
}

// Diagnostics returns the session's diagnostics (see Diagnostics). It
// makes no call to the provider.
func (s *Session) Diagnostics() Diagnostics {
	in := s.sb.Info()
	return Diagnostics{
		Key: s.key, SandboxID: s.sb.ID(), Provider: s.m.c.Provider(), Template: s.template,
		FallbackTemplateUsed: !s.usedRequested, Adopted: s.adopted, Workspace: s.workspace, LeaseEnd: in.LeaseEnd,
	}
}
