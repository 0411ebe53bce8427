package daytona

import (
	"context"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/api"
)

// networkSupport is what Daytona enforces: networkBlockAll (deny-all),
// networkAllowList (IPv4 CIDRs) and domainAllowList (exact domains). It
// has no deny-list, and wildcards in domainAllowList are not documented
// for the API this adapter speaks, so they are refused rather than
// assumed.
// BrokeredSecrets stays false: no Daytona create or network-settings
// field carries a secret or a header for its edge to inject.
var networkSupport = driver.NetworkSupport{
	AllowAll: true, DenyAll: true, AllowDomains: true, AllowCIDRs: true,
	MaxCIDRs: maxAllowCIDRs,
	Note:     "Daytona has networkBlockAll, networkAllowList (at most 10 IPv4 CIDRs) and domainAllowList (exact domains): no deny-list, no wildcards, no IPv6",
}

// maxAllowCIDRs is the most entries Daytona's networkAllowList takes (its
// API answers 400 to more).
const maxAllowCIDRs = 10

// networkSettings maps a policy to Daytona's networkBlockAll,
// networkAllowList and domainAllowList. The SDKs always send
// networkBlockAll; so does this.
func networkSettings(p *driver.NetworkPolicy, noNetwork bool) api.NetworkSettings {
	block := noNetwork || p != nil && p.Mode == driver.NetworkDenyAll
	ns := api.NetworkSettings{NetworkBlockAll: &block}
	if p != nil && p.Mode == driver.NetworkAllowList {
		cidrs, domains := strings.Join(p.AllowCIDRs, ","), strings.Join(p.AllowDomains, ",")
		ns.NetworkAllowList, ns.DomainAllowList = &cidrs, &domains
	}
	return ns
}

// policyOf reads the policy in force back from a Sandbox DTO.
func policyOf(sb *api.Sandbox) *driver.NetworkPolicy {
	if sb.NetworkBlockAll != nil && *sb.NetworkBlockAll {
		return &driver.NetworkPolicy{Mode: driver.NetworkDenyAll}
	}
	p := &driver.NetworkPolicy{Mode: driver.NetworkAllowAll}
	for _, e := range split(str(sb.NetworkAllowList)) {
		if c, err := netip.ParsePrefix(e); err == nil {
			p.AllowCIDRs = append(p.AllowCIDRs, c.Masked().String())
		} else if a, err := netip.ParseAddr(e); err == nil {
			p.AllowCIDRs = append(p.AllowCIDRs, netip.PrefixFrom(a, a.BitLen()).String())
		}
	}
	for _, e := range split(str(sb.DomainAllowList)) {
		p.AllowDomains = append(p.AllowDomains, strings.ToLower(e))
	}
	if len(p.AllowCIDRs)+len(p.AllowDomains) > 0 {
		p.Mode = driver.NetworkAllowList
	}
	slices.Sort(p.AllowCIDRs)
	slices.Sort(p.AllowDomains)
	return p
}

func split(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// SetNetwork changes the sandbox's network with POST
// /sandbox/{id}/network-settings, sending all three fields so that the
// new policy replaces the old one whole.
func (r *Runtime) SetNetwork(ctx context.Context, id string, p *driver.NetworkPolicy) error {
	const op = "set-network"
	ns := networkSettings(p, false)
	empty := ""
	if ns.NetworkAllowList == nil {
		ns.NetworkAllowList, ns.DomainAllowList = &empty, &empty
	}
	resp, err := r.call(ctx, op, true, func(ctx context.Context) (*http.Response, error) {
		return r.api.UpdateNetworkSettings(ctx, id, ns)
	}, http.StatusOK, http.StatusCreated)
	if err != nil {
		return r.clean(err)
	}
	resp.Body.Close()
	return nil
}
