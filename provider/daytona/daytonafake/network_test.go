package daytonafake_test

import (
	"strings"
	"testing"
)

// networkAllowList and domainAllowList are validated, echoed in the DTO
// and changed by network-settings.
func TestNetworkSettingsRecorded(t *testing.T) {
	t.Parallel()
	r := newRaw(t)
	many := strings.TrimSuffix(strings.Repeat("10.0.0.0/8,", 11), ",")
	st, body := r.json("POST", r.f.URL()+"/sandbox", map[string]any{"networkAllowList": many})
	if st != 400 || !strings.Contains(body["message"].(string), "more than 10") {
		t.Fatalf("11 networks: %d %v", st, body)
	}
	st, body = r.json("POST", r.f.URL()+"/sandbox", map[string]any{"networkAllowList": "2001:db8::/32"})
	if st != 400 || !strings.Contains(body["message"].(string), "2001:db8::/32") {
		t.Fatalf("IPv6 CIDR: %d %v", st, body)
	}
	st, sb := r.json("POST", r.f.URL()+"/sandbox", map[string]any{"networkBlockAll": false, "networkAllowList": "203.0.113.0/24", "domainAllowList": "pypi.org,files.pythonhosted.org"})
	if st != 200 || sb["networkAllowList"] != "203.0.113.0/24" || sb["domainAllowList"] != "pypi.org,files.pythonhosted.org" {
		t.Fatalf("create: %d %v", st, sb)
	}
	id := sb["id"].(string)
	st, sb = r.json("POST", r.f.URL()+"/sandbox/"+id+"/network-settings", map[string]any{"domainAllowList": "bad host"})
	if st != 400 {
		t.Fatalf("bad domain: %d %v", st, sb)
	}
	st, sb = r.json("POST", r.f.URL()+"/sandbox/"+id+"/network-settings", map[string]any{"networkBlockAll": true, "networkAllowList": "", "domainAllowList": ""})
	if st != 200 || sb["networkBlockAll"] != true || sb["networkAllowList"] != nil || sb["domainAllowList"] != nil {
		t.Fatalf("network-settings: %d %v", st, sb)
	}
	st, sb = r.json("GET", r.f.URL()+"/sandbox/"+id, nil)
	if st != 200 || sb["networkBlockAll"] != true {
		t.Fatalf("get: %d %v", st, sb)
	}
}
