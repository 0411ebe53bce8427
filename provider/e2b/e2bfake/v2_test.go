package e2bfake_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
)

// TestV2CreateAndConnect: POST /v2/sandboxes answers as E2B's API does
// for SDKs from 2.51: every sandbox is secured (an envdAccessToken, no
// secure field needed), the lease defaults to 300 s (the older route's
// 15 s stays), a timeout below 1 is refused; POST
// /v2/sandboxes/{id}/connect takes no body (300 s) and resumes a paused
// sandbox with 201.
func TestV2CreateAndConnect(t *testing.T) {
	f := start(t)
	hdr := map[string]string{"X-API-Key": f.APIKey(), "Content-Type": "application/json"}
	st, _, b := f.do("POST", f.APIURL()+"/v2/sandboxes", hdr, []byte(`{"templateID":"base"}`))
	if st != http.StatusCreated {
		t.Fatalf("v2 create: %d %s", st, b)
	}
	var c created
	if err := json.Unmarshal(b, &c); err != nil || c.EnvdAccessToken == "" {
		t.Fatalf("v2 create answered %s: want an envdAccessToken (%v)", b, err)
	}
	end, _ := f.Lease(c.SandboxID)
	if left := time.Until(end); left < 290*time.Second || left > 300*time.Second {
		t.Fatalf("v2 create without a timeout: lease ends in %v, want 300 s", left)
	}
	old := f.createAsSent(`{"templateID":"base"}`)
	if end, _ := f.Lease(old.SandboxID); time.Until(end) > 15*time.Second {
		t.Fatalf("older create without a timeout: lease ends in %v, want 15 s", time.Until(end))
	}
	if old.EnvdAccessToken != "" {
		t.Fatalf("older create without secure: envdAccessToken %q, want none", old.EnvdAccessToken)
	}
	st, _, b = f.do("POST", f.APIURL()+"/v2/sandboxes", hdr, []byte(`{"templateID":"base","timeout":0}`))
	if st != http.StatusBadRequest || !strings.Contains(string(b), "at least 1") {
		t.Fatalf("v2 create with timeout 0: %d %s, want 400", st, b)
	}
	if st, _, b = f.do("POST", f.APIURL()+"/sandboxes/"+c.SandboxID+"/pause", hdr, nil); st != http.StatusNoContent {
		t.Fatalf("pause: %d %s", st, b)
	}
	st, _, b = f.do("POST", f.APIURL()+"/v2/sandboxes/"+c.SandboxID+"/connect", map[string]string{"X-API-Key": f.APIKey()}, nil)
	if st != http.StatusCreated || !strings.Contains(string(b), `"envdAccessToken"`) {
		t.Fatalf("v2 connect of a paused sandbox without a body: %d %s, want 201 with a token", st, b)
	}
	end, _ = f.Lease(c.SandboxID)
	if left := time.Until(end); left < 290*time.Second || left > 300*time.Second {
		t.Fatalf("v2 connect without a timeout: lease ends in %v, want 300 s", left)
	}
	st, _, b = f.do("POST", f.APIURL()+"/v2/sandboxes/"+c.SandboxID+"/connect", hdr, []byte(`{"timeout":0}`))
	if st != http.StatusBadRequest {
		t.Fatalf("v2 connect with timeout 0: %d %s, want 400", st, b)
	}
	if st, _, _ = f.do("POST", f.APIURL()+"/v2/sandboxes/inope/connect", hdr, []byte(`{}`)); st != http.StatusNotFound {
		t.Fatalf("v2 connect of an unknown sandbox: %d, want 404", st)
	}
}

// TestWithoutV2Routes: an older server answers the v2 create and connect
// as E2B's API did before them (its request validator, before the API
// key is looked at), while its older routes work.
func TestWithoutV2Routes(t *testing.T) {
	f := start(t, e2bfake.WithoutV2Routes())
	hdr := map[string]string{"X-API-Key": "e2b_00", "Content-Type": "application/json"} // wrong key: routing comes first
	st, _, b := f.do("POST", f.APIURL()+"/v2/sandboxes", hdr, []byte(`{"templateID":"base"}`))
	if st != http.StatusBadRequest || strings.TrimSpace(string(b)) != `{"code":400,"message":"validation error: method not allowed"}` {
		t.Fatalf("v2 create on an older server: %d %q", st, b)
	}
	st, _, b = f.do("POST", f.APIURL()+"/v2/sandboxes/iabc/connect", hdr, []byte(`{}`))
	if st != http.StatusNotFound || strings.TrimSpace(string(b)) != `{"code":404,"message":"validation error: no matching operation was found"}` {
		t.Fatalf("v2 connect on an older server: %d %q", st, b)
	}
	c := f.create(`{"templateID":"base","secure":true}`)
	st, _, _ = f.do("GET", f.APIURL()+"/v2/sandboxes", map[string]string{"X-API-Key": f.APIKey()}, nil)
	if st != http.StatusOK || c.EnvdAccessToken == "" {
		t.Fatalf("older routes on an older server: list %d, token %q", st, c.EnvdAccessToken)
	}
}
