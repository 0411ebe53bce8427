package run

import (
	"bytes"
	"context"
	"errors"
	"strconv"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/redactcut"
)

// DefaultLogBytes is how many bytes Logs and ReadLogs return when their
// max is zero or negative.
const DefaultLogBytes = 64 << 10

// MaxLogBytes caps the bytes one Logs or ReadLogs call returns.
const MaxLogBytes = 8 << 20

// Chunk is one read of a run's output.
type Chunk struct {
	// Data holds whole lines (each ending in '\n'), except for a line longer
	// than the read's max, which comes in pieces, and the output's last
	// line once the run is done, which may lack its '\n'.
	Data []byte
	// Next is the offset to pass to the next ReadLogs call.
	Next int64
	// EOF reports that the run is done and Data reaches the end of its
	// output: the command will write no more. A process it left running in
	// the background (cmd &) still writes to the same output, and a later
	// read from Next returns what it wrote; Kill ends such processes.
	EOF bool
}

// Logs returns the last max bytes of the run's combined output (max <= 0
// means DefaultLogBytes), starting past a secret value the cut would run
// through.
func (r *Run) Logs(ctx context.Context, max int) ([]byte, error) {
	const op = "logs"
	max = logMax(max)
	out, redact, err := r.read(ctx, tailScript, max+secretWindow, strconv.Itoa(max+secretWindow))
	if err != nil {
		return nil, wrap(op, r.id, err)
	}
	head, data, _ := bytes.Cut(out, []byte("\n"))
	if string(head) != "ok" {
		return nil, wrap(op, r.id, sandbox.Errorf(sandbox.NotFound, "no such run"))
	}
	// The tail starts where no secret runs across its start: a secret cut
	// there would show its end, which its redaction no longer matches.
	start := 0
	if len(data) > max {
		start = redactcut.Off(data, len(data)-max, false, redact)
	}
	return redact(data[start:]), nil
}

// secretWindow is how far past a page's end, or before a tail's start,
// the output is read so that a secret the cut would run through is seen
// whole: the cut moves off it. A secret longer than that may still be cut.
const secretWindow = 16 << 10

// ReadLogs returns up to max bytes (max <= 0 means DefaultLogBytes) of the
// run's combined output from byte offset on. While the run goes on it
// returns only complete lines, so a poller that passes each Chunk's Next to
// its next call sees every line once and never a line cut in two (unless a
// line is longer than max). A page never ends inside a secret value of the
// sandbox (it would show the value's start, which its redaction no longer
// matches): it ends before the value, or, when the value starts the page,
// after it, past max.
func (r *Run) ReadLogs(ctx context.Context, offset int64, max int) (Chunk, error) {
	const op = "read-logs"
	if offset < 0 {
		return Chunk{}, invalid(op, r.id, "invalid offset: %d is negative", offset)
	}
	max = logMax(max)
	out, redact, err := r.read(ctx, readScript, max+secretWindow, strconv.FormatInt(offset, 10), strconv.Itoa(max+secretWindow))
	if err != nil {
		return Chunk{}, wrap(op, r.id, err)
	}
	head, ahead, _ := bytes.Cut(out, []byte("\n"))
	if string(head) != "0" && string(head) != "1" {
		return Chunk{}, wrap(op, r.id, sandbox.Errorf(sandbox.NotFound, "no such run"))
	}
	// ahead holds up to secretWindow bytes past the page, to see a secret
	// the page's end would run through.
	data := ahead[:min(len(ahead), max)]
	// Offsets count raw bytes: data comes back unredacted, and is
	// redacted only once cut, so its length may then differ.
	n := int64(len(data))
	tail := n - int64(bytes.LastIndexByte(data, '\n')+1)
	// The exit record existed before the read, so when fewer than max
	// bytes came back, they reach the end of the output for good.
	eof := head[0] == '1' && n < int64(max)
	next := offset + n
	if !eof && tail > 0 && (tail < n || n < int64(max)) {
		// Keep whole lines; a line longer than max goes out in pieces.
		next -= tail
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			data = data[:i+1]
		} else {
			data = data[:0]
		}
	}
	if k := int(next - offset); k > 0 && k < len(ahead) {
		// More follows the page: its end moves off a secret that runs
		// across it, back to the secret's start or, when the secret starts
		// the page (a cut at 0 would stall the poller), forward past it.
		if c := redactcut.Off(ahead, k, true, redact); c != k {
			data, next = ahead[:c], offset+int64(c)
		}
	}
	return Chunk{Data: redact(data), Next: next, EOF: eof}, nil
}

func logMax(max int) int {
	if max <= 0 {
		return DefaultLogBytes
	}
	return min(max, MaxLogBytes)
}

// read runs a read-only output script; it may run twice. The output comes
// back unredacted: the caller redacts the data it returns.
func (r *Run) read(ctx context.Context, script string, max int, args ...string) ([]byte, func([]byte) []byte, error) {
	args = append([]string{r.dir}, args...)
	limit := max + 1024 // the data and a header line
	out, redact, err := r.exec(ctx, script, controlTimeout, limit, nil, args...)
	if errors.Is(err, sandbox.ErrOutcomeUnknown) && ctx.Err() == nil {
		out, redact, err = r.exec(ctx, script, controlTimeout, limit, nil, args...)
	}
	return out, redact, err
}
