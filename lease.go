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
	if end := s.leaseEnd(); end.IsZero() || !end.Before(time.Now().Add(need)) {
		return nil
	}
	// Commands started together wait for one extension and then find the
	// lease covers them too.
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	if end := s.leaseEnd(); end.IsZero() || !end.Before(time.Now().Add(need)) {
		return nil
	}
	err := s.extendLease(ctx, d, true)
	if err == nil {
		return nil
	}
	if CodeOf(err) == NotFound {
		// The sandbox is gone: the command cannot run, and the caller
		// hears the provider say so as a command on a gone sandbox does,
		// not about the extension that found it.
		return err
	}
	if ctx.Err() != nil {
		// The caller gave up: the command does not run.
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
// leaseLookupTimeout) finds that the lease ended the sandbox; nil
// otherwise. A handle that knows of no lease, or of one that has not
// ended, makes no call.
//
// The provider's word comes first: a look-up error matching
// ErrLeaseExpired (a driver.LeaseEndedError, with when the lease ended)
// says the lease ended the sandbox. A provider that declares
// ReportsLeaseEnd and reports a plain NotFound says that something else
// (a Destroy through another handle) ended it, whatever the lease end
// this handle knew, which may be stale. Only for a provider that cannot
// tell is a sandbox found gone after the lease end the handle knew taken
// as ended by its lease: the best guess it has. A sandbox found paused
// after that end was paused by AutoPause. A sandbox still there refreshes
// the lease end the handle knows.
func (s *Sandbox) leaseEnded(ctx context.Context, op string, cause error) error {
	end := s.leaseEnd()
	if end.IsZero() || time.Now().Before(end.Add(-leaseSlack)) {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, leaseLookupTimeout)
	defer cancel()
	in, gerr := s.c.rt.Get(lctx, s.id)
	var le *driver.LeaseEndedError
	switch {
	case errors.As(gerr, &le):
		return s.leaseError(op, le.End, cause)
	case errors.Is(gerr, ErrLeaseExpired):
		return s.leaseError(op, end, cause)
	case CodeOf(gerr) == NotFound && !s.c.reportsLeaseEnd:
		return s.leaseError(op, end, cause)
	case gerr == nil && State(in.State) == StatePaused:
		s.setInfo(infoOf(in))
		return &Error{Op: op, Provider: s.c.rt.Name(), SandboxID: s.id, Code: FailedPrecondition,
			Err: &leaseErr{msg: fmt.Sprintf("the lease ended at %s while the command ran; the provider paused it (AutoPause; Resume it to go on)",
				end.UTC().Format(time.RFC3339)), errs: []error{ErrLeaseExpired, ErrPaused, cause}}}
	case gerr == nil:
		s.setInfo(infoOf(in))
	}
	return nil
}

// leaseError is the error of a command during which the lease ended at
// end and the provider destroyed the sandbox: one line that says so and
// what to do, matching ErrLeaseExpired and cause (ErrOutcomeUnknown, say)
// without repeating cause's text, which tells only how the connection to
// the sandbox broke.
func (s *Sandbox) leaseError(op string, end time.Time, cause error) error {
	return &Error{Op: op, Provider: s.c.rt.Name(), SandboxID: s.id, Code: NotFound,
		Err: &leaseErr{msg: fmt.Sprintf("the lease ended at %s while the command ran; the provider destroyed it (extend with SetTimeout or a longer CreateOptions.Timeout)",
			end.UTC().Format(time.RFC3339)), errs: []error{ErrLeaseExpired, cause}}}
}

// leaseErr is the cause of a lease error: its own text, and the
// sentinels and original error it matches.
type leaseErr struct {
	msg  string
	errs []error
}

func (e *leaseErr) Error() string   { return e.msg }
func (e *leaseErr) Unwrap() []error { return e.errs }

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
