// Package iox holds the small I/O and text helpers that more than one
// package of the module needs, so each exists once.
package iox

import (
	"io"
	"strconv"
)

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
