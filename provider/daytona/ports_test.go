package daytona_test

import (
	"net/http"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/daytona"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
)

// TestExposePreviewURL: Expose is the API's preview URL with its token in
// x-daytona-preview-token; with WithPreviewBaseURL the preview host moves
// to X-Forwarded-Host; the fake's preview proxy refuses a request without
// the token.
func TestExposePreviewURL(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	sb, err := e.c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	ep, err := sb.Expose(ctx, 8080, sandbox.ExposeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	host := "8080-" + sb.ID() + "." + daytonafake.PreviewDomain
	if ep.URL != e.fake.PreviewURL() || ep.Header.Get("X-Forwarded-Host") != host || ep.Header.Get(daytona.PreviewTokenHeader) == "" {
		t.Fatalf("endpoint %v: want %s with X-Forwarded-Host %s and a token", ep, e.fake.PreviewURL(), host)
	}
	req, _ := ep.NewRequest(ctx, http.MethodGet, "/", nil)
	req.Header.Del(daytona.PreviewTokenHeader)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("preview without the token: status %d, want 401", resp.StatusCode)
	}
	if ep.Public {
		t.Fatalf("endpoint of a private sandbox reports Public")
	}
	// A public sandbox's previews need no token: its endpoint says so.
	pub, err := e.c.Create(ctx, sandbox.CreateOptions{ProviderOptions: map[string]string{daytona.OptPublic: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Destroy(ctx)
	if pep, err := pub.Expose(ctx, 8080, sandbox.ExposeOptions{}); err != nil || !pep.Public {
		t.Fatalf("endpoint of a public sandbox: %v (Public %v), %v; want Public", pep, pep.Public, err)
	}

	rt, err := daytona.New(daytona.WithAPIKey(e.fake.APIKey()), daytona.WithAPIURL(e.fake.URL()))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	dep, err := rt.Expose(ctx, sb.ID(), 8080, driver.ExposeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ep = sandbox.Endpoint(dep)
	if ep.URL != "https://"+host || ep.Header.Get("X-Forwarded-Host") != "" {
		t.Fatalf("endpoint without a base URL: %v", ep)
	}
	if _, err := rt.Expose(ctx, "nosuchsandbox", 8080, driver.ExposeOptions{}); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Expose on a missing sandbox = %v, want NotFound", err)
	}
}
