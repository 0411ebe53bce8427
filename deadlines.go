package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// CallTimeouts bounds the provider calls the portable layer makes on behalf
// of a caller whose context has no deadline, so that a provider that never
// answers cannot hang the program. A context with a deadline is used as is:
// the caller chose the bound. A zero field takes the default in
// DefaultCallTimeouts; a negative field turns that bound off.
//
// Control-plane calls get a total time. Exec gets the command's timeout
// plus ExecGrace (the provider should end the command itself at its
// timeout; the grace covers the round trip). Upload and Download are bound
// by progress, not by a total time: they fail only when no bytes move for
// Idle, so a large transfer on a slow link is never cut off.
type CallTimeouts struct {
	// Create bounds Create and the create of GetOrCreate (default 2m: a
	// cold start, when the provider first pulls a template's image, can
	// take 60-120 s).
	Create time.Duration
	// CreateRetry bounds how long Create (and GetOrCreate) keeps retrying
	// a create the provider refused for a transient reason (429, 503, no
	// capacity), with jittered exponential backoff from 1 s to 30 s that
	// honours a Retry-After; ctx's deadline bounds it too (default 2m;
	// negative: no retries). A missing template, bad credentials or
	// invalid input are never retried. Unlike the other fields it applies
	// whether or not ctx has a deadline.
	CreateRetry time.Duration
	// Lookup bounds Get (Attach, Refresh) and a whole List, all its pages
	// together, leaving out the time the caller's loop spends between
	// pages (default 10s).
	Lookup time.Duration
	// Destroy bounds Destroy (default 1m).
	Destroy time.Duration
	// Lease bounds SetTimeout and SetNetwork (default 1m).
	Lease time.Duration
	// Pause bounds Pause (default 1m).
	Pause time.Duration
	// Resume bounds Resume (default 2m: waking a stopped sandbox is a start).
	Resume time.Duration
	// Snapshot bounds Sandbox.Snapshot, the snapshot step of Fork and a
	// provider's native fork (default 10m: a copy of a large home takes a
	// while); each create of a Fork through a snapshot gets Create's.
	Snapshot time.Duration
	// ExecGrace is added to a command's timeout to bound Exec
	// (default 30s).
	ExecGrace time.Duration
	// Idle ends an Upload or Download during which no bytes moved for
	// this long (default 2m).
	Idle time.Duration
}

// DefaultCallTimeouts returns the bounds a Client applies unless
// WithCallTimeouts changes them.
func DefaultCallTimeouts() CallTimeouts {
	return CallTimeouts{
		Create: 2 * time.Minute, CreateRetry: 2 * time.Minute, Lookup: 10 * time.Second, Destroy: time.Minute, Lease: time.Minute,
		Pause: time.Minute, Resume: 2 * time.Minute, Snapshot: 10 * time.Minute, ExecGrace: 30 * time.Second, Idle: 2 * time.Minute,
	}
}

// WithCallTimeouts overrides the default bounds of provider calls made
// with a context that has no deadline. Zero fields keep their defaults;
// negative fields turn that bound off.
func WithCallTimeouts(t CallTimeouts) Option { return func(o *options) { o.calls = t } }

// CallTimeouts returns the bounds the Client applies (see WithCallTimeouts);
// a negative field is a bound turned off.
func (c *Client) CallTimeouts() CallTimeouts { return c.calls }

func (t CallTimeouts) withDefaults() CallTimeouts {
	d := DefaultCallTimeouts()
	for _, f := range []struct{ v, def *time.Duration }{
		{&t.Create, &d.Create}, {&t.CreateRetry, &d.CreateRetry}, {&t.Lookup, &d.Lookup}, {&t.Destroy, &d.Destroy}, {&t.Lease, &d.Lease},
		{&t.Pause, &d.Pause}, {&t.Resume, &d.Resume}, {&t.Snapshot, &d.Snapshot}, {&t.ExecGrace, &d.ExecGrace}, {&t.Idle, &d.Idle},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	return t
}

// boundError is the cause of a context ended by a default bound.
type boundError struct {
	op   string
	d    time.Duration
	idle bool
}

func (e *boundError) Error() string {
	if e.idle {
		return fmt.Sprintf("%s made no progress for %v (the default idle bound; the context had no deadline; see WithCallTimeouts)", e.op, e.d)
	}
	return fmt.Sprintf("no answer to %s within %v (the default bound; the context had no deadline; see WithCallTimeouts)", e.op, e.d)
}

// Unwrap makes the cause match context.DeadlineExceeded (Code DeadlineExceeded).
func (e *boundError) Unwrap() error { return context.DeadlineExceeded }

// bound returns ctx limited to d when ctx has no deadline and d > 0, and
// end, which releases it and returns err, explained when the bound (not
// the caller's ctx) ended the call. Call end exactly once.
func bound(ctx context.Context, op string, d time.Duration) (bctx context.Context, end func(error) error) {
	if _, ok := ctx.Deadline(); ok || d <= 0 {
		return ctx, func(err error) error { return err }
	}
	bctx, cancel := context.WithTimeoutCause(ctx, d, &boundError{op: op, d: d})
	return bctx, func(err error) error {
		err = explain(ctx, bctx, err)
		cancel()
		return err
	}
}

// boundLeft is bound for one step of a call made of several (the pages of
// a List): the steps share one bound d, of which spent is used up. When
// none is left the step's ctx has ended already, with the bound as cause.
func boundLeft(ctx context.Context, op string, d, spent time.Duration) (bctx context.Context, end func(error) error) {
	if _, ok := ctx.Deadline(); ok || d <= 0 {
		return ctx, func(err error) error { return err }
	}
	bctx, cancel := context.WithTimeoutCause(ctx, max(d-spent, 0), &boundError{op: op, d: d})
	return bctx, func(err error) error {
		err = explain(ctx, bctx, err)
		cancel()
		return err
	}
}

// explain replaces a bare context error caused by a default bound (bctx
// ended, the caller's ctx did not) with one that also says why.
func explain(ctx, bctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil || bctx.Err() == nil {
		return err
	}
	var be *boundError
	cause := context.Cause(bctx)
	if cause == nil || cause == bctx.Err() || errors.As(err, &be) {
		return err
	}
	var se *Error
	if errors.As(err, &se) && se == err {
		cp := *se
		cp.Err = fmt.Errorf("%w: %w", cause, se.Err)
		cp.Code = DeadlineExceeded
		return &cp
	}
	return Errorf(DeadlineExceeded, "%w: %w", cause, err)
}

// idleBound returns a context that ends when touch has not been called
// for d, if ctx has no deadline and d > 0. stop releases it.
func idleBound(ctx context.Context, op string, d time.Duration) (bctx context.Context, touch, stop func()) {
	if _, ok := ctx.Deadline(); ok || d <= 0 {
		return ctx, func() {}, func() {}
	}
	bctx, cancel := context.WithCancelCause(ctx)
	t := time.AfterFunc(d, func() { cancel(&boundError{op: op, d: d, idle: true}) })
	return bctx, func() { t.Reset(d) }, func() { t.Stop(); cancel(nil) }
}
