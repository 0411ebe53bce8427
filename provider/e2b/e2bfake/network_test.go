package e2bfake_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// The egress fields are validated as the API does, recorded, reported by
// GET, and replaced whole by PUT /sandboxes/{id}/network.
func TestNetworkFieldsRecorded(t *testing.T) {
	f := start(t)
	key := map[string]string{"X-API-Key": f.APIKey(), "Content-Type": "application/json"}
	st, _, b := f.do("POST", f.APIURL()+"/sandboxes", key, []byte(`{"templateID":"base","network":{"denyOut":["evil.example"]}}`))
	if st != 400 || !strings.Contains(string(b), `domains are not supported in denyOut: \"evil.example\"`) {
		t.Fatalf("domain in denyOut: %d %s", st, b)
	}
	st, _, b = f.do("POST", f.APIURL()+"/sandboxes", key, []byte(`{"templateID":"base","network":{"allowOut":["bad host"]}}`))
	if st != 400 || !strings.Contains(string(b), `invalid allowOut entry: \"bad host\"`) {
		t.Fatalf("bad allowOut: %d %s", st, b)
	}
	c := f.create(`{"templateID":"base","secure":true,"allow_internet_access":true,"network":{"allowOut":["pypi.org","*.pythonhosted.org","1.2.3.4"],"denyOut":["0.0.0.0/0"]}}`)
	type detail struct {
		AllowInternetAccess *bool `json:"allowInternetAccess"`
		Network             *struct {
			AllowOut []string `json:"allowOut"`
			DenyOut  []string `json:"denyOut"`
		} `json:"network"`
	}
	get := func() detail {
		t.Helper()
		st, _, b := f.do("GET", f.APIURL()+"/sandboxes/"+c.SandboxID, key, nil)
		if st != 200 {
			t.Fatalf("get: %d %s", st, b)
		}
		var d detail
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := get()
	if d.AllowInternetAccess == nil || !*d.AllowInternetAccess || d.Network == nil ||
		strings.Join(d.Network.AllowOut, ",") != "pypi.org,*.pythonhosted.org,1.2.3.4" || strings.Join(d.Network.DenyOut, ",") != "0.0.0.0/0" {
		t.Fatalf("GET after create: %+v %+v", d, d.Network)
	}
	st, _, b = f.do("PUT", f.APIURL()+"/sandboxes/"+c.SandboxID+"/network", key, []byte(`{"denyOut":["api.example.com"]}`))
	if st != 400 {
		t.Fatalf("PUT with a domain in denyOut: %d %s", st, b)
	}
	st, _, b = f.do("PUT", f.APIURL()+"/sandboxes/"+c.SandboxID+"/network", key, []byte(`{"allow_internet_access":false}`))
	if st != 204 {
		t.Fatalf("PUT: %d %s", st, b)
	}
	d = get()
	if d.AllowInternetAccess == nil || *d.AllowInternetAccess || d.Network != nil && (len(d.Network.AllowOut) > 0 || len(d.Network.DenyOut) > 0) {
		t.Fatalf("GET after PUT (omitted fields cleared): %+v %+v", d, d.Network)
	}
	st, _, _ = f.do("PUT", f.APIURL()+"/sandboxes/inope0000000000000000/network", key, []byte(`{}`))
	if st != 404 {
		t.Fatalf("PUT on a missing sandbox: %d", st)
	}
}

// network.rules (header transforms) are validated, recorded, reported by
// GET and cleared by a PUT that leaves them out; errors never echo a
// header's value.
func TestNetworkRulesRecorded(t *testing.T) {
	f := start(t)
	key := map[string]string{"X-API-Key": f.APIKey(), "Content-Type": "application/json"}
	for _, tc := range []struct{ body, want string }{
		{`{"templateID":"base","network":{"rules":{"10.0.0.1":[{"transform":{"headers":{"Authorization":"Bearer v"}}}]}}}`, `\"10.0.0.1\" is not a valid domain`},
		{`{"templateID":"base","network":{"rules":{"api.example.com":[{"transform":{"headers":{"Bad Name":"v"}}}]}}}`, `\"Bad Name\" is not a valid header name`},
		{`{"templateID":"base","network":{"rules":{"api.example.com":[{"transform":{"headers":{"Authorization":"Bearer topsecret\r\nX: y"}}}]}}}`, `header \"Authorization\" holds control characters`},
	} {
		st, _, b := f.do("POST", f.APIURL()+"/sandboxes", key, []byte(tc.body))
		if st != 400 || !strings.Contains(string(b), tc.want) || strings.Contains(string(b), "topsecret") {
			t.Errorf("%s: %d %s", tc.body, st, b)
		}
	}
	c := f.create(`{"templateID":"base","secure":true,"network":{"rules":{"api.example.com":[{"transform":{"headers":{"Authorization":"Bearer k1"}}}],"*.example.org":[{"transform":{"headers":{"X-Api-Key":"k2"}}}]}}}`)
	if got := f.Rules(c.SandboxID); len(got) != 2 || got["api.example.com"][0]["Authorization"] != "Bearer k1" || got["*.example.org"][0]["X-Api-Key"] != "k2" {
		t.Fatalf("Rules after create: %v", got)
	}
	st, _, b := f.do("GET", f.APIURL()+"/sandboxes/"+c.SandboxID, key, nil)
	if st != 200 || !strings.Contains(string(b), `"rules":{`) || !strings.Contains(string(b), `"Bearer k1"`) {
		t.Fatalf("GET: %d %s", st, b)
	}
	st, _, b = f.do("PUT", f.APIURL()+"/sandboxes/"+c.SandboxID+"/network", key, []byte(`{"rules":{"a b":[]}}`))
	if st != 400 {
		t.Fatalf("PUT with a bad rules key: %d %s", st, b)
	}
	if got := f.Rules(c.SandboxID); len(got) != 2 {
		t.Fatalf("a refused PUT changed the rules: %v", got)
	}
	st, _, b = f.do("PUT", f.APIURL()+"/sandboxes/"+c.SandboxID+"/network", key, []byte(`{}`))
	if st != 204 {
		t.Fatalf("PUT: %d %s", st, b)
	}
	if got := f.Rules(c.SandboxID); got != nil {
		t.Fatalf("a PUT without rules must clear them: %v", got)
	}
}
