package e2b

import (
	"context"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/api"
)

// allTraffic is the CIDR E2B's documentation calls ALL_TRAFFIC: in
// denyOut it turns allowOut into an allow-list (domain entries in allowOut
// take effect only with it).
const allTraffic = "0.0.0.0/0"

// networkSupport is what E2B enforces: allowOut takes IPs, CIDRs, domains
// and "*." wildcards; denyOut takes IPs and CIDRs only, and an allowOut
// entry wins over a denyOut entry, so a deny entry cannot carve a hole in
// an allow-list.
var networkSupport = driver.NetworkSupport{
	AllowAll: true, DenyAll: true, AllowDomains: true, AllowWildcards: true, AllowCIDRs: true,
	DenyCIDRs: true, IPv6CIDRs: true,
	Note: "E2B's denyOut takes no domains, and its allowOut entries win over denyOut entries",
}

// egress maps a policy to E2B's create and update fields:
// allow_internet_access, network.allowOut and network.denyOut.
func egress(p *driver.NetworkPolicy, noNetwork bool) (internet bool, allowOut, denyOut *[]string) {
	if p == nil {
		return !noNetwork, nil, nil
	}
	switch p.Mode {
	case driver.NetworkDenyAll:
		return false, nil, nil
	case driver.NetworkAllowList:
		a := slices.Concat(p.AllowDomains, p.AllowCIDRs)
		d := []string{allTraffic}
		return true, &a, &d
	}
	if len(p.DenyCIDRs) == 0 {
		return true, nil, nil
	}
	d := slices.Clone(p.DenyCIDRs)
	return true, nil, &d
}

// policyOf reads the policy in force back from what E2B reports.
func policyOf(internet *bool, n *api.SandboxNetworkConfig) *driver.NetworkPolicy {
	var allow, deny []string
	if n != nil && n.AllowOut != nil {
		allow = *n.AllowOut
	}
	if n != nil && n.DenyOut != nil {
		deny = *n.DenyOut
	}
	if internet != nil && !*internet {
		return &driver.NetworkPolicy{Mode: driver.NetworkDenyAll}
	}
	p := &driver.NetworkPolicy{Mode: driver.NetworkAllowAll}
	// denyOut 0.0.0.0/0 makes allowOut an allow-list. Without allowOut
	// entries it is a deny entry of an allow-all policy, reported as such
	// (as the portable layer hands it over): it says nothing of IPv6.
	if len(allow) > 0 && slices.Contains(deny, allTraffic) {
		p.Mode = driver.NetworkAllowList
		for _, e := range allow {
			if c, ok := prefix(e); ok {
				p.AllowCIDRs = append(p.AllowCIDRs, c)
			} else {
				p.AllowDomains = append(p.AllowDomains, strings.ToLower(e))
			}
		}
	}
	for _, e := range deny {
		if c, ok := prefix(e); ok && (e != allTraffic || p.Mode != driver.NetworkAllowList) {
			p.DenyCIDRs = append(p.DenyCIDRs, c)
		}
	}
	for _, l := range []*[]string{&p.AllowDomains, &p.AllowCIDRs, &p.DenyCIDRs} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
	return p
}

// prefix returns e as a canonical CIDR when it is an IP or CIDR.
func prefix(e string) (string, bool) {
	if p, err := netip.ParsePrefix(e); err == nil {
		return p.Masked().String(), true
	}
	if a, err := netip.ParseAddr(e); err == nil {
		return netip.PrefixFrom(a, a.BitLen()).String(), true
	}
	return "", false
}

// SetNetwork replaces the sandbox's egress rules with PUT
// /sandboxes/{id}/network (E2B's updateNetwork).
func (r *Runtime) SetNetwork(ctx context.Context, id string, p *driver.NetworkPolicy) error {
	const op = "set-network"
	internet, allowOut, denyOut := egress(p, false)
	body := api.SandboxNetworkUpdateConfig{AllowInternetAccess: &internet, AllowOut: allowOut, DenyOut: denyOut}
	status, data, _, err := r.call(ctx, op, true, func(ctx context.Context) (*http.Response, error) {
		return r.api.PutSandboxNetwork(ctx, id, body)
	})
	if err != nil {
		return r.scrub(err)
	}
	if status != http.StatusNoContent && status != http.StatusOK {
		return r.scrub(apiErr(op, status, data))
	}
	return nil
}
