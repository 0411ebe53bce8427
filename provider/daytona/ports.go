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
	return ep, nil
}
