package e2b_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/e2b"
)

// TestExposeHostScheme: without a sandbox URL override the endpoint is the
// edge's host name for the port, https://<port>-<id>.<domain>, as the
// SDKs' getHost; with one, the override routed by E2b-Sandbox-Id/Port.
func TestExposeHostScheme(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := t.Context()
	if !e.client.Capabilities().Ports {
		t.Fatal("Capabilities.Ports is false")
	}
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	ep, err := sb.Expose(ctx, 8080, sandbox.ExposeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ep.URL != e.fake.SandboxURL() || ep.Header.Get("E2b-Sandbox-Id") != sb.ID() || ep.Header.Get("E2b-Sandbox-Port") != "8080" {
		t.Fatalf("endpoint with an override: %v %v", ep, ep.Header)
	}
	// A second Runtime without the override (it only asks the control
	// plane, so no name is resolved).
	rt, err := e2b.New(e2b.WithAPIKey(e.fake.APIKey()), e2b.WithAPIURL(e.fake.APIURL()), e2b.WithDomain("edge.example"))
	if err != nil {
		t.Fatal(err)
	}
	dep, err := rt.Expose(ctx, sb.ID(), 8080, driver.ExposeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ep = sandbox.Endpoint{Port: dep.Port, URL: dep.URL, Header: dep.Header, Public: dep.Public}
	if want := "https://8080-" + sb.ID() + ".edge.example"; ep.URL != want || ep.Header.Get("E2b-Sandbox-Port") != "" {
		t.Fatalf("endpoint %v, want %s without routing headers", ep, want)
	}
	if _, err := rt.Expose(ctx, "nosuchsandbox", 8080, driver.ExposeOptions{}); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Expose on a missing sandbox = %v, want NotFound", err)
	}
}

// TestExposePrivateTraffic: a sandbox is created with public traffic off
// unless asked otherwise, so its endpoint carries the traffic access
// token and the edge (the fake, as E2B's) refuses a request without it
// with 403; public_traffic=true or secure=false give a Public endpoint
// without one; public_traffic=false without secure is InvalidArgument.
func TestExposePrivateTraffic(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := t.Context()
	expose := func(opts map[string]string) sandbox.Endpoint {
		t.Helper()
		sb, err := e.client.Create(ctx, sandbox.CreateOptions{ProviderOptions: opts})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
		ep, err := sb.Expose(ctx, 8080, sandbox.ExposeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ep
	}
	ep := expose(nil)
	tok := ep.Header.Get("E2b-Traffic-Access-Token")
	if tok == "" || ep.Public {
		t.Fatalf("default endpoint %v (Public %v): want the traffic access token and not Public", ep, ep.Public)
	}
	if strings.Contains(fmt.Sprint(ep), tok) {
		t.Fatalf("endpoint prints its token: %v", ep)
	}
	status := func(edit func(http.Header)) int {
		req, err := ep.NewRequest(ctx, http.MethodGet, "/", nil)
		if err != nil {
			t.Fatal(err)
		}
		edit(req.Header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := status(func(h http.Header) { h.Del("E2b-Traffic-Access-Token") }); st != http.StatusForbidden {
		t.Fatalf("request without the traffic token: status %d, want 403", st)
	}
	if st := status(func(h http.Header) { h.Set("E2b-Traffic-Access-Token", tok+"x") }); st != http.StatusForbidden {
		t.Fatalf("request with a wrong traffic token: status %d, want 403", st)
	}
	// With it, the edge goes on to the port (nothing listens: 502).
	if st := status(func(http.Header) {}); st != http.StatusBadGateway {
		t.Fatalf("request with the traffic token: status %d, want 502 (port not open)", st)
	}
	for _, opts := range []map[string]string{{e2b.OptPublicTraffic: "true"}, {"secure": "false"}} {
		if ep := expose(opts); !ep.Public || ep.Header.Get("E2b-Traffic-Access-Token") != "" {
			t.Fatalf("endpoint of a sandbox created with %v: %v (Public %v), want Public without a token", opts, ep, ep.Public)
		}
	}
	_, err := e.client.Create(ctx, sandbox.CreateOptions{ProviderOptions: map[string]string{"secure": "false", e2b.OptPublicTraffic: "false"}})
	if sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "public_traffic") {
		t.Fatalf("public_traffic=false with secure=false: %v, want InvalidArgument naming the option", err)
	}
}
