package daytonafake

// The toolbox's PTY sessions, over the backend's terminals. As the
// daemon: POST /process/pty starts "SHELL -i -l" on a new terminal at
// once (bash when the backend has it, else sh), in cwd (default the
// home) with envs added and TERM xterm-256color unless envs set it; the
// terminal's output goes to the WebSocket clients connected at the time
// (none: it is dropped); every message a client sends is input; when the
// program exits every client gets a close frame (1000 for exit 0, else
// 1011 with {"exitCode":N,"exitReason":"..."}, N = 128+signal for a
// signal) and the session is gone (GET is 404, resize 410, connect an
// error control message). DELETE kills the program (exit 137).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/toolbox"
)

// ptyShell is the daemon's interactive login shell.
const ptyShell = `if command -v bash >/dev/null 2>&1; then exec bash -i -l; fi; exec sh -i -l`

// ptySession is one PTY session of a fake sandbox.
type ptySession struct {
	info toolbox.PtySessionInfo
	h    driver.TerminalHandle

	mu      sync.Mutex
	active  bool
	clients map[*ptyClient]struct{}
	killed  bool
	done    chan struct{} // closed once the program exited
	// The close frame every client gets, set before done is closed.
	closeStatus websocket.StatusCode
	closeReason string
}

// ptyClient is one connected WebSocket: a queue of output messages
// written by its own goroutine, so a slow client never stalls the others.
type ptyClient struct {
	c    *websocket.Conn
	send chan []byte
	gone chan struct{}
	once sync.Once
}

func (c *ptyClient) drop() { c.once.Do(func() { close(c.gone) }) }

// Write broadcasts the terminal's output to the clients connected now.
func (p *ptySession) Write(b []byte) (int, error) {
	msg := append([]byte(nil), b...)
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.clients {
		select {
		case c.send <- msg:
		default:
			// The daemon drops a client whose queue is full.
			delete(p.clients, c)
			c.drop()
		}
	}
	return len(b), nil
}

func (b *sbx) pty(id string) *ptySession {
	b.smu.Lock()
	defer b.smu.Unlock()
	return b.ptys[id]
}

// killPtys ends every PTY session (the sandbox stops or goes).
func (b *sbx) killPtys() {
	b.smu.Lock()
	ps := b.ptys
	b.ptys = nil
	b.smu.Unlock()
	for _, p := range ps {
		p.kill()
	}
}

func (p *ptySession) kill() {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = p.h.Signal(ctx, syscall.SIGKILL)
}

// ptyOp serves /process/pty and /process/pty/{id}[/resize|/connect].
func (t *tb) ptyOp(parts []string) {
	switch {
	case len(parts) == 0 && t.r.Method == http.MethodPost:
		t.createPty()
	case len(parts) == 0 && t.r.Method == http.MethodGet:
		t.b.smu.Lock()
		out := toolbox.PtyListResponse{Sessions: []toolbox.PtySessionInfo{}}
		for _, p := range t.b.ptys {
			out.Sessions = append(out.Sessions, p.snapshot())
		}
		t.b.smu.Unlock()
		writeJSON(t.w, 200, out)
	case len(parts) == 1 && t.r.Method == http.MethodGet:
		if p := t.b.pty(parts[0]); p != nil {
			writeJSON(t.w, 200, p.snapshot())
			return
		}
		writeJSON(t.w, 404, map[string]string{"error": "PTY session not found"})
	case len(parts) == 1 && t.r.Method == http.MethodDelete:
		t.b.smu.Lock()
		p := t.b.ptys[parts[0]]
		delete(t.b.ptys, parts[0])
		t.b.smu.Unlock()
		if p == nil {
			writeJSON(t.w, 404, map[string]string{"error": "PTY session not found"})
			return
		}
		p.kill()
		writeJSON(t.w, 200, map[string]string{"message": "PTY session deleted"})
	case len(parts) == 2 && parts[1] == "resize" && t.r.Method == http.MethodPost:
		t.resizePty(parts[0])
	case len(parts) == 2 && parts[1] == "connect" && t.r.Method == http.MethodGet:
		t.connectPty(parts[0])
	default:
		w := t.w
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "404 page not found")
	}
}

func (p *ptySession) snapshot() toolbox.PtySessionInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	info := p.info
	info.Active = p.active
	return info
}

func (t *tb) createPty() {
	var req toolbox.PtyCreateRequest
	if err := json.NewDecoder(t.r.Body).Decode(&req); err != nil {
		writeJSON(t.w, 400, map[string]string{"error": err.Error()})
		return
	}
	if req.Id == "" {
		writeJSON(t.w, 400, map[string]string{"error": "session ID is required"})
		return
	}
	env := map[string]string{}
	if req.Envs != nil {
		for k, v := range *req.Envs {
			env[k] = v
		}
	}
	if env["TERM"] == "" {
		env["TERM"] = "xterm-256color"
	}
	cols, rows := 80, 24
	if req.Cols != nil {
		cols = *req.Cols
	}
	if req.Rows != nil {
		rows = *req.Rows
	}
	if cols > 1000 || rows > 1000 {
		writeJSON(t.w, 400, map[string]string{"error": "invalid value for cols - must be less than 1000"})
		return
	}
	cwd := t.b.home
	if req.Cwd != nil && *req.Cwd != "" {
		cwd = t.abs(*req.Cwd)
	}
	tr, ok := t.s.backend.(driver.TerminalRuntime)
	if !ok || cols <= 0 || rows <= 0 {
		writeJSON(t.w, 500, map[string]string{"error": "failed to start PTY session"})
		return
	}
	t.b.smu.Lock()
	if _, dup := t.b.ptys[req.Id]; dup {
		t.b.smu.Unlock()
		writeJSON(t.w, 409, map[string]string{"error": fmt.Sprintf("PTY session with ID '%s' already exists", req.Id)})
		return
	}
	p := &ptySession{
		info: toolbox.PtySessionInfo{Id: req.Id, Cwd: cwd, Envs: env, Cols: cols, Rows: rows,
			CreatedAt: time.Now().UTC().Format(time.RFC3339Nano)},
		clients: map[*ptyClient]struct{}{}, done: make(chan struct{}),
	}
	if t.b.ptys == nil {
		t.b.ptys = map[string]*ptySession{}
	}
	t.b.ptys[req.Id] = p
	t.b.smu.Unlock()
	h, err := tr.StartTerminal(t.ctx(), t.b.backendID, &driver.TerminalRequest{
		Args: []string{"sh", "-c", ptyShell}, Dir: cwd, Env: env, Rows: uint16(rows), Cols: uint16(cols), Output: p,
	})
	if err != nil {
		t.b.smu.Lock()
		delete(t.b.ptys, req.Id)
		t.b.smu.Unlock()
		writeJSON(t.w, 500, map[string]string{"error": "failed to start PTY session"})
		return
	}
	p.h = h
	p.active = true
	t.s.wg.Add(1)
	go func() {
		defer t.s.wg.Done()
		p.reap(t.b, t.s.baseCtx)
	}()
	writeJSON(t.w, 201, toolbox.PtyCreateResponse{SessionId: req.Id})
}

// reap waits for the program's exit, closes the clients with it and
// removes the session.
func (p *ptySession) reap(b *sbx, ctx context.Context) {
	st, err := p.h.Wait(ctx)
	code := st.ExitCode
	switch {
	case err != nil:
		code = 137
	case st.Signal != 0:
		code = 128 + int(st.Signal)
	case st.TimedOut:
		code = 137
	}
	p.mu.Lock()
	if p.killed {
		code = 137
	}
	p.active = false
	p.clients = nil
	p.mu.Unlock()
	_ = p.h.Close()
	p.closeStatus = websocket.StatusNormalClosure
	if code != 0 {
		p.closeStatus = websocket.StatusInternalError
		var why string
		switch {
		case code == 130:
			why = "Ctrl+C"
		case code == 137:
			why = "SIGKILL"
		case code == 143:
			why = "SIGTERM"
		case code > 128:
			why = fmt.Sprintf("signal %d", code-128)
		default:
			why = "non-zero exit"
		}
		bs, _ := json.Marshal(map[string]any{"exitCode": code, "exitReason": why})
		p.closeReason = string(bs)
	} else {
		bs, _ := json.Marshal(map[string]any{"exitCode": 0})
		p.closeReason = string(bs)
	}
	close(p.done)
	b.smu.Lock()
	if b.ptys[p.info.Id] == p {
		delete(b.ptys, p.info.Id)
	}
	b.smu.Unlock()
}

func (t *tb) resizePty(id string) {
	var req toolbox.PtyResizeRequest
	if err := json.NewDecoder(t.r.Body).Decode(&req); err != nil || req.Cols < 1 || req.Rows < 1 {
		msg := "Key: 'PTYResizeRequest.Cols' Error:Field validation for 'Cols' failed on the 'required' tag"
		if err != nil {
			msg = err.Error()
		}
		writeJSON(t.w, 400, map[string]string{"error": msg})
		return
	}
	if req.Cols > 1000 || req.Rows > 1000 {
		writeJSON(t.w, 400, map[string]string{"error": "cols must be less than 1000"})
		return
	}
	p := t.b.pty(id)
	if p == nil || !p.snapshot().Active {
		writeJSON(t.w, 410, map[string]string{"error": fmt.Sprintf("PTY session %s not found", id)})
		return
	}
	if err := p.h.Resize(t.ctx(), uint16(req.Rows), uint16(req.Cols)); err != nil {
		writeJSON(t.w, 500, map[string]string{"error": err.Error()})
		return
	}
	p.mu.Lock()
	p.info.Cols, p.info.Rows = req.Cols, req.Rows
	p.mu.Unlock()
	writeJSON(t.w, 200, p.snapshot())
}

// connectPty upgrades first, then attaches or reports the error in a
// control message, as the daemon does.
func (t *tb) connectPty(id string) {
	c, err := websocket.Accept(t.w, t.r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	c.SetReadLimit(64 << 10)
	ctx := t.s.baseCtx
	p := t.b.pty(id)
	var cl *ptyClient
	if p != nil {
		p.mu.Lock()
		if p.active && p.clients != nil {
			cl = &ptyClient{c: c, send: make(chan []byte, 256), gone: make(chan struct{})}
			p.clients[cl] = struct{}{}
		}
		p.mu.Unlock()
	}
	if cl == nil {
		msg := fmt.Sprintf("PTY session %s not found", id)
		if p != nil {
			msg = fmt.Sprintf("PTY session '%s' has terminated and is no longer available", id)
		}
		bs, _ := json.Marshal(map[string]string{"type": "control", "status": "error", "error": "Failed to connect to PTY session: " + msg})
		_ = c.Write(ctx, websocket.MessageText, bs)
		_ = c.CloseNow()
		return
	}
	bs, _ := json.Marshal(map[string]string{"type": "control", "status": "connected"})
	if err := c.Write(ctx, websocket.MessageText, bs); err != nil {
		_ = c.CloseNow()
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-cl.gone:
				return
			case <-p.done:
				// Output queued before the exit goes out first.
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				for {
					select {
					case b := <-cl.send:
						if c.Write(wctx, websocket.MessageBinary, b) != nil {
							cl.drop()
							return
						}
						continue
					default:
					}
					break
				}
				_ = c.Close(p.closeStatus, p.closeReason)
				return
			case b := <-cl.send:
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				err := c.Write(wctx, websocket.MessageBinary, b)
				cancel()
				if err != nil {
					cl.drop()
					return
				}
			}
		}
	}()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			break
		}
		if werr := p.h.Write(ctx, data); werr != nil {
			_ = c.Close(websocket.StatusInternalError, "PTY session unavailable")
			break
		}
	}
	p.mu.Lock()
	delete(p.clients, cl)
	p.mu.Unlock()
	cl.drop()
	wg.Wait()
	_ = c.CloseNow()
}
