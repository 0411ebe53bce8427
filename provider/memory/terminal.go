package memory

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strconv"
	"sync"
	"syscall"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Terminals. The memory provider has no kernel, so its terminal is an
// emulation over its shell, documented as such:
//
//   - a line discipline: typed bytes are echoed ("\r" as "\r\n"),
//     backspace erases, Enter hands the line on, Ctrl-C ("\x03") prints
//     "^C" and interrupts the running command (or drops the typed line),
//     Ctrl-D on an empty line is end of input; output has "\n" turned
//     into "\r\n";
//   - without Args (or with Args naming a shell alone: "sh", "bash -l"),
//     a prompt ("$ ") and one shell line at a time: each
//     line runs as "sh -c LINE" would (variables and cd do not carry over
//     to the next line), with the lines typed while it runs as its
//     standard input (lines typed ahead of it wait for the shell); "exit [N]" ends the terminal;
//   - with Args, the program as Exec would run it, with typed lines as
//     its standard input;
//   - LINES and COLUMNS hold the size, and "stty size" answers it; there
//     is no job control, no SIGWINCH, and programs do not see a tty
//     ("test -t 0" is false): full-screen programs do not work.

// OpTerminal is recorded for StartTerminal and AttachTerminal.
const OpTerminal = "terminal"

// typedLine is a line typed on an emulated terminal; a nil line is end
// of input (Ctrl-D).
type typedLine struct {
	b   []byte
	seq uint64
}

// mterm is one emulated terminal.
type mterm struct {
	rt  *Runtime
	id  string
	box string
	pid int

	mu       sync.Mutex
	out      map[int]io.Writer // attached outputs
	nextKey  int
	rows     uint16
	cols     uint16
	line     []byte             // the line being typed
	shell    bool               // the emulated shell runs lines (see interactiveShell)
	queue    []typedLine        // typed lines not yet read, oldest first
	seq      uint64             // lines typed so far
	typed    chan struct{}      // signalled (capacity 1) when queue grows
	cancel   context.CancelFunc // interrupts the running command
	killedBy syscall.Signal     // the signal that ends the terminal
	status   driver.ExitStatus
	end      context.CancelFunc // ends the whole terminal
	done     chan struct{}
}

// emit writes p (with "\n" as "\r\n") to every attached output.
func (t *mterm) emit(p []byte) {
	p = bytes.ReplaceAll(p, []byte("\n"), []byte("\r\n"))
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, w := range t.out {
		_, _ = w.Write(p)
	}
}

// crlfWriter is a command's stdout and stderr on the terminal.
type crlfWriter struct{ t *mterm }

func (w crlfWriter) Write(p []byte) (int, error) { w.t.emit(p); return len(p), nil }

// StartTerminal starts an emulated terminal (see the package's notes on
// what it emulates).
func (r *Runtime) StartTerminal(_ context.Context, id string, req *driver.TerminalRequest) (driver.TerminalHandle, error) {
	if err := r.begin(OpTerminal, id, fmt.Sprint(req.Args)); err != nil {
		return nil, err
	}
	if req.Output == nil || req.Rows == 0 || req.Cols == 0 {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "memory: terminal request needs an Output and a size")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.get(id, true)
	if err == nil {
		err = checkDir(b, req.Dir)
	}
	if err != nil {
		return nil, err
	}
	r.nextPID++
	t := &mterm{rt: r, box: id, pid: r.nextPID, id: "t" + strconv.Itoa(r.nextPID),
		out: map[int]io.Writer{0: req.Output}, nextKey: 1, rows: req.Rows, cols: req.Cols, done: make(chan struct{})}
	var tctx context.Context
	if req.Timeout > 0 {
		tctx, t.end = context.WithTimeout(context.Background(), req.Timeout)
	} else {
		tctx, t.end = context.WithCancel(context.Background())
	}
	if r.terms == nil {
		r.terms = map[string]*mterm{}
	}
	r.terms[id+"/"+t.id] = t
	env := map[string]string{"TERM": "xterm-256color"}
	for k, v := range req.Env {
		env[k] = v
	}
	untrack := r.trackLocked(id, b, func(error) {
		t.mu.Lock()
		if t.killedBy == 0 {
			t.killedBy = syscall.SIGKILL
		}
		t.mu.Unlock()
		t.end()
	})
	t.shell, t.typed = interactiveShell(req.Args), make(chan struct{}, 1)
	go func() {
		defer close(t.done)
		defer t.end()
		code := t.run(tctx, b, req, env)
		untrack()
		r.mu.Lock()
		delete(r.terms, id+"/"+t.id) // an exited terminal cannot be attached
		r.mu.Unlock()
		t.mu.Lock()
		switch {
		case t.killedBy != 0:
			t.status = driver.ExitStatus{ExitCode: -1, Signal: t.killedBy}
		case tctx.Err() == context.DeadlineExceeded:
			t.status = driver.ExitStatus{ExitCode: -1, TimedOut: true}
		default:
			t.status = driver.ExitStatus{ExitCode: code}
		}
		t.mu.Unlock()
	}()
	return &mtermHandle{t: t, key: 0}, nil
}

// interactiveShell reports whether args start the emulated shell: none
// (the default), or a shell named without arguments ("sh", "bash").
func interactiveShell(args []string) bool {
	if len(args) == 0 {
		return true
	}
	switch path.Base(args[0]) {
	case "sh", "bash", "dash":
		return len(args) == 1 || (len(args) == 2 && (args[1] == "-l" || args[1] == "-i"))
	}
	return false
}

var exitLine = regexp.MustCompile(`^\s*exit(?:\s+(\d+))?\s*;?\s*$`)

// run runs the terminal's program (or its shell loop) and returns the
// exit code.
func (t *mterm) run(ctx context.Context, b *box, req *driver.TerminalRequest, env map[string]string) int {
	if !interactiveShell(req.Args) {
		return t.command(ctx, b, &driver.Command{Args: req.Args, Dir: req.Dir, Env: env})
	}
	last := 0
	for {
		t.emit([]byte("$ "))
		line, ok := t.next(ctx, ctx, 0)
		if ctx.Err() != nil {
			return -1
		}
		if !ok {
			t.emit([]byte("exit\n"))
			return last
		}
		s := string(bytes.TrimRight(line, "\n"))
		if m := exitLine.FindStringSubmatch(s); m != nil {
			if m[1] == "" {
				return last
			}
			n, _ := strconv.Atoi(m[1])
			return n & 0xff
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		last = t.command(ctx, b, &driver.Command{Shell: s, Dir: req.Dir, Env: env})
		if ctx.Err() != nil {
			return -1
		}
	}
}

// command runs one command with the terminal as its standard streams; the
// lines typed meanwhile are its input, Ctrl-C interrupts it (exit status
// 130, as a shell reports a job ended by SIGINT).
func (t *mterm) command(ctx context.Context, b *box, cmd *driver.Command) int {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.emit([]byte("sh: " + err.Error() + "\n"))
		return 126
	}
	defer pr.Close()
	var closeW sync.Once
	closePW := func() { closeW.Do(func() { _ = pw.Close() }) }
	// The command's end closes its input: a program blocked reading it
	// (an interrupted read) sees end of file.
	stopClose := context.AfterFunc(cctx, closePW)
	defer stopClose()
	fed := make(chan struct{})
	var from uint64
	if t.shell {
		t.mu.Lock()
		from = t.seq
		t.mu.Unlock()
	}
	go func() {
		// The lines typed (for a command of the shell: since it
		// started), in order, until the command ends. Lines typed ahead
		// of a command of the shell, and those it has not read, stay
		// for the shell, as in a tty.
		defer close(fed)
		for {
			l, ok := t.next(ctx, cctx, from)
			if !ok {
				if cctx.Err() == nil {
					closePW() // end of input (Ctrl-D)
				}
				return
			}
			if _, err := pw.Write(l); err != nil {
				return
			}
		}
	}()
	t.mu.Lock()
	env := make(map[string]string, len(cmd.Env)+2)
	for k, v := range cmd.Env {
		env[k] = v
	}
	env["LINES"], env["COLUMNS"] = strconv.Itoa(int(t.rows)), strconv.Itoa(int(t.cols))
	t.cancel = cancel
	t.mu.Unlock()
	cmd.Env = env
	t.rt.mu.Lock()
	c := t.rt.newCall(t.box, b, cmd, crlfWriter{t}, crlfWriter{t})
	t.rt.mu.Unlock()
	c.Stdin = pr // read by the command itself: what it leaves is still in the pipe
	code := t.rt.run(cctx, c)
	t.mu.Lock()
	t.cancel = nil
	interrupted := cctx.Err() != nil && ctx.Err() == nil
	t.mu.Unlock()
	cancel()
	closePW()
	<-fed
	if !interrupted && t.shell {
		// Input the command did not read goes back to the shell, ahead of
		// what was typed since. (An interrupt discards it, as a tty's
		// Ctrl-C flushes its input.)
		if rest, _ := io.ReadAll(pr); len(rest) > 0 {
			t.unread(rest)
		}
	}
	if interrupted {
		return 130
	}
	return code
}

// unread puts lines a command did not read back at the head of the queue.
func (t *mterm) unread(rest []byte) {
	var back []typedLine
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			i = len(rest) - 1
		}
		back = append(back, typedLine{b: bytes.Clone(rest[:i+1])})
		rest = rest[i+1:]
	}
	t.mu.Lock()
	t.queue = append(back, t.queue...)
	t.mu.Unlock()
	select {
	case t.typed <- struct{}{}:
	default:
	}
}

// next takes the oldest typed line numbered from on, waiting for one
// until stop ends (ok false then, as at end of input). Cancelling stop
// under t.mu (as Ctrl-C does) means no line is taken after it.
func (t *mterm) next(ctx, stop context.Context, from uint64) ([]byte, bool) {
	for {
		t.mu.Lock()
		if stop.Err() != nil {
			t.mu.Unlock()
			return nil, false
		}
		for i, l := range t.queue {
			if l.seq >= from {
				t.queue = append(t.queue[:i:i], t.queue[i+1:]...)
				t.mu.Unlock()
				return l.b, l.b != nil
			}
		}
		t.mu.Unlock()
		select {
		case <-t.typed:
		case <-stop.Done():
		case <-ctx.Done():
		}
	}
}

// maxQueued bounds the typed lines not yet read, as a tty's input
// queue is bounded: past it, lines are dropped.
const maxQueued = 256

// input applies typed bytes to the line discipline. The echo of a write
// reaches the output before any line it completes is handed to the
// program, as a tty echoes as it receives: the program's answer to a line
// never comes before the line's echo.
func (t *mterm) input(p []byte) {
	var echo []byte
	var lines [][]byte // completed lines, queued after the echo is out
	t.mu.Lock()
	for _, c := range p {
		switch c {
		case 0x03: // Ctrl-C: the typed line and queued input are dropped
			echo = append(echo, "^C\n"...)
			t.line, t.queue, lines = t.line[:0], nil, nil
			if t.cancel != nil {
				t.cancel()
			} else if t.shell {
				lines = append(lines, []byte("\n")) // the shell prompts again
			}
		case 0x04: // Ctrl-D
			if len(t.line) > 0 {
				lines = append(lines, bytes.Clone(t.line))
				t.line = t.line[:0]
				continue
			}
			lines = append(lines, nil)
		case 0x7f, 0x08: // backspace
			if len(t.line) > 0 {
				t.line = t.line[:len(t.line)-1]
				echo = append(echo, "\b \b"...)
			}
		case '\r', '\n':
			echo = append(echo, '\n')
			lines = append(lines, append(bytes.Clone(t.line), '\n'))
			t.line = t.line[:0]
		default:
			t.line = append(t.line, c)
			echo = append(echo, c)
		}
	}
	t.mu.Unlock()
	if len(echo) > 0 {
		t.emit(echo)
	}
	if len(lines) > 0 {
		t.mu.Lock()
		for _, l := range lines {
			t.queueLocked(l)
		}
		t.mu.Unlock()
	}
}

func (t *mterm) queueLocked(l []byte) {
	if len(t.queue) >= maxQueued {
		return
	}
	t.queue = append(t.queue, typedLine{b: l, seq: t.seq})
	t.seq++
	select {
	case t.typed <- struct{}{}:
	default:
	}
}

// AttachTerminal connects to an emulated terminal of this Runtime.
func (r *Runtime) AttachTerminal(_ context.Context, id, terminalID string, out io.Writer) (driver.TerminalHandle, error) {
	if err := r.begin(OpTerminal, id, terminalID); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.get(id, false); err != nil {
		return nil, err
	}
	t := r.terms[id+"/"+terminalID]
	if t == nil {
		return nil, fmt.Errorf("memory: sandbox %s: terminal %q: %w", id, terminalID, sberrors.ErrNotFound)
	}
	t.mu.Lock()
	key := t.nextKey
	t.nextKey++
	t.out[key] = out
	t.mu.Unlock()
	return &mtermHandle{t: t, key: key}, nil
}

type mtermHandle struct {
	t      *mterm
	key    int
	once   sync.Once
	closed chan struct{}
	mu     sync.Mutex
}

func (h *mtermHandle) ID() string { return h.t.id }
func (h *mtermHandle) PID() int   { return h.t.pid }

func (h *mtermHandle) check() error {
	select {
	case <-h.t.done:
		return sberrors.Errorf(sberrors.FailedPrecondition, "memory: terminal %s: the program has exited", h.t.id)
	default:
		return nil
	}
}

func (h *mtermHandle) Write(ctx context.Context, p []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := h.check(); err != nil {
		return err
	}
	h.t.input(p)
	return nil
}

func (h *mtermHandle) Resize(ctx context.Context, rows, cols uint16) error {
	if err := h.check(); err != nil {
		return err
	}
	h.t.mu.Lock()
	h.t.rows, h.t.cols = rows, cols
	h.t.mu.Unlock()
	return nil
}

// Signal: SIGINT interrupts the running command (as Ctrl-C does); SIGHUP,
// SIGTERM and SIGKILL end the terminal's program, or, for the shell, the
// terminal.
func (h *mtermHandle) Signal(_ context.Context, sig syscall.Signal) error {
	if h.check() != nil {
		return nil // the program has exited: nothing to deliver
	}
	t := h.t
	t.mu.Lock()
	cancel, shell := t.cancel, t.shell
	t.mu.Unlock()
	switch sig {
	case syscall.SIGINT:
		if cancel != nil {
			if !shell {
				t.mu.Lock()
				t.killedBy = sig
				t.mu.Unlock()
			}
			cancel()
		}
	case syscall.SIGHUP, syscall.SIGTERM, syscall.SIGKILL:
		if shell && cancel != nil && sig != syscall.SIGKILL {
			cancel() // the job dies; an interactive shell ignores it
			return nil
		}
		t.mu.Lock()
		if t.killedBy == 0 {
			t.killedBy = sig
		}
		t.mu.Unlock()
		t.end()
	}
	return nil
}

func (h *mtermHandle) Wait(ctx context.Context) (driver.ExitStatus, error) {
	select {
	case <-h.t.done:
		h.t.mu.Lock()
		defer h.t.mu.Unlock()
		return h.t.status, nil
	case <-ctx.Done():
		return driver.ExitStatus{}, ctx.Err()
	}
}

func (h *mtermHandle) Close() error {
	h.once.Do(func() {
		h.t.mu.Lock()
		delete(h.t.out, h.key)
		h.t.mu.Unlock()
	})
	return nil
}
