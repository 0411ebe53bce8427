package sandbox

import (
	"context"
	"io"
	"maps"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

// Default terminal size, used when TerminalOptions leaves Rows or Cols 0:
// the size of a classic VT100 screen, which programs assume when they
// cannot ask.
const (
	DefaultTerminalRows = 24
	DefaultTerminalCols = 80
)

// DefaultTerminalBuffer is how many bytes of output a Terminal without
// TerminalOptions.Output keeps for Read: past it the oldest unread bytes
// are dropped (Terminal.Dropped counts them), so a terminal nobody reads
// never holds more memory than this.
const DefaultTerminalBuffer = 1 << 20

// terminalWriteTimeout bounds Terminal.Write, which has no context.
const terminalWriteTimeout = 30 * time.Second

// TerminalOptions describes a program to run on a pseudo-terminal in a
// sandbox (Sandbox.StartTerminal). The zero value opens the sandbox
// user's login shell on a 24x80 terminal in the home directory, with its
// output kept for Terminal.Read.
type TerminalOptions struct {
	// Args is the program and its arguments (no shell interprets them);
	// empty means the sandbox user's login shell.
	Args []string
	// Rows and Cols are the initial window size; 0 means 24 rows and 80
	// columns.
	Rows, Cols uint16
	// Env adds environment variables. TERM is xterm-256color unless Env
	// sets it.
	Env map[string]string
	// SecretEnv adds environment variables whose values are secret: they
	// are redacted from the terminal's output (as are the sandbox's, set
	// with CreateOptions.SecretEnv) and never appear in errors. As for
	// Exec, output that could be the start of a secret is held back until
	// the output that follows shows it is not (or the program exits), so
	// a secret echoed one key at a time is redacted too. Escape sequences
	// between a secret's bytes (colour codes, as grep --color puts around
	// a match inside it) do not hide it: it is matched with them left
	// out and the whole span replaced, its control sequences kept after
	// the "[REDACTED]". A secret the program rewrites otherwise (cursor
	// moves that draw it out of order, other encodings) is not found.
	SecretEnv map[string]string
	// Dir is the working directory; default the sandbox's home. Relative
	// paths are resolved against the home.
	Dir string
	// Output, when non-nil, receives everything the terminal writes (the
	// program's output and the terminal's echo of the input), with secret
	// values redacted, as it comes; Terminal.Read then returns io.EOF at
	// once. When nil, output is kept, up to BufferSize bytes, for
	// Terminal.Read.
	Output io.Writer
	// BufferSize bounds the output kept for Read when Output is nil; 0
	// means DefaultTerminalBuffer. Negative is an error.
	BufferSize int
	// Timeout ends the program after this long (Wait then reports
	// TimedOut); 0 means no limit: like a background process, a terminal
	// runs until it exits, is signalled, or the sandbox ends. The lease is
	// extended to cover a Timeout, as for Start. Negative is an error.
	Timeout time.Duration
}

// ExitStatus is how a terminal's program ended (Terminal.Wait).
type ExitStatus struct {
	// ExitCode is the exit code; -1 when a signal or timeout ended it.
	ExitCode int
	// Signal is the (Linux) signal that ended the program, where the
	// provider reports it (Capabilities.ReportsSignal); 0 otherwise.
	Signal syscall.Signal
	// TimedOut reports that TerminalOptions.Timeout ended the program.
	TimedOut bool
	// Duration is the time from the start (or the attach) to the exit.
	Duration time.Duration
}

// Success reports whether the program exited with code 0.
func (e *ExitStatus) Success() bool { return e.ExitCode == 0 && !e.TimedOut }

// Terminal is a program running on a pseudo-terminal in a sandbox, from
// Sandbox.StartTerminal or AttachTerminal. It is an io.ReadWriter: Write
// sends input as typed keys ("\x03" is Ctrl-C, "\r" is Enter) and Read
// returns the output (when TerminalOptions.Output is nil). The handle is
// safe for concurrent use. Close releases it; the program runs on until it
// exits, so that another handle can attach to it by ID.
type Terminal struct {
	sb      *Sandbox
	h       driver.TerminalHandle
	secrets [][]byte
	out     io.Writer   // the redactor (or the buffer) the driver writes to
	buf     *termBuffer // nil when the caller gave an Output
	started time.Time

	mu     sync.Mutex
	status *ExitStatus
	closed bool
}

// StartTerminal starts a program (a login shell unless opts.Args says
// otherwise) on a new pseudo-terminal in the sandbox, with the same
// confinement as Exec: echo, line editing, job control and Ctrl-C behave
// as in a terminal, and the program sees a tty on its standard streams.
// ctx bounds only the start. The provider must implement
// driver.TerminalRuntime (Capabilities.Terminals); otherwise the error
// matches ErrUnimplemented.
func (s *Sandbox) StartTerminal(ctx context.Context, opts TerminalOptions) (_ *Terminal, err error) {
	const op = "start-terminal"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	name := s.c.rt.Name()
	tr, ok := s.c.rt.(driver.TerminalRuntime)
	if !ok {
		return nil, s.wrap(op, "", ErrUnimplemented)
	}
	if len(opts.Args) > 0 && opts.Args[0] == "" {
		return nil, invalid(op, name, s.id, "terminal args", "Args[0] is empty")
	}
	for i, a := range opts.Args {
		if slices.Contains([]byte(a), 0) {
			return nil, invalid(op, name, s.id, "terminal args", "Args[%d] holds NUL", i)
		}
		if len(a) > maxArgBytes {
			return nil, invalid(op, name, s.id, "terminal args", "Args[%d] is %d bytes, over the limit of %d (MAX_ARG_STRLEN)", i, len(a), maxArgBytes)
		}
	}
	if err := checkEnv(op, name, s.id, opts.Env, false); err != nil {
		return nil, err
	}
	if err := checkEnv(op, name, s.id, opts.SecretEnv, true); err != nil {
		return nil, err
	}
	if opts.Timeout < 0 {
		return nil, invalid(op, name, s.id, "terminal timeout", "%v is negative", opts.Timeout)
	}
	if opts.BufferSize < 0 {
		return nil, invalid(op, name, s.id, "terminal buffer size", "%d is negative", opts.BufferSize)
	}
	dir := s.Home()
	if opts.Dir != "" {
		var err error
		if dir, err = s.path(op, "terminal dir", opts.Dir); err != nil {
			return nil, err
		}
	}
	rows, cols := opts.Rows, opts.Cols
	if rows == 0 {
		rows = DefaultTerminalRows
	}
	if cols == 0 {
		cols = DefaultTerminalCols
	}
	s.remember(secretValues(opts.SecretEnv))
	secrets := append(slices.Clone(s.secrets), secretValues(opts.SecretEnv)...)
	slices.SortFunc(secrets, func(a, b []byte) int { return len(b) - len(a) })
	t := s.newTerminal(secrets, opts.Output, opts.BufferSize)
	env := make(map[string]string, len(opts.Env)+len(opts.SecretEnv))
	maps.Copy(env, opts.Env)
	maps.Copy(env, opts.SecretEnv)
	req := &driver.TerminalRequest{Args: slices.Clone(opts.Args), Dir: dir, Env: env, Rows: rows, Cols: cols,
		Output: t.out, Timeout: opts.Timeout}
	if err := s.coverLease(ctx, op, opts.Timeout); err != nil {
		return nil, redactErr(s.c.wrap(op, s.id, "", err), secrets)
	}
	err = s.c.retry(ctx, op, false, nil, func() error {
		var err error
		t.h, err = tr.StartTerminal(ctx, s.id, req)
		return err
	})
	if err != nil {
		return nil, redactErr(s.c.wrap(op, s.id, "", err), secrets)
	}
	return t, nil
}

// AttachTerminalOptions describes an attach to a running terminal
// (Sandbox.AttachTerminalWith).
type AttachTerminalOptions struct {
	// Output, when non-nil, receives what the terminal writes from now
	// on, redacted, as it comes; when nil it is kept (up to
	// DefaultTerminalBuffer bytes) for Terminal.Read.
	Output io.Writer
	// SecretEnv holds secret values to redact from the output besides
	// those the handle knows (only the values count; the names are
	// checked as TerminalOptions.SecretEnv's). An attach through the
	// handle that started the terminal already redacts its
	// TerminalOptions.SecretEnv; an attach from another handle (another
	// Client, another OS process) knows only the sandbox's secrets and
	// these, so a terminal started with its own secrets needs them given
	// here.
	SecretEnv map[string]string
}

// AttachTerminal connects to a running terminal of the sandbox by its ID
// (Terminal.ID), possibly one started by another Client in another OS
// process (where Capabilities.AttachAcrossClients holds). Output written
// from now on goes to out, redacted as StartTerminal's is; when out is
// nil it is kept (up to DefaultTerminalBuffer bytes) for Read. An unknown
// terminal matches ErrNotFound. It is AttachTerminalWith with only the
// writer: see there for which secrets are redacted.
func (s *Sandbox) AttachTerminal(ctx context.Context, id string, out io.Writer) (*Terminal, error) {
	return s.AttachTerminalWith(ctx, id, AttachTerminalOptions{Output: out})
}

// AttachTerminalWith connects to a running terminal by its ID, as
// AttachTerminal, redacting from its output the sandbox's secrets, the
// SecretEnv values of every command and terminal started through this
// handle, and opts.SecretEnv.
func (s *Sandbox) AttachTerminalWith(ctx context.Context, id string, opts AttachTerminalOptions) (_ *Terminal, err error) {
	const op = "attach-terminal"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	tr, ok := s.c.rt.(driver.TerminalRuntime)
	if !ok {
		return nil, s.wrap(op, "", ErrUnimplemented)
	}
	if id == "" {
		return nil, invalid(op, s.c.rt.Name(), s.id, "terminal id", "empty")
	}
	if len(id) > 256 || slices.ContainsFunc([]byte(id), func(b byte) bool { return b < 0x20 || b == 0x7f }) {
		return nil, invalid(op, s.c.rt.Name(), s.id, "terminal id", "%s is not a terminal id", printable(id))
	}
	if err := checkEnv(op, s.c.rt.Name(), s.id, opts.SecretEnv, true); err != nil {
		return nil, err
	}
	secrets := s.knownSecrets(secretValues(opts.SecretEnv))
	t := s.newTerminal(secrets, opts.Output, 0)
	err = s.c.retry(ctx, op, true, nil, func() error {
		var err error
		t.h, err = tr.AttachTerminal(ctx, s.id, id, t.out)
		return err
	})
	if err != nil {
		return nil, redactErr(s.wrap(op, "", err), secrets)
	}
	return t, nil
}

func (s *Sandbox) newTerminal(secrets [][]byte, out io.Writer, bufSize int) *Terminal {
	t := &Terminal{sb: s, secrets: secrets, started: time.Now()}
	if out == nil {
		if bufSize == 0 {
			bufSize = DefaultTerminalBuffer
		}
		t.buf = newTermBuffer(bufSize)
		out = t.buf
	} else {
		out = lockedWriter{mu: new(sync.Mutex), w: &failSafeWriter{w: out}}
	}
	t.out = newTermRedactor(out, secrets)
	return t
}

// ID identifies the terminal within its sandbox; pass it to
// Sandbox.AttachTerminal to reconnect.
func (t *Terminal) ID() string { return t.h.ID() }

// PID is the program's process id in the sandbox, where the provider
// says (0 otherwise).
func (t *Terminal) PID() int { return t.h.PID() }

// Write sends p to the terminal as typed input. It implements io.Writer;
// it gives up after 30 seconds should the provider not take the input
// (use WriteContext for another bound).
func (t *Terminal) Write(p []byte) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), terminalWriteTimeout)
	defer cancel()
	return t.WriteContext(ctx, p)
}

// WriteContext sends p to the terminal as typed input, bounded by ctx.
func (t *Terminal) WriteContext(ctx context.Context, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if t.isClosed() {
		return 0, t.sb.wrap("terminal-write", "", ErrClosed)
	}
	if err := t.h.Write(ctx, p); err != nil {
		return 0, t.wrap("terminal-write", err)
	}
	return len(p), nil
}

// Read reads output the terminal wrote, when TerminalOptions.Output (or
// AttachTerminal's out) was nil. It blocks until output is there, and
// returns io.EOF once the program exited and everything it wrote was read,
// or once the handle is closed. With an Output writer, it returns io.EOF
// at once.
func (t *Terminal) Read(p []byte) (int, error) {
	if t.buf == nil {
		return 0, io.EOF
	}
	return t.buf.Read(p)
}

// Dropped returns how many output bytes were dropped because nobody read
// them before the buffer (TerminalOptions.BufferSize) was full.
func (t *Terminal) Dropped() int64 {
	if t.buf == nil {
		return 0
	}
	return t.buf.dropped()
}

// Resize sets the terminal's window size; the program gets SIGWINCH.
// Rows and cols must be positive.
func (t *Terminal) Resize(ctx context.Context, rows, cols uint16) error {
	const op = "terminal-resize"
	if rows == 0 || cols == 0 {
		return invalid(op, t.sb.c.rt.Name(), t.sb.id, "terminal size", "%dx%d: rows and cols must be positive", rows, cols)
	}
	if t.isClosed() {
		return t.sb.wrap(op, "", ErrClosed)
	}
	return t.wrap(op, t.h.Resize(ctx, rows, cols))
}

// Signal sends sig to the terminal's foreground process group (the job
// the user would interrupt with Ctrl-C), or to the program where the
// provider cannot tell them apart. Once the program has exited, Signal
// sends nothing and returns nil.
func (t *Terminal) Signal(ctx context.Context, sig syscall.Signal) error {
	const op = "terminal-signal"
	if sig <= 0 {
		return invalid(op, t.sb.c.rt.Name(), t.sb.id, "signal", "%d is not a signal", int(sig))
	}
	if t.isClosed() {
		return t.sb.wrap(op, "", ErrClosed)
	}
	return t.wrap(op, t.h.Signal(ctx, sig))
}

// Wait waits for the program to exit and returns how it ended; by then
// all its output has been written to Output (or is in the buffer for
// Read). It may be called more than once and from several goroutines:
// each returns when its own ctx ends, and the program runs on.
func (t *Terminal) Wait(ctx context.Context) (*ExitStatus, error) {
	const op = "terminal-wait"
	t.mu.Lock()
	if st := t.status; st != nil {
		t.mu.Unlock()
		c := *st
		return &c, nil
	}
	t.mu.Unlock()
	st, err := t.h.Wait(ctx)
	if err != nil {
		return nil, t.wrap(op, t.sb.lostToLease(ctx, op, err))
	}
	flushWriter(t.out)
	t.mu.Lock()
	if t.status == nil {
		es := &ExitStatus{ExitCode: st.ExitCode, Signal: st.Signal, TimedOut: st.TimedOut, Duration: time.Since(t.started)}
		if es.Signal != 0 || es.TimedOut {
			es.ExitCode = -1
		}
		t.status = es
	}
	c := *t.status
	t.mu.Unlock()
	if t.buf != nil {
		t.buf.finish()
	}
	if lerr := t.sb.killedByLease(ctx, op, &Result{ExitCode: c.ExitCode, Signal: c.Signal, TimedOut: c.TimedOut}); lerr != nil {
		return &c, t.wrap(op, lerr)
	}
	return &c, nil
}

// Close releases the handle without ending the program; Read then returns
// what is buffered and io.EOF. Closing twice is a no-op.
func (t *Terminal) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	err := t.h.Close()
	flushWriter(t.out)
	if t.buf != nil {
		t.buf.finish()
	}
	return t.wrap("terminal-close", err)
}

func (t *Terminal) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

func (t *Terminal) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return redactErr(t.sb.c.wrap(op, t.sb.id, "", err), t.secrets)
}

// failSafeWriter drops the caller's Output once it failed, so a broken
// writer never stops the terminal's stream (or the driver's reader).
type failSafeWriter struct {
	w   io.Writer
	err error
}

func (f *failSafeWriter) Write(p []byte) (int, error) {
	if f.err == nil {
		if _, err := f.w.Write(p); err != nil {
			f.err = err
		}
	}
	return len(p), nil
}

// termBuffer is the bounded output of a Terminal read with Read: writes
// never block (a driver's reader must not stall on a slow consumer); when
// full, the oldest bytes make room and are counted as dropped.
type termBuffer struct {
	mu   sync.Mutex
	cond *sync.Cond
	max  int
	data []byte
	lost int64
	done bool
}

func newTermBuffer(max int) *termBuffer {
	b := &termBuffer{max: max}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *termBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if len(p) > b.max {
		b.lost += int64(len(p) - b.max)
		p = p[len(p)-b.max:]
	}
	if over := len(b.data) + len(p) - b.max; over > 0 {
		b.lost += int64(over)
		b.data = append(b.data[:0], b.data[over:]...)
	}
	b.data = append(b.data, p...)
	b.cond.Broadcast()
	return n, nil
}

func (b *termBuffer) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.data) == 0 && !b.done {
		b.cond.Wait()
	}
	if len(b.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	if len(b.data) == 0 {
		b.data = nil // let a large drained buffer go
	}
	return n, nil
}

// finish makes Read return io.EOF once the buffer is drained.
func (b *termBuffer) finish() {
	b.mu.Lock()
	b.done = true
	b.cond.Broadcast()
	b.mu.Unlock()
}

func (b *termBuffer) dropped() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lost
}
