// Package sberrors holds the error codes and sentinel errors that both
// layers of the module use: the portable layer (package sandbox, whose
// Client and Sandbox return *Error) and the drivers under provider/, which
// implement package driver and must not import package sandbox. It is a
// leaf, as gocloud.dev/gcerrors is: it imports nothing of the module but
// internal helpers.
//
// Package sandbox re-exports every name users need (Code, the codes, the
// sentinels, Error, CodeOf), so application code never has to import this
// package; drivers use it directly.
package sberrors

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/sandboxkit/sandbox/internal/errscrub"
	"github.com/sandboxkit/sandbox/internal/iox"
)

// Code classifies an error independently of the provider that produced it.
// Use [CodeOf] to read the Code of any error.
type Code int

// The codes, modelled on gocloud.dev/gcerrors and gRPC status codes.
const (
	// OK is the Code of a nil error.
	OK Code = iota
	// Unknown is the Code of an error no layer classified.
	Unknown
	// NotFound: the sandbox, file or process does not exist.
	NotFound
	// AlreadyExists: the thing to create exists already.
	AlreadyExists
	// InvalidArgument: the caller passed bad input; the message names it.
	InvalidArgument
	// PermissionDenied: credentials are missing or wrong, or access is forbidden.
	PermissionDenied
	// FailedPrecondition: the sandbox is not in a state that allows the call
	// (for example it is paused).
	FailedPrecondition
	// Unimplemented: the provider does not support the operation.
	Unimplemented
	// ResourceExhausted: a quota, rate limit or cap was hit.
	ResourceExhausted
	// Unavailable: the provider could not be reached; the call may be retried.
	Unavailable
	// DeadlineExceeded: the caller's context deadline passed.
	DeadlineExceeded
	// Canceled: the caller's context was canceled.
	Canceled
	// Internal: the provider failed in a way the caller cannot fix.
	Internal
)

var codeNames = [...]string{
	OK: "OK", Unknown: "Unknown", NotFound: "NotFound", AlreadyExists: "AlreadyExists",
	InvalidArgument: "InvalidArgument", PermissionDenied: "PermissionDenied",
	FailedPrecondition: "FailedPrecondition", Unimplemented: "Unimplemented",
	ResourceExhausted: "ResourceExhausted", Unavailable: "Unavailable",
	DeadlineExceeded: "DeadlineExceeded", Canceled: "Canceled", Internal: "Internal",
}

// String returns the name of the code, such as "NotFound".
func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// codeError is the type of the sentinel errors: each carries its Code.
type codeError struct {
	code Code
	msg  string
}

func (e *codeError) Error() string { return e.msg }

// Is lets a driver's error that wraps a sentinel match the io/fs sentinel
// of its Code too, as an *Error does: ErrNotFound matches fs.ErrNotExist,
// ErrAlreadyExists fs.ErrExist, ErrPermission fs.ErrPermission.
func (e *codeError) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.code == NotFound
	case fs.ErrExist:
		return e.code == AlreadyExists
	case fs.ErrPermission:
		return e.code == PermissionDenied
	}
	return false
}

// Sentinel errors for errors.Is. Every *Error matches the sentinel of its
// Code (an *Error with Code NotFound matches ErrNotFound), and drivers wrap
// the specific ones (ErrPaused, ErrStaleTransport, ...) into their errors with %w.
var (
	ErrNotFound           error = &codeError{NotFound, "not found"}
	ErrAlreadyExists      error = &codeError{AlreadyExists, "already exists"}
	ErrInvalidArgument    error = &codeError{InvalidArgument, "invalid argument"}
	ErrPermission         error = &codeError{PermissionDenied, "permission denied"}
	ErrFailedPrecondition error = &codeError{FailedPrecondition, "failed precondition"}
	ErrUnimplemented      error = &codeError{Unimplemented, "not implemented by this provider"}
	// ErrLimit reports a quota, rate limit or configured cap (ResourceExhausted).
	ErrLimit error = &codeError{ResourceExhausted, "limit reached"}
	// ErrUnavailable reports a provider that could not be reached (Unavailable).
	ErrUnavailable error = &codeError{Unavailable, "provider unavailable"}
	ErrInternal    error = &codeError{Internal, "internal provider error"}

	// ErrPaused reports a call on a paused (or stopped) sandbox that the
	// provider refuses until Resume (FailedPrecondition).
	ErrPaused error = &codeError{FailedPrecondition, "sandbox is paused"}
	// ErrPathEscape reports a path that would leave its jail (InvalidArgument).
	ErrPathEscape error = &codeError{InvalidArgument, "path escapes its root"}
	// ErrIsDirectory reports a file operation on a directory (FailedPrecondition).
	ErrIsDirectory error = &codeError{FailedPrecondition, "is a directory"}
	// ErrNotDirectory reports a directory operation on a file (FailedPrecondition).
	ErrNotDirectory error = &codeError{FailedPrecondition, "not a directory"}
	// ErrOutcomeUnknown reports a command or write whose request may have
	// reached the provider before the transport failed: it may or may not
	// have run, so it is never retried automatically (Unavailable).
	ErrOutcomeUnknown error = &codeError{Unavailable, "outcome unknown: the request may have been executed"}
	// ErrClosed reports a call on a closed Client or Process (FailedPrecondition).
	ErrClosed error = &codeError{FailedPrecondition, "closed"}
	// ErrLeaseExpired reports a command (or another call) that failed
	// because the sandbox's lease ended while it ran: the provider
	// destroyed the sandbox (NotFound, the Code of this sentinel) or, with
	// AutoPause, paused it (the error then has Code FailedPrecondition and
	// matches ErrPaused too). Extend the lease with SetTimeout, or create
	// the sandbox with a longer lease.
	//
	// The reason is the provider's when it can tell (local, memory: see
	// driver.Capabilities.ReportsLeaseEnd): a sandbox another handle
	// destroyed is then plain NotFound whatever lease end the handle knew.
	// For a provider that cannot tell (E2B, Daytona, docker) it is a best
	// guess from the lease end the handle knew: the sandbox was found gone,
	// or paused, after that end.
	ErrLeaseExpired error = &codeError{NotFound, "the sandbox's lease ended"}
)

// ErrStaleTransport is returned by drivers when a request could not have
// been admitted by the provider because the transport was already dead
// (a closed connection, an expired tunnel). The portable layer resets the
// transport and retries the call once. Like database/sql/driver.ErrBadConn,
// a driver must not return it when the provider may have acted.
var ErrStaleTransport = errors.New("stale transport: the request was not sent")

var codeSentinels = map[Code]error{
	NotFound: ErrNotFound, AlreadyExists: ErrAlreadyExists, InvalidArgument: ErrInvalidArgument,
	PermissionDenied: ErrPermission, FailedPrecondition: ErrFailedPrecondition,
	Unimplemented: ErrUnimplemented, ResourceExhausted: ErrLimit, Unavailable: ErrUnavailable,
	Internal: ErrInternal,
}

// Error is the error type of every method of Client, Sandbox and Process.
// It records the operation, where it failed and the classified Code; Err
// is the cause (a driver error, a context error, a sentinel) and is
// reachable with errors.Is and errors.As.
type Error struct {
	Op        string // "exec", "upload", "create", ...
	Provider  string // the Runtime's Name, e.g. "local"
	SandboxID string // empty for client-level operations
	Path      string // file path or other input the error is about, if any
	Code      Code
	Err       error
}

// The bounds of an error message: the Path is shown cut to maxShownPath
// bytes (with its length), as is every copy of it in the cause's text,
// and a cause's text over maxCauseText bytes is cut, so a long input (a
// path of a megabyte) never makes a message of a megabyte. The fields
// keep the whole values.
const (
	maxShownPath = 256
	maxCauseText = 8 << 10
)

// Error formats the error as "sandbox: op (provider) sandbox id "path":
// cause", with a long path and a long cause shortened (see maxShownPath).
// Each fact is said once: a fact the cause states already (the provider's
// name leading it, the sandbox id, the path) is left out of the prefix or
// cut from the cause, a cause that is itself an *Error leaves out what
// this one shows, a phrase repeated between colons is said once, and a
// trailing code text (": invalid argument") that the message already
// states is dropped.
func (e *Error) Error() string { return e.format(nil) }

// format renders e; outer, when non-nil, is the *Error whose cause e is,
// whose facts are shown already.
func (e *Error) format(outer *Error) string {
	var cause string
	switch inner := e.Err.(type) {
	case nil:
		cause = e.Code.String()
	case *Error:
		cause = inner.format(e)
	default:
		cause = e.Err.Error()
	}
	if e.Provider != "" {
		cause = strings.TrimPrefix(cause, e.Provider+": ")
	}
	cause = strings.TrimPrefix(cause, "sandbox: ")
	if e.SandboxID != "" {
		cause = strings.TrimPrefix(cause, "sandbox "+e.SandboxID+": ")
	}
	cause = dropRepeats(cause)
	if e.Err != nil {
		cause = dropCodeText(cause, e.Code)
	}
	if len(e.Path) > maxShownPath {
		cause = strings.ReplaceAll(cause, e.Path, iox.Shorten(e.Path, maxShownPath))
	}
	cause = iox.Shorten(cause, maxCauseText)

	var b strings.Builder
	if outer == nil {
		b.WriteString("sandbox: ")
	}
	if outer == nil || e.Op != outer.Op {
		b.WriteString(e.Op)
	}
	if e.Provider != "" && (outer == nil || e.Provider != outer.Provider) {
		b.WriteString(" (")
		b.WriteString(e.Provider)
		b.WriteString(")")
	}
	if e.SandboxID != "" && (outer == nil || e.SandboxID != outer.SandboxID) && !hasToken(cause, e.SandboxID) {
		b.WriteString(" sandbox ")
		b.WriteString(e.SandboxID)
	}
	if e.Path != "" && (outer == nil || e.Path != outer.Path) && !hasToken(cause, iox.Shorten(e.Path, maxShownPath)) {
		fmt.Fprintf(&b, " %q", iox.Shorten(e.Path, maxShownPath))
	}
	head := strings.TrimSpace(b.String())
	if head == "" {
		return cause
	}
	return head + ": " + cause
}

// hasToken reports whether s holds tok as a whole word: not as part of a
// longer name, path or id.
func hasToken(s, tok string) bool {
	if tok == "" {
		return false
	}
	for i := 0; ; {
		j := strings.Index(s[i:], tok)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(tok)
		if (j == 0 || !nameByte(s[j-1])) && (end == len(s) || !nameByte(s[end])) {
			return true
		}
		i = j + 1
	}
}

// nameByte reports whether c can continue a name, path or id.
func nameByte(c byte) bool {
	return c == '_' || c == '-' || c == '.' || c == '/' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// dropRepeats says once a phrase (two or more lower-case words, such as
// "invalid path" or "not found") that two layers both put between
// colons: "invalid path: "x": invalid path: empty" becomes
// "invalid path: "x": empty". Anything else (names, paths, quoted
// values) is kept as it is.
func dropRepeats(s string) string {
	parts := strings.Split(s, ": ")
	if len(parts) < 3 {
		return s
	}
	seen := map[string]bool{}
	out := parts[:0]
	for _, p := range parts {
		if phrase(p) {
			if seen[p] {
				continue
			}
			seen[p] = true
		}
		out = append(out, p)
	}
	return strings.Join(out, ": ")
}

// phrase reports whether s is two or more lower-case words (a single
// word may well be a name).
func phrase(s string) bool {
	if !strings.Contains(s, " ") || strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == ' ' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

// codeStated lists, per code, words by which a message states its code
// itself, besides the code's sentinel text.
var codeStated = map[Code][]string{
	InvalidArgument:   {"invalid", "must ", "empty", "too long", "negative"},
	NotFound:          {"not found", "no such", "not exist", "doesn't exist", "not_found"},
	AlreadyExists:     {"exist"},
	PermissionDenied:  {"denied", "forbidden", "not permitted", "unauthorized"},
	ResourceExhausted: {"limit", "quota", "too many", "too large", "exhausted"},
	Unavailable:       {"unavailable", "unreachable"},
	Unimplemented:     {"not implemented", "unimplemented", "not supported"},
}

// dropCodeText removes a trailing ": <sentinel text of code>" from s when
// the rest of s states the code already.
func dropCodeText(s string, code Code) string {
	sent, ok := codeSentinels[code]
	if !ok {
		return s
	}
	suffix := ": " + sent.Error()
	rest, found := strings.CutSuffix(s, suffix)
	if !found {
		return s
	}
	low := strings.ToLower(rest)
	if strings.Contains(low, sent.Error()) {
		return rest
	}
	for _, w := range codeStated[code] {
		if strings.Contains(low, w) {
			return rest
		}
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel of e's Code, or fs.ErrNotExist
// (for NotFound), fs.ErrExist (AlreadyExists) or fs.ErrPermission
// (PermissionDenied), so that file errors work with the io/fs idioms.
func (e *Error) Is(target error) bool {
	if s, ok := codeSentinels[e.Code]; ok && s == target {
		return true
	}
	switch target {
	case fs.ErrNotExist:
		return e.Code == NotFound
	case fs.ErrExist:
		return e.Code == AlreadyExists
	case fs.ErrPermission:
		return e.Code == PermissionDenied
	case fs.ErrInvalid:
		return e.Code == InvalidArgument
	}
	return false
}

// CodeOf returns the Code of err: OK for nil, the Code of the first *Error
// or sentinel in its chain, the matching code for context and io/fs errors,
// and Unknown otherwise.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var se *Error
	if errors.As(err, &se) && se.Code != Unknown {
		return se.Code
	}
	var cd *codedError
	if errors.As(err, &cd) {
		return cd.code
	}
	var ce *codeError
	if errors.As(err, &ce) {
		return ce.code
	}
	switch {
	case errors.Is(err, ErrStaleTransport):
		return Unavailable
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded
	case errors.Is(err, fs.ErrNotExist):
		return NotFound
	case errors.Is(err, fs.ErrExist):
		return AlreadyExists
	case errors.Is(err, fs.ErrPermission):
		return PermissionDenied
	case errors.Is(err, fs.ErrInvalid):
		return InvalidArgument
	}
	return Unknown
}

// Errorf returns an error of the given code whose message is formatted from
// format and args; it matches the code's sentinel with errors.Is. Drivers
// and the portable layer use it for errors they originate.
func Errorf(code Code, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if s, ok := codeSentinels[code]; ok {
		return &codedError{code: code, sentinel: s, err: err}
	}
	return &codedError{code: code, err: err}
}

type codedError struct {
	code     Code
	sentinel error
	err      error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() []error {
	if e.sentinel == nil {
		return []error{e.err}
	}
	return []error{e.err, e.sentinel}
}

// The portable layer's error types, rebuilt with redacted text by
// internal/errscrub: the chain a caller walks keeps the types and codes
// CodeOf and errors.As look for. Sentinels are fixed phrases, never user
// data, so they are kept as they are.
func init() {
	errscrub.Register(func(err error, kids []error, redact func(string) string) (error, bool) {
		switch e := err.(type) {
		case *Error:
			c := *e
			c.SandboxID, c.Path = redact(e.SandboxID), redact(e.Path)
			c.Err = nil
			if len(kids) > 0 {
				c.Err = kids[0]
			}
			return &c, true
		case *codedError:
			return &codedError{code: e.code, sentinel: e.sentinel, err: kids[0]}, true
		case *codeError:
			return e, true
		}
		return nil, false
	})
}
