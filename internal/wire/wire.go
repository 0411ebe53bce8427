// Package wire tells an HTTP request that never left this machine from one
// that may have reached a server, from facts about the connection rather
// than from error text. A request the server cannot have seen may be
// retried safely (sandbox.ErrStaleTransport); one that may have been read
// may have been acted on (sandbox.ErrOutcomeUnknown for a mutating call).
package wire

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
)

// countingConn counts the bytes the operating system accepted for sending.
type countingConn struct {
	net.Conn
	written atomic.Int64
	// closed is set when the peer was found to have closed the
	// connection before a request was written on it (see Attempt.got):
	// writes then fail without sending a byte.
	closed atomic.Bool
}

// errPeerClosed is the write error of a pooled connection the server had
// closed before the request was written on it.
var errPeerClosed = errors.New("the server had closed this pooled connection")

func (c *countingConn) Write(p []byte) (int, error) {
	if c.closed.Load() {
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: errPeerClosed}
	}
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// ReadFrom keeps the underlying connection's zero-copy path (sendfile,
// splice) for uploads while still counting.
func (c *countingConn) ReadFrom(r io.Reader) (int64, error) {
	if c.closed.Load() {
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: errPeerClosed}
	}
	n, err := io.Copy(c.Conn, r)
	c.written.Add(n)
	return n, err
}

// NetConn returns the wrapped connection.
func (c *countingConn) NetConn() net.Conn { return c.Conn }

// CountWrites makes every connection t dials count the bytes written on
// it, so an Attempt can tell whether its request left. A transport with its
// own DialTLSContext keeps those connections uncounted: every failure on
// them after a connection was obtained then counts as possibly sent.
func CountWrites(t *http.Transport) {
	dial := t.DialContext
	if dial == nil && t.Dial != nil { //nolint:staticcheck // honour a caller's legacy Dial
		legacy := t.Dial //nolint:staticcheck
		dial = func(_ context.Context, network, addr string) (net.Conn, error) { return legacy(network, addr) }
	}
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c}, nil
	}
}

// counted finds the countingConn under c (through TLS), or nil.
func counted(c net.Conn) *countingConn {
	for c != nil {
		switch v := c.(type) {
		case *countingConn:
			return v
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// Attempt records where one request's bytes went: whether it got a
// connection, which one, and how many bytes that connection had written
// at that moment.
type Attempt struct {
	mu      sync.Mutex
	gotConn bool
	conn    *countingConn
	start   int64
}

// Trace returns ctx instrumented to fill a new Attempt; send the request
// with the returned context.
func Trace(ctx context.Context) (context.Context, *Attempt) {
	a := &Attempt{}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: a.got}), a
}

func (a *Attempt) got(i httptrace.GotConnInfo) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gotConn = true
	a.conn = counted(i.Conn)
	if a.conn != nil {
		a.start = a.conn.written.Load()
		// A pooled connection the server closed a moment ago (a restart,
		// its idle timeout) is handed out until the transport's reader
		// sees the end; a request written on it would be lost after it
		// left, its outcome unknown. Where the end has already arrived,
		// the request is refused before a byte is written, so that it
		// is known not sent (and retried on a fresh connection).
		if i.Reused && peerClosed(a.conn.Conn) {
			a.conn.closed.Store(true)
		}
	}
}

// NotSent reports that not one byte of the request can have reached a
// server: the connection it was given wrote nothing since (a pooled
// keep-alive connection the server had already closed), or no connection
// was obtained. counting says the transport is one CountWrites was applied
// to, which reports every connection it hands out; with any other
// RoundTripper, no connection is known only when err is a failed dial.
func (a *Attempt) NotSent(err error, counting bool) bool {
	if a == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gotConn {
		return a.conn != nil && a.conn.written.Load() == a.start
	}
	if counting {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
