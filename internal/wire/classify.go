package wire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"

	"github.com/sandboxkit/sandbox/sberrors"
)

// Classify is the one transport classifier of the HTTP adapters: it turns
// err, the failure of a request that got no HTTP response, into the error a
// driver returns. prefix starts the message ("e2b: exec"); a is the
// request's Attempt (nil when it was not traced) and counting whether its
// transport counts writes (see Attempt.NotSent); mutating whether the
// request may change something.
//
//   - ctx ended: ctx's error, so the caller sees Canceled or DeadlineExceeded;
//   - not one byte left (a.NotSent): sberrors.ErrStaleTransport, which the
//     portable layer retries once after resetting the transport;
//   - a mutating request that may have been read: sberrors.ErrOutcomeUnknown,
//     never retried;
//   - otherwise: sberrors.ErrUnavailable.
//
// The decision rests on facts about the connection, never on error text.
// A *url.Error is unwrapped first: its URL is noise, and may carry a token.
func Classify(ctx context.Context, prefix string, a *Attempt, counting, mutating bool, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s: %w", prefix, ctxErr)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	switch {
	case a.NotSent(err, counting):
		return fmt.Errorf("%s: %w: %w", prefix, sberrors.ErrStaleTransport, err)
	case mutating:
		return fmt.Errorf("%s: %w: %w", prefix, sberrors.ErrOutcomeUnknown, err)
	default:
		return fmt.Errorf("%s: %w: %w", prefix, sberrors.ErrUnavailable, err)
	}
}

// Closed reports whether err says the transport was dead before the
// request was sent: a driver's sberrors.ErrStaleTransport, a connection
// already closed on this side (net.ErrClosed) or refused (nothing was
// listening, so nothing ran). The portable layer retries an idempotent
// call once on these; it reads facts, not error text.
func Closed(err error) bool {
	return err != nil && (errors.Is(err, sberrors.ErrStaleTransport) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNREFUSED))
}
