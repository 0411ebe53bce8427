package e2b

import (
	"context"
	"io"
	"net"
	"net/http"
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

// wire records where one request's bytes went: the connection it was
// given and how many bytes that connection had written at that moment.
type wire struct {
	mu      sync.Mutex
	gotConn bool
	conn    *countingConn
	start   int64
}

func (w *wire) got(c net.Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gotConn = true
	w.conn = counted(c)
	if w.conn != nil {
		w.start = w.conn.written.Load()
	}
}

// mayHaveSent reports whether any byte of the request can have reached the
// server: false only when no connection was obtained, or when the
// connection it was given has written nothing since. A connection that
// could not be inspected counts as written.
func (w *wire) mayHaveSent() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.gotConn {
		return false
	}
	return w.conn == nil || w.conn.written.Load() != w.start
}
