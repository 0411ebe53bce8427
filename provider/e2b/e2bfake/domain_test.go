package e2bfake_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
)

// TestDomainRoutesByHost: with a sandbox domain, envd is routed as E2B's
// edge routes it: by a host <port>-<id>.<domain>, whatever routing
// headers say; by the headers only on an IP literal, localhost or
// sandbox.<domain>; a host under another domain is refused.
func TestDomainRoutesByHost(t *testing.T) {
	f := start(t, e2bfake.WithDomain("example.com"))
	c := f.create(`{"templateID":"base","secure":true}`)
	health := func(host string, hdr map[string]string) int {
		t.Helper()
		req, err := http.NewRequest("GET", f.SandboxURL()+"/health", bytes.NewReader(nil))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	wrong := map[string]string{"E2b-Sandbox-Id": "inope", "E2b-Sandbox-Port": "49983"}
	right := map[string]string{"E2b-Sandbox-Id": c.SandboxID, "E2b-Sandbox-Port": "49983"}
	for _, tc := range []struct {
		host string
		hdr  map[string]string
		want int
	}{
		{"49983-" + c.SandboxID + ".example.com", nil, http.StatusNoContent},
		{"49983-" + c.SandboxID + ".example.com", wrong, http.StatusNoContent}, // the host wins
		{"49983-inope.example.com", right, http.StatusBadGateway},              // the host wins
		{"sandbox.example.com", right, http.StatusNoContent},
		{"127.0.0.1", right, http.StatusNoContent},
		{"49983-" + c.SandboxID + ".other.test", right, http.StatusBadRequest},
	} {
		if got := health(tc.host, tc.hdr); got != tc.want {
			t.Errorf("host %s, headers %v: %d, want %d", tc.host, tc.hdr, got, tc.want)
		}
	}
}
