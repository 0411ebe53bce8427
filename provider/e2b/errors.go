package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/wire"
	"github.com/sandboxkit/sandbox/sberrors"
)

// trace returns ctx carrying a trace that records where the request's
// bytes went.
func trace(ctx context.Context) (context.Context, *wire.Attempt) { return wire.Trace(ctx) }

// statusError is a plain (non-Connect) HTTP error from envd or the edge
// proxy: {"code": <int>, "message": "..."}.
type statusError struct {
	Status  int
	Message string
	// Proxy is true for the edge proxy's "sandbox not found" answer.
	Proxy bool
}

func (e *statusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
}

// envdTransport turns envd's and the proxy's plain JSON errors into a
// *statusError returned from RoundTrip, so Connect calls and /files
// classify them alike. Connect's own error bodies (string codes) pass.
type envdTransport struct{ next http.RoundTripper }

func (t *envdTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode < 400 {
		return resp, err
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
	default:
		return resp, nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Code      json.RawMessage `json:"code"`
		Message   string          `json:"message"`
		SandboxID string          `json:"sandboxId"`
	}
	jsonErr := json.Unmarshal(body, &e)
	isConnect := jsonErr == nil && len(e.Code) > 0 && e.Code[0] == '"'
	if isConnect {
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), resp.Body))
		return resp, nil
	}
	_ = resp.Body.Close()
	se := &statusError{Status: resp.StatusCode, Message: e.Message, Proxy: e.SandboxID != ""}
	if jsonErr != nil {
		se.Message = ""
	}
	return nil, se
}

// apiErr classifies a control-plane error response.
func apiErr(op string, status int, body []byte) error {
	var e struct {
		Message string `json:"message"`
	}
	msg := http.StatusText(status)
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		msg = e.Message
	}
	return sberrors.Errorf(codeForStatus(status), "e2b: %s: HTTP %d: %s", op, status, msg)
}

func codeForStatus(status int) sberrors.Code {
	switch {
	case status == http.StatusNotFound:
		return sberrors.NotFound
	case status == http.StatusConflict:
		return sberrors.FailedPrecondition
	case status == http.StatusTooManyRequests:
		return sberrors.ResourceExhausted
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return sberrors.PermissionDenied
	case status == http.StatusBadRequest:
		return sberrors.InvalidArgument
	case status == 507:
		return sberrors.ResourceExhausted
	case status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
		return sberrors.Unavailable
	}
	return sberrors.Internal
}

var connectCodes = map[connect.Code]sberrors.Code{
	connect.CodeCanceled: sberrors.Canceled, connect.CodeInvalidArgument: sberrors.InvalidArgument,
	connect.CodeDeadlineExceeded: sberrors.DeadlineExceeded, connect.CodeNotFound: sberrors.NotFound,
	connect.CodeAlreadyExists: sberrors.AlreadyExists, connect.CodePermissionDenied: sberrors.PermissionDenied,
	connect.CodeResourceExhausted: sberrors.ResourceExhausted, connect.CodeFailedPrecondition: sberrors.FailedPrecondition,
	connect.CodeAborted: sberrors.FailedPrecondition, connect.CodeUnimplemented: sberrors.Unimplemented,
	connect.CodeInternal: sberrors.Internal, connect.CodeUnavailable: sberrors.Unavailable,
	connect.CodeDataLoss: sberrors.Internal, connect.CodeUnauthenticated: sberrors.PermissionDenied,
	connect.CodeUnknown: sberrors.Internal,
}

// envdErr classifies a failed envd call on sandbox id. ctx is the
// caller's context; a reports whether the request can have been
// delivered. A proxy 502 is resolved with one control-plane lookup.
func (r *Runtime) envdErr(ctx context.Context, op, id string, a *wire.Attempt, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("e2b: %s: %w", op, ctxErr)
	}
	var se *statusError
	if errors.As(err, &se) {
		if se.Status == http.StatusBadGateway {
			return r.gone(ctx, op, id, se)
		}
		return sberrors.Errorf(codeForStatus(se.Status), "e2b: %s: %v", op, se)
	}
	if a.NotSent(err, r.counting) {
		return wire.Classify(ctx, "e2b: "+op, a, r.counting, false, err)
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		code, ok := connectCodes[ce.Code()]
		if !ok {
			code = sberrors.Internal
		}
		msg := ce.Message()
		if strings.HasSuffix(msg, ": argument list too long") {
			return tooLong(op, msg)
		}
		// envd's messages may echo a request (a path, a whole command):
		// a caller gets them bounded.
		msg = iox.Shorten(msg, maxMsg)
		switch {
		case strings.HasPrefix(msg, "cwd '") && strings.HasSuffix(msg, "' does not exist"):
			// Process.Start on a missing working directory: envd says
			// invalid_argument, the contract NotFound.
			return sberrors.Errorf(sberrors.NotFound, "e2b: %s: %s: %s", op, ce.Code(), msg)
		case strings.Contains(msg, "not a directory"):
			// ENOTDIR in envd's words, whatever the code it chose: MakeDir
			// through a file answers internal "error getting file info:
			// stat …: not a directory", a start in a file spawn-fails.
			return fmt.Errorf("e2b: %s: %s: %s: %w", op, ce.Code(), msg, sberrors.ErrNotDirectory)
		case code == sberrors.Internal && deniedMsg(msg):
			return sberrors.Errorf(sberrors.PermissionDenied, "e2b: %s: %s: %s", op, ce.Code(), msg)
		case code == sberrors.Internal && invalidMsg(msg):
			return sberrors.Errorf(sberrors.InvalidArgument, "e2b: %s: %s: %s", op, ce.Code(), msg)
		}
		return sberrors.Errorf(code, "e2b: %s: %s: %s", op, ce.Code(), msg)
	}
	return wire.Classify(ctx, "e2b: "+op, a, r.counting, false, err)
}

// gone classifies the edge proxy's 502: the sandbox is paused, gone, or
// running without envd answering.
func (r *Runtime) gone(ctx context.Context, op, id string, se *statusError) error {
	d, err := r.detail(ctx, id)
	switch {
	case sberrors.CodeOf(err) == sberrors.NotFound:
		r.forget(id)
		return fmt.Errorf("e2b: %s: sandbox %s no longer exists (%v): %w", op, id, se, sberrors.ErrNotFound)
	case err != nil:
		return sberrors.Errorf(sberrors.Unavailable, "e2b: %s: %v (and the sandbox could not be looked up: %v)", op, se, err)
	case d.State == "paused":
		return fmt.Errorf("e2b: %s: %w", op, pausedErr(id))
	}
	return sberrors.Errorf(sberrors.Unavailable, "e2b: %s: %v", op, se)
}

// invalidMsg reports whether an envd error message carries EINVAL (a
// directory moved into itself) or ENAMETOOLONG in Go's words: envd
// answers them as internal errors, but the caller's input is at fault.
func invalidMsg(msg string) bool {
	return strings.Contains(msg, "invalid argument") || strings.Contains(msg, "file name too long")
}

// deniedMsg reports whether an envd error message carries EACCES, EPERM or
// EROFS in Go's words: envd answers them as internal errors.
func deniedMsg(msg string) bool {
	return strings.Contains(msg, "permission denied") || strings.Contains(msg, "operation not permitted") ||
		strings.Contains(msg, "read-only file system")
}

// maxMsg bounds the part of an error message that comes from envd.
const maxMsg = 4 << 10

// Linux's limits on a program's arguments (fs/exec.c), as envd's exec
// meets them: one argument of at most MAX_ARG_STRLEN bytes with its NUL,
// and all of them and the environment within ARG_MAX with the usual 8 MiB
// stack.
const (
	maxArgStrlen = 128 << 10
	argMax       = 2 << 20
)

// tooLong is Start refused with E2BIG: envd's message ("error starting
// process '<the whole command>': fork/exec /bin/sh: argument list too
// long") can be megabytes long, so the error names the command's size and
// the limits instead.
func tooLong(op, msg string) error {
	size := len(msg)
	if cmd, ok := strings.CutPrefix(msg, "error starting process '"); ok {
		if i := strings.LastIndex(cmd, "': "); i >= 0 {
			size = len(cmd[:i])
		}
	}
	return sberrors.Errorf(sberrors.InvalidArgument,
		"e2b: %s: the command (%d bytes with its arguments) is over the kernel's limits on a program's arguments "+
			"(argument list too long: %d bytes per argument, %d in all with the environment); pass large data on Stdin or in a file",
		op, size, maxArgStrlen-1, argMax)
}
