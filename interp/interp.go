package interp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxkit/sandbox"
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
// time limit other than ctx's.
type RunOptions struct {
	// OnStdout and OnStderr, when non-nil, receive the cell's output while
	// it runs, in order, with secret values redacted. They are called from
	// Run's goroutine, one at a time.
	OnStdout func(text string)
	OnStderr func(text string)
	// Timeout, when positive, interrupts the cell after that long, as
	// Interrupt does: the cell ends with a KeyboardInterrupt (for Bash, the
	// cell's commands get SIGINT), Execution.TimedOut is set and the
	// kernel's state is kept.
	Timeout time.Duration
}

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
}

// String returns "Name: Value".
func (e *Error) String() string { return e.Name + ": " + e.Value }

// ErrDied is matched (errors.Is) by the error of a call on a kernel whose
// process is gone: killed, out of memory, or lost with its sandbox's memory.
// Restart starts a fresh one.
var ErrDied = errors.New("interp: the kernel is not running")

// ErrClosed is matched by the error of a call on a closed Kernel.
var ErrClosed = errors.New("interp: the kernel is closed")

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
	seq    int    // requests submitted to the current kernel
	closed bool
}

// New starts a kernel in sb. It needs a sandbox that runs commands with a
// POSIX sh and the usual tools (cat, mv, mkdir, mkfifo, tail, head, wc,
// sleep, kill, setsid or nohup), the language's interpreter (python3, or
// bash) and, for the kernel's liveness, /proc. Close ends the kernel; a
// Kernel dropped without Close lives on until the sandbox ends.
func New(ctx context.Context, sb *sandbox.Sandbox, opts Options) (*Kernel, error) {
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
	sum := sha256.Sum256(src)
	ext := map[Language]string{Python: ".py", Bash: ".bash", Node: ".js"}[k.opts.Language]
	return src, "kernel-" + hex.EncodeToString(sum[:12]) + ext
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
	out, _, err := k.exec(ctx, launchScript, bytes.NewReader(src), k.opts.Dir, k.opts.Env, 64<<10,
		k.base, kid, file, string(k.opts.Language))
	if err != nil {
		return wrap(op, err)
	}
	line, rest, _ := strings.Cut(string(out), "\n")
	switch {
	case strings.HasPrefix(line, "ok "):
		if _, err := strconv.Atoi(strings.TrimSpace(line[3:])); err != nil {
			return wrap(op, fmt.Errorf("bad launcher answer %q", line))
		}
		k.mu.Lock()
		closed := k.closed
		if !closed {
			k.dir, k.seq = path.Join(k.base, kid), 0
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
		return wrap(op, fmt.Errorf("%w: it exited at start: %s", ErrDied, strings.TrimSpace(rest)))
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
// kernel is gone (ErrDied), the transport failed, or ctx ended; then the
// cell is interrupted (when ctx ended) and the Execution, when non-nil,
// holds what was seen so far. An exception in the code is Execution.Error.
func (k *Kernel) Run(ctx context.Context, code string, opts RunOptions) (*Execution, error) {
	const op = "run"
	if opts.Timeout < 0 {
		return nil, wrap(op, sandbox.Errorf(sandbox.InvalidArgument, "RunOptions.Timeout %v is negative", opts.Timeout))
	}
	k.run.Lock()
	defer k.run.Unlock()
	dir, n, err := k.next()
	if err != nil {
		return nil, wrap(op, err)
	}
	var secs float64
	if opts.Timeout > 0 {
		secs = float64(max(opts.Timeout.Milliseconds(), 1)) / 1000
	}
	head, _ := json.Marshal(map[string]float64{"timeout": secs})
	req := append(append(head, '\n'), code...)
	c := &collector{ex: &Execution{}, opts: opts}
	if len(req) > maxArgRequest || bytes.IndexByte(req, 0) >= 0 {
		// Too long for an argument (or holding a NUL): a file of its own.
		if err := k.sb.WriteFile(ctx, path.Join(dir, "req", strconv.Itoa(n)), req); err != nil {
			return nil, wrap(op, err)
		}
		req = nil
	}
	var off int64
	submit := true
	for {
		if err := ctx.Err(); err != nil {
			k.interrupt(ctx, dir, n)
			c.finish()
			return c.ex, wrap(op, err)
		}
		st, data, redact, err := k.poll(ctx, dir, n, off, submit, req)
		if err != nil {
			if ctx.Err() != nil {
				k.interrupt(ctx, dir, n)
			}
			c.finish()
			return c.ex, wrap(op, err)
		}
		submit = false
		// Consume whole lines only: the kernel may be half-way through one.
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			if err := c.events(data[:i+1], redact); err != nil {
				return c.ex, wrap(op, err)
			}
			off += int64(i + 1)
		}
		if c.done {
			c.finish()
			return c.ex, nil
		}
		switch {
		case st.state == "dead":
			c.finish()
			return c.ex, wrap(op, fmt.Errorf("%w: cell %d did not finish", ErrDied, n))
		case st.state == "done" && off >= st.size:
			return c.ex, wrap(op, fmt.Errorf("the kernel's answer to cell %d ended early", n))
		}
	}
}

type pollState struct {
	state string
	size  int64
}

const (
	pollMax       = 4 << 20  // bytes of events one poll returns at most
	pollTicks     = 25       // seconds a poll waits at most for news
	maxArgRequest = 64 << 10 // longer requests go by WriteFile
)

// poll runs runScript once, retrying once a call whose transport failed
// (safe: events are read by offset and a submission is never repeated).
func (k *Kernel) poll(ctx context.Context, dir string, n int, off int64, submit bool, req []byte) (pollState, []byte, func([]byte) []byte, error) {
	var out []byte
	var redact func([]byte) []byte
	var err error
	args := []string{dir, strconv.Itoa(n), strconv.FormatInt(off, 10), strconv.Itoa(pollMax), strconv.Itoa(pollTicks), "0"}
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
		return pollState{}, nil, nil, fmt.Errorf("bad answer from the kernel's client: %q", line)
	}
	return st, data, redact, nil
}

// interrupt sends SIGINT to the kernel if cell n still runs, with a
// context of its own since ctx may have ended.
func (k *Kernel) interrupt(ctx context.Context, dir string, n int) {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, _, _ = k.exec(ictx, interruptScript, nil, "", nil, 1024, dir, strconv.Itoa(n))
}

// Interrupt interrupts the cell that runs now, if any, as Ctrl-C would:
// Python raises KeyboardInterrupt in it; the kernel and its state remain.
func (k *Kernel) Interrupt(ctx context.Context) error {
	k.mu.Lock()
	dir, n, closed := k.dir, k.seq, k.closed
	k.mu.Unlock()
	if closed {
		return wrap("interrupt", ErrClosed)
	}
	_, _, err := k.exec(ctx, interruptScript, nil, "", nil, 1024, dir, strconv.Itoa(n))
	if err != nil {
		return wrap("interrupt", err)
	}
	return nil
}

// Restart ends the kernel process (a cell that runs ends with it) and
// starts a fresh one: no state survives, and the execution count starts
// over. It is how to carry on after ErrDied.
func (k *Kernel) Restart(ctx context.Context) error {
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

func (k *Kernel) stop(ctx context.Context, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, _, err := k.exec(ctx, stopScript, nil, "", nil, 1024, dir)
	return err
}

// collector turns events into an Execution, redacting text field by field
// and stream output line by line (a secret split across two events is
// still found).
type collector struct {
	ex       *Execution
	opts     RunOptions
	out, err bytes.Buffer // stream text not yet handed on: an unfinished line
	stdout   strings.Builder
	stderr   strings.Builder
	redact   func([]byte) []byte
	done     bool
}

type event struct {
	Type        string          `json:"type"`
	Data        json.RawMessage `json:"data"`
	Main        bool            `json:"main"`
	Name        string          `json:"name"`
	Value       string          `json:"value"`
	Traceback   []string        `json:"traceback"`
	Count       int             `json:"count"`
	Interrupted bool            `json:"interrupted"`
	TimedOut    bool            `json:"timed_out"`
}

func (c *collector) events(lines []byte, redact func([]byte) []byte) error {
	c.redact = redact
	red := func(s string) string { return string(redact([]byte(s))) }
	for _, line := range bytes.Split(bytes.TrimSuffix(lines, []byte("\n")), []byte("\n")) {
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
				c.stream(&c.out, &c.stdout, c.opts.OnStdout, b, false)
			} else {
				c.stream(&c.err, &c.stderr, c.opts.OnStderr, b, false)
			}
		case "result":
			var data map[string]string
			if err := json.Unmarshal(ev.Data, &data); err != nil {
				return fmt.Errorf("bad result event: %w", err)
			}
			r := Result{Main: ev.Main, Text: red(data["text/plain"]), HTML: red(data["text/html"]),
				Markdown: red(data["text/markdown"]), LaTeX: red(data["text/latex"]), SVG: red(data["image/svg+xml"])}
			if j := data["application/json"]; j != "" {
				r.JSON = json.RawMessage(red(j))
			}
			var err error
			if r.PNG, err = decode64(data["image/png"]); err != nil {
				return fmt.Errorf("bad image/png result: %w", err)
			}
			if r.JPEG, err = decode64(data["image/jpeg"]); err != nil {
				return fmt.Errorf("bad image/jpeg result: %w", err)
			}
			c.ex.Results = append(c.ex.Results, r)
		case "error":
			e := &Error{Name: red(ev.Name), Value: red(ev.Value)}
			for _, t := range ev.Traceback {
				e.Traceback = append(e.Traceback, red(t))
			}
			c.ex.Error = e
		case "done":
			c.ex.Count, c.ex.Interrupted, c.ex.TimedOut = ev.Count, ev.Interrupted, ev.TimedOut
			c.done = true
		}
	}
	return nil
}

func decode64(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	return base64.StdEncoding.DecodeString(s)
}

// stream hands on the complete lines of pending+b (all of it when final),
// redacted, to the collected text and the callback.
func (c *collector) stream(pending *bytes.Buffer, all *strings.Builder, cb func(string), b []byte, final bool) {
	pending.Write(b)
	p := pending.Bytes()
	cut := len(p)
	if !final {
		cut = bytes.LastIndexByte(p, '\n') + 1
	}
	if cut == 0 {
		return
	}
	redact := c.redact
	if redact == nil {
		redact = func(b []byte) []byte { return b }
	}
	s := string(redact(p[:cut]))
	pending.Next(cut)
	all.WriteString(s)
	if cb != nil {
		cb(s)
	}
}

// finish hands on unfinished lines and fills the Execution's streams.
func (c *collector) finish() {
	c.stream(&c.out, &c.stdout, c.opts.OnStdout, nil, true)
	c.stream(&c.err, &c.stderr, c.opts.OnStderr, nil, true)
	c.ex.Stdout, c.ex.Stderr = c.stdout.String(), c.stderr.String()
}
