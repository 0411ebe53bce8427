package e2b

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/process"
	"github.com/sandboxkit/sandbox/sberrors"
	"google.golang.org/protobuf/proto"
)

// The two process streams every exec and attach opens (process.Process
// Start and Connect) are read by eventStream rather than by connect-go's
// generic client: per call, that client cost as much CPU as the rest of
// the adapter and the portable layer together (about 20 us of a 150 us
// exec on e2bfake). eventStream speaks the same protocol (Connect
// server streaming with the JSON codec, no compression, as the official
// SDKs do) and reports failures as *connect.Error values, so callers
// classify them with the same code paths as the generated clients'. The
// codes follow connect-go's where it matters to those callers, with these
// differences: a stream that breaks after the response began (a reset, an
// end of body without the end-of-stream message, an oversized message) is
// Unavailable, since the request was read and may have been acted on; a
// message that cannot be decoded is Internal; any answer that is not a
// Connect JSON stream (another content type, compression) is Unknown. Err
// tells an error the server sent in the end-of-stream message (Remote)
// from one found while reading. Every other RPC goes through the
// generated clients.

// maxEnvelope bounds one stream message (envd sends output in chunks of
// at most 32 KiB, about 44 KiB as base64 JSON).
const maxEnvelope = 16 << 20

// eventStream is one open Connect server stream of process events.
type eventStream struct {
	ctx    context.Context
	body   io.ReadCloser
	ev     *process.ProcessEvent
	err    error
	remote bool // err came from the server's end-of-stream message
	done   bool
	hdr    [5]byte
	buf    []byte
}

// errEncode marks a request that could not be encoded: nothing was sent.
var errEncode = errors.New("the request cannot be encoded")

// openEvents sends one server-streaming request (procedure is
// "/process.Process/Start" or "/process.Process/Connect") carrying msg,
// with the headers in h, and returns the stream once the response headers
// have arrived. ctx bounds the whole stream; its deadline is sent as
// Connect-Timeout-Ms, which is how envd learns a command's timeout, unless
// h already holds that header.
func (r *Runtime) openEvents(ctx context.Context, base, procedure string, msg proto.Message, h http.Header) (*eventStream, error) {
	payload, err := jsonCodec{}.Marshal(msg)
	if err != nil {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "e2b: %w: %v", errEncode, err)
	}
	body := make([]byte, 5+len(payload))
	binary.BigEndian.PutUint32(body[1:5], uint32(len(payload)))
	copy(body[5:], payload)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+procedure, bytes.NewReader(body))
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	req.Header = h
	h["Content-Type"] = connectJSON
	h["Connect-Protocol-Version"] = connectVersion
	h["Accept-Encoding"] = identity
	h["User-Agent"] = userAgent
	if dl, ok := ctx.Deadline(); ok && h["Connect-Timeout-Ms"] == nil {
		ms := time.Until(dl).Milliseconds()
		if ms <= 0 {
			return nil, connect.NewError(connect.CodeDeadlineExceeded, context.DeadlineExceeded)
		}
		h["Connect-Timeout-Ms"] = []string{strconv.FormatInt(min(ms, 9_999_999_999), 10)}
	}
	resp, err := r.rpcDoer.send(req) // the body is a bytes.Reader: no copy needed
	if err != nil {
		return nil, streamErr(ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		return nil, connect.NewError(codeForHTTP(resp.StatusCode), fmt.Errorf("HTTP status %s", resp.Status))
	}
	if ct := resp.Header.Get("Content-Type"); ct != connectJSON[0] {
		_ = resp.Body.Close()
		return nil, connect.NewError(connect.CodeUnknown, fmt.Errorf("invalid content-type %q; expecting %q", ct, connectJSON[0]))
	}
	if enc := resp.Header.Get("Connect-Content-Encoding"); enc != "" && enc != "identity" {
		_ = resp.Body.Close()
		return nil, connect.NewError(connect.CodeUnknown, fmt.Errorf("unexpected message compression %q", enc))
	}
	return &eventStream{ctx: ctx, body: resp.Body}, nil
}

var (
	connectJSON    = []string{"application/connect+json"}
	connectVersion = []string{"1"}
	identity       = []string{"identity"}
	userAgent      = []string{"sandboxkit-e2b"}
)

// codeForHTTP maps an unexpected HTTP status of a Connect stream onto a
// code, as the Connect protocol (and connect-go) do.
func codeForHTTP(status int) connect.Code {
	switch status {
	case 400:
		return connect.CodeInternal
	case 401:
		return connect.CodeUnauthenticated
	case 403:
		return connect.CodePermissionDenied
	case 404:
		return connect.CodeUnimplemented
	case 429, 502, 503, 504:
		return connect.CodeUnavailable
	}
	return connect.CodeUnknown
}

// streamErr turns a transport failure into a *connect.Error, keeping err
// in the chain (a statusError from envdTransport, a url.Error) for the
// classification of envdErr.
func streamErr(ctx context.Context, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	// The deadline is checked by the clock too: a stream reset at the
	// deadline can be seen before ctx's timer has fired.
	dl, hasDeadline := ctx.Deadline()
	switch ctxErr := ctx.Err(); {
	case errors.Is(ctxErr, context.DeadlineExceeded), ctxErr == nil && hasDeadline && !time.Now().Before(dl):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	case ctxErr != nil:
		return connect.NewError(connect.CodeCanceled, err)
	}
	return connect.NewError(connect.CodeUnavailable, err)
}

// Receive reads the next event; it returns false at the end of the
// stream or on failure (see Err).
func (s *eventStream) Receive() bool {
	for !s.done {
		flags, msg, err := s.next()
		if err != nil {
			s.fail(err)
			return false
		}
		if flags&0x02 != 0 {
			s.done = true
			s.err, s.remote = endStreamErr(msg)
			// Read the body to its end, as connect-go does, so that the
			// connection goes back to the pool. The result is complete:
			// what follows (nothing, or a failure) does not change it.
			_, _ = io.Copy(io.Discard, io.LimitReader(s.body, 512))
			return false
		}
		if flags != 0 {
			s.fail(connect.NewError(connect.CodeInternal, fmt.Errorf("protocol error: envelope flags %#x (compression was not negotiated)", flags)))
			return false
		}
		if len(msg) == 0 {
			continue // an empty message: an event with nothing set
		}
		var m process.StartResponse
		if err := (jsonCodec{}).Unmarshal(msg, &m); err != nil {
			s.fail(connect.NewError(connect.CodeInternal, fmt.Errorf("unmarshal message: %w", err)))
			return false
		}
		if m.GetEvent() == nil {
			continue
		}
		s.ev = m.GetEvent()
		return true
	}
	return false
}

// next reads one envelope: its flags and its message.
func (s *eventStream) next() (byte, []byte, error) {
	if _, err := io.ReadFull(s.body, s.hdr[:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // the stream must end with its end-of-stream message
		}
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(s.hdr[1:])
	if n > maxEnvelope {
		return 0, nil, fmt.Errorf("message of %d bytes exceeds %d", n, maxEnvelope)
	}
	if cap(s.buf) < int(n) {
		s.buf = make([]byte, n)
	}
	s.buf = s.buf[:n]
	if _, err := io.ReadFull(s.body, s.buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return s.hdr[0], s.buf, nil
}

func (s *eventStream) fail(err error) {
	s.done = true
	var ce *connect.Error
	if errors.As(err, &ce) {
		s.err = err
		return
	}
	s.err = streamErr(s.ctx, err)
}

// endStreamErr reads the end-of-stream message, {} or {"error": {...}};
// remote reports an error the server sent.
func endStreamErr(msg []byte) (err error, remote bool) {
	var end struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg, &end); err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("unmarshal end of stream: %w", err)), false
	}
	if end.Error == nil {
		return nil, false
	}
	var code connect.Code
	if err := code.UnmarshalText([]byte(end.Error.Code)); err != nil || code < connect.CodeCanceled || code > connect.CodeUnauthenticated {
		code = connect.CodeUnknown
	}
	return connect.NewError(code, errors.New(end.Error.Message)), true
}

func (s *eventStream) event() *process.ProcessEvent { return s.ev }

// Err is the stream's failure: nil after a clean end.
func (s *eventStream) Err() error { return s.err }

// Remote reports that Err is an error the server sent.
func (s *eventStream) Remote() bool { return s.remote }

// Close ends the stream.
func (s *eventStream) Close() error { return s.body.Close() }
