package e2b_test

import (
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/e2b"
)

// TestExposeHostScheme: without a sandbox URL override the endpoint is the
// edge's host name for the port, https://<port>-<id>.<domain>, as the
// SDKs' getHost; with one, the override routed by E2b-Sandbox-Id/Port.
func TestExposeHostScheme(t *testing.T) {
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
	ep = sandbox.Endpoint(dep)
	if want := "https://8080-" + sb.ID() + ".edge.example"; ep.URL != want || ep.Header.Get("E2b-Sandbox-Port") != "" {
		t.Fatalf("endpoint %v, want %s without routing headers", ep, want)
	}
	if _, err := rt.Expose(ctx, "nosuchsandbox", 8080, driver.ExposeOptions{}); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Expose on a missing sandbox = %v, want NotFound", err)
	}
}
