package local

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// TestExposeNoNetworkAndClose: a sandbox without network still serves
// the host through Expose (the relay runs in its namespace, not over a
// network), the endpoint listens on 127.0.0.1 only, and Client.Close
// closes it (connection refused).
func TestExposeNoNetworkAndClose(t *testing.T) {
	rt := newRuntime(t)
	if rt.level < L3 {
		t.Skipf("NoNetwork with a server needs a network namespace (L3+); this host gives %v", rt.level)
	}
	c := sandbox.NewClient(rt)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := c.Create(ctx, sandbox.CreateOptions{NoNetwork: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the Client is closed by then: destroy through a new Runtime
		r2, err := New(WithRoot(rt.Root()))
		if err != nil {
			t.Error(err)
			return
		}
		defer r2.Close()
		if err := r2.Destroy(context.Background(), sb.ID()); err != nil {
			t.Error(err)
		}
	})
	port := 20000 + rand.IntN(20000)
	dir := sb.Home() + "/www"
	if err := sb.WriteFile(ctx, dir+"/x", []byte("offline")); err != nil {
		t.Fatal(err)
	}
	p, err := sb.Start(ctx, sandbox.Command{Args: []string{"python3", "-m", "http.server", strconv.Itoa(port), "--bind", "127.0.0.1", "--directory", dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := sb.WaitForPort(ctx, port); err != nil {
		t.Fatal(err)
	}
	ep, err := sb.Expose(ctx, port, sandbox.ExposeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ := net.SplitHostPort(ep.URL[len("http://"):])
	if host != "127.0.0.1" {
		t.Fatalf("endpoint %s is not on 127.0.0.1", ep.URL)
	}
	if again, err := sb.Expose(ctx, port, sandbox.ExposeOptions{}); err != nil || again.URL != ep.URL {
		t.Fatalf("second Expose = %v, %v; want the same listener %s", again, err, ep.URL)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	req, _ := ep.NewRequest(ctx, http.MethodGet, "/x", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "offline" {
		t.Fatalf("GET = %q", body)
	}
	// The sandbox really has no network: the server is not reachable on
	// the host's loopback at its own port.
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second); err == nil {
		conn.Close()
		t.Fatalf("the sandbox's port %d is reachable on the host directly", port)
	}
	_ = p.Kill(ctx)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	_, err = net.DialTimeout("tcp", ep.URL[len("http://"):], 5*time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial after Client.Close: %v, want connection refused", err)
	}
}
