package sandbox

import (
	"bytes"
	"context"
	"errors"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox/internal/errscrub"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/signame"
)

// MaxStderrTail is the most bytes of a failed command's standard error an
// [ExitError] keeps: the end of the stream, where a program's last words
// (a traceback, a usage line) are, without holding megabytes of log in an
// error value.
const MaxStderrTail = 4 << 10

// ExitError reports a command that ran but did not succeed: it exited with
// a non-zero status, a signal ended it, or a timeout did. [Sandbox.Output]
// and [Sandbox.Run] return it (use errors.As), as os/exec's Output returns
// an *exec.ExitError; [Sandbox.Exec] reports the same facts in its Result
// instead.
type ExitError struct {
	// ExitCode is the command's exit status; -1 when a signal or a timeout
	// ended it.
	ExitCode int
	// Signal is the (Linux) signal that ended the command, when the
	// provider reports it; 0 otherwise (see Result.Signal).
	Signal syscall.Signal
	// TimedOut reports that a timeout ended the command; TimeoutBy says
	// whose and Timeout how long it was.
	TimedOut  bool
	TimeoutBy TimeoutLayer
	Timeout   time.Duration
	// Stderr is the end of the command's standard error, at most
	// MaxStderrTail bytes, with secret values redacted; StderrTruncated
	// reports that earlier bytes were left out.
	Stderr          []byte
	StderrTruncated bool

	// err is the error that ended the call when the caller's context did
	// (its Code is DeadlineExceeded or Canceled); nil otherwise.
	err error
}

// Error returns one line: the exit status (or the signal or timeout) and
// the last non-empty line of Stderr, shortened and with control
// characters escaped.
func (e *ExitError) Error() string {
	var s string
	switch {
	case e.TimedOut:
		s = "timed out"
		if e.Timeout > 0 {
			s += " after " + e.Timeout.String()
		}
		if e.TimeoutBy != TimeoutNone {
			s += " (" + string(e.TimeoutBy) + " timeout)"
		}
	case e.Signal != 0:
		s = "killed by signal " + signame.Name(e.Signal)
	default:
		s = "exit status " + strconv.Itoa(e.ExitCode)
	}
	if last := lastLine(e.Stderr); last != "" {
		s += ": " + iox.Printable(last, 200)
	}
	return s
}

// Unwrap returns the context error that ended the command, if any, so
// CodeOf and errors.Is(err, context.DeadlineExceeded) report it.
func (e *ExitError) Unwrap() error { return e.err }

// Is reports a timeout as context.DeadlineExceeded, whichever layer's
// deadline it was, so CodeOf gives DeadlineExceeded for every timed-out
// command.
func (e *ExitError) Is(target error) bool {
	return e.TimedOut && target == context.DeadlineExceeded
}

// lastLine returns the last line of b that holds more than white space.
func lastLine(b []byte) string {
	for len(b) > 0 {
		b = bytes.TrimRight(b, " \t\r\n")
		i := bytes.LastIndexByte(b, '\n')
		if line := bytes.TrimSpace(b[i+1:]); len(line) > 0 {
			return string(line)
		}
		if i < 0 {
			break
		}
		b = b[:i]
	}
	return ""
}

// exitError returns the *ExitError for res, or nil when res is a success.
// callErr is what Exec returned with res.
func exitError(res *Result, callErr error) error {
	if res == nil || (res.Success() && callErr == nil) {
		return callErr
	}
	if callErr != nil && !res.TimedOut {
		return callErr
	}
	tail, cut := res.Stderr, res.StderrTruncated
	if len(tail) > MaxStderrTail {
		tail, cut = tail[len(tail)-MaxStderrTail:], true
	}
	return &ExitError{
		ExitCode: res.ExitCode, Signal: res.Signal,
		TimedOut: res.TimedOut, TimeoutBy: res.TimeoutBy, Timeout: res.Timeout,
		Stderr: slices.Clone(tail), StderrTruncated: cut, err: callErr,
	}
}

// Output runs cmd as Exec does and returns its standard output. A command
// that does not succeed (a non-zero exit, a signal, a timeout) returns an
// *ExitError carrying its status and the tail of its standard error, with
// whatever output it wrote; any other failure is an *Error, as from Exec.
// A timeout is an *ExitError with TimedOut set that matches
// context.DeadlineExceeded (CodeOf gives DeadlineExceeded); when it was
// the caller's context deadline, it also wraps Exec's *Error. A canceled
// context is Exec's *Error alone: the command did not fail, it was
// abandoned.
func (s *Sandbox) Output(ctx context.Context, cmd Command) ([]byte, error) {
	res, err := s.Exec(ctx, cmd)
	if res == nil {
		return nil, err
	}
	return res.Stdout, exitError(res, err)
}

// RunOptions names the files [Sandbox.Run] writes before its command and
// reads back after it. Relative paths are resolved against the command's
// working directory (Command.Dir, itself relative to the home; the home
// when empty), which is where the command finds them; absolute paths and
// paths starting with "~/" are taken as every Sandbox method takes them.
type RunOptions struct {
	// Files are written (creating parents) before the command runs.
	Files []File
	// Outputs are read back after the command succeeds, each up to the
	// Client's read cap (WithMaxReadFile).
	Outputs []string
}

// RunResult is what [Sandbox.Run] returns: the command's Result and the
// contents of the files named in RunOptions.Outputs, by the name given.
type RunResult struct {
	Result
	Files map[string][]byte
}

// Run is the whole job in one call: it writes opts.Files, runs cmd, and
// reads back opts.Outputs. A command that does not succeed returns an
// *ExitError (as Output does) with the RunResult of the run, and no file
// is read back. Failures of several files are joined (errors.Join) into
// one error, each naming its path; an output the command did not write
// matches ErrNotFound.
func (s *Sandbox) Run(ctx context.Context, cmd Command, opts RunOptions) (*RunResult, error) {
	const op = "run"
	dir := s.Home()
	if cmd.Dir != "" {
		d, err := s.path(op, "dir", cmd.Dir)
		if err != nil {
			return nil, err
		}
		dir = d
	}
	files := make([]File, len(opts.Files))
	seen := make(map[string]string, len(opts.Files))
	for i, f := range opts.Files {
		abs, err := s.path(op, "file path", inDir(dir, f.Path))
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[abs]; dup {
			return nil, invalid(op, s.c.rt.Name(), s.id, "file path", "%s and %s are the same file %s", shortPath(prev), shortPath(f.Path), shortPath(abs))
		}
		seen[abs] = f.Path
		files[i] = File{Path: abs, Data: f.Data}
	}
	outs := make([]string, len(opts.Outputs))
	for i, o := range opts.Outputs {
		abs, err := s.path(op, "output path", inDir(dir, o))
		if err != nil {
			return nil, err
		}
		outs[i] = abs
	}
	if err := s.WriteFiles(ctx, files); err != nil {
		return nil, err
	}
	res, err := s.Exec(ctx, cmd)
	if res == nil {
		return nil, err
	}
	rr := &RunResult{Result: *res}
	if err := exitError(res, err); err != nil {
		return rr, err
	}
	rr.Files = make(map[string][]byte, len(outs))
	var errs []error
	for i, abs := range outs {
		data, err := s.ReadFile(ctx, abs)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rr.Files[opts.Outputs[i]] = data
	}
	return rr, errors.Join(errs...)
}

// inDir resolves a relative path p against dir; other paths (absolute,
// "~", "~/...", and "" so that it is refused as empty) are left as given.
func inDir(dir, p string) string {
	if p == "" || path.IsAbs(p) || p == "~" || strings.HasPrefix(p, "~/") {
		return p
	}
	return path.Join(dir, p)
}

// *ExitError is rebuilt with its stderr tail redacted, so errors.As still
// finds it in a redacted chain.
func init() {
	errscrub.Register(func(err error, kids []error, redact func(string) string) (error, bool) {
		e, ok := err.(*ExitError)
		if !ok {
			return nil, false
		}
		c := *e
		c.Stderr = []byte(redact(string(e.Stderr)))
		c.err = nil
		if len(kids) > 0 {
			c.err = kids[0]
		}
		return &c, true
	})
}
