// Package iox holds the small I/O and text helpers that more than one
// package of the module needs, so each exists once.
package iox

import (
	"context"
	"io"
	"io/fs"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// CutReader reads R and ends with io.EOF where R fails, keeping R's error
// for Failure, or once Stop was called. An upload whose source fails, or
// whose caller gave up, sends its body so far as a whole: the server
// writes it and answers, so that the uploader's clean-up of what was
// written comes after the server's last write. An aborted request instead
// leaves the server free to start writing after the clean-up, if it had
// not yet got to the request.
type CutReader struct {
	R       io.Reader
	mu      sync.Mutex
	err     error
	stopped bool
}

// Stop ends the stream: the next Read returns io.EOF without reading R (a
// Read in progress is not interrupted).
func (c *CutReader) Stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
}

// Read reads from R; R's failure, or Stop, ends the stream.
func (c *CutReader) Read(p []byte) (int, error) {
	c.mu.Lock()
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		return 0, io.EOF
	}
	n, err := c.R.Read(p)
	if err != nil && err != io.EOF {
		c.mu.Lock()
		if c.err == nil {
			c.err = err
		}
		c.mu.Unlock()
		return n, io.EOF
	}
	return n, err
}

// Failure returns the error R failed with, or nil.
func (c *CutReader) Failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// CountingReader counts the bytes read from R and records its first error
// other than io.EOF: whether any byte was consumed decides whether a call
// fed by R may be sent again.
type CountingReader struct {
	R   io.Reader
	N   int64
	Err error
}

// Read reads from R, counting.
func (c *CountingReader) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	c.N += int64(n)
	if err != nil && err != io.EOF && c.Err == nil {
		c.Err = err
	}
	return n, err
}

// Printable returns s for a message: cut to max bytes (with "..." when
// cut) and with control characters and invalid UTF-8 escaped as Go
// quotes them, without the surrounding quotes.
func Printable(s string, max int) string {
	if len(s) > max {
		s = s[:max] + "..."
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// Shorten returns s whole when it is at most max bytes long, and else its
// first max bytes (cut at a character boundary) followed by "…(N bytes)",
// N being the length of s: how a long input is shown in an error message,
// so that the message stays short whatever the caller passed. It does not
// quote or escape; format the result with %q.
func Shorten(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// UnixMode converts a raw st_mode (as stat(1) prints with %f, in hex) into
// an fs.FileMode: the file type, the permissions and the setuid, setgid
// and sticky bits.
func UnixMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & 0o170000 {
	case 0o040000:
		mode |= fs.ModeDir
	case 0o120000:
		mode |= fs.ModeSymlink
	case 0o010000:
		mode |= fs.ModeNamedPipe
	case 0o140000:
		mode |= fs.ModeSocket
	case 0o020000:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case 0o060000:
		mode |= fs.ModeDevice
	}
	if m&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// WaitClosed waits until done is closed, d has passed or ctx has ended,
// and reports whether done was closed.
func WaitClosed(ctx context.Context, done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}
