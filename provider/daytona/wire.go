package daytona

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

// countingConn counts the bytes the operating system accepted for sending
// on a connection. Comparing the count before and after a request is the
// fact that tells a request that never left (nothing was written on its
// connection: the provider cannot have seen it) from one that may have
// reached the server.
type countingConn struct {
	net.Conn
	written atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// ReadFrom keeps the underlying connection's zero-copy path (sendfile,
// splice) for uploads while still counting.
func (c *countingConn) ReadFrom(r io.Reader) (int64, error) {
	n, err := io.Copy(c.Conn, r)
	c.written.Add(n)
	return n, err
}

// NetConn returns the wrapped connection.
func (c *countingConn) NetConn() net.Conn { return c.Conn }

// countWrites makes every connection t dials a *countingConn. A transport
// with its own DialTLSContext keeps it unchanged: its HTTPS connections
// are then not counted and every failure on them after a connection was
// obtained is treated as possibly delivered.
func countWrites(t *http.Transport) {
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

// attempt records where one request's bytes went: whether it got a
// connection, which one, and how many bytes that connection had written
// at that moment. It tells a transport that was dead before the request
// left (stale: safe to retry) from one that failed after the provider may
// have acted on it (outcome unknown).
type attempt struct {
	counting bool // the Runtime's transport counts its connections' writes

	mu      sync.Mutex
	gotConn bool
	conn    *countingConn
	start   int64
}

// trace returns ctx instrumented to fill a new attempt.
func (r *Runtime) trace(ctx context.Context) (context.Context, *attempt) {
	a := &attempt{counting: r.counting}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: a.got}), a
}

func (a *attempt) got(i httptrace.GotConnInfo) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gotConn = true
	a.conn = counted(i.Conn)
	if a.conn != nil {
		a.start = a.conn.written.Load()
	}
}

// notSent reports, from facts about the wire and never from an error's
// text, that not one byte of the request reached a server: no connection
// was obtained (with a transport of the Runtime's own, which reports every
// connection; with a caller's RoundTripper only a failed dial counts), or
// the connection it was given wrote nothing since (a pooled keep-alive
// connection the server had already reset). A request dropped after it
// was even partly written may have been read and acted on.
func (a *attempt) notSent(err error) bool {
	if a == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gotConn {
		return a.conn != nil && a.conn.written.Load() == a.start
	}
	if a.counting {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
