package local

// Terminals. The agent allocates the pseudo-terminal inside the sandbox
// (from the sandbox's own devpts instance at L3 and L4, set up with its
// /dev; from the host's /dev/ptmx below) and forks the program on the
// confined forker thread, as every command: same user, Landlock domain,
// seccomp filter and cgroup as Exec. The program is a session leader with
// the terminal as its controlling terminal, so the line discipline's
// Ctrl-C, job control and SIGWINCH work as in any terminal. The agent
// keeps the terminal (and its master end) until the program exits, so a
// client in another process can attach to it by id; a client that goes
// away leaves it running.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/sberrors"
)

// termSize is the payload of a frameResize.
type termSize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// termSignal is the payload of a frameTermSig.
type termSignal struct {
	Signal int `json:"signal"`
}

// termStarted answers term and term-attach once the program runs.
type termStarted struct {
	PID  int    `json:"pid"`
	Term string `json:"term"`
}

// termInputWindow is how many input frames (each at most 32 KiB) one
// attachment may have sent that the agent has not yet written to the
// terminal. The agent writes input from a goroutine of its own and acks
// each frame written (frameTermAck); the client sends no more until acked.
// So the agent always reads the connection, and a resize or a signal is
// applied at once whatever input is waiting for a program that does not
// read it, while a client that writes faster than the program reads is
// held back in its Write, and the agent holds at most the window.
const termInputWindow = 16

// maxExitedTerms bounds the exited terminals an agent keeps for a late
// attach (which then reports the exit at once).
const maxExitedTerms = 64

// terms is an agent's table of terminals.
type terms struct {
	mu     sync.Mutex
	byID   map[string]*term
	exited []string // ids of exited terminals, oldest first
	live   int      // terminals started and not yet ended (or being started)
	seq    atomic.Uint64
}

// reserve counts a terminal about to start, unless limit (when positive)
// are already live; release undoes it for one that did not start.
func (t *terms) reserve(limit int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if limit > 0 && t.live >= limit {
		return false
	}
	t.live++
	return true
}

func (t *terms) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.live--
}

// term is one terminal the agent keeps.
type term struct {
	id     string
	p      *proc // the program: its subscribers, exit and done
	master *os.File
}

func (t *terms) add(tm *term) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID == nil {
		t.byID = map[string]*term{}
	}
	t.byID[tm.id] = tm
}

func (t *terms) get(id string) *term {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

func (t *terms) ended(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.live--
	t.exited = append(t.exited, id)
	if len(t.exited) > maxExitedTerms {
		delete(t.byID, t.exited[0])
		t.exited = t.exited[1:]
	}
}

// openPTY opens a new pseudo-terminal of rows x cols: the master end,
// nonblocking for the netpoller, and the slave end for the program.
func openPTY(rows, cols uint16) (*os.File, int, error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, -1, fmt.Errorf("opening /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(mfd)
		return nil, -1, fmt.Errorf("unlocking the pseudo-terminal: %w", err)
	}
	// TIOCGPTPEER opens the slave of this very master, through its devpts
	// instance, without a path look-up.
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(mfd), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno != 0 {
		n, err := unix.IoctlGetUint32(mfd, unix.TIOCGPTN)
		if err != nil {
			unix.Close(mfd)
			return nil, -1, fmt.Errorf("pseudo-terminal number: %w", err)
		}
		fd, err := unix.Open("/dev/pts/"+strconv.Itoa(int(n)), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Close(mfd)
			return nil, -1, fmt.Errorf("opening the pseudo-terminal: %w", err)
		}
		sfd = uintptr(fd)
	}
	_ = unix.IoctlSetWinsize(int(sfd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	return os.NewFile(uintptr(mfd), "ptmx"), int(sfd), nil
}

// defaultShell is the login shell of the sandbox's user: bash where the
// sandbox has it, else sh.
func defaultShell(env []string) []string {
	for _, sh := range []string{"bash", "sh"} {
		if p, err := lookPath(sh, env); err == nil {
			return []string{p, "-l"}
		}
	}
	return []string{"/bin/sh", "-l"}
}

// termEnv sets TERM (unless the request does) and, for the default
// shell, SHELL.
func termEnv(env []string, shell string) []string {
	out := make([]string, 0, len(env)+2)
	hasTerm := false
	for _, kv := range env {
		if shell != "" && len(kv) >= 6 && kv[:6] == "SHELL=" {
			continue
		}
		if len(kv) >= 5 && kv[:5] == "TERM=" {
			hasTerm = true
		}
		out = append(out, kv)
	}
	if !hasTerm {
		out = append(out, "TERM=xterm-256color")
	}
	if shell != "" {
		out = append(out, "SHELL="+shell)
	}
	return out
}

// startTerm starts req's program on a new terminal and serves the
// connection as an attachment to it.
func (a *agent) startTerm(in <-chan frameMsg, fw *frameWriter, req *request) {
	dir := req.Dir
	if dir == "" {
		dir = a.cfg.Home
	}
	if badDir(fw, dir) {
		return
	}
	if req.Rows == 0 || req.Cols == 0 {
		_ = fw.writeJSON(frameFail, failMsg{"InvalidArgument", "terminal size must be positive"})
		return
	}
	args, shell := req.Args, ""
	if len(args) == 0 {
		args = defaultShell(req.Env)
		shell = args[0]
	}
	env := termEnv(req.Env, shell)
	path, err := lookPath(args[0], env)
	if err != nil {
		_ = fw.writeJSON(frameFail, failMsg{"NotFound", fmt.Sprintf("%s: command not found", iox.Shorten(args[0], 64))})
		return
	}
	// At L1 and L2 terminals come from the host's /dev/ptmx, which
	// counts them against the host-wide kernel.pty.max: the agent holds
	// a sandbox to its share. At L3 and L4 the sandbox's own devpts
	// instance has that share as its max=.
	limit := 0
	if !a.cfg.Namespaces {
		limit = a.ptyLimit
	}
	if !a.terms.reserve(limit) {
		_ = fw.writeJSON(frameFail, failMsg{"ResourceExhausted", fmt.Sprintf("no pseudo-terminal: the sandbox already has %d terminals, the most it may hold", limit)})
		return
	}
	started := false
	defer func() {
		if !started {
			a.terms.release()
		}
	}()
	master, slave, err := openPTY(req.Rows, req.Cols)
	if err != nil {
		code := "Unavailable"
		msg := "no pseudo-terminal: " + err.Error()
		if errors.Is(err, syscall.ENOSPC) {
			code = "ResourceExhausted"
			if a.cfg.Namespaces {
				msg = fmt.Sprintf("no pseudo-terminal: the sandbox's programs hold all %d it may have: %v", sandboxPtys(), err)
			}
		}
		_ = fw.writeJSON(frameFail, failMsg{code, msg})
		return
	}
	if a.cfg.UID != 0 {
		_ = unix.Fchown(slave, a.cfg.UID, a.cfg.GID)
	}
	pidfd := -1
	attr := &syscall.ProcAttr{
		Dir:   dir,
		Env:   env,
		Files: []uintptr{uintptr(slave), uintptr(slave), uintptr(slave)},
		Sys: &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0,
			Pdeathsig: syscall.SIGKILL, PidFD: &pidfd},
	}
	tm := &term{id: "t" + strconv.FormatUint(a.terms.seq.Add(1), 10), master: master}
	p := &proc{reaped: make(chan struct{}), done: make(chan struct{}), subs: map[*frameWriter]struct{}{fw: {}}}
	tm.p = p
	var pid int
	var ferr error
	a.procMu.Lock()
	a.onForker(func() { pid, ferr = syscall.ForkExec(path, args, attr) })
	if ferr == nil {
		p.pid = pid
		a.procs[pid] = p
	}
	a.procMu.Unlock()
	closeFDs(slave)
	if ferr != nil {
		_ = master.Close()
		code := "NotFound"
		if errors.Is(ferr, syscall.EACCES) || errors.Is(ferr, syscall.ENOEXEC) {
			code = "PermissionDenied"
		}
		_ = fw.writeJSON(frameFail, failMsg{code, fmt.Sprintf("%s: %v", iox.Shorten(args[0], 64), ferr)})
		return
	}
	started = true
	tm.id += "-" + strconv.Itoa(pid)
	if pidfd >= 0 {
		go a.watchExit(pidfd, nil)
	} else {
		go a.waitBlocking(pid)
	}
	a.terms.add(tm)
	// The start frame goes out under p.mu, before any output is broadcast.
	p.mu.Lock()
	_ = fw.writeJSON(frameStarted, termStarted{PID: pid, Term: tm.id})
	p.mu.Unlock()
	pumped := make(chan struct{})
	go tm.pump(pumped)
	var timer *time.Timer
	if req.Timeout > 0 {
		timer = time.AfterFunc(time.Duration(req.Timeout), func() {
			select {
			case <-p.reaped:
				return
			default:
			}
			p.timedOut.Store(true)
			a.killTree(pid)
		})
	}
	go a.finishTerm(tm, timer, pumped)
	a.serveTerm(in, fw, tm)
}

// pump copies the terminal's output to its subscribers until the last
// slave end closes (EIO) or the master is closed.
func (tm *term) pump(done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, pumpBuf)
	for {
		n, err := tm.master.Read(buf)
		if n > 0 {
			tm.p.broadcast(frameStdout, buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// finishTerm publishes the program's exit once its output is drained:
// at once when no descendant keeps the terminal open, else waitDelay
// after the exit (what such a descendant writes later is not the
// program's).
func (a *agent) finishTerm(tm *term, timer *time.Timer, pumped <-chan struct{}) {
	p := tm.p
	<-p.reaped
	ws := <-p.status
	if timer != nil {
		timer.Stop()
	}
	select {
	case <-pumped:
	case <-time.After(waitDelay):
	}
	_ = tm.master.Close()
	<-pumped
	ex := exitMsg{Code: ws.ExitStatus()}
	if ws.Signaled() {
		ex.Code, ex.Signal = -1, int(ws.Signal())
	}
	if p.timedOut.Load() {
		ex = exitMsg{Code: -1, TimedOut: true}
	}
	// The terminal stops counting against the sandbox's share before
	// its end is told: a client that starts another once Wait returns
	// must find the room (it was refused, at the cap, beside CI).
	a.terms.ended(tm.id)
	p.mu.Lock()
	p.exit = &ex
	for fw := range p.subs {
		_ = fw.writeExit(&ex)
	}
	p.subs = nil
	p.mu.Unlock()
	close(p.done)
	a.procMu.Lock()
	a.exited = append(a.exited, p.pid)
	if len(a.exited) > 256 {
		old := a.exited[0]
		a.exited = a.exited[1:]
		if q := a.procs[old]; q != nil && q.exit != nil {
			delete(a.procs, old)
		}
	}
	a.procMu.Unlock()
}

// attachTerm serves a connection as a new attachment to terminal id:
// output from now on, and input and control frames.
func (a *agent) attachTerm(in <-chan frameMsg, fw *frameWriter, id string) {
	tm := a.terms.get(id)
	if tm == nil {
		_ = fw.writeJSON(frameFail, failMsg{"NotFound", fmt.Sprintf("no terminal %q in this sandbox", iox.Shorten(id, 64))})
		return
	}
	p := tm.p
	p.mu.Lock()
	_ = fw.writeJSON(frameStarted, termStarted{PID: p.pid, Term: tm.id})
	if p.exit != nil {
		_ = fw.writeExit(p.exit)
		p.mu.Unlock()
		return
	}
	p.subs[fw] = struct{}{}
	p.mu.Unlock()
	a.serveTerm(in, fw, tm)
}

// serveTerm applies one attachment's input and control frames to the
// terminal until the program is done or the client goes (the terminal
// then runs on).
func (a *agent) serveTerm(in <-chan frameMsg, fw *frameWriter, tm *term) {
	defer tm.p.unsubscribe(fw)
	input := make(chan []byte, termInputWindow)
	defer close(input)
	go tm.writeInput(input, fw)
	for {
		select {
		case <-tm.p.done:
			return
		case f, ok := <-in:
			if !ok {
				return
			}
			switch f.typ {
			case frameStdin:
				// A client keeps to the window, so this does not
				// block; one that does not only holds up itself.
				select {
				case input <- f.b:
				case <-tm.p.done:
					return
				}
			case frameResize:
				var sz termSize
				if json.Unmarshal(f.b, &sz) == nil && sz.Rows > 0 && sz.Cols > 0 {
					if rc, err := tm.master.SyscallConn(); err == nil {
						_ = rc.Control(func(fd uintptr) {
							_ = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: sz.Rows, Col: sz.Cols})
						})
					}
				}
			case frameTermSig:
				var s termSignal
				if json.Unmarshal(f.b, &s) == nil && s.Signal > 0 {
					a.signalTerm(tm, syscall.Signal(s.Signal))
				}
			}
		}
	}
}

// writeInput writes one attachment's input to the terminal, in order,
// acking each frame to the client; once writing fails (the terminal is
// closed) the rest is dropped. It ends when input is closed.
func (tm *term) writeInput(input <-chan []byte, fw *frameWriter) {
	failed := false
	for b := range input {
		if !failed {
			if _, err := tm.master.Write(b); err != nil {
				failed = true
			}
		}
		_ = fw.write(frameTermAck, nil)
	}
}

// signalTerm sends sig to the terminal's foreground process group, or to
// the program's group when the terminal cannot say which it is.
func (a *agent) signalTerm(tm *term, sig syscall.Signal) {
	select {
	case <-tm.p.reaped:
		return
	default:
	}
	pgrp := 0
	if rc, err := tm.master.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			if n, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP); err == nil {
				pgrp = n
			}
		})
	}
	if pgrp <= 0 {
		pgrp = tm.p.pid
	}
	a.onForker(func() {
		if syscall.Kill(-pgrp, sig) != nil {
			_ = syscall.Kill(tm.p.pid, sig)
		}
	})
}

// The client side.

// StartTerminal starts req's program on a new terminal in sandbox id,
// through its agent.
func (r *Runtime) StartTerminal(ctx context.Context, id string, req *driver.TerminalRequest) (driver.TerminalHandle, error) {
	if req.Output == nil {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "local: terminal request without an Output writer")
	}
	m, err := r.running(ctx, id)
	if err != nil {
		return nil, err
	}
	c, m, err := r.connect(ctx, m)
	if err != nil {
		return nil, err
	}
	// The request is built as a command's (environment, paths, the
	// marker Destroy finds the processes of a flat sandbox by), with no
	// program when the default shell is asked for.
	cmd := &driver.Command{Args: req.Args, Dir: req.Dir, Env: req.Env, Timeout: req.Timeout}
	if len(cmd.Args) == 0 {
		cmd.Args = []string{"sh"}
	}
	areq, err := r.commandRequest(m, cmd, "term")
	if err != nil {
		c.Close()
		return nil, err
	}
	if len(req.Args) == 0 {
		areq.Args = nil
	}
	areq.Rows, areq.Cols = req.Rows, req.Cols
	return r.followTerm(ctx, id, c, areq, req.Output)
}

// AttachTerminal connects to terminal terminalID of sandbox id.
func (r *Runtime) AttachTerminal(ctx context.Context, id, terminalID string, out io.Writer) (driver.TerminalHandle, error) {
	if out == nil {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "local: terminal attach without an output writer")
	}
	m, err := r.running(ctx, id)
	if err != nil {
		return nil, err
	}
	c, err := dial(ctx, r.sock(m.ID))
	if err != nil {
		return nil, sberrors.Errorf(sberrors.NotFound, "local: sandbox %s has no running agent, so no terminal %q: %w", id, iox.Shorten(terminalID, 64), sberrors.ErrNotFound)
	}
	return r.followTerm(ctx, id, c, &request{Op: "term-attach", Term: terminalID}, out)
}

// followTerm sends req on c and returns a handle once the agent reports
// the terminal running; a goroutine then reads its output until the exit
// or Close.
func (r *Runtime) followTerm(ctx context.Context, id string, c net.Conn, req *request, out io.Writer) (driver.TerminalHandle, error) {
	h := &termHandle{r: r, sandbox: id, c: c, fw: &frameWriter{w: c}, done: make(chan struct{}), closed: make(chan struct{}),
		inflight: make(chan struct{}, termInputWindow)}
	// ctx bounds only the start (see follow).
	var startMu sync.Mutex
	isStarted := false
	stop := context.AfterFunc(ctx, func() {
		startMu.Lock()
		defer startMu.Unlock()
		if !isStarted {
			_ = c.SetDeadline(time.Unix(1, 0))
		}
	})
	defer stop()
	if err := h.fw.writeRequest(req); err != nil {
		c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errSend(err)
	}
	started := make(chan termStarted, 1)
	go func() {
		defer close(h.done)
		defer c.Close()
		h.st, h.err = h.read(out, func(s termStarted) {
			startMu.Lock()
			isStarted = true
			_ = c.SetDeadline(time.Time{})
			startMu.Unlock()
			started <- s
		})
	}()
	select {
	case s := <-started:
		h.pid, h.term = s.PID, s.Term
		return h, nil
	case <-h.done:
		select {
		case s := <-started:
			h.pid, h.term = s.PID, s.Term
			return h, nil
		default:
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if h.err != nil {
			return nil, h.err
		}
		return nil, sberrors.Errorf(sberrors.Internal, "local: the agent ended the terminal request without starting it")
	}
}

// termHandle is a TerminalHandle on one terminal of a local sandbox.
type termHandle struct {
	r       *Runtime
	sandbox string
	c       net.Conn
	fw      *frameWriter
	pid     int
	term    string
	done    chan struct{}
	st      driver.ExitStatus
	err     error

	closeOnce sync.Once
	closed    chan struct{}

	// inflight holds a token per input frame sent and not yet acked
	// (see termInputWindow).
	inflight chan struct{}
}

// read reads the connection's frames until the exit frame.
func (h *termHandle) read(out io.Writer, started func(termStarted)) (driver.ExitStatus, error) {
	var buf []byte
	gotStart := false
	for {
		typ, b, err := readFrame(h.c, buf)
		buf = b
		if err != nil {
			if !gotStart {
				return driver.ExitStatus{}, errGone(err, true)
			}
			return driver.ExitStatus{}, fmt.Errorf("local: the sandbox agent went away: %w: %w", err, sberrors.ErrOutcomeUnknown)
		}
		switch typ {
		case frameStarted:
			var s termStarted
			if err := json.Unmarshal(b, &s); err != nil {
				return driver.ExitStatus{}, fmt.Errorf("local: protocol: %w", err)
			}
			gotStart = true
			started(s)
		case frameStdout:
			_, _ = out.Write(b)
		case frameTermAck:
			select {
			case <-h.inflight:
			default:
			}
		case frameExit:
			var x exitMsg
			if err := decodeExit(b, &x); err != nil {
				return driver.ExitStatus{}, fmt.Errorf("local: protocol: %w", err)
			}
			st := driver.ExitStatus{ExitCode: x.Code, TimedOut: x.TimedOut}
			if x.Signal > 0 && !x.TimedOut {
				st.ExitCode, st.Signal = -1, syscall.Signal(x.Signal)
			}
			return st, nil
		case frameFail:
			var f failMsg
			_ = json.Unmarshal(b, &f)
			return driver.ExitStatus{}, f.err()
		}
	}
}

// ID names the terminal for AttachTerminal.
func (h *termHandle) ID() string { return h.term }

// PID is the program's pid in the sandbox.
func (h *termHandle) PID() int { return h.pid }

// send writes one frame, bounded by ctx: a write that ctx cut short
// leaves the connection unusable, and the handle says so from then on.
func (h *termHandle) send(ctx context.Context, typ byte, p []byte) error {
	if err := h.usable(ctx); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = h.c.SetWriteDeadline(time.Unix(1, 0)) })
	err := h.fw.write(typ, p)
	if !stop() && ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("local: terminal %s: %w: %w", h.term, err, sberrors.ErrOutcomeUnknown)
	}
	return nil
}

// usable fails when the handle is closed, the program has exited or ctx
// has ended.
func (h *termHandle) usable(ctx context.Context) error {
	select {
	case <-h.closed:
		return fmt.Errorf("local: terminal %s: %w", h.term, sberrors.ErrClosed)
	case <-h.done:
		if h.err == nil {
			return sberrors.Errorf(sberrors.FailedPrecondition, "local: terminal %s: the program has exited", h.term)
		}
		return h.err
	default:
	}
	return ctx.Err()
}

// exited reports whether the program has exited with a status.
func (h *termHandle) exited() bool {
	select {
	case <-h.done:
		return h.err == nil
	default:
		return false
	}
}

// Write sends input to the terminal, in frames of at most 32 KiB, each
// once the agent has room for it (termInputWindow): input the program
// does not read holds Write up, bounded by ctx, and leaves the connection
// free for Resize and Signal.
func (h *termHandle) Write(ctx context.Context, p []byte) error {
	for len(p) > 0 {
		n := min(len(p), 32<<10)
		select {
		case h.inflight <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-h.closed:
			return h.usable(ctx)
		case <-h.done:
			return h.usable(ctx)
		}
		if err := h.send(ctx, frameStdin, p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// Resize sets the terminal's window size.
func (h *termHandle) Resize(ctx context.Context, rows, cols uint16) error {
	b, _ := json.Marshal(termSize{Rows: rows, Cols: cols})
	return h.send(ctx, frameResize, b)
}

// Signal signals the terminal's foreground process group. A program that
// has exited is not signalled, and that is no error.
func (h *termHandle) Signal(ctx context.Context, sig syscall.Signal) error {
	if err := h.usable(ctx); err != nil {
		if h.exited() {
			return nil
		}
		return err
	}
	m, err := h.r.readMeta(h.sandbox)
	if err != nil {
		return err
	}
	if m.State == driver.StatePaused {
		return errPaused(h.sandbox)
	}
	b, _ := json.Marshal(termSignal{Signal: int(sig)})
	return h.send(ctx, frameTermSig, b)
}

// Wait returns the program's exit status once the agent reports it.
func (h *termHandle) Wait(ctx context.Context) (driver.ExitStatus, error) {
	select {
	case <-h.done:
		if h.err != nil {
			select {
			case <-h.closed:
				return driver.ExitStatus{}, fmt.Errorf("local: terminal %s: %w", h.term, sberrors.ErrClosed)
			default:
			}
			if _, err := h.r.readMeta(h.sandbox); err != nil && sberrors.CodeOf(err) == sberrors.NotFound {
				return driver.ExitStatus{}, err
			}
			return driver.ExitStatus{}, h.err
		}
		return h.st, nil
	case <-ctx.Done():
		return driver.ExitStatus{}, ctx.Err()
	}
}

// Close stops following the terminal; its program keeps running.
func (h *termHandle) Close() error {
	h.closeOnce.Do(func() {
		close(h.closed)
		_ = h.c.Close()
		<-h.done
	})
	return nil
}
