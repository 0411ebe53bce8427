package daytona_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/daytona"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
)

// An execute the toolbox received and ran, on a reused keep-alive
// connection a proxy then cut before the answer, is ErrOutcomeUnknown,
// never a stale transport: the portable layer does not run it again.
func TestExecDroppedMidCommandIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	ctx := ctxT(t)
	sh(t, sb, "true") // leaves a pooled connection
	e.fake.FailNext("POST", "/process/execute", daytonafake.FaultDropResponse)
	_, err := sb.Exec(ctx, sandbox.Command{Shell: "echo x >> ran"})
	if !errors.Is(err, sandbox.ErrOutcomeUnknown) || errors.Is(err, sandbox.ErrStaleTransport) {
		t.Fatalf("exec cut before its answer: %v, want ErrOutcomeUnknown", err)
	}
	if b, err := sb.ReadFile(ctx, "ran"); err != nil || string(b) != "x\n" {
		t.Fatalf("the command ran %q (%v), want exactly once", b, err)
	}
	// The same for a create on the main API: one sandbox, not two.
	before := e.fake.Count("POST", "/api/sandbox")
	e.fake.FailNext("POST", "/api/sandbox", daytonafake.FaultDropResponse)
	_, err = e.c.Create(ctx, sandbox.CreateOptions{})
	if !errors.Is(err, sandbox.ErrOutcomeUnknown) || errors.Is(err, sandbox.ErrStaleTransport) {
		t.Fatalf("create cut before its answer: %v, want ErrOutcomeUnknown", err)
	}
	if n := e.fake.Count("POST", "/api/sandbox") - before; n != 1 {
		t.Fatalf("%d creates reached the server, want exactly 1", n)
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
// stale transport, and the portable layer's one retry runs it once.
func TestNothingWrittenIsStale(t *testing.T) {
	t.Parallel()
	newTransport := func() *http.Transport {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = (&deadOnce{}).dial
		return tr
	}
	e := newEnv(t, nil, daytona.WithTransport(newTransport()))
	ctx := ctxT(t)
	_, err := e.rt.Create(ctx, &driver.CreateRequest{Timeout: time.Minute})
	if !errors.Is(err, sandbox.ErrStaleTransport) || errors.Is(err, sandbox.ErrOutcomeUnknown) {
		t.Fatalf("create on a dead connection: %v, want ErrStaleTransport", err)
	}
	if n := e.fake.Count("POST", "/api/sandbox"); n != 0 {
		t.Fatalf("%d creates reached the server, want 0", n)
	}
	e = newEnv(t, nil, daytona.WithTransport(newTransport()))
	sb := e.create(t)
	if n := e.fake.Count("POST", "/api/sandbox"); n != 1 {
		t.Fatalf("%d creates reached the server, want exactly 1", n)
	}
	if r := sh(t, sb, "echo ok"); string(r.Stdout) != "ok\n" {
		t.Fatalf("exec: %+v", r)
	}
}
