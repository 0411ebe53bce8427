package e2b

import (
	"context"
	"fmt"
	"maps"
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
	// network.rules: per-domain transforms that set headers on the
	// sandbox's egress HTTP(S) requests at E2B's edge.
	BrokeredSecrets: true,
	Note:            "E2B's denyOut takes no domains, and its allowOut entries win over denyOut entries",
}

// rulesOf maps brokered secrets to E2B's network.rules: for each host, a
// rule whose transform sets the secret's header to its formatted value.
// E2B replaces a header the sandbox sent under that name; unlike the
// local egress proxy, it does not replace the placeholder inside other
// headers. nil when there are none.
func rulesOf(secrets []driver.BrokeredSecret) *api.SandboxNetworkRules {
	if len(secrets) == 0 {
		return nil
	}
	rules := api.SandboxNetworkRules{}
	for _, s := range secrets {
		h := map[string]string{s.Header: fmt.Sprintf(s.Format, s.Value)}
		for _, host := range s.Hosts {
			rules[host] = append(rules[host], api.SandboxNetworkRule{Transform: &api.SandboxNetworkTransform{Headers: &h}})
		}
	}
	return &rules
}

// secretsOf reports the brokered headers E2B holds, one entry per header
// with the hosts it is set for, and never the values E2B sends back.
func secretsOf(n *api.SandboxNetworkConfig) []driver.BrokeredSecret {
	if n == nil || n.Rules == nil {
		return nil
	}
	hosts := map[string][]string{}
	for host, rules := range *n.Rules {
		for _, rule := range rules {
			if rule.Transform == nil || rule.Transform.Headers == nil {
				continue
			}
			for h := range *rule.Transform.Headers {
				h = http.CanonicalHeaderKey(h)
				if !slices.Contains(hosts[h], strings.ToLower(host)) {
					hosts[h] = append(hosts[h], strings.ToLower(host))
				}
			}
		}
	}
	var out []driver.BrokeredSecret
	for _, h := range slices.Sorted(maps.Keys(hosts)) {
		slices.Sort(hosts[h])
		out = append(out, driver.BrokeredSecret{Header: h, Hosts: hosts[h]})
	}
	return out
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
// /sandboxes/{id}/network (E2B's updateNetwork). That call clears every
// field it is not sent, the header rules of brokered secrets included, so
// the rules in force are read first (GET /sandboxes/{id}) and sent again.
func (r *Runtime) SetNetwork(ctx context.Context, id string, p *driver.NetworkPolicy) error {
	const op = "set-network"
	d, err := r.detail(ctx, id)
	if err != nil {
		return err
	}
	internet, allowOut, denyOut := egress(p, false)
	body := api.SandboxNetworkUpdateConfig{AllowInternetAccess: &internet, AllowOut: allowOut, DenyOut: denyOut}
	if d.Network != nil && d.Network.Rules != nil && len(*d.Network.Rules) > 0 {
		body.Rules = d.Network.Rules
	}
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

// reportedSecrets is what Create reports of the secrets it sent: hosts,
// header and placeholder, never the value.
func reportedSecrets(secrets []driver.BrokeredSecret) []driver.BrokeredSecret {
	var out []driver.BrokeredSecret
	for _, s := range secrets {
		out = append(out, driver.BrokeredSecret{Hosts: slices.Clone(s.Hosts), Header: s.Header, Placeholder: s.Placeholder})
	}
	return out
}
