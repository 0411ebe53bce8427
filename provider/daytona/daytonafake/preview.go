package daytonafake

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
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
			s.authRedirect(w, r, host, id)
			return
		}
	}
	if state != stateStarted {
		http.Error(w, fmt.Sprintf("sandbox %s is %s", id, state), http.StatusBadGateway)
		return
	}
	// Nothing listens on the port: the daemon's reverse proxy, at the
	// end of the chain, answers 502 with an empty body, which the proxy
	// passes on as it is.
	bad := func() { emptyError(w, http.StatusBadGateway) }
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

// AuthPath is the path, on PreviewURL, of the fake's stand-in for the
// OpenID Connect login page the preview proxy sends a request without a
// valid preview token to (on Daytona, another host). It answers 200 with
// a page, as a login page does: a client that follows the redirect gets a
// 200 that is not the server's.
const AuthPath = "/.daytonafake/oauth/authorize"

// authRedirect answers a preview request without a valid token as the
// preview proxy does: 307 to the login page (an authorization-code
// request with PKCE, coming back to the proxy's /callback), with the
// pkce_verifier cookie set.
func (s *Server) authRedirect(w http.ResponseWriter, r *http.Request, host, id string) {
	base := host
	if _, rest, ok := strings.Cut(host, "."); ok {
		base = rest
	}
	state, _ := json.Marshal(map[string]string{"state": randHex(16), "returnTo": "https://" + host + r.URL.RequestURI(), "sandboxId": id})
	sum := sha256.Sum256([]byte(randHex(16)))
	q := url.Values{
		"client_id": {"daytona"}, "redirect_uri": {"https://" + base + "/callback"}, "response_type": {"code"},
		"scope": {"openid profile"}, "state": {base64.URLEncoding.EncodeToString(state)},
		"audience": {"daytona"}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
	}
	http.SetCookie(w, &http.Cookie{Name: "pkce_verifier", Value: randHex(16), Path: "/", Domain: "." + base, MaxAge: 300, HttpOnly: true})
	http.Redirect(w, r, s.ts.URL+AuthPath+"?"+q.Encode(), http.StatusTemporaryRedirect)
}

// authPage serves AuthPath.
func authPage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.WriteString(w, "<!doctype html><title>Log in</title><p>Log in to Daytona to open this preview.</p>\n")
}
