package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

// CommandLeaseGrace is what the portable layer adds to a command's timeout
// when it extends the lease to cover the command (see Sandbox.Exec): time
// for the provider to end the command at its timeout and for the caller to
// read the result and files it left.
const CommandLeaseGrace = time.Minute

// leaseLookupTimeout bounds the look-up that tells a command lost to the
// end of the lease from other losses.
const leaseLookupTimeout = 5 * time.Second

// leaseSlack is how far before the lease end the handle knows a sandbox
// found gone still counts as ended by its lease: the provider's clock and
// this host's differ, and the provider reports the end rounded.
const leaseSlack = 2 * time.Second

// notOwned is the error of a lifecycle call on a handle that does not own
// its sandbox.
func (s *Sandbox) notOwned(op, verb string) error {
	return &Error{Op: op, Provider: s.c.rt.Name(), SandboxID: s.id, Code: FailedPrecondition,
		Err: fmt.Errorf("the handle does not own the sandbox (it was attached without AttachOptions.Own, or found by GetOrCreate), so it may not %s it; attach with AttachOptions{Own: true} to take charge of it: %w",
			verb, ErrFailedPrecondition)}
}

// leaseEnd returns the lease end the handle knows (zero when it knows of
// none).
func (s *Sandbox) leaseEnd() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info.LeaseEnd
}

// coverLease makes the lease last for a command of the given timeout:
// when the lease the handle knows ends before timeout plus half of
// CommandLeaseGrace from now, it extends it to timeout plus
// CommandLeaseGrace (at most to the
// provider's MaxLease), once, through the SetTimeout path. A command that
// fits costs no call. A handle that does not own its sandbox never
// extends (the owner keeps charge of the lease), nor does a sandbox
// without a lease, nor a command without a timeout (a background process
// may run for ever).
func (s *Sandbox) coverLease(ctx context.Context, op string, timeout time.Duration) error {
	if !s.owned || timeout <= 0 {
		return nil
	}
	d, need := timeout+CommandLeaseGrace, timeout+CommandLeaseGrace/2
	if m := s.c.caps.MaxLease; m > 0 && d > m {
		d, need = m, m
	}
	// A lease that covers the command and half the grace is left as it
	// is, so that a caller that just extended it (the session package
	// does, by the timeout and a minute) does not pay for another call.
	end := s.leaseEnd()
	if end.IsZero() || !end.Before(time.Now().Add(need)) {
		return nil
	}
	err := s.extendLease(ctx, d, true)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil || CodeOf(err) == NotFound {
		// The caller gave up, or the sandbox is gone: the command cannot run.
		return &Error{Op: op, Provider: s.c.rt.Name(), SandboxID: s.id, Code: CodeOf(err),
			Err: fmt.Errorf("extending the lease by %v to cover the command's timeout: %w", d, err)}
	}
	// Any other failure (a paused sandbox, a flaky control plane) must not
	// stop a command that may well fit: it runs, and should the lease end
	// while it does, its error says so (ErrLeaseExpired). The cause's text
	// is not logged: it may quote a secret.
	s.c.log.Warn("sandbox: could not extend the lease to cover a command; running it anyway", "op", op,
		"provider", s.c.rt.Name(), "id", s.id, "want", d, "code", CodeOf(err))
	return nil
}

// extendLease makes the lease end no sooner than d from now, reading the
// current end first (never a cached one: a resume elsewhere may have
// shortened it) and only ever moving it later. With onlyLeased, a sandbox
// the provider reports without a lease end is left without one. The
// error is the provider's, not yet wrapped.
func (s *Sandbox) extendLease(ctx context.Context, d time.Duration, onlyLeased bool) error {
	const op = "set-timeout"
	want := time.Now().Add(d)
	var in driver.Info
	gctx, end := bound(ctx, "get", s.c.calls.Lookup)
	err := end(s.c.retry(gctx, "get", true, nil, func() error {
		var err error
		in, err = s.c.rt.Get(gctx, s.id)
		return err
	}))
	if err != nil {
		return err
	}
	s.setInfo(infoOf(in))
	if in.LeaseEnd.IsZero() && onlyLeased {
		return nil
	}
	if !in.LeaseEnd.IsZero() && !in.LeaseEnd.Before(want) {
		return nil
	}
	lctx, end := bound(ctx, op, s.c.calls.Lease)
	err = end(s.c.retry(lctx, op, true, nil, func() error { return s.c.rt.SetTimeout(lctx, s.id, time.Until(want)) }))
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.info.LeaseEnd.Before(want) {
		s.info.LeaseEnd = want
	}
	s.mu.Unlock()
	return nil
}

// lostToLease turns the error of a command that failed because the
// sandbox or the connection to it went away into one matching
// ErrLeaseExpired, when leaseEnded finds that the lease ended. Any other
// error, or any other finding, returns err as it is. ctx must still be
// live.
func (s *Sandbox) lostToLease(ctx context.Context, op string, err error) error {
	if err == nil || ctx.Err() != nil || !lostSandbox(err) {
		return err
	}
	if lerr := s.leaseEnded(ctx, op, err); lerr != nil {
		return lerr
	}
	return err
}

// killedByLease returns the error matching ErrLeaseExpired for a command
// that was killed (the provider kills what runs in a sandbox it ends: a
// signal, or exit status -1 or 137 where the provider reports no signal)
// when leaseEnded finds that the lease ended, and nil otherwise.
func (s *Sandbox) killedByLease(ctx context.Context, op string, res *Result) error {
	if res == nil || res.TimedOut || ctx.Err() != nil {
		return nil
	}
	var cause error
	switch {
	case res.Signal != 0:
		cause = fmt.Errorf("the command was killed (signal %v)", res.Signal)
	case res.ExitCode < 0 || res.ExitCode == 128+9:
		cause = fmt.Errorf("the command was killed (exit status %d)", res.ExitCode)
	default:
		return nil
	}
	return s.leaseEnded(ctx, op, cause)
}

// leaseEnded returns an error matching ErrLeaseExpired, with cause, when
// the lease the handle knows has ended and a look-up (bounded by
// leaseLookupTimeout) finds the sandbox gone, or paused by AutoPause; nil
// otherwise. A handle that knows of no lease, or of one that has not
// ended, makes no call.
func (s *Sandbox) leaseEnded(ctx context.Context, op string, cause error) error {
	end := s.leaseEnd()
	if end.IsZero() || time.Now().Before(end.Add(-leaseSlack)) {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, leaseLookupTimeout)
	defer cancel()
	in, gerr := s.c.rt.Get(lctx, s.id)
	switch {
	case CodeOf(gerr) == NotFound:
		return &Error{Op: op, Provider: s.c.rt.Name(), SandboxID: s.id, Code: NotFound,
			Err: fmt.Errorf("%w at %s while the command ran, and the provider destroyed the sandbox (extend the lease with SetTimeout, or create the sandbox with a longer CreateOptions.Timeout): %w",
				ErrLeaseExpired, end.UTC().Format(time.RFC3339), cause)}
	case gerr == nil && State(in.State) == StatePaused:
		s.setInfo(infoOf(in))
		return &Error{Op: op, Provider: s.c.rt.Name(), SandboxID: s.id, Code: FailedPrecondition,
			Err: fmt.Errorf("%w at %s while the command ran, and the provider paused the sandbox (AutoPause; Resume it to go on): %w: %w",
				ErrLeaseExpired, end.UTC().Format(time.RFC3339), ErrPaused, cause)}
	}
	return nil
}

// lostSandbox reports whether err is how a provider reports that the
// sandbox, or the connection to it, went away during a call.
func lostSandbox(err error) bool {
	if errors.Is(err, ErrOutcomeUnknown) {
		return true
	}
	switch CodeOf(err) {
	case NotFound, Unavailable, Unknown, Internal:
		return true
	}
	return false
}
