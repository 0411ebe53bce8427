package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// exposer is the memory runtime with a PortExposer that records calls.
type exposer struct {
	*memory.Runtime
	calls int
}

func (e *exposer) Expose(_ context.Context, id string, port int, _ driver.ExposeOptions) (driver.Endpoint, error) {
	e.calls++
	return driver.Endpoint{Port: port, URL: fmt.Sprintf("http://%d-%s.example", port, id),
		Header: http.Header{"X-Token": {"s3cret"}}}, nil
}

func TestExposeWithoutPortExposerIsUnimplemented(t *testing.T) {
	t.Parallel()
	sb, _ := newSandbox(t, sandbox.CreateOptions{})
	if sb.Client().Capabilities().Ports {
		t.Fatal("Capabilities.Ports is true for a runtime without PortExposer")
	}
	_, err := sb.Expose(t.Context(), 8000, sandbox.ExposeOptions{})
	if !errors.Is(err, sandbox.ErrUnimplemented) {
		t.Fatalf("Expose on memory = %v, want ErrUnimplemented", err)
	}
}

func TestExposeValidatesPortAndDerivesCapability(t *testing.T) {
	t.Parallel()
	rt := &exposer{Runtime: memory.New()}
	c := sandbox.NewClient(rt)
	defer c.Close()
	if !c.Capabilities().Ports {
		t.Fatal("Capabilities.Ports is false for a runtime implementing PortExposer")
	}
	ctx := t.Context()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	for _, p := range []int{0, -1, 65536} {
		_, err := sb.Expose(ctx, p, sandbox.ExposeOptions{})
		if sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "port") {
			t.Errorf("Expose(%d) = %v, want InvalidArgument naming the port", p, err)
		}
	}
	if _, err := sb.Expose(ctx, 80, sandbox.ExposeOptions{TTL: -1}); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("Expose with a negative TTL = %v, want InvalidArgument", err)
	}
	if _, err := sb.Expose(ctx, 80, sandbox.ExposeOptions{MaxConns: -1}); sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "max-conns") {
		t.Errorf("Expose with a negative MaxConns = %v, want InvalidArgument naming it", err)
	}
	if _, err := sb.Expose(ctx, 80, sandbox.ExposeOptions{IdleTimeout: -time.Second}); sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "idle-timeout") {
		t.Errorf("Expose with a negative IdleTimeout = %v, want InvalidArgument naming it", err)
	}
	if rt.calls != 0 {
		t.Fatalf("the driver was called %d times for invalid input", rt.calls)
	}
	ep, err := sb.Expose(ctx, 8000, sandbox.ExposeOptions{})
	if err != nil || ep.Port != 8000 || rt.calls != 1 {
		t.Fatalf("Expose(8000) = %v, %v (calls %d)", ep, err, rt.calls)
	}
	for _, s := range []string{fmt.Sprint(ep), fmt.Sprintf("%+v", ep), fmt.Sprintf("%#v", ep)} {
		if strings.Contains(s, "s3cret") || !strings.Contains(s, "X-Token") {
			t.Errorf("formatted endpoint %q shows the token or hides the header name", s)
		}
	}
	req, err := ep.NewRequest(ctx, http.MethodGet, "/a", nil)
	if err != nil || req.Header.Get("X-Token") != "s3cret" || req.URL.Path != "/a" {
		t.Fatalf("NewRequest = %v, %v", req, err)
	}
	if _, err := ep.NewRequest(ctx, http.MethodGet, "a", nil); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("NewRequest with a relative path = %v, want InvalidArgument", err)
	}
}
