package docker

// Terminals. A terminal is an exec with a TTY: the engine allocates the
// pseudo-terminal, makes the program a session leader with it as its
// controlling terminal (so the line discipline's Ctrl-C, job control and
// SIGWINCH work as in any terminal), and streams it over the exec's
// hijacked connection, one raw stream with no multiplexing. The program
// runs through termWrapper, as the sandbox's user with the create-time
// environment, as Exec's commands do.
//
// The engine cannot attach to an exec after it started: the hijacked
// connection is the terminal's only output. So the Runtime that started a
// terminal keeps that connection, reading it whether or not a handle is
// open, and AttachTerminal works only through that Runtime (closing a
// handle leaves the program running and re-attachable there); another
// Runtime, in this or another OS process, gets NotFound. The Runtime's
// Close drops its terminals' streams: their programs run on (the engine
// does not hang the terminal up) until they exit or the sandbox is
// destroyed, but nothing can reach them any more.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/sberrors"
)

// termWrapper runs a terminal's program inside the container:
//
//	sh -c termWrapper sbx TIMEOUT MARKER DIR ARGV...
//
// It sources the create-time environment, enters DIR and checks that
// ARGV[0] can be run (reporting either through marker files), starts the
// TIMEOUT watchdog (0: none) and prints "S<pid>\n", its own pid, which is
// the program's. It then waits (at most about ten seconds) for MARKER.go,
// which the client creates once it has set the window size (engines
// before API 1.42 ignore the size given at the exec's creation, and the
// size can be set only once the exec runs), and execs ARGV, so the
// program is the exec's process, starts with the right size, and keeps
// the terminal as its controlling terminal. The watchdog ends
// the program's process group only while that pid still runs this exec
// (its environment holds the exec's token).
const termWrapper = `__sbx_t=$1 __sbx_m=$2 __sbx_d=$3
shift 3
if [ -r ` + stateDir + `/env ]; then . ` + stateDir + `/env; fi
unset __sbx_keep
if [ ! -d "$__sbx_d" ]; then
  if [ -e "$__sbx_d" ]; then : >"$__sbx_m.notdir"; else : >"$__sbx_m.missing"; fi
  exit 126
fi
cd "$__sbx_d" 2>/dev/null || { : >"$__sbx_m.denied"; exit 126; }
command -v "$1" >/dev/null 2>&1 || { : >"$__sbx_m.noprog"; exit 127; }
if [ "$__sbx_t" != 0 ]; then
  setsid sh -c 'sleep "$1"
if tr "\0" "\n" <"/proc/$3/environ" 2>/dev/null | grep -qx "SANDBOXKIT_EXEC=$4"; then : >"$2"; kill -9 -"$3" 2>/dev/null; kill -9 "$3"; fi' sh "$__sbx_t" "$__sbx_m" "$$" "$SANDBOXKIT_EXEC" </dev/null >/dev/null 2>&1 &
fi
printf 'S%s\n' "$$"
__sbx_i=0
while [ ! -e "$__sbx_m.go" ] && [ $__sbx_i -lt 1000 ]; do sleep 0.01; __sbx_i=$((__sbx_i+1)); done
rm -f "$__sbx_m.go"
unset __sbx_t __sbx_m __sbx_d __sbx_i
exec "$@"
`

// loginShell is the program of a terminal that names none: bash as a
// login shell where the image has it, else sh.
var loginShell = []string{"/bin/sh", "-c", `if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l`}

// termSignaller sends a signal to the foreground process group of the
// terminal of program PID (the tpgid field of its stat), or to the
// program when it has none.
//
//	sh -c termSignaller sbx PID SIGNAL
const termSignaller = `p=$1 sig=$2
s=$(cat /proc/$p/stat 2>/dev/null) || exit 3
s=${s##*) }
set -- $s
g=$6
if [ "$g" -gt 0 ] 2>/dev/null; then kill -"$sig" -"$g" 2>/dev/null && exit 0; fi
kill -"$sig" "$p"`

// maxEndedTerms bounds the ended terminals a Runtime remembers for a late
// attach (which then reports the exit at once).
const maxEndedTerms = 64

// dterm is one terminal a Runtime keeps: the exec's connection, read by
// one goroutine that passes the output to the handles attached.
type dterm struct {
	r       *Runtime
	sandbox string
	id      string // the exec's ID: the terminal's ID
	pid     int
	token   string
	conn    client.ExecAttachResult

	wmu sync.Mutex // serializes input

	mu   sync.Mutex
	subs map[*termHandle]struct{}
	done chan struct{} // closed once the program's status is known
	st   driver.ExitStatus
	err  error
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

// StartTerminal starts req's program on a new pseudo-terminal of sandbox
// id, through an exec with a TTY.
func (r *Runtime) StartTerminal(ctx context.Context, id string, req *driver.TerminalRequest) (driver.TerminalHandle, error) {
	if req.Output == nil {
		return nil, fmt.Errorf("docker: terminal request without an Output writer: %w", sberrors.ErrInvalidArgument)
	}
	if req.Rows == 0 || req.Cols == 0 {
		return nil, fmt.Errorf("docker: terminal size %dx%d: rows and columns must be positive: %w", req.Rows, req.Cols, sberrors.ErrInvalidArgument)
	}
	env := make(map[string]string, len(req.Env)+1)
	for k, v := range req.Env {
		env[k] = v
	}
	if _, ok := env["TERM"]; !ok {
		env["TERM"] = "xterm-256color"
	}
	argv := req.Args
	if len(argv) == 0 {
		argv = loginShell
	}
	spec := execSpec{argv: argv, dir: req.Dir, env: env, timeout: req.Timeout, token: newToken(), stdin: true}
	opts, err := execOptions(spec)
	if err != nil {
		return nil, err
	}
	opts.Cmd[2] = termWrapper
	opts.TTY = true
	opts.ConsoleSize = client.ConsoleSize{Height: uint(req.Rows), Width: uint(req.Cols)}
	att, execID, done, err := r.startExec(ctx, id, opts)
	if err != nil {
		return nil, r.wrap(ctx, "terminal", err)
	}
	defer done()
	t := &dterm{r: r, sandbox: id, id: execID, token: spec.token, conn: att, subs: map[*termHandle]struct{}{}, done: make(chan struct{})}
	// ctx bounds the start: until the wrapper's first line, an ended ctx
	// drops the connection.
	stop := context.AfterFunc(ctx, func() { att.Conn.Close() })
	pid, rest, rerr := readStartLine(att.Reader)
	if !stop() || ctx.Err() != nil {
		att.Close()
		r.killExec(id, spec.token)
		return nil, fmt.Errorf("docker: terminal: %w", ctx.Err())
	}
	if rerr != nil {
		att.Close()
		return nil, r.termStartFailed(ctx, id, execID, spec.token, rerr)
	}
	t.pid = pid
	if err := r.termGo(ctx, t, req.Rows, req.Cols); err != nil {
		att.Close()
		r.killExec(id, spec.token)
		return nil, err
	}
	h := t.attach(req.Output)
	if len(rest) > 0 {
		_, _ = req.Output.Write(rest)
	}
	r.terms.add(t)
	r.bg.Add(1)
	go t.read()
	return h, nil
}

// termGo sets the window size of a terminal whose wrapper waits, then
// lets the wrapper run the program.
func (r *Runtime) termGo(ctx context.Context, t *dterm, rows, cols uint16) error {
	if _, err := r.cli.ExecResize(ctx, t.id, client.ExecResizeOptions{Height: uint(rows), Width: uint(cols)}); err != nil {
		return r.wrap(ctx, "terminal resize", err)
	}
	code, out, err := r.runQuiet(ctx, t.sandbox, "", `: >"$1"`, stateDir+"/t/"+t.token+".go")
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("docker: terminal: starting the program: %s: %w", strings.TrimSpace(out), sberrors.ErrInternal)
	}
	return nil
}

// readStartLine reads the wrapper's "S<pid>" line (the terminal turns its
// newline into CRLF) and returns the pid and what followed it in the read.
func readStartLine(rd io.Reader) (int, []byte, error) {
	var line []byte
	buf := make([]byte, 512)
	for {
		n, err := rd.Read(buf)
		line = append(line, buf[:n]...)
		for i, c := range line {
			if c != '\n' {
				continue
			}
			s := string(line[:i])
			if len(s) > 0 && s[len(s)-1] == '\r' {
				s = s[:len(s)-1]
			}
			if len(s) < 2 || s[0] != 'S' {
				return 0, nil, fmt.Errorf("unexpected start line %q", s)
			}
			pid, perr := strconv.Atoi(s[1:])
			if perr != nil {
				return 0, nil, fmt.Errorf("unexpected start line %q", s)
			}
			return pid, line[i+1:], nil
		}
		if err != nil {
			return 0, nil, err
		}
		if len(line) > 64 {
			return 0, nil, fmt.Errorf("unexpected start output %q", line)
		}
	}
}

// termStartFailed explains a terminal whose program never ran: a bad
// working directory or program (the wrapper's markers), or a broken
// connection.
func (r *Runtime) termStartFailed(ctx context.Context, id, execID, token string, rerr error) error {
	code, err := r.execExit(ctx, execID)
	if err != nil {
		return err
	}
	if code == 127 {
		if _, serr := r.cli.ContainerStatPath(ctx, id, client.ContainerStatPathOptions{Path: stateDir + "/t/" + token + ".noprog"}); serr == nil {
			r.removeMarkers(id, token)
			return fmt.Errorf("docker: terminal: the program is not found in the sandbox: %w", sberrors.ErrNotFound)
		}
	}
	if _, err := r.status(ctx, id, token, code); err != nil {
		return fmt.Errorf("docker: terminal: %w", err)
	}
	if !errors.Is(rerr, io.EOF) {
		return fmt.Errorf("docker: terminal: reading the start: %v: %w", rerr, sberrors.ErrOutcomeUnknown)
	}
	return fmt.Errorf("docker: terminal: the program did not start (exit %d): %w", code, sberrors.ErrInternal)
}

// read passes the terminal's output to its handles until the stream ends
// (the program exited, the container went, or the Runtime closed), then
// records the exit status.
func (t *dterm) read() {
	defer t.r.bg.Done()
	stop := context.AfterFunc(t.r.ctx, func() { t.conn.Conn.Close() })
	buf := make([]byte, 32<<10)
	var rerr error
	for {
		n, err := t.conn.Reader.Read(buf)
		if n > 0 {
			t.mu.Lock()
			for h := range t.subs {
				_, _ = h.out.Write(buf[:n])
			}
			t.mu.Unlock()
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				rerr = err
			}
			break
		}
	}
	t.conn.Close()
	stopped := !stop()
	st, err := driver.ExitStatus{}, error(nil)
	switch {
	case stopped && t.r.ctx.Err() != nil:
		err = fmt.Errorf("docker: terminal %s: the client closed: %w", t.id, sberrors.ErrClosed)
	default:
		ctx, cancel := context.WithTimeout(t.r.ctx, 30*time.Second)
		var code int
		code, err = t.r.execExit(ctx, t.id)
		if err == nil {
			st, err = t.r.status(ctx, t.sandbox, t.token, code)
		} else if _, gerr := t.r.inspect(ctx, t.sandbox); gerr != nil {
			err = gerr
		} else if rerr != nil {
			err = fmt.Errorf("docker: terminal %s: reading the output: %v: %w", t.id, rerr, sberrors.ErrOutcomeUnknown)
		}
		cancel()
	}
	t.mu.Lock()
	t.st, t.err = st, err
	t.subs = nil
	close(t.done)
	t.mu.Unlock()
	t.r.terms.ended(t.id)
}

// attach adds a handle whose output goes to out from now on.
func (t *dterm) attach(out io.Writer) *termHandle {
	h := &termHandle{t: t, out: out, closed: make(chan struct{})}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.subs != nil {
		t.subs[h] = struct{}{}
	}
	return h
}

// AttachTerminal connects to terminal terminalID of sandbox id, started
// by this Runtime.
func (r *Runtime) AttachTerminal(ctx context.Context, id, terminalID string, out io.Writer) (driver.TerminalHandle, error) {
	if out == nil {
		return nil, fmt.Errorf("docker: terminal attach without an output writer: %w", sberrors.ErrInvalidArgument)
	}
	if err := r.owns(ctx, id); err != nil {
		return nil, err
	}
	t := r.terms.get(terminalID)
	if t == nil || t.sandbox != id {
		return nil, fmt.Errorf("docker: no terminal %q in sandbox %s started by this client (the engine cannot attach to a running exec, so a terminal is kept only by the client that started it): %w", shorten(terminalID), id, sberrors.ErrNotFound)
	}
	return t.attach(out), nil
}

func shorten(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// termTable is a Runtime's terminals by ID.
type termTable struct {
	mu   sync.Mutex
	byID map[string]*dterm
	gone []string // ended terminals, oldest first
}

func (tt *termTable) add(t *dterm) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.byID == nil {
		tt.byID = map[string]*dterm{}
	}
	tt.byID[t.id] = t
}

func (tt *termTable) get(id string) *dterm {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.byID[id]
}

func (tt *termTable) ended(id string) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.gone = append(tt.gone, id)
	if len(tt.gone) > maxEndedTerms {
		delete(tt.byID, tt.gone[0])
		tt.gone = tt.gone[1:]
	}
}

// termHandle is one attachment to a terminal.
type termHandle struct {
	t         *dterm
	out       io.Writer
	closeOnce sync.Once
	closed    chan struct{}
}

// ID is the exec's ID, the key for AttachTerminal.
func (h *termHandle) ID() string { return h.t.id }

// PID is the program's pid in the container.
func (h *termHandle) PID() int { return h.t.pid }

// usable fails once the handle is closed or the program has exited.
func (h *termHandle) usable(ctx context.Context) error {
	select {
	case <-h.closed:
		return fmt.Errorf("docker: terminal %s: %w", h.t.id, sberrors.ErrClosed)
	case <-h.t.done:
		if h.t.err != nil {
			return h.t.err
		}
		return fmt.Errorf("docker: terminal %s: the program has exited: %w", h.t.id, sberrors.ErrFailedPrecondition)
	default:
	}
	return ctx.Err()
}

// Write sends input to the terminal over the exec's connection, bounded
// by ctx (a write ctx cut short leaves the connection unusable).
func (h *termHandle) Write(ctx context.Context, p []byte) error {
	if err := h.usable(ctx); err != nil {
		return err
	}
	t := h.t
	t.wmu.Lock()
	defer t.wmu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = t.conn.Conn.SetWriteDeadline(time.Unix(1, 0)) })
	_, err := t.conn.Conn.Write(p)
	if !stop() && ctx.Err() != nil {
		return fmt.Errorf("docker: terminal %s: write: %w", t.id, ctx.Err())
	}
	if err != nil {
		select {
		case <-t.done:
			return fmt.Errorf("docker: terminal %s: the program has exited: %w", t.id, sberrors.ErrFailedPrecondition)
		default:
		}
		return fmt.Errorf("docker: terminal %s: write: %v: %w", t.id, err, sberrors.ErrOutcomeUnknown)
	}
	return nil
}

// Resize sets the terminal's window size through the engine.
func (h *termHandle) Resize(ctx context.Context, rows, cols uint16) error {
	if rows == 0 || cols == 0 {
		return fmt.Errorf("docker: terminal %s: size %dx%d: rows and columns must be positive: %w", h.t.id, rows, cols, sberrors.ErrInvalidArgument)
	}
	if err := h.usable(ctx); err != nil {
		return err
	}
	if _, err := h.t.r.cli.ExecResize(ctx, h.t.id, client.ExecResizeOptions{Height: uint(rows), Width: uint(cols)}); err != nil {
		return h.t.r.wrap(ctx, "terminal resize", err)
	}
	return nil
}

// Signal sends sig to the terminal's foreground process group, read from
// the program's /proc stat in the container. A program that has exited is
// not signalled, and that is no error.
func (h *termHandle) Signal(ctx context.Context, sig syscall.Signal) error {
	if err := h.usable(ctx); err != nil {
		if h.t.exited() {
			return nil
		}
		return err
	}
	code, _, err := h.t.r.runQuiet(ctx, h.t.sandbox, "", termSignaller, strconv.Itoa(h.t.pid), strconv.Itoa(int(sig)))
	if err != nil {
		return err
	}
	if code != 0 {
		if iox.WaitClosed(ctx, h.t.done, time.Second) && h.t.exited() {
			return nil // it exited as the signal came
		}
		return fmt.Errorf("docker: terminal %s: signal %d: the program is gone: %w", h.t.id, sig, sberrors.ErrFailedPrecondition)
	}
	return nil
}

// Wait returns the program's exit status once the stream has ended.
func (h *termHandle) Wait(ctx context.Context) (driver.ExitStatus, error) {
	select {
	case <-h.t.done:
		if h.t.err != nil {
			return driver.ExitStatus{}, h.t.err
		}
		return h.t.st, nil
	case <-h.closed:
		return driver.ExitStatus{}, fmt.Errorf("docker: terminal %s: %w", h.t.id, sberrors.ErrClosed)
	case <-ctx.Done():
		return driver.ExitStatus{}, fmt.Errorf("docker: terminal %s: wait: %w", h.t.id, ctx.Err())
	}
}

// Close detaches the handle; the program keeps running, and this
// Runtime's AttachTerminal reaches it again.
func (h *termHandle) Close() error {
	h.closeOnce.Do(func() {
		close(h.closed)
		h.t.mu.Lock()
		delete(h.t.subs, h)
		h.t.mu.Unlock()
	})
	return nil
}
