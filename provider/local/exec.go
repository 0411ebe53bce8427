//go:build linux

package local

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/pathsafe"
	"github.com/sandboxkit/sandbox/sberrors"
)

// dial connects to the agent listening on sock and authenticates with the
// key stored next to the socket (in the sandbox's directory).
func dial(ctx context.Context, sock string) (net.Conn, error) {
	key, err := os.ReadFile(filepath.Join(filepath.Dir(sock), keyFile))
	if err != nil {
		return nil, fmt.Errorf("local: agent key: %w", err)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write(authFrame(key)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// agentCall sends a control request and waits for its OK.
func agentCall(ctx context.Context, sock string, req *request) error {
	c, err := dial(ctx, sock)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	fw := &frameWriter{w: c}
	if err := fw.writeRequest(req); err != nil {
		return err
	}
	typ, b, err := readFrame(c, nil)
	if err != nil {
		if req.Op == "shutdown" && errors.Is(err, io.EOF) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	if typ == frameFail {
		var f failMsg
		_ = json.Unmarshal(b, &f)
		return f.err()
	}
	return nil
}

// agentExec runs req (exec) on the agent at sock, streaming output, and
// returns the exit status.
func agentExec(ctx context.Context, sock string, req *request, stdin io.Reader, stdout, stderr io.Writer) (driver.ExitStatus, error) {
	c, err := dial(ctx, sock)
	if err != nil {
		return driver.ExitStatus{}, err
	}
	defer c.Close()
	return runConn(ctx, c, req, stdin, stdout, stderr, nil)
}

// runConn sends req on c and reads frames until the exit frame. started,
// if non-nil, receives the pid once the process runs.
func runConn(ctx context.Context, c net.Conn, req *request, stdin io.Reader, stdout, stderr io.Writer, started func(int)) (driver.ExitStatus, error) {
	stop := context.AfterFunc(ctx, func() { endOnCancel(c, req.Op == "exec") })
	defer stop()
	if req.Timeout > 0 {
		// Safety net should the agent stop answering (it enforces the timeout itself).
		_ = c.SetReadDeadline(time.Now().Add(time.Duration(req.Timeout) + 10*time.Second))
	}
	fw := &frameWriter{w: c}
	req.Stdin = stdin != nil
	if err := fw.writeRequest(req); err != nil {
		if ctx.Err() != nil {
			return driver.ExitStatus{}, ctx.Err()
		}
		return driver.ExitStatus{}, errSend(err)
	}
	requestOnly := true
	if stdin != nil && req.Op == "exec" {
		copied, in := make(chan struct{}), stdin
		go func() {
			defer close(copied)
			copyStdin(fw, in) // the agent queues it until the process runs
		}()
		if sc, ok := in.(io.Closer); ok {
			// Join the copy before returning: closing the portable layer's
			// stdin abandons a Read of the caller's reader that may never
			// end (driver.Runtime.Exec), and closing c ends a write.
			defer func() {
				_ = sc.Close()
				_ = c.SetWriteDeadline(time.Unix(1, 0))
				<-copied
			}()
		}
		stdin, requestOnly = nil, false
	}
	return readExit(ctx, c, fw, stdin, stdout, stderr, started, req.Timeout > 0, requestOnly)
}

// endOnCancel ends a command's connection when the caller's context ends.
// For an exec it closes only the client's side: the agent kills the
// command and sends what it wrote until then, then the exit frame, which
// the client reads for at most twice cancelDrain (the agent's own bound,
// counted from when it sees the close, plus as much again for a loaded
// host to run the agent and carry its frames); output already on its way
// is not dropped at the deadline. Any other request's read ends at once.
func endOnCancel(c net.Conn, drain bool) {
	if cw, ok := c.(interface{ CloseWrite() error }); drain && ok && cw.CloseWrite() == nil {
		_ = c.SetWriteDeadline(time.Unix(1, 0))
		_ = c.SetReadDeadline(time.Now().Add(2 * cancelDrain))
		return
	}
	_ = c.SetDeadline(time.Unix(1, 0))
}

// errSend is the error of a request that could not be written whole: a
// truncated frame is never acted on, so the transport was stale.
func errSend(err error) error {
	return fmt.Errorf("local: sending the command: %w: %w", err, sberrors.ErrStaleTransport)
}

// errGone is the error of a connection that failed after its request was
// written and before any answer. The agent may have started the command
// (it announces a foreground exec only through its output or exit), so
// the outcome is unknown, with one exception: when the client wrote
// nothing but the request (requestOnly) and the read fails with
// ECONNRESET, the agent closed the connection with the request still
// unread in its receive queue (Linux resets a unix stream socket whose
// peer closes with unread data; had the agent read it, the read would end
// with EOF), so it cannot have acted on it.
func errGone(err error, requestOnly bool) error {
	if requestOnly && errors.Is(err, syscall.ECONNRESET) {
		return fmt.Errorf("local: the sandbox agent closed the connection without reading the command: %w: %w", err, sberrors.ErrStaleTransport)
	}
	return fmt.Errorf("local: the sandbox agent went away after receiving the command, which may have run: %w: %w", err, sberrors.ErrOutcomeUnknown)
}

// readExit reads the frames of one command until its exit. requestOnly
// says that the client has written nothing but the request on c (it then
// writes stdin only after the start frame).
func readExit(ctx context.Context, c net.Conn, fw *frameWriter, stdin io.Reader, stdout, stderr io.Writer, started func(int), hasTimeout, requestOnly bool) (driver.ExitStatus, error) {
	var buf []byte
	gotStart := false
	// A frame's header and payload come in one read: the agent sends
	// nothing after the exit (or fail) frame until the next request, so
	// the buffer holds no byte of a later exchange when this returns.
	br := frameReaders.Get().(*bufio.Reader)
	br.Reset(c)
	defer func() {
		br.Reset(nil)
		frameReaders.Put(br)
	}()
	for {
		typ, b, err := readFrame(br, buf)
		buf = b
		if err != nil {
			if ctx.Err() != nil {
				return driver.ExitStatus{}, ctx.Err()
			}
			var ne net.Error
			if hasTimeout && errors.As(err, &ne) && ne.Timeout() {
				// The agent enforces the timeout and reports it; one that
				// did not answer 10 s after it is stuck, and what the
				// command did is unknown (issue 12: never a TimedOut
				// result the agent did not report).
				return driver.ExitStatus{}, sberrors.Errorf(sberrors.DeadlineExceeded, "local: the sandbox agent did not report the command's end 10s after its timeout: %w", sberrors.ErrOutcomeUnknown)
			}
			if !gotStart {
				return driver.ExitStatus{}, errGone(err, requestOnly)
			}
			return driver.ExitStatus{}, fmt.Errorf("local: the sandbox agent went away: %w: %w", err, sberrors.ErrOutcomeUnknown)
		}
		gotStart = gotStart || typ != frameFail
		switch typ {
		case frameStarted:
			gotStart = true
			var s startedMsg
			_ = json.Unmarshal(b, &s)
			if started != nil {
				started(s.PID)
			}
			if stdin != nil {
				go copyStdin(fw, stdin)
				stdin = nil
			}
		case frameStdout:
			_, _ = stdout.Write(b)
		case frameStderr:
			_, _ = stderr.Write(b)
		case frameExit:
			var x exitMsg
			if err := decodeExit(b, &x); err != nil {
				return driver.ExitStatus{}, fmt.Errorf("local: protocol: %w", err)
			}
			if err := ctx.Err(); err != nil && x.Signal == int(syscall.SIGKILL) && !x.TimedOut {
				return driver.ExitStatus{}, err // killed because ctx ended (endOnCancel)
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

// frameReaders are readExit's buffered readers.
var frameReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

// copyStdin sends r to the process in frames, then closes its stdin. It
// ends at EOF of r or when the connection fails.
func copyStdin(fw *frameWriter, r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if fw.write(frameStdin, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			_ = fw.write(frameEOF, nil)
			return
		}
	}
}

// commandRequest builds the agent request for cmd in sandbox m.
func (r *Runtime) commandRequest(m *meta, cmd *driver.Command, op string) (*request, error) {
	req := &request{Op: op, Timeout: int64(cmd.Timeout), level: m.Achieved}
	switch {
	case len(cmd.Args) > 0:
		req.Args = slices.Clone(cmd.Args)
	case cmd.Shell != "":
		req.Args = []string{"/bin/sh", "-c", cmd.Shell}
	default:
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "local: command has neither Args nor Shell")
	}
	home := r.home(m.ID)
	tmp := filepath.Join(r.dir(m.ID), "tmp")
	if m.Achieved >= L3 {
		home, tmp = sandboxHome, "/tmp"
	}
	if err := pathsafe.CheckLength(cmd.Dir); err != nil {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "local: working directory %q: %w", iox.Shorten(cmd.Dir, 64), err)
	}
	req.Dir = cmd.Dir
	if req.Dir == "" {
		req.Dir = home
	}
	env := map[string]string{
		"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME": home, "USER": "user", "LOGNAME": "user", "SHELL": "/bin/sh",
		"LANG": "C.UTF-8", "TMPDIR": tmp, "PWD": req.Dir,
	}
	if m.netMode() == netProxy {
		maps.Copy(env, proxyEnv(m.EgressCA))
	}
	maps.Copy(env, m.Env)
	maps.Copy(env, cmd.Env)
	if m.Achieved < L3 {
		env[markerEnv] = m.ID // what Destroy looks for (see killAll)
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		req.Env = append(req.Env, k+"="+env[k])
	}
	return req, nil
}

// busyAgentWait bounds how long connect keeps dialling a live agent that
// listens but drops connections before it gives up (it never replaces it).
const busyAgentWait = 30 * time.Second

// agentListens reports whether a failed dial reached a listening socket:
// the agent exists and took (or queued) the connection, then dropped it.
// A refused connection or a missing socket means nobody listens.
func agentListens(err error) bool {
	return !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, os.ErrNotExist)
}

// connect returns a connection to the running agent of m, starting the
// agent when none answers (first use at L0/L1, or after the agent died).
func (r *Runtime) connect(ctx context.Context, m *meta) (net.Conn, *meta, error) {
	sock := r.sock(m.ID)
	c, err := dial(ctx, sock)
	if err == nil {
		return c, m, nil
	}
	if ctx.Err() != nil {
		return nil, m, ctx.Err()
	}
	l, err := r.lockCtx(ctx, m.ID)
	if err != nil {
		return nil, m, err
	}
	defer l.unlock()
	m, err = l.read(m.ID)
	if err != nil {
		return nil, m, err
	}
	if m.State == driver.StatePaused {
		return nil, m, errPaused(m.ID)
	}
	// An agent that listens but dropped the connection (starved of CPU,
	// its accept queue full: EPIPE, ECONNRESET, EAGAIN) is busy, not dead:
	// replacing it would kill every command it runs. Only a socket nobody
	// listens on (refused, or gone) calls for a new agent.
	busy := time.Now()
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		c, err := dial(ctx, sock)
		if err == nil {
			return c, m, nil
		}
		if ctx.Err() != nil {
			return nil, m, ctx.Err()
		}
		if !agentListens(err) || !procAlive(m.AgentPID, m.AgentAt) {
			break
		}
		if time.Since(busy) > busyAgentWait {
			return nil, m, sberrors.Errorf(sberrors.Unavailable, "local: the sandbox agent listens but has dropped every connection for %v: %w", busyAgentWait, err)
		}
		select {
		case <-ctx.Done():
			return nil, m, ctx.Err()
		case <-time.After(wait):
		}
	}
	if procAlive(m.AgentPID, m.AgentAt) {
		// An agent that no longer answers: replace it.
		_ = syscall.Kill(m.AgentPID, syscall.SIGKILL)
		waitGone(ctx, m.AgentPID, m.AgentAt)
	}
	if err := r.startAgent(ctx, m); err != nil {
		return nil, m, err
	}
	if err := l.write(m); err != nil {
		return nil, m, err
	}
	c, err = dial(ctx, sock)
	if err != nil {
		return nil, m, sberrors.Errorf(sberrors.Internal, "local: the new agent does not answer: %w", err)
	}
	return c, m, nil
}

// Exec runs cmd through the sandbox's agent and waits for it. A
// connection that carried a complete exec without stdin is kept for the
// next one (a new connection costs more than the exec's own round trip).
func (r *Runtime) Exec(ctx context.Context, id string, cmd *driver.Command) (driver.ExitStatus, error) {
	m, err := r.running(ctx, id)
	if err != nil {
		return driver.ExitStatus{}, err
	}
	req, err := r.commandRequest(m, cmd, "exec")
	if err != nil {
		return driver.ExitStatus{}, err
	}
	c := r.idleConn(id)
	if c == nil {
		if c, m, err = r.connect(ctx, m); err != nil {
			return driver.ExitStatus{}, err
		}
		if m.Achieved != req.level {
			// The agent was restarted at another level: paths changed.
			if req, err = r.commandRequest(m, cmd, "exec"); err != nil {
				c.Close()
				return driver.ExitStatus{}, err
			}
		}
	}
	st, err := runConn(ctx, c, req, cmd.Stdin, cmd.Stdout, cmd.Stderr, nil)
	if err != nil || cmd.Stdin != nil || ctx.Err() != nil {
		c.Close()
		return st, err
	}
	r.keepConn(id, c)
	return st, nil
}

// maxIdle bounds the idle connections kept per sandbox.
const maxIdle = 4

// idleConn returns a kept connection to the agent of id that is still
// open, or nil.
func (r *Runtime) idleConn(id string) net.Conn {
	for {
		r.connMu.Lock()
		cs := r.idle[id]
		if len(cs) == 0 {
			r.connMu.Unlock()
			return nil
		}
		c := cs[len(cs)-1]
		r.idle[id] = cs[:len(cs)-1]
		r.connMu.Unlock()
		if connOpen(c) {
			return c
		}
		c.Close()
	}
}

// keepConn keeps c for the next exec in id.
func (r *Runtime) keepConn(id string, c net.Conn) {
	_ = c.SetDeadline(time.Time{})
	r.connMu.Lock()
	defer r.connMu.Unlock()
	if r.idle == nil {
		r.idle = map[string][]net.Conn{}
	}
	select {
	case <-r.stop:
		c.Close()
		return
	default:
	}
	if len(r.idle[id]) >= maxIdle {
		c.Close()
		return
	}
	r.idle[id] = append(r.idle[id], c)
}

// dropConns closes the kept connections of id, or of every sandbox when
// id is empty.
func (r *Runtime) dropConns(id string) {
	r.connMu.Lock()
	defer r.connMu.Unlock()
	for k, cs := range r.idle {
		if id == "" || k == id {
			for _, c := range cs {
				c.Close()
			}
			delete(r.idle, k)
		}
	}
}

// rawConn returns c's descriptor access, or false when c has none.
func rawConn(c net.Conn) (syscall.RawConn, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	return rc, err == nil
}

// connOpen reports whether the agent still holds c open: an idle
// connection has nothing to read, so EOF or data means it is unusable.
func connOpen(c net.Conn) bool {
	rc, ok := rawConn(c)
	if !ok {
		return false
	}
	open := false
	err := rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = err == syscall.EAGAIN
		return true
	})
	return err == nil && open
}

// Start starts cmd in the background through the sandbox's agent.
func (r *Runtime) Start(ctx context.Context, id string, cmd *driver.Command) (driver.ProcessHandle, error) {
	m, err := r.running(ctx, id)
	if err != nil {
		return nil, err
	}
	c, m, err := r.connect(ctx, m)
	if err != nil {
		return nil, err
	}
	req, err := r.commandRequest(m, cmd, "start")
	if err != nil {
		c.Close()
		return nil, err
	}
	req.Stdin = cmd.Stdin != nil
	return r.follow(ctx, id, c, req, cmd.Stdin, cmd.Stdout, cmd.Stderr)
}

// Attach connects to a background process of the sandbox by pid.
func (r *Runtime) Attach(ctx context.Context, id string, pid int, stdout, stderr io.Writer) (driver.ProcessHandle, error) {
	m, err := r.running(ctx, id)
	if err != nil {
		return nil, err
	}
	c, err := dial(ctx, r.sock(m.ID))
	if err != nil {
		return nil, sberrors.Errorf(sberrors.NotFound, "local: sandbox %s has no running agent, so no process %d: %w", id, pid, sberrors.ErrNotFound)
	}
	return r.follow(ctx, id, c, &request{Op: "attach", PID: pid}, nil, stdout, stderr)
}

// follow sends req on c and returns a handle once the process started; a
// goroutine then reads its frames until exit or Close.
func (r *Runtime) follow(ctx context.Context, id string, c net.Conn, req *request, stdin io.Reader, stdout, stderr io.Writer) (driver.ProcessHandle, error) {
	h := &handle{r: r, id: id, c: c, done: make(chan struct{}), closed: make(chan struct{})}
	fw := &frameWriter{w: c}
	startCtx, cancel := context.WithCancel(ctx)
	// ctx bounds only the start. The reader clears the deadline ctx may
	// have set as soon as it reads the start, before reading on: a ctx
	// that ends just then must not break the following of a process that
	// runs (its Wait would fail, its output would be lost).
	var startMu sync.Mutex
	isStarted := false
	stop := context.AfterFunc(startCtx, func() {
		startMu.Lock()
		defer startMu.Unlock()
		if !isStarted {
			_ = c.SetDeadline(time.Unix(1, 0))
		}
	})
	if err := fw.writeRequest(req); err != nil {
		stop()
		cancel()
		c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errSend(err)
	}
	pidc := make(chan int, 1)
	go func() {
		defer close(h.done)
		defer c.Close()
		st, err := readExit(context.Background(), c, fw, stdin, stdout, stderr, func(pid int) {
			startMu.Lock()
			isStarted = true
			_ = c.SetDeadline(time.Time{})
			startMu.Unlock()
			pidc <- pid
		}, false, true)
		h.st, h.err = st, err
	}()
	select {
	case pid := <-pidc:
		stop()
		cancel()
		h.pid = pid
		return h, nil
	case <-h.done:
		stop()
		cancel()
		// A command that started and already exited makes both channels
		// ready; select picks either, so look for its pid first.
		select {
		case pid := <-pidc:
			h.pid = pid
			return h, nil
		default:
		}
		c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if h.err != nil {
			return nil, h.err
		}
		return nil, sberrors.Errorf(sberrors.Internal, "local: the agent ended the request without starting it")
	}
}

// handle is a ProcessHandle on one background process.
type handle struct {
	r    *Runtime
	id   string
	pid  int
	c    net.Conn
	done chan struct{}
	st   driver.ExitStatus
	err  error

	closeOnce sync.Once
	closed    chan struct{}
}

// PID is the process's pid in the sandbox (as the agent sees it).
func (h *handle) PID() int { return h.pid }

// Wait returns the exit status once the agent reports it.
func (h *handle) Wait(ctx context.Context) (driver.ExitStatus, error) {
	select {
	case <-h.done:
		if h.err != nil {
			if h.isClosed() {
				return driver.ExitStatus{}, fmt.Errorf("local: process %d: %w", h.pid, sberrors.ErrClosed)
			}
			return driver.ExitStatus{}, h.err
		}
		return h.st, nil
	case <-ctx.Done():
		return driver.ExitStatus{}, ctx.Err()
	}
}

func (h *handle) isClosed() bool {
	select {
	case <-h.closed:
		return true
	default:
		return false
	}
}

// Signal signals the process's group through the agent. A process that
// has exited is not signalled, and that is no error (the agent, too,
// does nothing for a process it has reaped).
func (h *handle) Signal(ctx context.Context, sig syscall.Signal) error {
	select {
	case <-h.done:
		if h.err == nil {
			return nil
		}
	default:
	}
	m, err := h.r.readMeta(h.id)
	if err != nil {
		return err
	}
	if m.State == driver.StatePaused {
		return errPaused(h.id)
	}
	return agentCall(ctx, h.r.sock(h.id), &request{Op: "signal", PID: h.pid, Signal: int(sig)})
}

// Close stops following the process; it keeps running.
func (h *handle) Close() error {
	h.closeOnce.Do(func() {
		close(h.closed)
		_ = h.c.Close()
		<-h.done
	})
	return nil
}
