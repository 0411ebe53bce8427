package wire

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
