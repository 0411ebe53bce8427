package sandbox

import (
	"bytes"
	"io"
	"maps"
	"regexp"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox/internal/iox"
)

// Command describes a command to run in a sandbox. Set exactly one of Args
// (an argv, run without a shell) or Shell (a line run by the sandbox's
// shell, "sh -c" or the provider's equivalent). The zero values of the other
// fields are the defaults.
type Command struct {
	// Args is the program and its arguments. No shell interprets them.
	Args []string
	// Shell is a shell command line. Never build it from untrusted text.
	Shell string
	// Dir is the working directory; default the sandbox's home. Relative
	// paths are resolved against the home.
	Dir string
	// Env adds environment variables for this command.
	Env map[string]string
	// SecretEnv adds environment variables whose values are secret: they
	// are redacted (replaced by "[REDACTED]") from the captured and streamed
	// output and never appear in errors.
	SecretEnv map[string]string
	// Stdin, when non-nil, is the command's standard input; the command
	// sees EOF when Stdin returns io.EOF. When nil, the command's stdin is
	// closed: a program that reads it sees EOF at once. Stdin is read only
	// while the call runs (Exec; for Start, until the Process is closed,
	// which Wait does): like os/exec with a WaitDelay, no new Read of Stdin
	// starts after the call returned, and the call does not wait for a Read
	// in progress, which cannot be interrupted: it is abandoned and whatever
	// it returns is discarded. To feed a background process interactively,
	// pass the reader of an io.Pipe and write to (and finally close) its
	// writer.
	Stdin io.Reader
	// Stdout and Stderr, when non-nil, receive output while the command runs
	// (after redaction, before capping). Captured output is in Result as well.
	Stdout io.Writer
	Stderr io.Writer
	// Timeout bounds the command's lifetime; when it expires the command's
	// process tree is ended and Result.TimedOut is set. Zero means the
	// Client's default (DefaultCommandTimeout unless changed), further
	// bounded by ctx's deadline. It is always sent to the provider, so no
	// hidden provider default applies. Negative is an error.
	Timeout time.Duration
	// MaxOutput caps the bytes captured per stream in Result; zero means the
	// Client's default (DefaultMaxOutput). Output past the cap is dropped
	// from Result (the stream's Truncated flag is set) but still reaches
	// Stdout and Stderr. Negative is an error.
	MaxOutput int
}

// DefaultCommandTimeout is the command timeout used when neither the
// Command nor the Client sets one.
const DefaultCommandTimeout = 10 * time.Minute

// DefaultMaxOutput is the per-stream capture cap used when neither the
// Command nor the Client sets one.
const DefaultMaxOutput = 10 << 20

var envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkEnv validates env keys and values; secret values are never quoted.
func checkEnv(op, provider, id string, env map[string]string, secret bool) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !envKeyRE.MatchString(k) {
			return invalid(op, provider, id, "env name", "%q must match %s", printable(k), envKeyRE)
		}
		for _, r := range env[k] {
			if r == 0 {
				if secret {
					return invalid(op, provider, id, "secret env value", "value of %s holds NUL", k)
				}
				return invalid(op, provider, id, "env value", "value of %s holds NUL", k)
			}
		}
		if n := len(k) + 1 + len(env[k]); n > maxArgBytes {
			// The value is never shown: it may be a secret.
			what := "env value"
			if secret {
				what = "secret env value"
			}
			return invalid(op, provider, id, what, "%s=… is %d bytes, over the limit of %d (MAX_ARG_STRLEN); pass large data on Stdin or in a file", printable(k), n, maxArgBytes)
		}
	}
	return nil
}

func secretValues(env map[string]string) [][]byte {
	var out [][]byte
	for _, v := range env {
		if v != "" {
			out = append(out, []byte(v))
		}
	}
	// Longest first, so a secret that contains another is redacted whole.
	slices.SortFunc(out, func(a, b []byte) int { return len(b) - len(a) })
	return out
}

// printable quotes s safely for an error message, bounded in length.
func printable(s string) string { return iox.Printable(s, 80) }

// TimeoutLayer says which layer's deadline ended a command.
type TimeoutLayer string

// The layers that can end a command.
const (
	// TimeoutNone: the command was not ended by a timeout.
	TimeoutNone TimeoutLayer = ""
	// TimeoutCommand: Command.Timeout (or the Client default) expired.
	TimeoutCommand TimeoutLayer = "command"
	// TimeoutContext: the caller's context deadline expired first.
	TimeoutContext TimeoutLayer = "context"
	// TimeoutProvider: the provider ended the command for its own limit.
	TimeoutProvider TimeoutLayer = "provider"
)

// Result is the outcome of a command that ran. A Result returned with a nil
// error holds every byte the command wrote to each stream, in order, up to
// MaxOutput (the Truncated flags say when more was dropped): a provider that
// cannot deliver all of it returns an error, never a short Result. ExitCode
// 0 means the provider saw the command exit with status 0.
type Result struct {
	// ExitCode is the exit code; -1 when a signal or timeout ended it.
	ExitCode int
	// Signal is the signal that ended the command, when the provider
	// knows it (Capabilities.ReportsSignal); ExitCode is then -1. It is 0
	// when the command exited, when the provider cannot tell, and when a
	// timeout ended the command: TimedOut is the one mark of a timeout,
	// whatever signal ended the process. The number is Linux's, as in the
	// sandbox (syscall.SIGUSR1 differs on a macOS host).
	Signal syscall.Signal
	// Stdout and Stderr hold the captured output, up to MaxOutput bytes
	// each, with secret values redacted.
	Stdout, Stderr []byte
	// StdoutTruncated and StderrTruncated report output dropped by the cap.
	StdoutTruncated, StderrTruncated bool
	// TimedOut reports that a timeout ended the command; TimeoutBy says
	// whose, and Timeout how long it was. Output produced before the
	// timeout is kept.
	TimedOut  bool
	TimeoutBy TimeoutLayer
	Timeout   time.Duration
	// Duration is the wall time of the call.
	Duration time.Duration
}

// Success reports whether the command exited with code 0.
func (r *Result) Success() bool { return r.ExitCode == 0 && !r.TimedOut }

// capBuffer captures up to max bytes and records whether more arrived. It is
// safe for concurrent use, since a driver may write from its own goroutine.
type capBuffer struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	max       int
	truncated bool
	total     int64 // bytes written, kept or not
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	room := c.max - c.buf.Len()
	if room < len(p) {
		c.truncated = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	c.buf.Write(p)
	return len(p), nil
}

func (c *capBuffer) empty() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Len() == 0 && !c.truncated
}

// written returns how many bytes the stream carried, beyond the cap too.
func (c *capBuffer) written() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

func (c *capBuffer) result() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := bytes.Clone(c.buf.Bytes())
	if out == nil {
		out = []byte{}
	}
	return out, c.truncated
}

// lockedWriter serializes writes to a caller's writer, which drivers may
// call from more than one goroutine.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// redactor replaces secret values in a byte stream before passing it on.
// It holds back only a tail that may still grow into a secret (a proper
// prefix of one), so live output is not delayed otherwise, and a secret
// split across writes is still caught; Flush releases the tail. It is safe
// for concurrent use.
type redactor struct {
	mu      sync.Mutex
	next    io.Writer
	secrets [][]byte // longest first
	pending []byte
	err     error
	// escapes makes the match skip terminal escape sequences inside a
	// secret (see scanSecretsTerm): a terminal's output.
	escapes bool
}

var redacted = []byte("[REDACTED]")

func newRedactor(next io.Writer, secrets [][]byte) io.Writer {
	if len(secrets) == 0 {
		return next
	}
	return &redactor{next: next, secrets: secrets}
}

func (r *redactor) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return 0, r.err
	}
	r.pending = append(r.pending, p...)
	out, rest := r.scan(false)
	if len(out) > 0 {
		if _, err := r.next.Write(out); err != nil {
			r.err = err
			return 0, err
		}
	}
	r.pending = append(r.pending[:0], rest...)
	return len(p), nil
}

// Flush writes the held-back bytes.
func (r *redactor) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil || len(r.pending) == 0 {
		return r.err
	}
	out, _ := r.scan(true)
	r.pending = r.pending[:0]
	_, r.err = r.next.Write(out)
	return r.err
}

func (r *redactor) scan(final bool) (out, rest []byte) {
	if r.escapes {
		return scanSecretsTerm(r.pending, r.secrets, final)
	}
	return scanSecrets(r.pending, r.secrets, final)
}

// newTermRedactor is newRedactor for a terminal's output, where programs
// colour what they print: a secret is matched in the text with the
// escape sequences between its bytes left out (grep --color highlights a
// match inside it with "\x1b[01;31m...\x1b[m"), and the whole span is
// replaced. The control sequences (CSI) of the span follow the
// "[REDACTED]", so the terminal's colours stay as the program set them;
// other sequences in it (OSC, which may carry text) are dropped.
func newTermRedactor(next io.Writer, secrets [][]byte) io.Writer {
	if len(secrets) == 0 {
		return next
	}
	return &redactor{next: next, secrets: secrets, escapes: true}
}

// Bounds of the escape sequences scanSecretsTerm skips: a longer one is
// not taken for an escape sequence (so a stray ESC holds nothing back
// for long).
const (
	maxCSILen = 64
	maxOSCLen = 512
)

// escLen returns the length of the escape sequence b starts with (b[0] is
// ESC): 0 when b ends before it does, -1 when it is too long to be one.
func escLen(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch b[1] {
	case '[':
		for i := 2; i < len(b); i++ {
			if i >= maxCSILen {
				return -1
			}
			if b[i] >= 0x40 && b[i] <= 0x7e {
				return i + 1
			}
		}
		return 0
	case ']':
		for i := 2; i < len(b); i++ {
			if i >= maxOSCLen {
				return -1
			}
			if b[i] == 0x07 {
				return i + 1
			}
			if b[i] == 0x1b && i+1 < len(b) && b[i+1] == '\\' {
				return i + 2
			}
		}
		return 0
	}
	return 2
}

// matchTerm reports whether secret s starts b, with escape sequences
// between its bytes skipped: end is where the match ends in b and csi the
// control sequences skipped; partial is true when b ends before it could
// tell.
func matchTerm(b, s []byte) (end int, csi []byte, ok, partial bool) {
	j, k := 0, 0
	for k < len(s) {
		if j >= len(b) {
			return 0, nil, false, true
		}
		if b[j] == 0x1b && k > 0 && s[k] != 0x1b {
			n := escLen(b[j:])
			switch {
			case n == 0:
				return 0, nil, false, true
			case n < 0:
				return 0, nil, false, false
			}
			if b[j+1] == '[' {
				csi = append(csi, b[j:j+n]...)
			}
			j += n
			continue
		}
		if s[k] == '\n' && b[j] == '\r' && (k == 0 || s[k-1] != '\r') {
			// A terminal writes a newline as CR LF (ONLCR): a value of
			// several lines comes back with a CR before each LF.
			if j+1 >= len(b) {
				return 0, nil, false, true
			}
			if b[j+1] == '\n' {
				j++
			}
		}
		if b[j] != s[k] {
			return 0, nil, false, false
		}
		j++
		k++
	}
	return j, csi, true, false
}

// widenTerm is widen with matchTerm's matching: the span of b from start
// to end is widened over every secret that starts inside it and ends past
// it; csi is then every control sequence of the widened span.
func widenTerm(b []byte, start, end int, csi []byte, secrets [][]byte, final bool) (int, []byte, bool) {
	widened := false
	for j := start + 1; j < end; j++ {
		for _, s := range secrets {
			if len(s) == 0 {
				continue
			}
			e, _, ok, partial := matchTerm(b[j:], s)
			switch {
			case ok && j+e > end:
				end, widened = j+e, true
			case partial && !final:
				return end, nil, true
			}
		}
	}
	if widened {
		csi = nil
		for j := start; j < end; j++ {
			if b[j] == 0x1b && j+1 < end && b[j+1] == '[' {
				if n := escLen(b[j:end]); n > 0 {
					csi = append(csi, b[j:j+n]...)
					j += n - 1
				}
			}
		}
	}
	return end, csi, false
}

// scanSecretsTerm is scanSecrets with matchTerm's matching.
func scanSecretsTerm(b []byte, secrets [][]byte, final bool) (out, rest []byte) {
	out = make([]byte, 0, len(b))
	i := 0
scan:
	for i < len(b) {
		tail := b[i:]
		for _, s := range secrets {
			if len(s) == 0 {
				continue
			}
			end, csi, ok, partial := matchTerm(tail, s)
			switch {
			case ok:
				end, csi, held := widenTerm(b, i, i+end, csi, secrets, final)
				if held {
					return out, tail
				}
				out = append(out, redacted...)
				out = append(out, csi...)
				i = end
				continue scan
			case partial && !final:
				return out, tail
			}
		}
		out = append(out, b[i])
		i++
	}
	return out, nil
}

// scanSecrets copies b with every secret replaced by "[REDACTED]", trying
// the longest secret first at each position. A match is widened over every
// secret that starts inside it and ends past it (two values that overlap in
// the text: "deploy-X" then "X9f2..." in "deploy-X9f2..."), so that the
// whole span is replaced once and no part of either is left. Unless final,
// it stops at the first position where the rest of b is a proper prefix of
// a secret that longer input could complete (or where such a secret starts
// inside a match and could widen it), and returns that tail as rest.
func scanSecrets(b []byte, secrets [][]byte, final bool) (out, rest []byte) {
	out = make([]byte, 0, len(b))
	i := 0
scan:
	for i < len(b) {
		tail := b[i:]
		for _, s := range secrets {
			switch {
			case len(s) == 0:
			case bytes.HasPrefix(tail, s):
				end, held := widen(b, i, i+len(s), secrets, final)
				if held {
					return out, tail
				}
				out = append(out, redacted...)
				i = end
				continue scan
			case !final && len(tail) < len(s) && bytes.HasPrefix(s, tail):
				return out, tail
			}
		}
		out = append(out, b[i])
		i++
	}
	return out, nil
}

// widen returns the end of the span of b from start to end widened over
// every secret that starts inside it and ends past it, repeatedly. held
// reports (unless final) a secret starting inside the span whose start is
// all of the rest of b: more input could widen the span further.
func widen(b []byte, start, end int, secrets [][]byte, final bool) (int, bool) {
	for j := start + 1; j < end; j++ {
		for _, s := range secrets {
			switch {
			case len(s) == 0 || j+len(s) <= end:
			case bytes.HasPrefix(b[j:], s):
				end = j + len(s)
			case !final && len(b)-j < len(s) && bytes.HasPrefix(s, b[j:]):
				return end, true
			}
		}
	}
	return end, false
}

// redact returns b with every secret replaced.
func redact(b []byte, secrets [][]byte) []byte {
	out, _ := scanSecrets(b, secrets, true)
	return out
}

func flushWriter(w io.Writer) {
	if r, ok := w.(*redactor); ok {
		_ = r.Flush()
	}
}
