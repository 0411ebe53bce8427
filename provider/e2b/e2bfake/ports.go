package e2bfake

import (
	"crypto/subtle"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/sandboxkit/sandbox/driver"
)

// proxyPort serves a request for a user port of b, as E2B's edge does: a
// reverse proxy (WebSocket upgrades and streamed responses included) to
// the port in the backend sandbox, reached through the backend's own
// Expose. A port nothing listens on gets the edge's 502 JSON body; a
// sandbox created without public traffic refuses a request without its
// traffic access token with 403.
func (s *Server) proxyPort(w http.ResponseWriter, r *http.Request, b *box, port int) {
	notOpen := func() {
		writeJSON(w, http.StatusBadGateway, map[string]any{"sandboxId": b.id, "message": "The sandbox is running but port is not open", "port": port, "code": http.StatusBadGateway})
	}
	s.mu.Lock()
	traffic := b.traffic
	s.mu.Unlock()
	if traffic != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("E2b-Traffic-Access-Token")), []byte(traffic)) != 1 {
		// A sandbox created without public traffic: its user ports
		// need the traffic access token (missing or wrong: 403).
		writeJSON(w, http.StatusForbidden, map[string]any{"sandboxId": b.id, "message": "Missing or invalid traffic access token", "code": http.StatusForbidden})
		return
	}
	p, ok := s.backend.(driver.PortExposer)
	if !ok {
		notOpen()
		return
	}
	ep, err := p.Expose(r.Context(), b.backendID, port, driver.ExposeOptions{})
	if err != nil {
		notOpen()
		return
	}
	target, err := url.Parse(ep.URL)
	if err != nil {
		notOpen()
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = r.Host
			for _, k := range []string{"E2b-Sandbox-Id", "E2b-Sandbox-Port", "E2b-Traffic-Access-Token"} {
				pr.Out.Header.Del(k)
			}
			for k, vs := range ep.Header {
				pr.Out.Header[k] = vs
			}
		},
		Transport:     s.portTr,
		FlushInterval: -1,
		ErrorHandler:  func(w http.ResponseWriter, _ *http.Request, _ error) { notOpen() },
	}
	rp.ServeHTTP(w, r)
}
