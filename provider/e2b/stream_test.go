package e2b

import (
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/process"
)

func envelope(flags byte, msg string) string {
	var h [5]byte
	h[0] = flags
	binary.BigEndian.PutUint32(h[1:], uint32(len(msg)))
	return string(h[:]) + msg
}

// TestEventStream reads crafted Connect streams: every way a stream can
// end must give the events before it and the code connect-go would give.
func TestEventStream(t *testing.T) {
	t.Parallel()
	start := envelope(0, `{"event":{"start":{"pid":7}}}`)
	out := envelope(0, `{"event": {"data": {"stdout": "aGk="}}}`)
	end := envelope(0, `{"event":{"end":{"exitCode":3, "exited":true}}}`)
	cases := []struct {
		name   string
		status int
		body   string
		events int
		code   connect.Code // 0: Err() is nil
	}{
		{"clean", 200, start + out + end + envelope(2, `{}`), 3, 0},
		{"end with error code", 200, start + envelope(2, `{"error":{"code":"deadline_exceeded","message":"too slow"}}`), 1, connect.CodeDeadlineExceeded},
		{"unknown code", 200, start + envelope(2, `{"error":{"code":"weird","message":"x"}}`), 1, connect.CodeUnknown},
		{"code out of range", 200, start + envelope(2, `{"error":{"code":"code_99","message":"x"}}`), 1, connect.CodeUnknown},
		{"empty message", 200, start + envelope(0, "") + end + envelope(2, `{}`), 2, 0},
		{"data after the end", 200, start + envelope(2, `{}`) + "x", 1, 0},
		{"error code then data", 200, envelope(2, `{"error":{"code":"invalid_argument","message":"cwd"}}`) + "x", 0, connect.CodeInvalidArgument},
		{"truncated", 200, start + out[:7], 1, connect.CodeUnavailable},
		{"no end of stream", 200, start + end, 2, connect.CodeUnavailable},
		{"compressed", 200, start + envelope(1, "xx"), 1, connect.CodeInternal},
		{"bad message", 200, envelope(0, `{"event":`), 0, connect.CodeInternal},
		{"bad end", 200, envelope(2, `nope`), 0, connect.CodeInternal},
		{"huge", 200, "\x00\xff\xff\xff\xff", 0, connect.CodeUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Content-Type") != "application/connect+json" || r.Header.Get("X-Test") != "1" {
					http.Error(w, "bad request headers", 415)
					return
				}
				if ms := r.Header.Get("Connect-Timeout-Ms"); ms == "" || ms == "0" {
					http.Error(w, "no timeout", 400)
					return
				}
				w.Header().Set("Content-Type", "application/connect+json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			r := newTestRuntime(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := r.openEvents(ctx, srv.URL, "/process.Process/Start", &process.StartRequest{Process: &process.ProcessConfig{Cmd: "true"}}, http.Header{"X-Test": {"1"}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			n := 0
			for s.Receive() {
				n++
			}
			if n != tc.events {
				t.Errorf("read %d events, want %d", n, tc.events)
			}
			if got := connect.CodeOf(s.Err()); (tc.code == 0) != (s.Err() == nil) || (tc.code != 0 && got != tc.code) {
				t.Errorf("Err() = %v (code %v), want code %v", s.Err(), got, tc.code)
			}
			// Only an error in the end-of-stream message is the server's.
			if wantRemote := strings.Contains(tc.name, "code"); s.Remote() != wantRemote {
				t.Errorf("Remote() = %v, want %v", s.Remote(), wantRemote)
			}
		})
	}
}

// TestEventStreamRefused covers answers that are not a stream at all.
func TestEventStreamRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status int
		ctype  string
		code   connect.Code
	}{
		{404, "text/plain", connect.CodeUnimplemented},
		{400, "text/plain", connect.CodeInternal},
		{200, "application/json", connect.CodeUnknown},
	}
	for _, tc := range cases {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", tc.ctype)
			w.WriteHeader(tc.status)
		}))
		r := newTestRuntime(t)
		_, err := r.openEvents(context.Background(), srv.URL, "/process.Process/Start", &process.StartRequest{}, http.Header{})
		srv.Close()
		if got := connect.CodeOf(err); got != tc.code {
			t.Errorf("HTTP %d %s: code %v (%v), want %v", tc.status, tc.ctype, got, err, tc.code)
		}
	}
}

// TestEventStreamContext checks that an ended context ends a stream
// waiting for events with the context's code.
func TestEventStreamContext(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/connect+json")
		_, _ = w.Write([]byte(envelope(0, `{"event":{"start":{"pid":7}}}`)))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	r := newTestRuntime(t)
	// The deadline passes once the start event is in, not after a fixed
	// time: on a loaded host a fixed one passed before the stream opened.
	ctx := &passableDeadline{done: make(chan struct{})}
	s, err := r.openEvents(ctx, srv.URL, "/process.Process/Start", &process.StartRequest{}, http.Header{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Receive() || s.event().GetStart().GetPid() != 7 {
		t.Fatalf("no start event: %v", s.Err())
	}
	close(ctx.done)
	if s.Receive() {
		t.Fatal("an event after the start")
	}
	if connect.CodeOf(s.Err()) != connect.CodeDeadlineExceeded || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("Err() = %v, want deadline_exceeded", s.Err())
	}
	if _, err := r.openEvents(ctx, srv.URL, "/x", &process.StartRequest{}, http.Header{}); connect.CodeOf(err) != connect.CodeDeadlineExceeded {
		t.Errorf("open after the deadline: %v", err)
	}
}

// passableDeadline is a context whose deadline passes when done is
// closed.
type passableDeadline struct {
	done chan struct{}
}

func (c *passableDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *passableDeadline) Done() <-chan struct{}       { return c.done }
func (c *passableDeadline) Value(key any) any           { return nil }
func (c *passableDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func newTestRuntime(t *testing.T) *Runtime {
	t.Helper()
	r, err := New(WithAPIKey("e2b_00"), WithAPIURL("http://127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}
