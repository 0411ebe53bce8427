package e2b_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// A create the server received and carried out, on a reused keep-alive
// connection that then closed without an answer, may have created a
// sandbox: it is ErrOutcomeUnknown, never a stale transport, and the
// portable layer does not create a second one.
func TestCreateDroppedAfterAdmissionIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	var creates atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v2/sandboxes" {
			creates.Add(1) // the request was read; the sandbox is being made...
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_ = c.Close() // ...and the connection drops before the answer
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"code":404,"message":"not found"}`))
	}))
	defer srv.Close()
	rt, err := e2b.New(e2b.WithAPIKey("e2b_0123456789abcdef"), e2b.WithAPIURL(srv.URL), e2b.WithSandboxURL(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx := ctxT(t)
	if _, err := rt.Get(ctx, "warm"); !errors.Is(err, sandbox.ErrNotFound) { // leaves a pooled connection
		t.Fatalf("get: %v", err)
	}
	_, err = rt.Create(ctx, &driver.CreateRequest{Timeout: time.Minute})
	if !errors.Is(err, sandbox.ErrOutcomeUnknown) || errors.Is(err, sandbox.ErrStaleTransport) {
		t.Fatalf("create: %v, want ErrOutcomeUnknown and not ErrStaleTransport", err)
	}

	c := sandbox.NewClient(rt)
	defer c.Close()
	creates.Store(0)
	if _, err := rt.Get(ctx, "warm"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("get: %v", err)
	}
	_, err = c.Create(ctx, sandbox.CreateOptions{})
	if !errors.Is(err, sandbox.ErrOutcomeUnknown) {
		t.Fatalf("client create: %v, want ErrOutcomeUnknown", err)
	}
	if n := creates.Load(); n != 1 {
		t.Fatalf("%d creates reached the server, want exactly 1", n)
	}
}

// The same against the fake: the create and the command run, their
// answers are lost, and neither is sent again. The create is found by its
// token and adopted; the command's outcome stays unknown.
func TestFaultDropResponseIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.DropResponse, Path: "POST /v2/sandboxes"})
	adopted, err := e.client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatalf("create whose answer was dropped: %v, want the sandbox found by its token", err)
	}
	defer adopted.Destroy(context.Background())
	if n, m := e.fake.Count("POST /v2/sandboxes"), len(e.fake.Sandboxes()); n != 2 || m != 2 {
		t.Fatalf("%d creates and %d sandboxes, want 2 and 2 (one retry would make 3)", n, m)
	}
	e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.DropResponse, Path: "POST /process.Process/Start"})
	_, err = sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	if !errors.Is(err, sandbox.ErrOutcomeUnknown) || errors.Is(err, sandbox.ErrStaleTransport) {
		t.Fatalf("exec: %v, want ErrOutcomeUnknown", err)
	}
	if n := e.fake.Count("POST /process.Process/Start"); n != 1 {
		t.Fatalf("%d starts, want exactly 1", n)
	}
}

// deadOnce dials normally, but the first connection it makes is already
// reset by the server: its first write fails without sending a byte.
type deadOnce struct {
	used atomic.Bool
	d    net.Dialer
}

func (o *deadOnce) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := o.d.DialContext(ctx, network, addr)
	if err != nil || o.used.Swap(true) {
		return c, err
	}
	return &resetConn{Conn: c}, nil
}

type resetConn struct{ net.Conn }

func (c *resetConn) Write([]byte) (int, error) {
	return 0, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)}
}

// A request that did not write a byte cannot have been acted on: it is a
// stale transport, and the portable layer's one retry creates exactly one
// sandbox.
func TestNothingWrittenIsStale(t *testing.T) {
	t.Parallel()
	fake := e2bfake.New(memory.New())
	defer fake.Close()
	newRT := func(o *deadOnce) *e2b.Runtime {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = o.dial
		rt, err := e2b.New(e2b.WithAPIKey(fake.APIKey()), e2b.WithAPIURL(fake.APIURL()),
			e2b.WithSandboxURL(fake.SandboxURL()), e2b.WithTransport(tr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Close() })
		return rt
	}
	ctx := ctxT(t)
	_, err := newRT(&deadOnce{}).Create(ctx, &driver.CreateRequest{Timeout: time.Minute})
	if !errors.Is(err, sandbox.ErrStaleTransport) || errors.Is(err, sandbox.ErrOutcomeUnknown) {
		t.Fatalf("create on a dead connection: %v, want ErrStaleTransport", err)
	}
	if n := fake.Count("POST /v2/sandboxes"); n != 0 {
		t.Fatalf("%d creates reached the server, want 0", n)
	}
	c := sandbox.NewClient(newRT(&deadOnce{}))
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatalf("create through the client: %v", err)
	}
	defer sb.Destroy(context.Background())
	if n := fake.Count("POST /v2/sandboxes"); n != 1 {
		t.Fatalf("%d creates reached the server, want exactly 1", n)
	}
}

// Nothing listening: no connection, so nothing can have been admitted.
func TestRefusedIsStale(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	_ = ln.Close()
	rt, err := e2b.New(e2b.WithAPIKey("e2b_0123456789abcdef"), e2b.WithAPIURL(url), e2b.WithSandboxURL(url))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	_, err = rt.Create(ctxT(t), &driver.CreateRequest{Timeout: time.Minute})
	if !errors.Is(err, sandbox.ErrStaleTransport) {
		t.Fatalf("create with nothing listening: %v, want ErrStaleTransport", err)
	}
}
