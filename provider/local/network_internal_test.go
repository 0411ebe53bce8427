package local

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

// The driver refuses a list it cannot enforce even when the portable
// layer's check is bypassed (a driver-level caller), naming the missing
// enforcement.
func TestDriverRefusesNetworkLists(t *testing.T) {
	for _, p := range []*driver.NetworkPolicy{
		{Mode: driver.NetworkAllowList, AllowDomains: []string{"pypi.org"}},
		{Mode: driver.NetworkAllowList, AllowCIDRs: []string{"10.0.0.0/8"}},
		{Mode: driver.NetworkAllowAll, DenyCIDRs: []string{"192.0.2.0/24"}},
	} {
		err := checkNetworkPolicy(p)
		if !errors.Is(err, sberrors.ErrFailedPrecondition) || !strings.Contains(err.Error(), "egress proxy") {
			t.Errorf("%+v: %v, want FailedPrecondition naming the egress proxy", p, err)
		}
	}
	for _, p := range []*driver.NetworkPolicy{nil, {Mode: driver.NetworkAllowAll}, {Mode: driver.NetworkDenyAll}} {
		if err := checkNetworkPolicy(p); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	if s := netSupport(true, true); s.AllowDomains || s.AllowCIDRs || s.DenyCIDRs || s.DenyDomains || s.NotEnforced {
		t.Errorf("local declares more than it enforces: %+v", s)
	}
}
