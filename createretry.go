package sandbox

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

// RetryDelayer is implemented by provider errors that carry the delay the
// service asked for before a new attempt (an HTTP Retry-After). Create
// waits at least that long before retrying.
type RetryDelayer interface {
	RetryDelay() time.Duration
}

// createRetryable reports whether a failed create may succeed if sent
// again: the provider answered that it has no room now (rate limit, no
// capacity: ResourceExhausted) or could not serve the request
// (Unavailable), and nothing may have been created. A missing template,
// bad credentials or invalid input are never retried, nor is a create
// whose outcome is unknown.
func createRetryable(err error) bool {
	if errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	switch CodeOf(err) {
	case ResourceExhausted, Unavailable:
		return true
	}
	return false
}

// Backoff of create retries: full jitter over an exponential ceiling.
const (
	createRetryBase = time.Second
	createRetryMax  = 30 * time.Second
)

// retryingCreate wraps mk so that a transient failure is retried with
// jittered exponential backoff, honouring the provider's Retry-After,
// for as long as the next attempt can start within ctx's deadline and
// CallTimeouts.CreateRetry of the first attempt.
func (c *Client) retryingCreate(ctx context.Context, mk createFunc) createFunc {
	budget := c.calls.CreateRetry
	if budget <= 0 {
		return mk
	}
	return func(_ context.Context, req *driver.CreateRequest) (driver.Info, bool, error) {
		stop := time.Now().Add(budget)
		if dl, ok := ctx.Deadline(); ok && dl.Before(stop) {
			stop = dl
		}
		ceiling := createRetryBase
		for attempt := 1; ; attempt++ {
			info, created, err := mk(ctx, req)
			if err == nil || info.ID != "" || !createRetryable(err) || ctx.Err() != nil {
				return info, created, err
			}
			wait := rand.N(ceiling + 1)
			var rd RetryDelayer
			if errors.As(err, &rd) {
				wait = max(wait, rd.RetryDelay())
			}
			if time.Now().Add(wait).After(stop) {
				return info, created, err
			}
			c.log.Info("sandbox: create failed for a transient reason; retrying", "provider", c.rt.Name(), "attempt", attempt, "in", wait, "code", CodeOf(err))
			c.tel.createRetry(ctx, attempt, wait, err)
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return info, created, err
			case <-t.C:
			}
			ceiling = min(ceiling*2, createRetryMax)
		}
	}
}
