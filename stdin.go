package sandbox

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
)

// errStdinClosed is what a driver reads from a command's stdin once the
// call that owned it returned.
var errStdinClosed = errors.New("sandbox: the command's stdin was closed: its call returned")

// stdinGate hands a command's Stdin to a driver until closed, as os/exec's
// WaitDelay does for a child's stdin: once closed, no new Read of the
// caller's reader starts, and a Read still in progress is abandoned (its
// data is discarded) instead of being waited for, since a Read cannot be
// interrupted. So a call returns on time even when Stdin never ends, and
// never touches the caller's reader after it returned. The caller's reader
// is read on a goroutine of its own, one Read at a time (even should a
// driver read concurrently), which ends when that Read returns.
type stdinGate struct {
	r    io.Reader
	read atomic.Int64 // bytes taken from r, which decides whether a call may be retried

	mu      sync.Mutex
	closed  bool
	done    chan struct{} // closed by close
	pending *pendingRead  // the Read of r in progress
	rest    []byte        // read from r, not yet handed on
	restErr error         // r's error, handed on after rest
	spare   []byte        // a buffer to read into again
}

// pendingRead is one Read of the caller's reader; n and err are set
// before done is closed.
type pendingRead struct {
	done chan struct{}
	buf  []byte
	n    int
	err  error
}

func newStdinGate(r io.Reader) *stdinGate { return &stdinGate{r: r, done: make(chan struct{})} }

// Read hands on what the caller's reader returns, or errStdinClosed once
// the gate is closed.
func (g *stdinGate) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		switch {
		case g.closed:
			return 0, errStdinClosed
		case len(g.rest) > 0:
			n := copy(p, g.rest)
			g.rest = g.rest[n:]
			return n, nil
		case g.restErr != nil:
			err := g.restErr
			g.restErr = nil
			return 0, err
		}
		pr := g.pending
		if pr == nil {
			buf := g.spare
			if cap(buf) < len(p) {
				buf = make([]byte, len(p))
			}
			pr = &pendingRead{done: make(chan struct{}), buf: buf[:len(p)]}
			g.pending, g.spare = pr, nil
			go g.fill(pr)
		}
		g.mu.Unlock()
		select {
		case <-pr.done:
			g.mu.Lock()
			if g.pending == pr {
				g.pending = nil
				g.rest, g.restErr = pr.buf[:pr.n], pr.err
				g.spare = pr.buf
			}
		case <-g.done:
			// The caller's Read may still be running: its buffer stays its
			// own, since no Read follows a close.
			g.mu.Lock()
			return 0, errStdinClosed
		}
	}
}

// fill runs one Read of the caller's reader, unless the gate closed.
func (g *stdinGate) fill(pr *pendingRead) {
	defer close(pr.done)
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		pr.err = errStdinClosed
		return
	}
	n, err := g.r.Read(pr.buf)
	pr.n, pr.err = min(max(n, 0), len(pr.buf)), err
	g.read.Add(int64(pr.n))
}

// consumed reports the bytes taken from the caller's reader so far.
func (g *stdinGate) consumed() int64 {
	if g == nil {
		return 0
	}
	return g.read.Load()
}

// Close ends the gate, as close does: a driver whose command ended may
// call it (cmd.Stdin is then an io.Closer) to join its stdin copy at once.
func (g *stdinGate) Close() error {
	g.close()
	return nil
}

// close ends the gate; it is safe to call more than once and on nil.
func (g *stdinGate) close() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.closed = true
		g.rest, g.restErr = nil, nil
		close(g.done)
	}
}
