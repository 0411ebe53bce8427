package daytonafake

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/toolbox"
)

// The markers the daemon puts before each chunk of a session command's
// output.
var (
	stdoutMark = []byte{1, 1, 1}
	stderrMark = []byte{2, 2, 2}
)

// session is a toolbox session. Each command runs as its own process (see
// the differences in doc.go).
type session struct {
	id     string
	ctx    context.Context
	cancel context.CancelFunc

	mu   sync.Mutex
	cmds map[string]*command
}

func (se *session) kill() { se.cancel() }

// command is one session command and its output.
type command struct {
	id, text string
	done     chan struct{}

	mu                  sync.Mutex
	raw, stdout, stderr bytes.Buffer
	exit                *int
}

type markWriter struct {
	c    *command
	mark []byte
	own  *bytes.Buffer
}

func (m markWriter) Write(p []byte) (int, error) {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	m.c.raw.Write(m.mark)
	m.c.raw.Write(p)
	m.own.Write(p)
	return len(p), nil
}

// splitOutput reports whether the client's SDK version asks for split
// output (0.167.0 and later, or a -dev build).
func splitOutput(r *http.Request) bool {
	v := strings.TrimPrefix(r.Header.Get("X-Daytona-SDK-Version"), "v")
	if v == "" {
		return false
	}
	if strings.Contains(v, "-dev") {
		return true
	}
	v, _, _ = strings.Cut(v, "-")
	parts := strings.Split(v, ".")
	var n [3]int
	for i := 0; i < 3 && i < len(parts); i++ {
		n[i], _ = strconv.Atoi(parts[i])
	}
	return n[0] > 0 || n[1] >= 167
}

func (t *tb) createSession() {
	var req toolbox.CreateSessionRequest
	if err := json.NewDecoder(t.r.Body).Decode(&req); err != nil || req.SessionId == "" {
		t.ginError(400, "BAD_REQUEST", "invalid request body")
		return
	}
	if req.SessionId == "entrypoint" {
		t.ginError(400, "BAD_REQUEST", "session ID 'entrypoint' is reserved")
		return
	}
	t.b.smu.Lock()
	defer t.b.smu.Unlock()
	if _, ok := t.b.sessions[req.SessionId]; ok {
		t.ginError(409, "CONFLICT", "conflict: session already exists")
		return
	}
	ctx, cancel := context.WithCancel(t.s.baseCtx)
	t.b.sessions[req.SessionId] = &session{id: req.SessionId, ctx: ctx, cancel: cancel, cmds: map[string]*command{}}
	t.w.WriteHeader(http.StatusCreated)
}

func (t *tb) session(id string) *session {
	t.b.smu.Lock()
	defer t.b.smu.Unlock()
	return t.b.sessions[id]
}

// sessionOp serves /process/session/{sid}[/...].
func (t *tb) sessionOp(parts []string) {
	se := t.session(parts[0])
	switch {
	case len(parts) == 1 && t.r.Method == http.MethodGet:
		if se == nil {
			t.ginError(404, "NOT_FOUND", "not found: session not found")
			return
		}
		out := toolbox.Session{SessionId: se.id, Commands: []toolbox.Command{}}
		se.mu.Lock()
		for _, c := range se.cmds {
			out.Commands = append(out.Commands, c.dto())
		}
		se.mu.Unlock()
		writeJSON(t.w, 200, out)
	case len(parts) == 1 && t.r.Method == http.MethodDelete:
		if se == nil {
			t.ginError(404, "NOT_FOUND", "not found: session not found")
			return
		}
		t.b.smu.Lock()
		delete(t.b.sessions, se.id)
		t.b.smu.Unlock()
		se.kill()
		t.w.WriteHeader(http.StatusNoContent)
	case len(parts) == 2 && parts[1] == "exec" && t.r.Method == http.MethodPost:
		t.sessionExec(se)
	case len(parts) >= 3 && parts[1] == "command" && t.r.Method == http.MethodGet:
		if se == nil {
			t.ginError(404, "NOT_FOUND", "not found: session not found")
			return
		}
		se.mu.Lock()
		c := se.cmds[parts[2]]
		se.mu.Unlock()
		if c == nil {
			t.ginError(404, "NOT_FOUND", "not found: command not found")
			return
		}
		if len(parts) == 3 {
			writeJSON(t.w, 200, c.dto())
			return
		}
		if len(parts) == 4 && parts[3] == "logs" {
			t.logs(c)
			return
		}
		emptyError(t.w, 404)
	default:
		emptyError(t.w, 404)
	}
}

func (c *command) dto() toolbox.Command {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := toolbox.Command{Id: c.id, Command: c.text}
	if c.exit != nil {
		out.ExitCode = ptr(*c.exit)
	}
	return out
}

func (t *tb) sessionExec(se *session) {
	var req toolbox.SessionExecuteRequest
	if err := json.NewDecoder(t.r.Body).Decode(&req); err != nil {
		t.ginError(400, "INVALID_REQUEST_BODY", "invalid request body")
		return
	}
	if strings.TrimSpace(req.Command) == "" {
		t.ginError(400, "BAD_REQUEST", "command is required")
		return
	}
	if se == nil {
		t.internalError("failed to execute command: not found: session not found")
		return
	}
	c := &command{id: uuid4(), text: req.Command, done: make(chan struct{})}
	se.mu.Lock()
	se.cmds[c.id] = c
	se.mu.Unlock()
	t.s.wg.Add(1)
	go func() {
		defer t.s.wg.Done()
		defer close(c.done)
		st, err := t.s.backend.Exec(se.ctx, t.b.backendID, &driver.Command{
			Args: []string{"sh", "-c", req.Command}, Dir: t.b.home,
			Stdout: markWriter{c, stdoutMark, &c.stdout}, Stderr: markWriter{c, stderrMark, &c.stderr},
			Timeout: 365 * 24 * time.Hour,
		})
		code := st.ExitCode
		if err != nil {
			code = -1
		}
		c.mu.Lock()
		c.exit = &code
		c.mu.Unlock()
	}()
	async := (req.RunAsync != nil && *req.RunAsync) || (req.Async != nil && *req.Async)
	if async {
		writeJSON(t.w, http.StatusAccepted, toolbox.SessionExecuteResponse{CmdId: &c.id})
		return
	}
	// Sync exec has no server-side timeout: it waits for the command.
	select {
	case <-c.done:
	case <-t.r.Context().Done():
		return
	}
	c.mu.Lock()
	out := toolbox.SessionExecuteResponse{CmdId: &c.id, ExitCode: ptr(*c.exit)}
	if splitOutput(t.r) {
		out.Output, out.Stdout, out.Stderr = ptr(c.raw.String()), ptr(c.stdout.String()), ptr(c.stderr.String())
	} else {
		out.Output = ptr(string(stripMarks(c.raw.Bytes())))
	}
	c.mu.Unlock()
	writeJSON(t.w, 200, out)
}

func (t *tb) logs(c *command) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if splitOutput(t.r) {
		writeJSON(t.w, 200, toolbox.SessionCommandLogs{Output: ptr(c.raw.String()), Stdout: ptr(c.stdout.String()), Stderr: ptr(c.stderr.String())})
		return
	}
	t.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	t.w.WriteHeader(200)
	_, _ = t.w.Write(stripMarks(c.raw.Bytes()))
}

func stripMarks(b []byte) []byte {
	b = bytes.ReplaceAll(b, stdoutMark, nil)
	return bytes.ReplaceAll(b, stderrMark, nil)
}
