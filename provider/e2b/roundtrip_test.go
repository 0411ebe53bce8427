package e2b

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// opaqueBody is a request body net/http cannot tell is in memory, as
// Connect's request bodies are.
type opaqueBody struct{ io.Reader }

func (opaqueBody) Close() error { return nil }

type writeCounter struct {
	net.Conn
	writes *atomic.Int32
}

func (c writeCounter) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestRoundTripperSendsSmallBodyInOneWrite checks that a small Connect
// request leaves in one write (headers and body together), not in two,
// and that the server still gets the whole body.
func TestRoundTripperSendsSmallBodyInOneWrite(t *testing.T) {
	t.Parallel()
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(string(b))
	}))
	defer srv.Close()
	var writes atomic.Int32
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return writeCounter{c, &writes}, nil
	}}
	defer tr.CloseIdleConnections()
	body := strings.Repeat("x", 300)
	req, err := http.NewRequest(http.MethodPost, srv.URL, opaqueBody{strings.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(body))
	orig := req.Body
	resp, err := roundTripper{tr}.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if n := writes.Load(); n != 1 {
		t.Errorf("the request took %d writes, want 1", n)
	}
	if got.Load() != body {
		t.Errorf("the server got %q", got.Load())
	}
	if req.Body != orig {
		t.Error("Do replaced the caller's request body")
	}
}
