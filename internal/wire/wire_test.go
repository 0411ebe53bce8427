package wire

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func send(t *testing.T, c *http.Client, url string) (*Attempt, error) {
	t.Helper()
	ctx, a := Trace(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader("body"))
	resp, err := c.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return a, err
}

func TestReadByServerIsMaybeSent(t *testing.T) {
	// The server reads the request, then closes without an answer.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	}))
	defer srv.Close()
	tr := &http.Transport{}
	CountWrites(tr)
	c := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	a, err := send(t, c, srv.URL)
	if err == nil {
		t.Fatal("no error from a server that hung up")
	}
	if a.NotSent(err, true) {
		t.Fatal("a request the server read counted as not sent")
	}
}

func TestFailedDialIsNotSent(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close() // nothing listens any more
	tr := &http.Transport{}
	CountWrites(tr)
	defer tr.CloseIdleConnections()
	a, err := send(t, &http.Client{Transport: tr}, "http://"+addr)
	if err == nil || !a.NotSent(err, true) {
		t.Fatalf("refused dial: err %v, NotSent %v", err, a.NotSent(err, true))
	}
	// With a RoundTripper that reports nothing, only the dial error counts.
	var op *net.OpError
	if !errors.As(err, &op) || !a.NotSent(err, false) || a.NotSent(errors.New("x"), false) {
		t.Fatal("non-counting rule")
	}
}

func TestNilAttempt(t *testing.T) {
	var a *Attempt
	if a.NotSent(errors.New("x"), true) {
		t.Fatal("nil attempt is not evidence of anything")
	}
}

// tcpPair returns the two ends of a loopback TCP connection, closed when
// t ends.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if client, err = net.Dial("tcp", l.Addr().String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if server, err = l.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

// A pooled connection the server has closed (its end of stream already
// arrived, not yet read by the transport) writes nothing when handed to
// a request: the request is known not sent. One still open writes, and
// a fresh connection is not checked.
func TestPooledConnClosedByServerIsNotSent(t *testing.T) {
	client, server := tcpPair(t)
	cc := &countingConn{Conn: client}
	server.Close()
	// The end of stream arrives: wait for it without reading it.
	deadline := time.Now().Add(10 * time.Second)
	for !peerClosed(client) {
		if time.Now().After(deadline) {
			t.Fatal("the server's close did not arrive within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	a := &Attempt{}
	a.got(httptrace.GotConnInfo{Conn: cc, Reused: true})
	_, err := cc.Write([]byte("POST / HTTP/1.1\r\n"))
	if err == nil {
		t.Fatal("a request was written on a connection the server had closed")
	}
	if !a.NotSent(err, true) || cc.written.Load() != 0 {
		t.Fatalf("NotSent %v after %d bytes: want a request known not sent", a.NotSent(err, true), cc.written.Load())
	}

	open, _ := tcpPair(t)
	oc := &countingConn{Conn: open}
	b := &Attempt{}
	b.got(httptrace.GotConnInfo{Conn: oc, Reused: true})
	if n, err := oc.Write([]byte("x")); n != 1 || err != nil {
		t.Fatalf("a live pooled connection: wrote %d, %v", n, err)
	}
	if b.NotSent(nil, true) {
		t.Fatal("a request written on a live connection counted as not sent")
	}
}
