package daytona

// Terminals, over the toolbox's PTY sessions (POST /process/pty, the
// session's WebSocket at /process/pty/{id}/connect, its resize and
// DELETE). The daemon always runs the sandbox user's interactive login
// shell on a new session's terminal and takes no program, so the adapter
// uploads a small script (it holds the environment, secrets included,
// and removes itself when it starts), types "exec sh SCRIPT" into that
// shell, and passes the terminal's output on only from a marker the
// script prints (an OSC sequence with a random nonce the typed line does
// not hold): the shell's greeting, prompt and the echo of the typed line
// never reach the caller. The script checks the working directory and
// the program (reporting a bad one through the marker, so StartTerminal
// fails as Exec would), starts the Timeout's watchdog and execs the
// program, which therefore is the session's process: the daemon reports
// its exit code when it closes the WebSocket (1000 for 0, else 1011 with
// {"exitCode":N}; a signal is 128+N). The session lives in the sandbox,
// so any Client can attach to it by its ID; output is not replayed (an
// attach sees what is written after it).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/toolbox"
	"github.com/sandboxkit/sandbox/sberrors"
)

var _ driver.TerminalRuntime = (*Runtime)(nil)

// envKeyRE is a name the script can export.
var envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// termEnvVar marks the processes of a terminal, for Signal.
const termEnvVar = "SANDBOXKIT_TERM"

// termSignaller sends a signal to the foreground process group of the
// terminal whose program carries SANDBOXKIT_TERM=ID (the tpgid field of
// its stat), or to the program when it has none.
//
//	sh -c termSignaller sbx ID SIGNAL
const termSignaller = `id=$1 sig=$2
for d in /proc/[0-9]*; do
  if tr '\0' '\n' <"$d/environ" 2>/dev/null | grep -qx "` + termEnvVar + `=$id"; then
    p=${d#/proc/}
    s=$(cat "$d/stat" 2>/dev/null) || continue
    s=${s##*) }
    set -- $s
    if [ "$5" -gt 0 ] 2>/dev/null && [ "$6" -gt 0 ] 2>/dev/null; then
      kill -"$sig" -"$6" 2>/dev/null && exit 0
    fi
    kill -"$sig" "$p" 2>/dev/null && exit 0
  fi
done
exit 3`

// termLoginShell is the program of a terminal that names none.
const termLoginShell = `if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l`

// termScript is the script typed into the session's shell.
func termScript(nonce, sid, marker string, req *driver.TerminalRequest) string {
	var b strings.Builder
	b.WriteString("rm -f -- \"$0\" 2>/dev/null\n")
	fmt.Fprintf(&b, "m() { printf '\\033]sbx;%s;%%s\\007' \"$1\"; }\n", nonce)
	fmt.Fprintf(&b, "d=%s\n", shellQuote(req.Dir))
	b.WriteString(`if [ ! -d "$d" ]; then if [ -e "$d" ]; then m Enotdir; else m Enoent; fi; exit 126; fi
cd "$d" 2>/dev/null || { m Eperm; exit 126; }
`)
	env := map[string]string{}
	for k, v := range req.Env {
		env[k] = v
	}
	if _, ok := env["TERM"]; !ok {
		env["TERM"] = "xterm-256color"
	}
	env[termEnvVar] = sid
	b.WriteString(exports(env))
	args := req.Args
	if len(args) == 0 {
		args = []string{"sh", "-c", termLoginShell}
	}
	fmt.Fprintf(&b, "command -v %s >/dev/null 2>&1 || { m Enoprog; exit 127; }\n", shellQuote(args[0]))
	if req.Timeout > 0 {
		secs := strconv.FormatFloat(req.Timeout.Seconds(), 'f', 3, 64)
		fmt.Fprintf(&b, "( sleep %s; : >%s; kill -9 $$ ) </dev/null >/dev/null 2>&1 &\n", secs, shellQuote(marker))
	}
	b.WriteString("m \"S$$\"\nexec")
	for _, a := range args {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString("\n")
	return b.String()
}

// StartTerminal starts req's program on a new PTY session of sandbox id.
func (r *Runtime) StartTerminal(ctx context.Context, id string, req *driver.TerminalRequest) (driver.TerminalHandle, error) {
	ctx = withEnvValues(ctx, req.Env)
	if req.Output == nil {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "daytona: terminal request without an Output writer")
	}
	if req.Rows == 0 || req.Cols == 0 || req.Rows > 1000 || req.Cols > 1000 {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "daytona: terminal size %dx%d: rows and columns must be between 1 and 1000", req.Rows, req.Cols)
	}
	for k := range req.Env {
		if !envKeyRE.MatchString(k) {
			return nil, sberrors.Errorf(sberrors.InvalidArgument, "daytona: terminal: environment variable name %q is not a shell name", k)
		}
	}
	scratch, err := r.scratchDir(ctx, id)
	if err != nil {
		return nil, err
	}
	sid := "sbx-t" + randHex(8)
	nonce := randHex(12)
	base := scratch + "/" + sid
	if err := r.MkdirAll(ctx, id, scratch); err != nil {
		return nil, err
	}
	if err := r.upload(ctx, id, base+".sh", strings.NewReader(termScript(nonce, sid, base+".timedout", req)), nil); err != nil {
		return nil, err
	}
	cols, rows := int(req.Cols), int(req.Rows)
	resp, err := r.toolboxCall(ctx, id, "pty create", true, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		return c.CreatePtySession(ctx, toolbox.PtyCreateRequest{Id: sid, Cols: &cols, Rows: &rows})
	}, http.StatusCreated, http.StatusOK)
	if err != nil {
		r.removeQuiet(id, base+".sh")
		return nil, err
	}
	resp.Body.Close()
	t, err := r.connectTerm(ctx, id, sid, base)
	if err != nil {
		r.deletePty(id, sid)
		r.removeQuiet(id, base+".sh")
		return nil, err
	}
	t.pid = -1
	t.hold = &startGate{nonce: nonce}
	h := t.attach(req.Output)
	go t.read()
	if err := t.write(ctx, []byte(" exec sh "+shellQuote(base+".sh")+"\r")); err != nil {
		t.abandon()
		r.deletePty(id, sid)
		return nil, err
	}
	select {
	case <-t.started:
	case <-t.done:
	case <-ctx.Done():
		t.abandon()
		r.deletePty(id, sid)
		return nil, fmt.Errorf("daytona: terminal: %w", ctx.Err())
	}
	if t.startErr != nil {
		t.abandon()
		r.deletePty(id, sid)
		return nil, t.startErr
	}
	select {
	case <-t.started:
		return h, nil
	default:
	}
	<-t.done
	if t.err != nil {
		return nil, t.err
	}
	return nil, sberrors.Errorf(sberrors.Internal, "daytona: terminal: the session ended (exit %d) before its program started", t.st.ExitCode)
}

// AttachTerminal connects to PTY session terminalID of sandbox id.
func (r *Runtime) AttachTerminal(ctx context.Context, id, terminalID string, out io.Writer) (driver.TerminalHandle, error) {
	if out == nil {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "daytona: terminal attach without an output writer")
	}
	if !strings.HasPrefix(terminalID, "sbx-t") || strings.ContainsAny(terminalID, "/?#%") {
		return nil, sberrors.Errorf(sberrors.NotFound, "daytona: no terminal %q in sandbox %s", shorten(terminalID), id)
	}
	scratch, err := r.scratchDir(ctx, id)
	if err != nil {
		return nil, err
	}
	t, err := r.connectTerm(ctx, id, terminalID, scratch+"/"+terminalID)
	if err != nil {
		return nil, err
	}
	t.pid = 0
	close(t.started)
	h := t.attach(out)
	go t.read()
	return h, nil
}

func shorten(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// startGate holds a new terminal's output back until the script's marker.
type startGate struct {
	nonce string
	buf   []byte
}

// dterm is one WebSocket connection to a PTY session.
type dterm struct {
	r       *Runtime
	sandbox string
	sid     string
	base    string // the scratch path prefix of its files
	c       *websocket.Conn
	pid     int
	hold    *startGate // until the start marker; nil after

	started  chan struct{} // closed at the start marker
	startErr error         // set before done, when the script failed

	mu      sync.Mutex
	subs    map[*termHandle]struct{}
	closing bool // the client dropped the connection

	done chan struct{}
	st   driver.ExitStatus
	err  error
}

// connectTerm dials the session's WebSocket and waits for the daemon's
// control message.
func (r *Runtime) connectTerm(ctx context.Context, id, sid, base string) (*dterm, error) {
	u, err := r.toolboxURL(ctx, id)
	if err != nil {
		return nil, err
	}
	u += "/process/pty/" + sid + "/connect"
	hdr := http.Header{}
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	_ = r.headers(ctx, hreq)
	for k, v := range hreq.Header {
		hdr[k] = v
	}
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: r.toolhc, HTTPHeader: hdr})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("daytona: terminal connect: %w", ctx.Err())
		}
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			he := r.responseError("toolbox pty connect", resp)
			return nil, he
		}
		return nil, sberrors.Errorf(sberrors.Unavailable, "daytona: terminal connect: %v", r.redact(err.Error()))
	}
	c.SetReadLimit(1 << 20)
	typ, msg, err := c.Read(ctx)
	if err != nil {
		c.CloseNow()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("daytona: terminal connect: %w", ctx.Err())
		}
		return nil, sberrors.Errorf(sberrors.Unavailable, "daytona: terminal connect: no control message: %v", err)
	}
	var ctl struct {
		Type, Status, Error string
	}
	if typ != websocket.MessageText || json.Unmarshal(msg, &ctl) != nil || ctl.Type != "control" {
		c.CloseNow()
		return nil, sberrors.Errorf(sberrors.Internal, "daytona: terminal connect: unexpected first message %q", shorten(string(msg)))
	}
	if ctl.Status != "connected" {
		c.CloseNow()
		return nil, sberrors.Errorf(sberrors.NotFound, "daytona: no running terminal %q in sandbox %s: %s", shorten(sid), id, r.redact(ctl.Error))
	}
	return &dterm{r: r, sandbox: id, sid: sid, base: base, c: c, subs: map[*termHandle]struct{}{},
		started: make(chan struct{}), done: make(chan struct{})}, nil
}

// read passes output to the handles until the daemon closes the
// connection, then records the exit status.
func (t *dterm) read() {
	var rerr error
	for {
		_, b, err := t.c.Read(context.Background())
		if err != nil {
			rerr = err
			break
		}
		if t.hold != nil {
			b = t.gate(b)
			if b == nil {
				continue
			}
		}
		t.mu.Lock()
		for h := range t.subs {
			_, _ = h.out.Write(b)
		}
		t.mu.Unlock()
	}
	t.mu.Lock()
	closing := t.closing
	t.mu.Unlock()
	var st driver.ExitStatus
	var err error
	if closing {
		err = fmt.Errorf("daytona: terminal %s: %w", t.sid, sberrors.ErrClosed)
	} else {
		st, err = t.exit(rerr)
	}
	t.mu.Lock()
	t.st, t.err = st, err
	t.subs = nil
	t.mu.Unlock()
	close(t.done)
}

// exited reports whether the program has exited with a status.
func (t *dterm) exited() bool {
	select {
	case <-t.done:
		return t.err == nil
	default:
		return false
	}
}

// gate looks for the start marker in the output held so far; it returns
// what follows the marker once it is seen, nil before.
func (t *dterm) gate(b []byte) []byte {
	g := t.hold
	g.buf = append(g.buf, b...)
	pre := "\x1b]sbx;" + g.nonce + ";"
	i := strings.Index(string(g.buf), pre)
	if i < 0 {
		if len(g.buf) > 64<<10 {
			g.buf = g.buf[len(g.buf)-len(pre):]
		}
		return nil
	}
	j := strings.IndexByte(string(g.buf[i+len(pre):]), '\a')
	if j < 0 {
		return nil
	}
	val := string(g.buf[i+len(pre) : i+len(pre)+j])
	rest := g.buf[i+len(pre)+j+1:]
	t.hold = nil
	if strings.HasPrefix(val, "S") {
		t.pid, _ = strconv.Atoi(val[1:])
		close(t.started)
		return append([]byte{}, rest...)
	}
	switch val {
	case "Enoent":
		t.startErr = sberrors.Errorf(sberrors.NotFound, "daytona: terminal: the working directory does not exist")
	case "Enotdir":
		t.startErr = fmt.Errorf("daytona: terminal: the working directory is not a directory: %w", sberrors.ErrNotDirectory)
	case "Eperm":
		t.startErr = sberrors.Errorf(sberrors.PermissionDenied, "daytona: terminal: the working directory cannot be entered")
	case "Enoprog":
		t.startErr = sberrors.Errorf(sberrors.NotFound, "daytona: terminal: the program is not found in the sandbox")
	default:
		t.startErr = sberrors.Errorf(sberrors.Internal, "daytona: terminal: unexpected start marker %q", shorten(val))
	}
	return nil
}

// exit reads the exit status from the daemon's close frame.
func (t *dterm) exit(rerr error) (driver.ExitStatus, error) {
	var ce websocket.CloseError
	if errors.As(rerr, &ce) && (ce.Code == websocket.StatusNormalClosure || ce.Code == websocket.StatusInternalError) {
		var x struct {
			ExitCode *int `json:"exitCode"`
		}
		code := 0
		if json.Unmarshal([]byte(ce.Reason), &x) == nil && x.ExitCode != nil {
			code = *x.ExitCode
		} else if ce.Code != websocket.StatusNormalClosure {
			return driver.ExitStatus{}, sberrors.Errorf(sberrors.Unavailable, "daytona: terminal %s: closed: %s", t.sid, t.r.redact(ce.Reason))
		}
		if code == exitKilled {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := t.r.Stat(ctx, t.sandbox, t.base+".timedout"); err == nil {
				t.r.removeQuiet(t.sandbox, t.base+".timedout")
				return driver.ExitStatus{ExitCode: -1, TimedOut: true}, nil
			}
		}
		return driver.ExitStatus{ExitCode: code}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := t.r.getDTO(ctx, t.sandbox); err != nil && sberrors.CodeOf(err) == sberrors.NotFound {
		return driver.ExitStatus{}, err
	}
	return driver.ExitStatus{}, fmt.Errorf("daytona: terminal %s: the connection broke: %v: %w", t.sid, rerr, sberrors.ErrOutcomeUnknown)
}

// exitKilled is the daemon's exit code for a program killed by SIGKILL.
const exitKilled = 128 + 9

func (t *dterm) attach(out io.Writer) *termHandle {
	h := &termHandle{t: t, out: out, closed: make(chan struct{})}
	t.mu.Lock()
	t.subs[h] = struct{}{}
	t.mu.Unlock()
	return h
}

// abandon drops the connection and waits for the reader.
func (t *dterm) abandon() {
	t.drop()
	<-t.done
}

// drop closes the connection from this side.
func (t *dterm) drop() {
	t.mu.Lock()
	t.closing = true
	t.mu.Unlock()
	_ = t.c.CloseNow()
}

func (t *dterm) write(ctx context.Context, p []byte) error {
	if err := t.c.Write(ctx, websocket.MessageBinary, p); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("daytona: terminal %s: write: %w", t.sid, ctx.Err())
		}
		select {
		case <-t.done:
			return sberrors.Errorf(sberrors.FailedPrecondition, "daytona: terminal %s: the program has exited", t.sid)
		default:
		}
		return fmt.Errorf("daytona: terminal %s: write: %v: %w", t.sid, err, sberrors.ErrOutcomeUnknown)
	}
	return nil
}

// deletePty kills a session whose start failed, bounded by its own
// deadline.
func (r *Runtime) deletePty(id, sid string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := r.toolboxCall(ctx, id, "pty delete", true, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		return c.DeletePtySession(ctx, sid)
	}, http.StatusOK, http.StatusNoContent)
	if err == nil {
		resp.Body.Close()
	}
}

func (r *Runtime) removeQuiet(id, p string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = r.Remove(ctx, id, p)
}

// termHandle is one handle on a terminal's connection.
type termHandle struct {
	t         *dterm
	out       io.Writer
	closeOnce sync.Once
	closed    chan struct{}
}

// ID is the PTY session's id, the key for AttachTerminal.
func (h *termHandle) ID() string { return h.t.sid }

// PID is the program's pid in the sandbox, known to the handle that
// started it (0 for an attached one).
func (h *termHandle) PID() int { return max(h.t.pid, 0) }

func (h *termHandle) usable(ctx context.Context) error {
	select {
	case <-h.closed:
		return fmt.Errorf("daytona: terminal %s: %w", h.t.sid, sberrors.ErrClosed)
	case <-h.t.done:
		if h.t.err != nil {
			return h.t.err
		}
		return sberrors.Errorf(sberrors.FailedPrecondition, "daytona: terminal %s: the program has exited", h.t.sid)
	default:
	}
	return ctx.Err()
}

// Write sends input as one WebSocket message.
func (h *termHandle) Write(ctx context.Context, p []byte) error {
	if err := h.usable(ctx); err != nil {
		return err
	}
	return h.t.write(ctx, p)
}

// Resize sets the window size through POST /process/pty/{id}/resize.
func (h *termHandle) Resize(ctx context.Context, rows, cols uint16) error {
	if rows == 0 || cols == 0 || rows > 1000 || cols > 1000 {
		return sberrors.Errorf(sberrors.InvalidArgument, "daytona: terminal %s: size %dx%d: rows and columns must be between 1 and 1000", h.t.sid, rows, cols)
	}
	if err := h.usable(ctx); err != nil {
		return err
	}
	resp, err := h.t.r.toolboxCall(ctx, h.t.sandbox, "pty resize", true, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		return c.ResizePtySession(ctx, h.t.sid, toolbox.PtyResizeRequest{Cols: int(cols), Rows: int(rows)})
	}, http.StatusOK)
	if err != nil {
		var he *HTTPError
		if errors.As(err, &he) && he.Status == http.StatusGone {
			return sberrors.Errorf(sberrors.FailedPrecondition, "daytona: terminal %s: the program has exited", h.t.sid)
		}
		return err
	}
	resp.Body.Close()
	return nil
}

// Signal sends sig to the terminal's foreground process group, through
// a command that finds the terminal's program by its environment. A
// program that has exited is not signalled, and that is no error.
func (h *termHandle) Signal(ctx context.Context, sig syscall.Signal) error {
	if err := h.usable(ctx); err != nil {
		if h.t.exited() {
			return nil
		}
		return err
	}
	st, err := h.t.r.Exec(ctx, h.t.sandbox, &driver.Command{
		Args: []string{"sh", "-c", termSignaller, "sbx", h.t.sid, strconv.Itoa(int(sig))},
		Dir:  "/", Stdout: io.Discard, Stderr: io.Discard,
	})
	if err != nil {
		return err
	}
	if st.ExitCode != 0 {
		if iox.WaitClosed(ctx, h.t.done, time.Second) && h.t.exited() {
			return nil // it exited as the signal came
		}
		return sberrors.Errorf(sberrors.FailedPrecondition, "daytona: terminal %s: signal %d: the program is gone", h.t.sid, sig)
	}
	return nil
}

// Wait returns the exit status the daemon reported on closing.
func (h *termHandle) Wait(ctx context.Context) (driver.ExitStatus, error) {
	select {
	case <-h.closed:
		return driver.ExitStatus{}, fmt.Errorf("daytona: terminal %s: %w", h.t.sid, sberrors.ErrClosed)
	default:
	}
	select {
	case <-h.t.done:
		if h.t.err != nil {
			return driver.ExitStatus{}, h.t.err
		}
		return h.t.st, nil
	case <-h.closed:
		return driver.ExitStatus{}, fmt.Errorf("daytona: terminal %s: %w", h.t.sid, sberrors.ErrClosed)
	case <-ctx.Done():
		return driver.ExitStatus{}, fmt.Errorf("daytona: terminal %s: wait: %w", h.t.sid, ctx.Err())
	}
}

// Close drops the handle's connection; the program keeps running and
// AttachTerminal reaches it again.
func (h *termHandle) Close() error {
	h.closeOnce.Do(func() {
		close(h.closed)
		h.t.drop()
		<-h.t.done
	})
	return nil
}
