package e2b_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// countingRT is a RoundTripper that is not an *http.Transport.
type countingRT struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(req)
}

// WithTransport takes any http.RoundTripper, as daytona.WithTransport
// does, and every request of the adapter (control plane and envd) goes
// through it.
func TestWithTransportTakesARoundTripper(t *testing.T) {
	t.Parallel()
	fake := e2bfake.New(memory.New())
	t.Cleanup(fake.Close)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	rt := &countingRT{next: base}
	r, err := e2b.New(e2b.WithAPIKey(fake.APIKey()), e2b.WithAPIURL(fake.APIURL()), e2b.WithSandboxURL(fake.SandboxURL()), e2b.WithTransport(rt))
	if err != nil {
		t.Fatal(err)
	}
	c := sandbox.NewClient(r)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	before := rt.n.Load()
	if err := sb.WriteFile(ctx, "f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v %v", res, err)
	}
	if before == 0 || rt.n.Load() <= before {
		t.Fatalf("requests through the given RoundTripper: %d after create, %d after a write and an exec; want both to use it", before, rt.n.Load())
	}
}
