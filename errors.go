package sandbox

import (
	"fmt"

	"github.com/sandboxkit/sandbox/sberrors"
)

// Code classifies an error independently of the provider that produced it.
// Use [CodeOf] to read the Code of any error. It is defined in package
// sberrors, which drivers use without importing this package.
type Code = sberrors.Code

// The codes, modelled on gocloud.dev/gcerrors and gRPC status codes; see
// package sberrors for what each means.
const (
	OK                 = sberrors.OK
	Unknown            = sberrors.Unknown
	NotFound           = sberrors.NotFound
	AlreadyExists      = sberrors.AlreadyExists
	InvalidArgument    = sberrors.InvalidArgument
	PermissionDenied   = sberrors.PermissionDenied
	FailedPrecondition = sberrors.FailedPrecondition
	Unimplemented      = sberrors.Unimplemented
	ResourceExhausted  = sberrors.ResourceExhausted
	Unavailable        = sberrors.Unavailable
	DeadlineExceeded   = sberrors.DeadlineExceeded
	Canceled           = sberrors.Canceled
	Internal           = sberrors.Internal
)

// Sentinel errors for errors.Is; they are the values of package sberrors
// (see there for what each reports), so a driver's error that wraps one
// matches here. Every *Error matches the sentinel of its Code.
var (
	ErrNotFound           = sberrors.ErrNotFound
	ErrAlreadyExists      = sberrors.ErrAlreadyExists
	ErrInvalidArgument    = sberrors.ErrInvalidArgument
	ErrPermission         = sberrors.ErrPermission
	ErrFailedPrecondition = sberrors.ErrFailedPrecondition
	ErrUnimplemented      = sberrors.ErrUnimplemented
	ErrLimit              = sberrors.ErrLimit
	ErrUnavailable        = sberrors.ErrUnavailable
	ErrInternal           = sberrors.ErrInternal
	ErrPaused             = sberrors.ErrPaused
	ErrPathEscape         = sberrors.ErrPathEscape
	ErrIsDirectory        = sberrors.ErrIsDirectory
	ErrNotDirectory       = sberrors.ErrNotDirectory
	ErrOutcomeUnknown     = sberrors.ErrOutcomeUnknown
	ErrClosed             = sberrors.ErrClosed
	ErrLeaseExpired       = sberrors.ErrLeaseExpired
	// ErrStaleTransport reports a call that failed before the provider could
	// have acted on it; the portable layer resets the transport and retries
	// such a call once, so callers see it only when the retry failed too.
	ErrStaleTransport = sberrors.ErrStaleTransport
)

// Error is the error type of every method of Client, Sandbox and Process:
// the operation, where it failed, the classified Code and the cause.
type Error = sberrors.Error

// CodeOf returns the Code of err: OK for nil, the Code of the first *Error
// or sentinel in its chain, the matching code for context and io/fs errors,
// and Unknown otherwise.
func CodeOf(err error) Code { return sberrors.CodeOf(err) }

// Errorf returns an error of the given code whose message is formatted from
// format and args; it matches the code's sentinel with errors.Is.
func Errorf(code Code, format string, args ...any) error {
	return sberrors.Errorf(code, format, args...)
}

// invalid builds the InvalidArgument *Error for a bad input named name.
func invalid(op, provider, id, name, format string, args ...any) error {
	return &Error{Op: op, Provider: provider, SandboxID: id, Code: InvalidArgument,
		Err: Errorf(InvalidArgument, "invalid %s: %s", name, fmt.Sprintf(format, args...))}
}
