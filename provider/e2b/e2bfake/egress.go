package e2bfake

import (
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/api"
)

// backendNet is the network a fresh backend sandbox is created with.
type backendNet struct {
	noNetwork bool
	policy    *driver.NetworkPolicy
	secrets   []driver.BrokeredSecret
}

// allTraffic is the denyOut entry that turns allowOut into an allow-list.
const allTraffic = "0.0.0.0/0"

// backendNetwork maps a create's egress rules to the backend's policy and
// brokered secrets, when the backend enforces them (see the package doc
// for how the semantics differ from E2B's); the zero value otherwise.
func (s *Server) backendNetwork(internet *bool, allowOut, denyOut []string, rules api.SandboxNetworkRules) backendNet {
	ns := s.backend.Capabilities().NetworkPolicy
	if !ns.AllowDomains || !ns.AllowCIDRs || !ns.DenyCIDRs || ns.NotEnforced {
		return backendNet{}
	}
	var n backendNet
	switch {
	case internet != nil && !*internet:
		n.noNetwork = true
		n.policy = &driver.NetworkPolicy{Mode: driver.NetworkDenyAll}
	case len(allowOut) > 0 && slices.Contains(denyOut, allTraffic):
		p := &driver.NetworkPolicy{Mode: driver.NetworkAllowList}
		for _, e := range allowOut {
			if c, ok := cidrOf(e); ok {
				p.AllowCIDRs = append(p.AllowCIDRs, c)
			} else {
				p.AllowDomains = append(p.AllowDomains, strings.ToLower(e))
			}
		}
		for _, e := range denyOut {
			if c, ok := cidrOf(e); ok && e != allTraffic {
				p.DenyCIDRs = append(p.DenyCIDRs, c)
			}
		}
		n.policy = p
	case len(denyOut) > 0:
		p := &driver.NetworkPolicy{Mode: driver.NetworkAllowAll}
		for _, e := range denyOut {
			if c, ok := cidrOf(e); ok {
				p.DenyCIDRs = append(p.DenyCIDRs, c)
			}
		}
		n.policy = p
	}
	if len(rules) > 0 && ns.BrokeredSecrets {
		for _, host := range slices.Sorted(maps.Keys(rules)) {
			for _, r := range rules[host] {
				if r.Transform == nil || r.Transform.Headers == nil {
					continue
				}
				for _, name := range slices.Sorted(maps.Keys(*r.Transform.Headers)) {
					v := (*r.Transform.Headers)[name]
					if v == "" {
						continue // nothing to broker: the proxy needs a value
					}
					// E2B only sets the header: a placeholder that never
					// occurs, so no other header is touched.
					n.secrets = append(n.secrets, driver.BrokeredSecret{Value: v, Hosts: []string{strings.ToLower(host)},
						Header: name, Format: "%s", Placeholder: "E2BFAKE_NO_PLACEHOLDER_" + randHex(16)})
				}
			}
		}
	}
	return n
}

// cidrOf returns e, an IP or CIDR, as a canonical CIDR.
func cidrOf(e string) (string, bool) {
	if p, err := netip.ParsePrefix(e); err == nil {
		return p.Masked().String(), true
	}
	if a, err := netip.ParseAddr(e); err == nil {
		return netip.PrefixFrom(a, a.BitLen()).String(), true
	}
	return "", false
}
