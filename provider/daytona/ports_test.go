package daytona_test

import (
	"net/http"
	"strings"
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
	t.Parallel()
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
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != daytonafake.AuthPath {
		t.Fatalf("preview without the token, redirects followed: status %d at %s, want the login page's 200", resp.StatusCode, resp.Request.URL)
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
	ep = sandbox.Endpoint{Port: dep.Port, URL: dep.URL, Header: dep.Header, Public: dep.Public}
	if ep.URL != "https://"+host || ep.Header.Get("X-Forwarded-Host") != "" {
		t.Fatalf("endpoint without a base URL: %v", ep)
	}
	if _, err := rt.Expose(ctx, "nosuchsandbox", 8080, driver.ExposeOptions{}); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Expose on a missing sandbox = %v, want NotFound", err)
	}
}

// TestPreviewEdgeFailuresAreErrors: through the endpoint's transport, the
// preview proxy's 502 with an empty body for a port nothing listens on is
// FailedPrecondition naming the port, and its redirect to the login page
// for a missing or stale token is PermissionDenied naming the token
// header, with the redirect not followed; the server's own answers pass.
func TestPreviewEdgeFailuresAreErrors(t *testing.T) {
	t.Parallel()
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
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := ep.Client(&http.Client{Transport: tr})
	req, _ := ep.NewRequest(ctx, http.MethodGet, "/", nil)
	resp, err := hc.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("GET on a closed port: status %d, want an error", resp.StatusCode)
	}
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), "port 8080") {
		t.Errorf("GET on a closed port: %v (code %v), want FailedPrecondition naming port 8080", err, sandbox.CodeOf(err))
	}
	req, _ = ep.NewRequest(ctx, http.MethodGet, "/", nil)
	req.Header.Set(daytona.PreviewTokenHeader, "stale")
	resp, err = hc.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("GET with a stale token: status %d at %s, want an error", resp.StatusCode, resp.Request.URL)
	}
	if sandbox.CodeOf(err) != sandbox.PermissionDenied || !strings.Contains(err.Error(), daytona.PreviewTokenHeader) || !strings.Contains(err.Error(), "port 8080") {
		t.Errorf("GET with a stale token: %v (code %v), want PermissionDenied naming the port and the token header", err, sandbox.CodeOf(err))
	}
	if strings.Contains(err.Error(), ep.Header.Get(daytona.PreviewTokenHeader)) {
		t.Errorf("the error shows the token: %v", err)
	}
}
