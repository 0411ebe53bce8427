package sandbox_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/sberrors"
)

// checkingExposer is the memory runtime with a PortExposer whose
// endpoints reach url and tell the edge's failures by check.
type checkingExposer struct {
	*memory.Runtime
	url   string
	check func(*http.Response) error
}

func (e *checkingExposer) Expose(_ context.Context, _ string, port int, _ driver.ExposeOptions) (driver.Endpoint, error) {
	return driver.Endpoint{Port: port, URL: e.url, Check: e.check}, nil
}

// TestEndpointTransportReportsEdgeFailures: through Endpoint.Client, what
// the provider's Check calls an edge failure is a *sandbox.Error with its
// code naming the port and the sandbox (a redirect to a login page is not
// followed); the server's answers, a 502 of its own included, pass
// unchanged, body and all.
func TestEndpointTransportReportsEdgeFailures(t *testing.T) {
	t.Parallel()
	var logins atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/closed":
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusBadGateway)
		case "/refused":
			w.Header().Set("X-Edge-Login", "1")
			http.Redirect(w, r, "/login", http.StatusTemporaryRedirect)
		case "/login":
			logins.Add(1)
			_, _ = io.WriteString(w, "log in")
		case "/app502":
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "the app's own 502")
		default:
			_, _ = io.WriteString(w, "hello")
		}
	}))
	defer srv.Close()
	check := func(resp *http.Response) error {
		switch {
		case resp.StatusCode == http.StatusBadGateway && resp.ContentLength == 0:
			return sberrors.Errorf(sberrors.FailedPrecondition, "nothing listens")
		case resp.StatusCode == http.StatusTemporaryRedirect && resp.Header.Get("X-Edge-Login") != "":
			return sberrors.Errorf(sberrors.PermissionDenied, "token refused")
		}
		return nil
	}
	c := sandbox.NewClient(&checkingExposer{Runtime: memory.New(), url: srv.URL, check: check})
	defer c.Close()
	ctx := t.Context()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	ep, err := sb.Expose(ctx, 8080, sandbox.ExposeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := ep.Client(&http.Client{Transport: tr})
	get := func(path string) (*http.Response, string, error) {
		req, _ := ep.NewRequest(ctx, http.MethodGet, path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b), nil
	}
	for path, want := range map[string]sandbox.Code{"/closed": sandbox.FailedPrecondition, "/refused": sandbox.PermissionDenied} {
		_, _, err := get(path)
		var se *sandbox.Error
		if !errors.As(err, &se) || se.Code != want || se.SandboxID != sb.ID() || !strings.Contains(err.Error(), "port 8080") {
			t.Errorf("GET %s: %v, want a *sandbox.Error with code %v naming port 8080 and the sandbox", path, err, want)
		}
	}
	if n := logins.Load(); n != 0 {
		t.Errorf("the redirect to the login page was followed (%d requests)", n)
	}
	for path, want := range map[string]string{"/": "hello", "/app502": "the app's own 502"} {
		if resp, body, err := get(path); err != nil || body != want {
			t.Errorf("GET %s: %v %q, %v; want the server's answer %q", path, resp, body, err, want)
		}
	}
	// Without a Check, the transport is the one given.
	plain := sandbox.Endpoint{URL: srv.URL}
	if got := plain.Transport(tr); got != http.RoundTripper(tr) {
		t.Errorf("Transport of an endpoint without a check = %T, want the base transport", got)
	}
}
