package local

import (
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox/driver"
)

// Without network namespaces local declares only the two base modes; with
// them, every list and brokered secrets (enforced by the egress proxy).
func TestNetSupportByLevel(t *testing.T) {
	if s := netSupport(true, true, false); s.AllowDomains || s.AllowCIDRs || s.DenyCIDRs || s.DenyDomains || s.BrokeredSecrets || s.NotEnforced {
		t.Errorf("local without namespaces declares more than it enforces: %+v", s)
	}
	s := netSupport(true, true, true)
	if !s.AllowDomains || !s.AllowWildcards || !s.AllowCIDRs || !s.DenyDomains || !s.DenyCIDRs || !s.DenyOverAllow || !s.IPv6CIDRs || !s.BrokeredSecrets || s.NotEnforced {
		t.Errorf("local with namespaces: %+v", s)
	}
}

// Without pasta allow-all is refused, and the refusal (the Note the
// portable layer adds to it) names the package to install at every level:
// at L3 and up, where the lists still work through the egress proxy, as
// below it.
func TestNetSupportWithoutPastaNamesPasst(t *testing.T) {
	for _, proxy := range []bool{false, true} {
		for _, denyAll := range []bool{false, true} {
			s := netSupport(false, denyAll, proxy)
			if s.AllowAll || !strings.Contains(s.Note, "passt") {
				t.Errorf("netSupport(allowAll false, denyAll %v, proxy %v): AllowAll %v, Note %q; want false, naming passt", denyAll, proxy, s.AllowAll, s.Note)
			}
			if s := netSupport(true, denyAll, proxy); strings.Contains(s.Note, "passt") {
				t.Errorf("netSupport(allowAll true, denyAll %v, proxy %v): Note %q names passt, which is there", denyAll, proxy, s.Note)
			}
		}
	}
}

// Only a policy that narrows allow-all, or brokered secrets, needs the
// proxy; deny-all and allow-all do not.
func TestNeedsProxy(t *testing.T) {
	for _, tc := range []struct {
		p       *driver.NetworkPolicy
		secrets int
		want    bool
	}{
		{nil, 0, false},
		{nil, 1, true},
		{&driver.NetworkPolicy{Mode: driver.NetworkAllowAll}, 0, false},
		{&driver.NetworkPolicy{Mode: driver.NetworkDenyAll}, 0, false},
		{&driver.NetworkPolicy{Mode: driver.NetworkAllowAll, DenyCIDRs: []string{"10.0.0.0/8"}}, 0, true},
		{&driver.NetworkPolicy{Mode: driver.NetworkAllowAll, DenyDomains: []string{"x.example"}}, 0, true},
		{&driver.NetworkPolicy{Mode: driver.NetworkAllowList, AllowDomains: []string{"pypi.org"}}, 0, true},
	} {
		if got := needsProxy(tc.p, tc.secrets); got != tc.want {
			t.Errorf("needsProxy(%+v, %d) = %v, want %v", tc.p, tc.secrets, got, tc.want)
		}
	}
}
