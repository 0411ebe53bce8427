package interp

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/telemetry"
)

//go:embed kernel.py
var pythonKernel []byte

//go:embed kernel.bash
var bashKernel []byte

//go:embed kernel.js
var nodeKernel []byte

// Language names the language of a kernel.
type Language string

// The languages a kernel can run.
const (
	// Python runs cells with python3 (3.8 or later) and its standard
	// library; matplotlib figures come back as PNG when matplotlib is
	// installed in the sandbox.
	Python Language = "python"
	// Bash runs cells in one persistent bash: variables, functions, the
	// working directory and exported environment carry over between cells,
	// and each cell reports its exit status.
	Bash Language = "bash"
	// Node runs cells as scripts in one persistent vm context of node
	// (18 or later), where it exists in the sandbox: top-level var and
	// function declarations and globalThis persist (let and const are
	// local to their cell); the value of the last expression is the result.
	Node Language = "node"
)

// BaseDir is where kernels keep their files, relative to the sandbox's home.
const BaseDir = ".sandboxkit/interp"

// Options configure a kernel. The zero value is a Python kernel in the
// sandbox's home.
type Options struct {
	// Language is the kernel's language; default Python.
	Language Language
	// Dir is the kernel's initial working directory; default the
	// sandbox's home.
	Dir string
	// Env adds environment variables to the kernel's process.
	Env map[string]string
	// StartTimeout bounds New and Restart when ctx has no deadline;
	// default one minute.
	StartTimeout time.Duration
}

// RunOptions configure one Run. The zero value runs the cell without a
// time limit other than ctx's, with the default caps on what is kept.
type RunOptions struct {
	// OnStdout and OnStderr, when non-nil, receive the cell's output while
	// it runs, in order, with secret values redacted. They are called from
	// Run's goroutine, one at a time. They receive all of the output, past
	// MaxOutput too, as Command.Stdout does for Exec: a line is handed on
	// whole, or in pieces of about 192 KiB when it is longer than 256 KiB.
	OnStdout func(text string)
	OnStderr func(text string)
	// Timeout, when positive, interrupts the cell after that long, as
	// Interrupt does: the cell ends with a KeyboardInterrupt (for Bash, the
	// cell's commands get SIGINT), Execution.TimedOut is set and the
	// kernel's state is kept. A cell that has not ended TimeoutGrace after
	// that (it caught or ignored the interrupt, or is stuck in a call that
	// signals cannot break) is ended for sure: the kernel is killed and a
	// fresh one started, and Run returns an error matching ErrRestarted
	// with Execution.Restarted set.
	Timeout time.Duration
	// TimeoutGrace is how long a cell may take to end once interrupted,
	// by Timeout or by the end of Run's ctx, before its kernel is killed;
	// zero means DefaultTimeoutGrace. Run counts it on the caller's clock
	// from when it submits the cell plus Timeout, so it also covers the
	// transport's latency and the kernel's report of the end (a Bash
	// kernel starts a few programs for it): on a heavily loaded host or a
	// slow link, a larger grace keeps a cell that does end on its interrupt
	// from costing its kernel.
	TimeoutGrace time.Duration
	// MaxOutput caps the bytes of each stream kept in Execution.Stdout and
	// Execution.Stderr; zero means DefaultMaxOutput. Output past the cap
	// is dropped from the Execution (StdoutTruncated or StderrTruncated is
	// set) but still reaches OnStdout and OnStderr; without a callback the
	// kernel does not send it at all.
	MaxOutput int
	// MaxResults caps the number of results kept in Execution.Results
	// (the main value comes first, then figures); zero means
	// DefaultMaxResults. Results past it are dropped and ResultsTruncated
	// is set.
	MaxResults int
	// MaxResultBytes caps the total size of the results kept for the cell:
	// the bytes of every text form and every image; zero means
	// DefaultMaxResultBytes. A result's text/plain form is cut to what
	// room is left, and its other forms are kept only whole: a form that
	// does not fit is dropped. Result.Truncated and
	// Execution.ResultsTruncated say so.
	MaxResultBytes int
}

// The defaults of RunOptions' caps. DefaultMaxOutput is Exec's own default
// cap per stream (sandbox.DefaultMaxOutput).
const (
	DefaultMaxOutput      = sandbox.DefaultMaxOutput
	DefaultMaxResults     = 100
	DefaultMaxResultBytes = 10 << 20
	DefaultTimeoutGrace   = 2 * time.Second
)

// Execution is the outcome of one cell.
type Execution struct {
	// Stdout and Stderr hold everything the cell printed, with secret
	// values redacted.
	Stdout, Stderr string
	// Results holds, in order, what the cell displayed: for Python, every
	// matplotlib figure created or changed by the cell, and the value of
	// its last expression (the one Result with Main set) when that is not
	// None.
	Results []Result
	// Error describes the exception (Python) or the non-zero exit status
	// (Bash) that ended the cell; nil when it ran to its end. An error in
	// the cell's code is reported here, never as Run's error.
	Error *Error
	// Count is the cell's execution count in its kernel: 1 for the first
	// cell after New or Restart.
	Count int
	// Interrupted reports that the cell was interrupted (Timeout, Interrupt
	// or the end of Run's ctx); TimedOut that Timeout did it.
	Interrupted, TimedOut bool
	// Restarted reports that the cell did not end within TimeoutGrace of
	// its interrupt, so its kernel was killed: the kernel's state is lost
	// and the next cell runs in a fresh kernel (its Count starts at 1).
	// Run's error then matches ErrRestarted.
	Restarted bool
	// StdoutTruncated and StderrTruncated report output dropped by
	// RunOptions.MaxOutput; ResultsTruncated reports results, or forms of
	// them, dropped or cut by MaxResults or MaxResultBytes.
	StdoutTruncated, StderrTruncated, ResultsTruncated bool
}

// Text returns the text/plain form of the main result (the value of the
// cell's last expression), or "".
func (e *Execution) Text() string {
	for _, r := range e.Results {
		if r.Main {
			return r.Text
		}
	}
	return ""
}

// Result is one displayed value in the formats its object offers, as
// Jupyter's display data: each field is empty when the format is absent.
type Result struct {
	// Main reports the value of the cell's last expression; other results
	// are figures.
	Main bool
	// Text is the text/plain form (Python's repr).
	Text string
	// HTML, Markdown, LaTeX and SVG come from _repr_html_, _repr_markdown_,
	// _repr_latex_ and _repr_svg_.
	HTML, Markdown, LaTeX, SVG string
	// JSON is the application/json form, from _repr_json_.
	JSON json.RawMessage
	// PNG and JPEG hold image bytes: every matplotlib figure, and objects
	// with _repr_png_ or _repr_jpeg_.
	PNG, JPEG []byte
	// Truncated reports that Text was cut or other forms were dropped by
	// RunOptions.MaxResultBytes.
	Truncated bool
}

// Formats lists the MIME types r holds.
func (r Result) Formats() []string {
	var f []string
	add := func(ok bool, mime string) {
		if ok {
			f = append(f, mime)
		}
	}
	add(r.Text != "", "text/plain")
	add(r.HTML != "", "text/html")
	add(r.Markdown != "", "text/markdown")
	add(r.LaTeX != "", "text/latex")
	add(r.SVG != "", "image/svg+xml")
	add(len(r.JSON) > 0, "application/json")
	add(len(r.PNG) > 0, "image/png")
	add(len(r.JPEG) > 0, "image/jpeg")
	return f
}

// Error is an error raised by a cell's code: an exception in Python, a
// non-zero exit status in Bash. It is data, not a Go error.
type Error struct {
	// Name is the exception's class name ("ZeroDivisionError"), or
	// "ExitStatus" for Bash.
	Name string
	// Value is the exception's message, or the exit status.
	Value string
	// Traceback holds the formatted traceback, one frame (or line) per
	// element, the cell's own frames only.
	Traceback []string
	// Truncated is set when Value or Traceback was cut: each holds at most
	// 64 KiB (an exception can carry any amount of text), and a report
	// too long for the kernel's event limit is replaced by one that says
	// so (Name "Error").
	Truncated bool
}

// maxErrorText bounds an Error's Value, and its Traceback in all.
const maxErrorText = 64 << 10

// String returns "Name: Value".
func (e *Error) String() string { return e.Name + ": " + e.Value }

// ErrDied is matched (errors.Is) by the error of a call on a kernel whose
// process is gone: killed, out of memory, or lost with its sandbox's memory.
// Restart starts a fresh one.
var ErrDied = errors.New("interp: the kernel is not running")

// ErrRestarted is matched (errors.Is) by the error of a Run whose cell did
// not end within RunOptions.TimeoutGrace of its interrupt (by Timeout or
// by the end of ctx): its kernel was killed, so every variable, import and
// working directory of the kernel is lost. The next Run starts on a fresh
// kernel.
var ErrRestarted = errors.New("interp: the cell ignored its interrupt; the kernel was killed and restarted, its state is lost")

// ErrNotKilled is matched by the error of a Run, Restart or Close that
// could not end the kernel, or a process one of its cells started: it may
// still run in the sandbox, with its state. A Run that reports it does not
// report ErrRestarted.
var ErrNotKilled = errors.New("interp: the kernel could not be killed")

// ErrClosed is matched by the error of a call on a closed Kernel.
var ErrClosed = errors.New("interp: the kernel is closed")

// errBadAnswer is the error of a poll whose status line made no sense (a
// cell can write the files the kernel's client reads).
var errBadAnswer = errors.New("bad answer from the kernel's client")

// Kernel is one interpreter context: a kernel process in a sandbox with its
// own state. Runs on one Kernel are served one at a time, in call order;
// kernels run concurrently with one another. It is safe for concurrent use.
type Kernel struct {
	sb   *sandbox.Sandbox
	opts Options
	base string

	run sync.Mutex // held by Run

	mu     sync.Mutex
	dir    string // the current kernel's directory
	group  string // the pid of the current kernel's monitor
	seq    int    // requests submitted to the current kernel
	stale  bool   // the kernel was killed: start one before the next cell
	closed bool
}

// New starts a kernel in sb. It needs a sandbox that runs commands with a
// POSIX sh and the usual tools (cat, mv, mkdir, mkfifo, tail, head, wc,
// grep, sleep, kill, setsid or nohup), the language's interpreter
// (python3, bash or node) and, for the kernel's liveness and for finding
// every process it started when it is killed, /proc. Close ends the kernel; a
// Kernel dropped without Close lives on until the sandbox ends.
func New(ctx context.Context, sb *sandbox.Sandbox, opts Options) (_ *Kernel, err error) {
	ctx, span := telemetry.Start(ctx, tracer(sb), "interp.new", telemetry.Language.String(string(opts.Language)), telemetry.SandboxID.String(sb.ID()))
	defer func() { telemetry.End(span, err) }()
	if sb == nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "interp: new: sandbox is nil")
	}
	switch opts.Language {
	case "":
		opts.Language = Python
	case Python, Bash, Node:
	default:
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "interp: new: unknown language %q (want %q, %q or %q)", opts.Language, Python, Bash, Node)
	}
	if opts.StartTimeout < 0 {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "interp: new: StartTimeout %v is negative", opts.StartTimeout)
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = time.Minute
	}
	k := &Kernel{sb: sb, opts: opts, base: path.Join(home(sb), BaseDir)}
	if err := k.start(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

// NewContext starts another kernel in the same sandbox with the same
// options: an independent context whose state is its own, runnable
// concurrently with k.
func (k *Kernel) NewContext(ctx context.Context) (*Kernel, error) {
	return New(ctx, k.sb, k.opts)
}

// Language returns the kernel's language.
func (k *Kernel) Language() Language { return k.opts.Language }

func home(sb *sandbox.Sandbox) string {
	if h := sb.Home(); path.IsAbs(h) {
		return path.Clean(h)
	}
	return "/tmp"
}

func (k *Kernel) source() (src []byte, file string) {
	src = pythonKernel
	switch k.opts.Language {
	case Bash:
		src = bashKernel
	case Node:
		src = nodeKernel
	}
	ext := map[Language]string{Python: ".py", Bash: ".bash", Node: ".js"}[k.opts.Language]
	return src, "kernel" + ext
}

// start launches a fresh kernel process and makes it the current one.
func (k *Kernel) start(ctx context.Context) error {
	const op = "start"
	var id [8]byte
	_, _ = rand.Read(id[:])
	kid := hex.EncodeToString(id[:])
	src, file := k.source()
	ctx, cancel := context.WithTimeout(ctx, k.opts.StartTimeout)
	defer cancel()
	out, redact, err := k.exec(ctx, launchScript, bytes.NewReader(src), k.opts.Dir, k.opts.Env, 64<<10,
		k.base, kid, file, string(k.opts.Language))
	if err != nil {
		return wrap(op, err)
	}
	line, rest, _ := strings.Cut(string(out), "\n")
	switch {
	case strings.HasPrefix(line, "ok "):
		f := strings.Fields(line[3:])
		if len(f) != 2 {
			return wrap(op, fmt.Errorf("bad launcher answer %q", line))
		}
		if _, err := strconv.Atoi(f[0]); err != nil {
			return wrap(op, fmt.Errorf("bad launcher answer %q", line))
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			return wrap(op, fmt.Errorf("bad launcher answer %q", line))
		}
		k.mu.Lock()
		closed := k.closed
		if !closed {
			k.dir, k.group, k.seq, k.stale = path.Join(k.base, kid), f[1], 0, false
		}
		k.mu.Unlock()
		if closed { // closed while this kernel started: end it too
			_ = k.stop(context.WithoutCancel(ctx), path.Join(k.base, kid))
			return wrap(op, ErrClosed)
		}
		return nil
	case strings.HasPrefix(line, "error="):
		return wrap(op, sandbox.Errorf(sandbox.FailedPrecondition, "%s", strings.TrimPrefix(line, "error=")))
	case line == "failed":
		k.stop(context.WithoutCancel(ctx), path.Join(k.base, kid))
		// The tail of the kernel's log: what the program printed.
		return wrap(op, fmt.Errorf("%w: it exited at start: %s", ErrDied, strings.TrimSpace(string(redact([]byte(rest))))))
	}
	return wrap(op, fmt.Errorf("bad launcher answer %q", line))
}

// exec runs a control script and returns its stdout unredacted, with the
// function that redacts what of it reaches the caller.
func (k *Kernel) exec(ctx context.Context, script string, stdin *bytes.Reader, dir string, env map[string]string, maxOut int, args ...string) ([]byte, func([]byte) []byte, error) {
	argv := append([]string{"sh", "-c", script, "sandboxkit-interp"}, args...)
	cmd := sandbox.Command{Args: argv, Dir: dir, Env: env, MaxOutput: maxOut}
	if stdin != nil {
		cmd.Stdin = stdin
	}
	if dl, ok := ctx.Deadline(); ok {
		cmd.Timeout = max(time.Until(dl), time.Millisecond)
	} else {
		cmd.Timeout = time.Minute
	}
	res, redact, err := k.sb.ExecUnredacted(ctx, cmd)
	if err != nil {
		return nil, nil, err
	}
	if res.ExitCode != 0 || res.StdoutTruncated {
		msg := strings.TrimSpace(string(redact(res.Stderr)))
		if res.TimedOut {
			return nil, nil, sandbox.Errorf(sandbox.DeadlineExceeded, "control command timed out after %v", res.Timeout)
		}
		return nil, nil, fmt.Errorf("control command failed (exit %d): %s", res.ExitCode, msg)
	}
	return res.Stdout, redact, nil
}

func wrap(op string, err error) error {
	return fmt.Errorf("interp: %s: %w", op, err)
}

// next returns the kernel's directory and the number of the next request.
func (k *Kernel) next() (dir string, n int, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return "", 0, ErrClosed
	}
	k.seq++
	return k.dir, k.seq, nil
}

// Run runs code as the kernel's next cell and returns its Execution. It
// returns an error only when the cell could not be run or followed: the
// kernel is gone (ErrDied), the transport failed, ctx ended, or the cell
// had to be ended by killing its kernel (ErrRestarted, or ErrNotKilled
// when some of its processes survived the kill); the Execution,
// when non-nil, then holds what was seen so far. An exception in the code
// is Execution.Error.
//
// When ctx ends, the cell is interrupted and Run waits up to
// RunOptions.TimeoutGrace for it to end, so that the next cell finds the
// kernel idle; a cell that is still running then is ended by killing the
// kernel, and the error matches both ctx's error and ErrRestarted.
func (k *Kernel) Run(ctx context.Context, code string, opts RunOptions) (_ *Execution, err error) {
	ctx, span := telemetry.Start(ctx, tracer(k.sb), "interp.run", telemetry.Language.String(string(k.opts.Language)), telemetry.SandboxID.String(k.sb.ID()))
	defer func() { telemetry.End(span, err) }()
	const op = "run"
	for _, f := range []struct {
		name string
		bad  bool
		v    any
	}{
		{"Timeout", opts.Timeout < 0, opts.Timeout},
		{"TimeoutGrace", opts.TimeoutGrace < 0, opts.TimeoutGrace},
		{"MaxOutput", opts.MaxOutput < 0, opts.MaxOutput},
		{"MaxResults", opts.MaxResults < 0, opts.MaxResults},
		{"MaxResultBytes", opts.MaxResultBytes < 0, opts.MaxResultBytes},
	} {
		if f.bad {
			return nil, wrap(op, sandbox.Errorf(sandbox.InvalidArgument, "RunOptions.%s %v is negative", f.name, f.v))
		}
	}
	if opts.TimeoutGrace == 0 {
		opts.TimeoutGrace = DefaultTimeoutGrace
	}
	if opts.MaxOutput == 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	if opts.MaxResults == 0 {
		opts.MaxResults = DefaultMaxResults
	}
	if opts.MaxResultBytes == 0 {
		opts.MaxResultBytes = DefaultMaxResultBytes
	}
	k.run.Lock()
	defer k.run.Unlock()
	if err := k.restartStale(ctx); err != nil {
		return nil, wrap(op, err)
	}
	dir, n, err := k.next()
	if err != nil {
		return nil, wrap(op, err)
	}
	var secs float64
	if opts.Timeout > 0 {
		secs = float64(max(opts.Timeout.Milliseconds(), 1)) / 1000
	}
	ship := func(cb func(string)) int64 { return shipCap(opts, cb) }
	head, _ := json.Marshal(map[string]any{
		"timeout":          secs,
		"max_stdout":       ship(opts.OnStdout),
		"max_stderr":       ship(opts.OnStderr),
		"max_results":      opts.MaxResults,
		"max_result_bytes": opts.MaxResultBytes,
		"slack":            slack,
	})
	req := append(append(head, '\n'), code...)
	c := newCollector(opts)
	if len(req) > maxArgRequest || bytes.IndexByte(req, 0) >= 0 {
		// Too long for an argument (or holding a NUL): a file of its own.
		if err := k.sb.WriteFile(ctx, path.Join(dir, "req", strconv.Itoa(n)), req); err != nil {
			return nil, wrap(op, err)
		}
		req = nil
	}
	if err := ctx.Err(); err != nil {
		return c.ex, wrap(op, err) // nothing submitted
	}
	var (
		off     int64
		submit  = true
		sent    bool  // the interrupt reached the cell
		base    = ctx // polls' context: ctx, or once it ended a detached one
		ctxErr  error // ctx's error, once it ended
		killAt  time.Time
		timeout = opts.Timeout > 0
	)
	if timeout {
		killAt = time.Now().Add(opts.Timeout + opts.TimeoutGrace)
	}
	for {
		if ctxErr == nil && ctx.Err() != nil {
			ctxErr = ctx.Err()
			base = context.WithoutCancel(ctx)
			sent = k.interrupt(base, dir, n)
			if g := time.Now().Add(opts.TimeoutGrace); killAt.IsZero() || g.Before(killAt) {
				killAt, timeout = g, false
			}
		}
		if !killAt.IsZero() && !time.Now().Before(killAt) {
			return k.kill(ctx, c, dir, n, off, timeout, ctxErr)
		}
		pctx, cancel := base, context.CancelFunc(func() {})
		if !killAt.IsZero() {
			pctx, cancel = context.WithDeadline(base, killAt)
		}
		if ctxErr != nil && !sent {
			// The cell had not begun: interrupt it once it has.
			sent = k.interrupt(pctx, dir, n)
		}
		st, data, redact, err := k.poll(pctx, dir, n, off, submit, req, pollTicks)
		cancel()
		if err != nil {
			if errors.Is(err, errBadAnswer) {
				// As with events that make no sense below: the cell
				// cannot be followed, so its kernel is ended.
				return k.end(ctx, c, dir, false, ctxErr, fmt.Errorf("cell %d: %w", n, err))
			}
			if atDeadline(base, pctx) || (ctxErr == nil && ctx.Err() != nil) || (!killAt.IsZero() && !time.Now().Before(killAt)) {
				continue // the loop's head interrupts or kills
			}
			c.finish()
			return c.ex, wrap(op, errors.Join(ctxErr, err))
		}
		submit = false
		off += int64(len(data))
		if err := c.feed(data, redact); err != nil {
			// Events that make no sense (a cell may write to the
			// kernel's files) leave the cell unfollowable, perhaps still
			// running: its kernel is ended, so that no cell runs on
			// unseen.
			return k.end(ctx, c, dir, false, ctxErr, fmt.Errorf("cell %d: %w", n, err))
		}
		if c.done {
			c.finish()
			if ctxErr != nil {
				return c.ex, wrap(op, ctxErr)
			}
			return c.ex, nil
		}
		switch {
		case st.state == "dead":
			c.finish()
			return c.ex, wrap(op, errors.Join(ctxErr, fmt.Errorf("%w: cell %d did not finish", ErrDied, n)))
		case st.state == "done" && (off >= st.size || len(data) == 0):
			c.finish()
			return c.ex, wrap(op, errors.Join(ctxErr, fmt.Errorf("the kernel's answer to cell %d ended early", n)))
		}
	}
}

// atDeadline reports whether a poll that failed ran into the deadline of
// its context pctx (derived from base), which a provider may end a moment
// before the deadline itself; it then waits for that deadline to pass, so
// that the caller sees it passed.
func atDeadline(base, pctx context.Context) bool {
	dl, ok := pctx.Deadline()
	if !ok || time.Until(dl) > 250*time.Millisecond {
		return false
	}
	wait := max(time.Until(dl), 0)
	if bdl, ok := base.Deadline(); ok && !bdl.After(dl) {
		wait += time.Second // base's own: it reports its end in a moment
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-base.Done():
	}
	return true
}

// shipCap is how much of a stream the kernel sends at most: the cap plus
// a margin (so that a secret the cap cuts through is still whole for
// redaction), or all of it (-1) for a callback.
func shipCap(opts RunOptions, cb func(string)) int64 {
	if cb != nil {
		return -1
	}
	return int64(opts.MaxOutput) + slack
}

// kill ends cell n for sure once its grace is over: a last look for its
// end, then the kernel is killed, and a fresh one started unless ctx ended
// (then the next call starts it).
func (k *Kernel) kill(ctx context.Context, c *collector, dir string, n int, off int64, timedOut bool, ctxErr error) (*Execution, error) {
	const op = "run"
	// The last looks and the collection of kept output are bounded, by
	// time as by size (a hostile cell may keep its files growing or its
	// FIFOs full): the kill must follow soon whatever they meet.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.TimeoutGrace+lookTime)
	defer cancel()
	// Last looks: the deadline may have cut a poll that would have seen
	// the end; and a look's round trip, the transport's latency that the
	// caller's clock counted against the grace, is given once more.
	var lat time.Duration
	for look := 0; look < 2; look++ {
		if look == 1 {
			t := time.NewTimer(min(lat, c.opts.TimeoutGrace))
			select {
			case <-t.C:
			case <-lctx.Done():
			}
			t.Stop()
		}
		start := time.Now()
		st, data, redact, err := k.poll(lctx, dir, n, off, false, nil, 0)
		lat = time.Since(start)
		if err != nil {
			break
		}
		off += int64(len(data))
		if err := c.feed(data, redact); err != nil {
			break
		}
		if c.done && st.state != "dead" {
			c.finish()
			if ctxErr != nil {
				return c.ex, wrap(op, ctxErr)
			}
			return c.ex, nil
		}
		if st.state != "run" {
			break
		}
	}
	if k.opts.Language == Bash {
		k.bashOutput(lctx, c, dir)
	}
	c.ex.Interrupted = true
	cause := fmt.Errorf("cell %d did not end within %v of its interrupt", n, c.opts.TimeoutGrace)
	return k.end(ctx, c, dir, timedOut, ctxErr, cause)
}

// end kills the kernel of dir, whose cell is not to be followed further
// (for cause), and starts a fresh one unless ctx ended (then the next call
// starts it). It reports the kernel restarted only once the old one and
// everything it started are gone.
func (k *Kernel) end(ctx context.Context, c *collector, dir string, timedOut bool, ctxErr, cause error) (*Execution, error) {
	const op = "run"
	k.mu.Lock()
	if k.dir == dir {
		k.stale = true
	}
	k.mu.Unlock()
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), killTime)
	stopErr := k.stop(sctx, dir)
	scancel()
	c.finish()
	c.ex.TimedOut = timedOut
	if stopErr != nil {
		// Never reported as restarted: the old kernel may live on, and
		// a fresh one next to it would hide that.
		err := fmt.Errorf("%w, and killing its kernel failed: %w", cause, stopErr)
		if !errors.Is(err, ErrNotKilled) {
			err = fmt.Errorf("%w: %w", ErrNotKilled, err)
		}
		if ctxErr != nil {
			err = errors.Join(ctxErr, err)
		}
		return c.ex, wrap(op, err)
	}
	c.ex.Restarted = true
	err := fmt.Errorf("%w: %w", cause, ErrRestarted)
	if ctxErr != nil {
		return c.ex, wrap(op, errors.Join(ctxErr, err))
	}
	if serr := k.restartStale(ctx); serr != nil {
		err = errors.Join(err, serr)
	}
	return c.ex, wrap(op, err)
}

// bashOutput collects what a Bash cell that is to be killed has printed:
// its kernel sends a cell's output only when the cell ends.
func (k *Kernel) bashOutput(ctx context.Context, c *collector, dir string) {
	shipped := max(c.out.ship, c.err.ship)
	if c.out.ship < 0 || c.err.ship < 0 {
		shipped = int64(c.opts.MaxOutput) + slack // no later output to hand on
		c.out.ship, c.err.ship = shipped, shipped
	}
	out, redact, err := k.exec(ctx, outputScript, nil, "", nil, int(shipped*2+1024), dir, strconv.FormatInt(shipped, 10))
	if err != nil {
		return
	}
	lines := strings.SplitN(string(out), "\n", 3)
	if len(lines) < 2 {
		return
	}
	c.redact = redact
	for i, s := range []*outStream{&c.out, &c.err} {
		if b, err := base64.StdEncoding.DecodeString(lines[i]); err == nil {
			c.stream(s, b, false)
		}
	}
}

// restartStale starts a fresh kernel when the current one was killed.
func (k *Kernel) restartStale(ctx context.Context) error {
	k.mu.Lock()
	stale, closed := k.stale, k.closed
	k.mu.Unlock()
	if !stale || closed {
		return nil
	}
	return k.start(ctx)
}

type pollState struct {
	state string
	size  int64
}

const (
	pollMax       = 4 << 20  // bytes of events one poll returns at most
	pollTicks     = 25       // seconds a poll waits at most for news
	maxArgRequest = 64 << 10 // longer requests go by WriteFile
	// slack is how far past a cap the kernel sends a stream or a text, and
	// how much of an unfinished piece of text is held back from redaction:
	// a secret up to that long that a cut goes through is still redacted
	// whole, never handed on in part.
	slack = 64 << 10
	// lookTime is how long a kill's last looks and output collection take
	// at most past the grace; killTime, how long killing takes at most.
	lookTime = 3 * time.Second
	killTime = 20 * time.Second
)

// poll runs runScript once, retrying once a call whose transport failed
// (safe: events are read by offset and a submission is never repeated).
func (k *Kernel) poll(ctx context.Context, dir string, n int, off int64, submit bool, req []byte, ticks int) (pollState, []byte, func([]byte) []byte, error) {
	var out []byte
	var redact func([]byte) []byte
	var err error
	args := []string{dir, strconv.Itoa(n), strconv.FormatInt(off, 10), strconv.Itoa(pollMax), strconv.Itoa(ticks), "0"}
	if submit {
		args[5] = "1"
		if req != nil {
			args = append(args, string(req))
		}
	}
	for try := 0; try < 2; try++ {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		out, redact, err = k.exec(pctx, runScript, nil, "", nil, pollMax+1024, args...)
		cancel()
		if err == nil || !errors.Is(err, sandbox.ErrOutcomeUnknown) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return pollState{}, nil, nil, err
	}
	line, data, _ := bytes.Cut(out, []byte("\n"))
	var st pollState
	if _, err := fmt.Sscanf(string(line), "%s %d", &st.state, &st.size); err != nil {
		// The line comes from files a cell can write: redacted.
		return pollState{}, nil, nil, fmt.Errorf("%w: %q", errBadAnswer, redact(line))
	}
	return st, data, redact, nil
}

// interrupt sends SIGINT to the kernel if cell n runs, and reports whether
// it did. ctx must not have ended.
func (k *Kernel) interrupt(ctx context.Context, dir string, n int) bool {
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, _, err := k.exec(ictx, interruptScript, nil, "", nil, 1024, dir, strconv.Itoa(n), k.groupOf(dir))
	return err == nil && strings.TrimSpace(string(out)) == "sent"
}

// Interrupt interrupts the cell that runs now, if any, as Ctrl-C would:
// Python raises KeyboardInterrupt in it; the kernel and its state remain.
func (k *Kernel) Interrupt(ctx context.Context) (err error) {
	ctx, span := telemetry.Start(ctx, tracer(k.sb), "interp.interrupt", telemetry.SandboxID.String(k.sb.ID()))
	defer func() { telemetry.End(span, err) }()
	k.mu.Lock()
	dir, n, closed := k.dir, k.seq, k.closed
	k.mu.Unlock()
	if closed {
		return wrap("interrupt", ErrClosed)
	}
	_, _, err = k.exec(ctx, interruptScript, nil, "", nil, 1024, dir, strconv.Itoa(n), k.groupOf(dir))
	if err != nil {
		return wrap("interrupt", err)
	}
	return nil
}

// Restart ends the kernel process (a cell that runs ends with it) and
// starts a fresh one: no state survives, and the execution count starts
// over. It is how to carry on after ErrDied.
func (k *Kernel) Restart(ctx context.Context) (err error) {
	ctx, span := telemetry.Start(ctx, tracer(k.sb), "interp.restart", telemetry.SandboxID.String(k.sb.ID()))
	defer func() { telemetry.End(span, err) }()
	k.mu.Lock()
	dir, closed := k.dir, k.closed
	k.mu.Unlock()
	if closed {
		return wrap("restart", ErrClosed)
	}
	if err := k.stop(ctx, dir); err != nil {
		return wrap("restart", err)
	}
	k.run.Lock() // a Run in progress sees the kernel die and returns
	defer k.run.Unlock()
	return k.start(ctx)
}

// Close ends the kernel process and everything it started, and removes its
// files. A Run in progress returns with ErrDied. Close is idempotent.
//
// A kernel's processes are found by a variable in their environment, by
// the session and process group of the kernel, and by descent. A process
// a cell started that left all three on purpose (a new session, an
// emptied environment, its parent gone) is not found: code in a sandbox
// can always outlive its kernel that way. Destroying the sandbox ends
// every process in it.
func (k *Kernel) Close(ctx context.Context) error {
	k.mu.Lock()
	dir, closed := k.dir, k.closed
	k.closed = true
	k.mu.Unlock()
	if closed {
		return nil
	}
	if err := k.stop(ctx, dir); err != nil {
		return wrap("close", err)
	}
	return nil
}

// groupOf returns the pid of the monitor of the kernel of dir, as its
// launcher reported it (its file in dir is writable by cells), or "" when
// dir is not the current kernel's.
func (k *Kernel) groupOf(dir string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dir == dir {
		return k.group
	}
	return ""
}

// stop ends the kernel of directory dir and every process it started. It
// fails when some of them could not be killed.
func (k *Kernel) stop(ctx context.Context, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, _, err := k.exec(ctx, stopScript, nil, "", nil, 64<<10, dir, path.Base(dir), k.groupOf(dir))
	if err != nil {
		return err
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	switch {
	case line == "ok":
		return nil
	case strings.HasPrefix(line, "alive"):
		return fmt.Errorf("%w: processes of the kernel survived being killed: pids%s", ErrNotKilled, cutString(line[len("alive"):], 200))
	}
	return fmt.Errorf("bad answer from the kernel's stopper: %q", cutString(line, 200))
}

// collector turns events into an Execution, redacting text field by field
// and stream output line by line (a secret split across two events is
// still found), and keeping no more than the caps of its RunOptions: what
// it holds at any time is bounded by them, whatever the kernel sends.
type collector struct {
	ex       *Execution
	opts     RunOptions
	out, err outStream
	redact   func([]byte) []byte
	line     []byte // an event line not yet complete
	skip     bool   // the current event line is over maxLine: dropped
	maxLine  int
	rbytes   int // bytes of results kept
	done     bool
}

// outStream is one output stream of a cell.
type outStream struct {
	pending   []byte // raw output not yet handed on: an unfinished line
	kept      strings.Builder
	max       int
	truncated bool
	cut       bool  // the kernel reported it stopped sending at its cap
	ship      int64 // what the kernel sends at most, or -1
	got       int64 // what it sent
	cb        func(string)
}

const (
	maxPending = 256 << 10 // an unfinished line longer than this is handed on in part
	maxHeld    = 4 << 20   // an unfinished line that cannot be split safely is dropped past this
)

func newCollector(opts RunOptions) *collector {
	c := &collector{ex: &Execution{}, opts: opts, redact: func(b []byte) []byte { return b }}
	c.out = outStream{max: opts.MaxOutput, cb: opts.OnStdout, ship: shipCap(opts, opts.OnStdout)}
	c.err = outStream{max: opts.MaxOutput, cb: opts.OnStderr, ship: shipCap(opts, opts.OnStderr)}
	// The longest event a kernel that keeps the caps sends: a result's
	// text, cut at the cap and a margin, each character escaped as \uXXXX
	// at worst.
	c.maxLine = math.MaxInt
	if opts.MaxResultBytes < (math.MaxInt-1<<20)/6-slack {
		c.maxLine = 6*(opts.MaxResultBytes+slack) + 1<<20
	}
	return c
}

type event struct {
	Type        string          `json:"type"`
	Data        json.RawMessage `json:"data"`
	Main        bool            `json:"main"`
	Cut         bool            `json:"cut"`
	Dropped     bool            `json:"dropped"` // a form over the cap was left out
	Name        string          `json:"name"`
	Value       string          `json:"value"`
	Traceback   []string        `json:"traceback"`
	Count       int             `json:"count"`
	Interrupted bool            `json:"interrupted"`
	TimedOut    bool            `json:"timed_out"`
	StdoutCut   bool            `json:"stdout_cut"`
	StderrCut   bool            `json:"stderr_cut"`
	ResultsCut  bool            `json:"results_cut"`
}

// feed takes the next bytes of the event file, wherever they end: a line
// that is not complete yet waits for the rest.
func (c *collector) feed(data []byte, redact func([]byte) []byte) error {
	if redact != nil {
		c.redact = redact
	}
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			switch {
			case c.skip:
			case len(c.line)+len(data) > c.maxLine:
				c.dropLine(c.line, data)
				c.line, c.skip = nil, true
			default:
				c.line = append(c.line, data...)
			}
			return nil
		}
		line := data[:i]
		data = data[i+1:]
		switch {
		case c.skip:
			c.skip = false
			continue
		case len(c.line) > 0:
			if len(c.line)+len(line) > c.maxLine {
				c.dropLine(c.line, line)
				c.line = nil
				continue
			}
			line = append(c.line, line...)
			c.line = nil
		case len(line) > c.maxLine:
			c.dropLine(nil, line)
			continue
		}
		if err := c.event(line); err != nil {
			return err
		}
	}
	return nil
}

// dropLine notes an event too long to be held: no kernel keeping the caps
// sends one, so it is dropped and counted as output past the caps; an
// error's report is replaced by one that says it was dropped, so that the
// cell is not taken for one that succeeded.
func (c *collector) dropLine(held, more []byte) {
	start := append(held[:min(len(held), 64):min(len(held), 64)], more[:min(len(more), 64)]...)
	switch {
	case bytes.HasPrefix(start, []byte(`{"type":"error"`)):
		c.ex.Error = &Error{Name: "Error", Value: fmt.Sprintf("the cell raised an error whose report was over %d bytes, too long to keep", c.maxLine), Truncated: true}
	case bytes.Contains(start, []byte(`"stdout"`)):
		c.ex.StdoutTruncated = true
	case bytes.Contains(start, []byte(`"stderr"`)):
		c.ex.StderrTruncated = true
	default:
		c.ex.ResultsTruncated = true
	}
}

func (c *collector) event(line []byte) error {
	red := func(s string) string { return string(c.redact([]byte(s))) }
	var ev event
	if err := json.Unmarshal(line, &ev); err != nil {
		return fmt.Errorf("bad event from the kernel: %w", err)
	}
	switch ev.Type {
	case "stdout", "stderr":
		var s string
		if err := json.Unmarshal(ev.Data, &s); err != nil {
			return fmt.Errorf("bad %s event: %w", ev.Type, err)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return fmt.Errorf("bad %s event: %w", ev.Type, err)
		}
		if ev.Type == "stdout" {
			c.stream(&c.out, b, false)
		} else {
			c.stream(&c.err, b, false)
		}
	case "result":
		var data map[string]string
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			return fmt.Errorf("bad result event: %w", err)
		}
		return c.result(ev, data)
	case "error":
		// Redacted before it is cut: a secret the cut goes through is
		// redacted whole.
		e := &Error{Name: cutString(red(ev.Name), 1<<10), Value: red(ev.Value), Truncated: ev.Cut}
		if len(e.Value) > maxErrorText {
			e.Value, e.Truncated = cutString(e.Value, maxErrorText), true
		}
		room := maxErrorText
		for _, t := range ev.Traceback {
			t = red(t)
			if len(t) > room {
				if t = cutString(t, room); t != "" {
					e.Traceback = append(e.Traceback, t)
				}
				e.Truncated = true
				break
			}
			room -= len(t)
			e.Traceback = append(e.Traceback, t)
		}
		c.ex.Error = e
	case "done":
		c.ex.Count, c.ex.Interrupted, c.ex.TimedOut = ev.Count, ev.Interrupted, ev.TimedOut
		c.out.cut, c.err.cut = ev.StdoutCut, ev.StderrCut
		if ev.ResultsCut {
			c.ex.ResultsTruncated = true
		}
		c.done = true
	}
	return nil
}

// result keeps what fits of one result: its text/plain form cut to the
// room left, its other forms whole or not at all.
func (c *collector) result(ev event, data map[string]string) error {
	if len(c.ex.Results) >= c.opts.MaxResults {
		c.ex.ResultsTruncated = true
		return nil
	}
	room := c.opts.MaxResultBytes - c.rbytes
	r := Result{Main: ev.Main, Truncated: ev.Dropped}
	if t, ok := data["text/plain"]; ok {
		var s string
		if ev.Cut { // cut by the kernel: its end may hold part of a secret
			s = string(c.safePrefix([]byte(t)))
			r.Truncated = true
		} else {
			s = string(c.redact([]byte(t)))
		}
		if len(s) > room {
			s, r.Truncated = cutString(s, room), true
		}
		r.Text = s
		room -= len(s)
	}
	text := func(mime string, dst *string) {
		v, ok := data[mime]
		if !ok || v == "" {
			return
		}
		if len(v) > room+slack { // larger than the room even if redaction shrank it
			r.Truncated = true
			return
		}
		if v = string(c.redact([]byte(v))); len(v) > room {
			r.Truncated = true
			return
		}
		*dst, room = v, room-len(v)
	}
	text("text/html", &r.HTML)
	text("text/markdown", &r.Markdown)
	text("text/latex", &r.LaTeX)
	text("image/svg+xml", &r.SVG)
	var js string
	text("application/json", &js)
	if js != "" {
		r.JSON = json.RawMessage(js)
	}
	image := func(mime string, dst *[]byte) error {
		v := data[mime]
		if v == "" {
			return nil
		}
		if base64.StdEncoding.DecodedLen(len(v)) > room+3 {
			r.Truncated = true
			return nil
		}
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return fmt.Errorf("bad %s result: %w", mime, err)
		}
		if len(b) > room {
			r.Truncated = true
			return nil
		}
		*dst, room = b, room-len(b)
		return nil
	}
	if err := image("image/png", &r.PNG); err != nil {
		return err
	}
	if err := image("image/jpeg", &r.JPEG); err != nil {
		return err
	}
	c.rbytes = c.opts.MaxResultBytes - room
	if r.Truncated {
		c.ex.ResultsTruncated = true
	}
	c.ex.Results = append(c.ex.Results, r)
	return nil
}

// cutString returns s cut to at most n bytes, at the start of a character.
func cutString(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// split finds where p can be cut so that redacting its two parts apart
// gives what redacting it whole does, at least slack bytes before its end,
// and returns that place with the redacted first part. Without knowing the
// secrets, that is the test that no secret found in p runs across the cut,
// and any secret shorter than slack that runs past p's end starts after it.
// It tries the places just before the first one (a secret runs across
// that one) and then further back.
func (c *collector) split(p []byte) (int, []byte, bool) {
	if len(p) <= slack {
		return 0, nil, false
	}
	whole := c.redact(p)
	k0 := len(p) - slack
	for try := 0; try < 48; try++ {
		k := k0 - try
		if try >= 32 {
			k = k0 - 32 - (try-31)*4093
		}
		for k > 0 && !utf8.RuneStart(p[k]) {
			k--
		}
		if k <= 0 {
			break
		}
		a := c.redact(p[:k])
		if !bytes.HasPrefix(whole, a) {
			continue
		}
		if b := c.redact(p[k:]); len(a)+len(b) == len(whole) && bytes.HasSuffix(whole, b) {
			return k, a, true
		}
	}
	return 0, nil, false
}

// safePrefix returns the redaction of p cut where no part of a secret can
// follow: p's end may be a cut through a secret (up to slack bytes long),
// so what is kept is what redacting p whole and redacting it without its
// last slack bytes agree on. That is the image of p's bytes before the
// last slack, up to a secret that runs across that place.
func (c *collector) safePrefix(p []byte) []byte {
	if len(p) <= slack {
		return nil
	}
	whole, a := c.redact(p), c.redact(p[:len(p)-slack])
	n := 0
	for n < len(a) && n < len(whole) && a[n] == whole[n] {
		n++
	}
	for n > 0 && n < len(whole) && !utf8.RuneStart(whole[n]) {
		n--
	}
	return whole[:n]
}

// stream hands on the complete lines of the stream's pending output and b
// (all of it when final), redacted, to the kept text and the callback. An
// unfinished line that grows past maxPending is handed on in part, cut
// where no secret runs across.
func (c *collector) stream(s *outStream, b []byte, final bool) {
	s.got += int64(len(b))
	s.pending = append(s.pending, b...)
	p := s.pending
	var cut int
	var out []byte
	switch {
	case final && len(p) > 0 && (s.cut || (s.ship >= 0 && s.got >= s.ship)):
		// The kernel stopped sending at its cap: what is left may end in
		// part of a secret, and is past the cap anyway.
		out = c.safePrefix(p)
		cut, s.truncated = len(p), true
	case final:
		cut = len(p)
		out = c.redact(p)
	default:
		cut = bytes.LastIndexByte(p, '\n') + 1
		if cut > 0 {
			out = c.redact(p[:cut])
		} else if len(p) > maxPending {
			var ok bool
			if cut, out, ok = c.split(p); !ok {
				cut, out = 0, nil
				if len(p) > maxHeld { // never found a safe cut: drop rather than leak
					cut, s.truncated = len(p)-slack, true
				}
			}
		}
	}
	if cut > 0 {
		n := copy(s.pending, p[cut:])
		s.pending = s.pending[:n]
		if cap(s.pending) > 2*maxHeld && n < maxPending {
			s.pending = append([]byte(nil), s.pending...)
		}
	}
	if len(out) == 0 {
		return
	}
	str := string(out)
	if room := s.max - s.kept.Len(); len(str) > room {
		s.kept.WriteString(cutString(str, room))
		s.truncated = true
	} else {
		s.kept.WriteString(str)
	}
	if s.cb != nil {
		s.cb(str)
	}
}

// finish hands on unfinished lines and fills the Execution's streams.
func (c *collector) finish() {
	c.stream(&c.out, nil, true)
	c.stream(&c.err, nil, true)
	c.ex.Stdout, c.ex.Stderr = c.out.kept.String(), c.err.kept.String()
	c.ex.StdoutTruncated = c.ex.StdoutTruncated || c.out.truncated || c.out.cut
	c.ex.StderrTruncated = c.ex.StderrTruncated || c.err.truncated || c.err.cut
	c.line = nil
}
