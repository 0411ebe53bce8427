// Package stdinread hands a caller's Command.Stdin to a cloud adapter's
// feeder so that the feeder can stop reading it at once when the command
// ends, even while a Read of the caller's reader blocks.
package stdinread

import (
	"errors"
	"io"
	"sync"
)

// ErrStopped ends the reads of a stopped Reader.
var ErrStopped = errors.New("the command has ended: its stdin is no longer read")

// Reader hands the caller's Command.Stdin to a command. The caller's
// reader is read in a goroutine of its own, one Read at a time and only
// when asked, so that the end of the command need not wait for a Read
// that blocks: once Stop is called no new Read of the caller's reader
// starts, and a Read in progress is abandoned (its goroutine ends when it
// returns; its data is discarded), as os/exec does after WaitDelay.
type Reader struct {
	src  io.Reader
	want chan int       // a Read of up to n bytes is asked for
	got  chan stdinRead // its result (buffered: the reader never blocks on it)
	done chan struct{}  // closed by stop

	mu      sync.Mutex
	stopped bool
	started bool
}

type stdinRead struct {
	b   []byte
	err error
}

// New returns a Reader of src; nothing is read before the first Read.
func New(src io.Reader) *Reader {
	return &Reader{src: src, want: make(chan int), got: make(chan stdinRead, 1), done: make(chan struct{})}
}

// loop reads src on demand until Stop or the end of src.
func (s *Reader) loop() {
	var buf []byte
	for {
		var n int
		select {
		case n = <-s.want:
		case <-s.done:
			return
		}
		s.mu.Lock()
		stopped := s.stopped
		s.mu.Unlock()
		if stopped {
			return
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		k, err := s.src.Read(buf[:n])
		s.got <- stdinRead{b: buf[:k:k], err: err}
		if err != nil {
			return
		}
	}
}

// Read reads from the caller's reader, or fails once stopped. It is not
// safe for concurrent use (one feeder calls it).
func (s *Reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return 0, ErrStopped
	}
	if !s.started {
		s.started = true
		go s.loop()
	}
	s.mu.Unlock()
	select {
	case s.want <- len(p):
	case <-s.done:
		return 0, ErrStopped
	}
	select {
	case c := <-s.got:
		// c.b is the loop's buffer: the loop does not touch it again
		// before the next want.
		return copy(p, c.b), c.err
	case <-s.done:
		return 0, ErrStopped
	}
}

// Stop ends the reading: no Read of the caller's reader starts after it
// returns.
func (s *Reader) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		s.stopped = true
		close(s.done)
	}
}
