package daytonafake_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// dialPty connects to a PTY session's WebSocket and returns the
// connection and the daemon's first (control) message.
func (r *raw) dialPty(ctx context.Context, id, sid string) (*websocket.Conn, map[string]string) {
	r.t.Helper()
	u := "ws" + strings.TrimPrefix(r.tb(id), "http") + "/process/pty/" + sid + "/connect"
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: r.hc,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + r.key}}})
	if err != nil {
		r.t.Fatalf("dial %s: %v", u, err)
	}
	typ, b, err := c.Read(ctx)
	if err != nil || typ != websocket.MessageText {
		r.t.Fatalf("first message: %v %v %q", typ, err, b)
	}
	var ctl map[string]string
	if err := json.Unmarshal(b, &ctl); err != nil {
		r.t.Fatalf("first message %q: %v", b, err)
	}
	return c, ctl
}

// The PTY API answers as the daemon: 201 {sessionId}, 409 for an id in
// use, a control message first on the WebSocket, output as binary
// messages, input from any message, and on exit a close frame carrying
// the exit code, after which the session is gone (GET 404, resize 410,
// connect an error control message).
func TestPtyProtocol(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := newRaw(t)
	id := r.create(nil)
	st, body := r.json("POST", r.tb(id)+"/process/pty", map[string]any{"id": "p1", "cols": 100, "rows": 30})
	if st != 201 || body["sessionId"] != "p1" {
		t.Fatalf("create: %d %v", st, body)
	}
	if st, body := r.json("POST", r.tb(id)+"/process/pty", map[string]any{"id": "p1"}); st != 409 || !strings.Contains(body["error"].(string), "already exists") {
		t.Errorf("duplicate id: %d %v, want 409", st, body)
	}
	if st, _ := r.json("POST", r.tb(id)+"/process/pty", map[string]any{"id": "p2", "cols": 1001}); st != 400 {
		t.Errorf("cols 1001: %d, want 400", st)
	}
	if st, info := r.json("GET", r.tb(id)+"/process/pty/p1", nil); st != 200 || info["active"] != true || info["cols"] != 100.0 ||
		info["envs"].(map[string]any)["TERM"] != "xterm-256color" {
		t.Errorf("GET: %d %v", st, info)
	}
	c, ctl := r.dialPty(ctx, id, "p1")
	defer c.CloseNow()
	if ctl["type"] != "control" || ctl["status"] != "connected" {
		t.Fatalf("control message %v", ctl)
	}
	if st, info := r.json("POST", r.tb(id)+"/process/pty/p1/resize", map[string]any{"cols": 120, "rows": 40}); st != 200 || info["cols"] != 120.0 {
		t.Errorf("resize: %d %v", st, info)
	}
	if err := c.Write(ctx, websocket.MessageText, []byte("stty size; echo out-$((40+2)); exit 3\r")); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var cerr error
	for {
		typ, b, err := c.Read(ctx)
		if err != nil {
			cerr = err
			break
		}
		if typ != websocket.MessageBinary {
			t.Errorf("output as a %v message, want binary", typ)
		}
		out.Write(b)
	}
	if !strings.Contains(out.String(), "40 120") || !strings.Contains(out.String(), "out-42") {
		t.Errorf("output %q: want the new size and out-42", out.String())
	}
	var ce websocket.CloseError
	if !errors.As(cerr, &ce) || ce.Code != websocket.StatusInternalError {
		t.Fatalf("close: %v, want a close frame 1011", cerr)
	}
	var x struct {
		ExitCode   int    `json:"exitCode"`
		ExitReason string `json:"exitReason"`
	}
	if err := json.Unmarshal([]byte(ce.Reason), &x); err != nil || x.ExitCode != 3 || x.ExitReason != "non-zero exit" {
		t.Errorf("close reason %q: want exitCode 3", ce.Reason)
	}
	// The exited session is gone.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _ := r.json("GET", r.tb(id)+"/process/pty/p1", nil)
		if st == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET after the exit: %d, want 404", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st, _ := r.json("POST", r.tb(id)+"/process/pty/p1/resize", map[string]any{"cols": 80, "rows": 24}); st != 410 {
		t.Errorf("resize after the exit: %d, want 410", st)
	}
	c2, ctl := r.dialPty(ctx, id, "p1")
	c2.CloseNow()
	if ctl["status"] != "error" || !strings.Contains(ctl["error"], "not found") {
		t.Errorf("connect after the exit: %v, want an error control message", ctl)
	}
	// DELETE kills: the client gets exit code 137.
	if st, _ := r.json("POST", r.tb(id)+"/process/pty", map[string]any{"id": "p3"}); st != 201 {
		t.Fatalf("create p3: %d", st)
	}
	c3, _ := r.dialPty(ctx, id, "p3")
	defer c3.CloseNow()
	if st, body := r.json("DELETE", r.tb(id)+"/process/pty/p3", nil); st != 200 || body["message"] != "PTY session deleted" {
		t.Errorf("DELETE: %d %v", st, body)
	}
	for {
		if _, _, err := c3.Read(ctx); err != nil {
			if !errors.As(err, &ce) || !strings.Contains(ce.Reason, `"exitCode":137`) {
				t.Errorf("after DELETE: %v, want exitCode 137", err)
			}
			break
		}
	}
	if st, _ := r.json("DELETE", r.tb(id)+"/process/pty/p3", nil); st != 404 {
		t.Errorf("second DELETE: %d, want 404", st)
	}
}
