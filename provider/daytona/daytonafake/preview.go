package daytonafake

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/sandboxkit/sandbox/driver"
)

// PreviewDomain is the proxy domain of the fake's preview URLs:
// https://{port}-{sandboxId}.PreviewDomain. Nothing resolves it; clients
// send preview traffic to PreviewURL with the preview host in
// X-Forwarded-Host (daytona.WithPreviewBaseURL).
const PreviewDomain = "proxy.daytonafake.test"

// PreviewURL returns the base URL the fake's preview proxy answers on.
func (s *Server) PreviewURL() string { return s.ts.URL }

// previewTarget parses a preview host {port}-{sandboxId}.{domain}.
func previewTarget(host string) (port int, id string, ok bool) {
	first, _, _ := strings.Cut(host, ".")
	ps, id, ok := strings.Cut(first, "-")
	if !ok || id == "" {
		return 0, "", false
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return 0, "", false
	}
	return port, id, true
}

// previewHost is the host a preview request is for, when it is one.
func previewHost(r *http.Request) (string, bool) {
	for _, h := range []string{r.Header.Get("X-Forwarded-Host"), r.Host} {
		h, _, _ = strings.Cut(h, ":")
		if strings.HasSuffix(h, "."+PreviewDomain) {
			return h, true
		}
	}
	return "", false
}

// previewLink answers GET /sandbox/{id}/ports/{port}/preview-url.
func (s *Server) previewLink(w http.ResponseWriter, r *http.Request, b *sbx, portStr string) {
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		nestError(w, r, http.StatusBadRequest, "Invalid port")
		return
	}
	s.mu.Lock()
	if b.previewToken == "" {
		b.previewToken = randHex(16)
	}
	tok := b.previewToken
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{
		"sandboxId": b.id, "url": fmt.Sprintf("https://%d-%s.%s", port, b.id, PreviewDomain), "token": tok,
	})
}

// preview serves a request for a preview host: the token (unless the
// sandbox is public), then a reverse proxy (WebSocket upgrades and
// streamed responses pass) to the port in the backend sandbox, reached
// through the backend's Expose.
func (s *Server) preview(w http.ResponseWriter, r *http.Request, host string) {
	port, id, ok := previewTarget(host)
	if !ok {
		http.Error(w, "invalid preview host", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	b := s.sandboxes[id]
	var tok, backendID, state string
	var public bool
	if b != nil {
		tok, backendID, state, public = b.previewToken, b.backendID, b.stored, b.public
	}
	s.mu.Unlock()
	if b == nil || state == stateDestroyed {
		http.Error(w, fmt.Sprintf("sandbox %s not found", id), http.StatusNotFound)
		return
	}
	if !public {
		got := r.Header.Get("X-Daytona-Preview-Token")
		if tok == "" || subtle.ConstantTimeCompare([]byte(got), []byte(tok)) != 1 {
			http.Error(w, "unauthorized: a valid x-daytona-preview-token is required", http.StatusUnauthorized)
			return
		}
	}
	if state != stateStarted {
		http.Error(w, fmt.Sprintf("sandbox %s is %s", id, state), http.StatusBadGateway)
		return
	}
	bad := func() {
		http.Error(w, fmt.Sprintf("no server is listening on port %d of sandbox %s", port, id), http.StatusBadGateway)
	}
	p, ok := s.backend.(driver.PortExposer)
	if !ok {
		bad()
		return
	}
	ep, err := p.Expose(r.Context(), backendID, port, driver.ExposeOptions{})
	if err != nil {
		bad()
		return
	}
	target, err := url.Parse(ep.URL)
	if err != nil {
		bad()
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = host
			pr.Out.Header.Del("X-Daytona-Preview-Token")
			pr.Out.Header.Del("X-Forwarded-Host")
			for k, vs := range ep.Header {
				pr.Out.Header[k] = vs
			}
		},
		Transport:     s.portTr,
		FlushInterval: -1,
		ErrorHandler:  func(w http.ResponseWriter, _ *http.Request, _ error) { bad() },
	}
	rp.ServeHTTP(w, r)
}
