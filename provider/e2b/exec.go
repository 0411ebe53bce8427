package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/signame"
	"github.com/sandboxkit/sandbox/internal/stdinread"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/process"
	"github.com/sandboxkit/sandbox/sberrors"
)

// keepaliveSeconds is the keepalive interval asked of envd on streams.
var keepaliveSeconds = []string{"50"}

// streamHeaders returns the headers of a process stream request.
func (r *Runtime) streamHeaders(id string, c *conn) http.Header {
	h := make(http.Header, 8)
	r.setEnvdHeaders(h, id, c)
	h["Keepalive-Ping-Interval"] = keepaliveSeconds
	return h
}

// stdinChunk is the size of one stdin message.
const stdinChunk = 32 << 10

// startRequest builds the Start request for cmd: an argv goes straight to
// envd (it takes a program and its arguments, no shell); a shell line is
// run by "/bin/bash -l -c" as the official SDKs do.
func startRequest(cmd *driver.Command) *process.StartRequest {
	cfg := &process.ProcessConfig{Envs: cmd.Env}
	if len(cmd.Args) > 0 {
		cfg.Cmd, cfg.Args = cmd.Args[0], cmd.Args[1:]
	} else {
		cfg.Cmd, cfg.Args = "/bin/bash", []string{"-l", "-c", cmd.Shell}
	}
	if cmd.Dir != "" {
		d := cmd.Dir
		cfg.Cwd = &d
	}
	stdin := cmd.Stdin != nil
	tag := newTag()
	return &process.StartRequest{Process: cfg, Stdin: &stdin, Tag: &tag}
}

// newTag names one started process, so that it can be found (and ended)
// even when its start event never arrived.
func newTag() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "sandboxkit-" + hex.EncodeToString(b[:])
}

// events is what reading a process stream produced.
type events struct {
	pid     uint32
	started bool
	end     *process.ProcessEvent_EndEvent
}

// readStart reads until the start event.
func readStart(src *eventStream, ev *events) bool {
	for src.Receive() {
		if st := src.event().GetStart(); st != nil {
			ev.pid, ev.started = st.GetPid(), true
			return true
		}
	}
	return false
}

// pump copies data events to stdout and stderr (pty output to stdout) until the end event or
// the end of the stream.
func pump(src *eventStream, ev *events, stdout, stderr io.Writer) {
	for src.Receive() {
		e := src.event()
		switch {
		case e.GetData() != nil:
			d := e.GetData()
			if b := d.GetStdout(); len(b) > 0 {
				_, _ = stdout.Write(b)
			}
			if b := d.GetStderr(); len(b) > 0 {
				_, _ = stderr.Write(b)
			}
			if b := d.GetPty(); len(b) > 0 {
				// A terminal's output: its handle passes the terminal's
				// Output as stdout.
				_, _ = stdout.Write(b)
			}
		case e.GetEnd() != nil:
			ev.end = e.GetEnd()
		}
	}
}

// exitStatus reads envd's end event. exit_code is omitted (0) on success;
// a signal gives -1, and status is Go's os.ProcessState text, which names
// the signal ("signal: terminated"): an unknown text leaves Signal 0.
func exitStatus(end *process.ProcessEvent_EndEvent) driver.ExitStatus {
	st := driver.ExitStatus{ExitCode: int(end.GetExitCode())}
	if !end.GetExited() {
		if sig := signame.FromStatus(end.GetStatus()); sig != 0 {
			st.ExitCode, st.Signal = -1, sig
		}
	}
	return st
}

// errEnvdTimedOut reports a stream that envd ended with deadline_exceeded:
// the process reached its lifetime (Connect-Timeout-Ms) and envd killed it.
var errEnvdTimedOut = errors.New("e2b: envd ended the process at its timeout")

// openStart sends sr (Start) and waits for the start event; op names the
// operation in errors. The stream's ctx is
// sctx; the wait is bounded by ctx too. life, when not zero, is the
// process's end of life sent to envd (Connect-Timeout-Ms); otherwise that
// is sctx's deadline.
func (r *Runtime) openStart(ctx, sctx context.Context, op, id string, c *conn, sr *process.StartRequest, life time.Time) (*eventStream, *events, error) {
	h := r.streamHeaders(id, c)
	if !life.IsZero() {
		ms := time.Until(life).Milliseconds()
		if ms <= 0 {
			return nil, nil, errEnvdTimedOut // nothing was sent
		}
		h["Connect-Timeout-Ms"] = []string{strconv.FormatInt(min(ms, 9_999_999_999), 10)}
	}
	tctx, a := trace(sctx)
	src, err := r.openEvents(tctx, r.envdBase(id, c), "/process.Process/Start", sr, h)
	if errors.Is(err, errEncode) {
		return nil, nil, err // nothing was sent
	}
	ev := &events{}
	if err != nil || !readStart(src, ev) {
		// A failed request and a stream that broke before the start
		// event are alike: the request may have reached envd. Only an
		// error envd itself answered (an HTTP status before the stream,
		// or the stream's end-of-stream error) says that nothing ran.
		answered := src == nil
		if err == nil {
			err, answered = src.Err(), src.Remote()
			_ = src.Close()
		}
		if err == nil {
			err = errors.New("stream ended before the start event")
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			// The process may have started: end it by its tag.
			r.killQuietly(id, c, byTag(sr.GetTag()))
			return nil, nil, fmt.Errorf("e2b: %s: %w", op, ctxErr)
		}
		if src != nil && src.Remote() && connect.CodeOf(err) == connect.CodeDeadlineExceeded {
			return nil, nil, errEnvdTimedOut // envd's own word, before the start event
		}
		if sctx.Err() != nil {
			// Our bound ran out with no word from envd: the connection
			// stalled. The process may have started; its lifetime has
			// passed, so envd has ended it.
			return nil, nil, r.scrub(fmt.Errorf("e2b: %s: no start event from envd within the process's lifetime and grace (the connection stalled: %v): %w", op, err, sberrors.ErrOutcomeUnknown))
		}
		cerr := r.envdErr(ctx, op, id, a, err)
		var ce *connect.Error
		if answered && errors.As(err, &ce) && ce.Code() != connect.CodeUnknown && ce.Code() != connect.CodeUnavailable {
			return nil, nil, cerr // envd refused the start (bad cwd, bad user): nothing ran
		}
		if errors.Is(cerr, sberrors.ErrStaleTransport) || errors.Is(cerr, sberrors.ErrNotFound) || errors.Is(cerr, sberrors.ErrPaused) ||
			sberrors.CodeOf(cerr) == sberrors.PermissionDenied || sberrors.CodeOf(cerr) == sberrors.ResourceExhausted {
			return nil, nil, cerr
		}
		return nil, nil, fmt.Errorf("%w: %w", cerr, sberrors.ErrOutcomeUnknown)
	}
	return src, ev, nil
}

// ExecGrace is how long Exec may run past Command.Timeout whatever the
// connection does. envd kills the process when its lifetime (sent as
// Connect-Timeout-Ms) elapses and ends the stream with deadline_exceeded;
// the stream itself is given ExecGrace more. A stream that has brought
// neither the end event nor envd's deadline_exceeded by then stalled:
// Exec returns an error matching sberrors.ErrOutcomeUnknown, never
// TimedOut.
const ExecGrace = 10 * time.Second

// Exec runs cmd and waits for it. The command's lifetime, cmd.Timeout, is
// sent as Connect-Timeout-Ms: envd kills the process when it elapses and
// ends the stream with deadline_exceeded and no end event, which is
// reported as TimedOut. Exec returns at most ExecGrace after cmd.Timeout;
// a stream that stalls or breaks is an error, not a timeout. The caller's
// Stdin is no longer read once Exec returns (a Read in progress is
// abandoned, its data discarded).
func (r *Runtime) Exec(ctx context.Context, id string, cmd *driver.Command) (driver.ExitStatus, error) {
	const op = "exec"
	c, err := r.conn(ctx, id)
	if err != nil {
		return driver.ExitStatus{}, err
	}
	timeout := cmd.Timeout
	if timeout <= 0 {
		// The portable layer always resolves it (driver.Command).
		return driver.ExitStatus{}, sberrors.Errorf(sberrors.InvalidArgument, "e2b: exec: command timeout %v is not positive", timeout)
	}
	cmdDeadline := time.Now().Add(timeout)
	// The stream outlives ctx by up to cancelDrain: when ctx ends after
	// the start event, the process is killed and the stream read on for
	// the output already on its way and the end event, so that what the
	// command wrote before the caller's deadline is not dropped.
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), cmdDeadline.Add(r.execGrace()))
	defer cancel()
	// pid is the process's once the start event came, or cut when ctx
	// ended before: whichever is swapped in first holds.
	const cut = ^uint32(0)
	var pid atomic.Uint32
	killed := make(chan struct{})
	stopDrain := context.AfterFunc(ctx, func() {
		defer close(killed)
		if pid.CompareAndSwap(0, cut) {
			cancel()
			return
		}
		// The window opens once the kill is answered, not when ctx
		// ended: until then the process may still be writing, and a
		// loaded host's slow kill must not use up the time the rest of
		// its output needs to arrive.
		r.killQuietly(id, c, byPID(pid.Load()))
		drain := time.AfterFunc(cancelDrain, cancel)
		defer drain.Stop()
		<-rctx.Done()
	})
	// drained reports whether the AfterFunc ran, once it is done.
	drained := func() bool {
		if stopDrain() {
			return false
		}
		<-killed
		return true
	}
	// timedOut reports the command's timeout, unless the caller's deadline
	// was the binding one (envd may report it a moment before ctx ends).
	timedOut := func() (driver.ExitStatus, error) {
		if dl, ok := ctx.Deadline(); ok && !dl.After(cmdDeadline) {
			<-ctx.Done()
			return driver.ExitStatus{ExitCode: -1}, fmt.Errorf("e2b: %s: %w", op, ctx.Err())
		}
		return driver.ExitStatus{ExitCode: -1, TimedOut: true}, nil
	}
	src, ev, err := r.openStart(ctx, rctx, op, id, c, startRequest(cmd), cmdDeadline)
	if err != nil {
		drained()
		if errors.Is(err, errEnvdTimedOut) && ctx.Err() == nil {
			return timedOut()
		}
		return driver.ExitStatus{}, r.scrub(err)
	}
	defer src.Close()
	if !pid.CompareAndSwap(0, ev.pid) {
		// ctx ended before the pid was known: the stream was cut.
		drained()
		r.killQuietly(id, c, byPID(ev.pid))
		return driver.ExitStatus{ExitCode: -1}, fmt.Errorf("e2b: %s: %w", op, ctx.Err())
	}
	var wg sync.WaitGroup
	var in *stdinread.Reader
	if cmd.Stdin != nil {
		in = stdinread.New(cmd.Stdin)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.feed(rctx, id, c, ev.pid, in)
		}()
	}
	pump(src, ev, cmd.Stdout, cmd.Stderr)
	serr := src.Err()
	cancel()
	if in != nil {
		in.Stop() // no Read of cmd.Stdin starts from now on
	}
	wg.Wait()
	killedOnCancel := drained()
	switch {
	case ev.end != nil && !killedOnCancel:
		return exitStatus(ev.end), nil
	case ctx.Err() != nil:
		if !killedOnCancel {
			r.killQuietly(id, c, byPID(ev.pid))
		}
		return driver.ExitStatus{ExitCode: -1}, fmt.Errorf("e2b: %s: %w", op, ctx.Err())
	case src.Remote() && connect.CodeOf(serr) == connect.CodeDeadlineExceeded:
		// envd's own word: the process reached its lifetime.
		return timedOut()
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		// Neither the end nor envd's deadline_exceeded came within the
		// grace: the stream stalled. envd ends the process at its
		// lifetime, which has passed.
		return driver.ExitStatus{}, r.scrub(fmt.Errorf("e2b: %s: process %d: no end event from envd within the command's timeout (%v) plus %v: the stream stalled: %w", op, ev.pid, timeout, r.execGrace(), sberrors.ErrOutcomeUnknown))
	case serr == nil:
		return driver.ExitStatus{}, fmt.Errorf("e2b: %s: %w: %w", op, errNoResult, sberrors.ErrOutcomeUnknown)
	}
	return driver.ExitStatus{}, r.scrub(fmt.Errorf("e2b: %s: process %d: the stream broke (%v): %w", op, ev.pid, serr, sberrors.ErrOutcomeUnknown))
}

// cancelDrain bounds how long, once an Exec's context ended and envd
// answered the kill, the stream is read on for the output already on its
// way and the end event.
const cancelDrain = time.Second

// killQuietly ends a process whose caller went away; best effort, bounded.
func (r *Runtime) killQuietly(id string, c *conn, sel *process.ProcessSelector) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.signal(ctx, id, c, sel, syscall.SIGKILL)
}

func byPID(pid uint32) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
}

func byTag(tag string) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: tag}}
}

// feed streams r into the process's stdin with StreamInput, then closes
// stdin. Failures end the feed quietly: the process's result tells the rest.
func (r *Runtime) feed(ctx context.Context, id string, c *conn, pid uint32, in io.Reader) {
	sel := byPID(pid)
	stream := r.clients(r.envdBase(id, c)).proc.StreamInput(ctx)
	r.setEnvdHeaders(stream.RequestHeader(), id, c)
	err := stream.Send(&process.StreamInputRequest{Event: &process.StreamInputRequest_Start{
		Start: &process.StreamInputRequest_StartEvent{Process: sel}}})
	buf := make([]byte, stdinChunk)
	for err == nil {
		n, rerr := in.Read(buf)
		if n > 0 {
			err = stream.Send(&process.StreamInputRequest{Event: &process.StreamInputRequest_Data{
				Data: &process.StreamInputRequest_DataEvent{Input: &process.ProcessInput{
					Input: &process.ProcessInput_Stdin{Stdin: buf[:n]}}}}})
		}
		if rerr != nil {
			break
		}
	}
	_, _ = stream.CloseAndReceive()
	if ctx.Err() != nil {
		return
	}
	req := connect.NewRequest(&process.CloseStdinRequest{Process: sel})
	r.setEnvdHeaders(req.Header(), id, c)
	_, _ = r.clients(r.envdBase(id, c)).proc.CloseStdin(ctx, req)
}

// signal sends sig to pid. envd knows SIGKILL and SIGTERM.
func (r *Runtime) signal(ctx context.Context, id string, c *conn, sel *process.ProcessSelector, sig syscall.Signal) error {
	const op = "signal"
	var s process.Signal
	switch sig {
	case syscall.SIGKILL:
		s = process.Signal_SIGNAL_SIGKILL
	case syscall.SIGTERM:
		s = process.Signal_SIGNAL_SIGTERM
	default:
		return fmt.Errorf("e2b: %s: %v: envd sends only SIGKILL and SIGTERM: %w", op, sig, sberrors.ErrUnimplemented)
	}
	req := connect.NewRequest(&process.SendSignalRequest{Process: sel, Signal: s})
	r.setEnvdHeaders(req.Header(), id, c)
	tctx, a := trace(ctx)
	_, err := r.clients(r.envdBase(id, c)).proc.SendSignal(tctx, req)
	return r.scrub(r.envdErr(ctx, op, id, a, err))
}

// Start starts cmd in the background. Its lifetime, cmd.Timeout (or, when
// zero, the longest lease), is always sent so envd never applies a default.
func (r *Runtime) Start(ctx context.Context, id string, cmd *driver.Command) (driver.ProcessHandle, error) {
	c, err := r.conn(ctx, id)
	if err != nil {
		return nil, err
	}
	life := cmd.Timeout
	if life <= 0 {
		life = maxLease
	}
	// envd ends the process at end; the stream gets ExecGrace more, so
	// that envd's deadline_exceeded (a timeout) is told from a stream
	// that stalled (an error).
	end := time.Now().Add(life)
	sctx, cancel := context.WithDeadline(context.Background(), end.Add(r.execGrace()))
	stop := context.AfterFunc(ctx, cancel)
	src, ev, err := r.openStart(ctx, sctx, "exec", id, c, startRequest(cmd), end)
	if !stop() && err == nil {
		// ctx ended just as the process started: nobody will hold it.
		_ = src.Close()
		cancel()
		r.killQuietly(id, c, byPID(ev.pid))
		return nil, fmt.Errorf("e2b: start: %w", ctx.Err())
	}
	if err != nil {
		cancel()
		return nil, r.scrub(err)
	}
	h := r.newHandle(id, c, ev, src, sctx, cancel, cmd.Stdout, cmd.Stderr, cmd.Timeout > 0)
	if cmd.Stdin != nil {
		// Close ends sctx: the feed then stops reading cmd.Stdin, even
		// in the middle of a Read that blocks.
		in := stdinread.New(cmd.Stdin)
		context.AfterFunc(sctx, in.Stop)
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			r.feed(sctx, id, c, ev.pid, in)
		}()
	}
	return h, nil
}

// Attach connects to a running process by pid.
func (r *Runtime) Attach(ctx context.Context, id string, pid int, stdout, stderr io.Writer) (driver.ProcessHandle, error) {
	const op = "attach"
	c, err := r.conn(ctx, id)
	if err != nil {
		return nil, err
	}
	if pid <= 0 || pid > int(^uint32(0)) {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "e2b: %s: pid %d out of range", op, pid)
	}
	sctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	msg := &process.ConnectRequest{Process: byPID(uint32(pid))}
	tctx, a := trace(sctx)
	src, err := r.openEvents(tctx, r.envdBase(id, c), "/process.Process/Connect", msg, r.streamHeaders(id, c))
	if err != nil {
		stop()
		cancel()
		return nil, r.scrub(r.envdErr(ctx, op, id, a, err))
	}
	ev := &events{}
	ok := readStart(src, ev)
	stop()
	if !ok {
		err := src.Err()
		_ = src.Close()
		cancel()
		if err == nil {
			err = errors.New("stream ended before the start event")
		}
		return nil, r.scrub(r.envdErr(ctx, op, id, a, err))
	}
	return r.newHandle(id, c, ev, src, sctx, cancel, stdout, stderr, false), nil
}

// handle is a background process's stream.
type handle struct {
	r        *Runtime
	id       string
	c        *conn
	ev       *events
	cancel   context.CancelFunc
	sctx     context.Context
	timeout  bool
	done     chan struct{}
	wg       sync.WaitGroup
	err      error
	remote   bool // err is envd's end-of-stream error
	closed   sync.Once
	isClosed bool
	mu       sync.Mutex
}

func (r *Runtime) newHandle(id string, c *conn, ev *events, src *eventStream, sctx context.Context, cancel context.CancelFunc, stdout, stderr io.Writer, timeout bool) *handle {
	h := &handle{r: r, id: id, c: c, ev: ev, cancel: cancel, sctx: sctx, timeout: timeout, done: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer close(h.done)
		pump(src, ev, stdout, stderr)
		h.err, h.remote = src.Err(), src.Remote()
		_ = src.Close()
	}()
	return h
}

// PID returns envd's pid of the process.
func (h *handle) PID() int { return int(h.ev.pid) }

// Wait waits for the end event.
func (h *handle) Wait(ctx context.Context) (driver.ExitStatus, error) {
	const op = "wait"
	select {
	case <-h.done:
	case <-ctx.Done():
		return driver.ExitStatus{}, fmt.Errorf("e2b: %s: %w", op, ctx.Err())
	}
	h.mu.Lock()
	closed := h.isClosed
	h.mu.Unlock()
	switch {
	case h.ev.end != nil:
		return exitStatus(h.ev.end), nil
	case closed:
		return driver.ExitStatus{}, fmt.Errorf("e2b: %s: %w", op, sberrors.ErrClosed)
	case h.timeout && h.remote && connect.CodeOf(h.err) == connect.CodeDeadlineExceeded:
		// envd's own word: the process reached its lifetime.
		return driver.ExitStatus{ExitCode: -1, TimedOut: true}, nil
	case errors.Is(h.sctx.Err(), context.DeadlineExceeded):
		return driver.ExitStatus{}, h.r.scrub(fmt.Errorf("e2b: %s: process %d: no end event from envd within its lifetime plus %v: the stream stalled: %w", op, h.ev.pid, h.r.execGrace(), sberrors.ErrOutcomeUnknown))
	case h.err == nil:
		return driver.ExitStatus{}, fmt.Errorf("e2b: %s: %w", op, errNoResult)
	}
	return driver.ExitStatus{}, h.r.scrub(sberrors.Errorf(sberrors.Unavailable, "e2b: %s: process %d: the stream broke: %v", op, h.ev.pid, h.err))
}

// Signal sends sig (SIGKILL or SIGTERM) to the process. A process that
// has ended is not signalled, and that is no error.
func (h *handle) Signal(ctx context.Context, sig syscall.Signal) error {
	if h.ended() {
		return nil
	}
	err := h.r.signal(ctx, h.id, h.c, byPID(h.ev.pid), sig)
	if sberrors.CodeOf(err) == sberrors.NotFound && iox.WaitClosed(ctx, h.done, time.Second) && h.ended() {
		return nil // envd forgot it as it ended: the end event was on its way
	}
	return err
}

// ended reports whether envd has said the process ended: its end event,
// or its lifetime's deadline_exceeded.
func (h *handle) ended() bool {
	select {
	case <-h.done:
	default:
		return false
	}
	return h.ev.end != nil || (h.timeout && h.remote && connect.CodeOf(h.err) == connect.CodeDeadlineExceeded)
}

// Close ends the stream; the process keeps running.
func (h *handle) Close() error {
	h.closed.Do(func() {
		h.mu.Lock()
		select {
		case <-h.done:
		default:
			h.isClosed = true
		}
		h.mu.Unlock()
		h.cancel()
		h.wg.Wait()
	})
	return nil
}
