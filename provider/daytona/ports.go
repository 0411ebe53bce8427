package daytona

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

// PreviewTokenHeader carries a preview URL's access token (Daytona's
// x-daytona-preview-token).
const PreviewTokenHeader = "X-Daytona-Preview-Token"

// WithPreviewBaseURL sends preview traffic to base (a local preview proxy,
// or a fake's) instead of the preview host name: Expose returns base as
// the URL and the preview host in X-Forwarded-Host, which Daytona's
// preview proxy routes on as it does behind a custom proxy. Tests use it
// so that no name is resolved.
func WithPreviewBaseURL(base string) Option {
	return func(c *config) { c.previewBase = strings.TrimRight(base, "/") }
}

// previewLink is the API's answer to GET /sandbox/{id}/ports/{port}/preview-url.
type previewLink struct {
	SandboxID string `json:"sandboxId"`
	URL       string `json:"url"`
	Token     string `json:"token"`
}

// Expose asks the API for the port's preview URL
// (https://{port}-{sandboxId}.{proxyDomain}) and its token, sent in
// x-daytona-preview-token, which the preview proxy requires unless the
// sandbox is public (OptPublic; the endpoint then reports Public, read
// from the sandbox). The token changes when the sandbox restarts: call
// Expose again after a Resume. Daytona previews ports 3000-9999.
// MaxConns and IdleTimeout are the proxy's: the endpoint reports none.
func (r *Runtime) Expose(ctx context.Context, id string, port int, _ driver.ExposeOptions) (driver.Endpoint, error) {
	const op = "preview-url"
	u := strings.TrimRight(r.apiURL, "/") + "/sandbox/" + url.PathEscape(id) + "/ports/" + strconv.Itoa(port) + "/preview-url"
	resp, err := r.call(ctx, op, false, func(ctx context.Context) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		if err := r.headers(ctx, req); err != nil {
			return nil, err
		}
		return r.hc.Do(req)
	}, http.StatusOK)
	if err != nil {
		return driver.Endpoint{}, err
	}
	var link previewLink
	if err := decode(op, resp, &link); err != nil {
		return driver.Endpoint{}, err
	}
	pu, err := url.Parse(link.URL)
	if err != nil || pu.Host == "" {
		return driver.Endpoint{}, sberrors.Errorf(sberrors.Internal, "daytona: preview-url: the API answered a URL that does not parse")
	}
	// A public sandbox's previews take requests without the token: the
	// endpoint says so (Public).
	sb, err := r.getDTO(ctx, id)
	if err != nil {
		return driver.Endpoint{}, err
	}
	ep := driver.Endpoint{Port: port, URL: strings.TrimRight(link.URL, "/"), Public: sb.Public != nil && *sb.Public}
	h := http.Header{}
	if link.Token != "" {
		h.Set(PreviewTokenHeader, link.Token)
	}
	if r.previewBase != "" {
		ep.URL = r.previewBase
		h.Set("X-Forwarded-Host", pu.Host)
	}
	if len(h) > 0 {
		ep.Header = h
	}
	ep.Check = previewCheck(port)
	return ep, nil
}

// previewCheck tells the preview proxy's own failures from the answers
// of the server on port (driver.Endpoint.Check):
//   - nothing listens on the port: the daemon's reverse proxy, at the end
//     of the proxy's chain, answers 502 with an empty body, which names
//     nothing; the error names the port (FailedPrecondition);
//   - the preview token is missing or no longer valid: the proxy answers
//     307 to its OpenID Connect login page (an authorization-code request,
//     with the pkce_verifier cookie), whose 200 a client following the
//     redirect would take for the server's; the error says so
//     (PermissionDenied), and the redirect is not followed.
//
// A server's own 502 with an empty body is taken for the first: the
// proxy sends nothing that tells them apart.
func previewCheck(port int) func(*http.Response) error {
	return func(resp *http.Response) error {
		switch {
		case resp.StatusCode == http.StatusBadGateway && resp.ContentLength == 0:
			return sberrors.Errorf(sberrors.FailedPrecondition,
				"daytona: preview: nothing accepts connections on port %d in the sandbox (the preview proxy answered 502 with an empty body)", port)
		case resp.StatusCode == http.StatusTemporaryRedirect && authRedirect(resp):
			return sberrors.Errorf(sberrors.PermissionDenied,
				"daytona: preview: the preview proxy refused the request to port %d: its %s is missing or no longer valid (the token changes when the sandbox restarts: call Expose again); it redirected to its login page, not followed", port, PreviewTokenHeader)
		}
		return nil
	}
}

// authRedirect reports whether a 307 is the preview proxy's redirect to
// its login page rather than the server's own: it sets the PKCE verifier
// cookie, or sends to an authorization-code request with a PKCE challenge.
func authRedirect(resp *http.Response) bool {
	for _, c := range resp.Cookies() {
		if c.Name == "pkce_verifier" {
			return true
		}
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return false
	}
	q := loc.Query()
	return q.Get("response_type") == "code" && q.Get("code_challenge") != "" && q.Get("state") != ""
}
