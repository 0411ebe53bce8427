package sandbox

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/idna"

	"github.com/sandboxkit/sandbox/driver"
)

// NetworkMode is the base rule of a NetworkPolicy.
type NetworkMode = driver.NetworkMode

// The network modes.
const (
	// NetworkAllowAll lets the sandbox reach any destination except those
	// in NetworkPolicy.Deny.
	NetworkAllowAll = driver.NetworkAllowAll
	// NetworkDenyAll cuts the sandbox off from the network (what
	// CreateOptions.NoNetwork asks for).
	NetworkDenyAll = driver.NetworkDenyAll
	// NetworkAllowList lets the sandbox reach only the destinations in
	// NetworkPolicy.Allow, minus those in NetworkPolicy.Deny.
	NetworkAllowList = driver.NetworkAllowList
)

// NetworkPolicy says where a sandbox may connect (egress). Entries are
// domain names ("pypi.org"), wildcards that match every subdomain but not
// the name itself ("*.pythonhosted.org"), IP addresses and CIDR prefixes
// ("10.0.0.0/8", "2001:db8::/32"). Names are matched case-insensitively;
// internationalised names may be given in Unicode or punycode. A name is
// a host name (letters, digits, hyphens; no underscore), and one whose
// last label is a number, as "127.1" or "0x7f000001", is refused: clients
// read it as an IPv4 address, which must be written as a CIDR. An
// IPv4-mapped IPv6 address is the IPv4 address it reaches.
//
// A Deny entry wins over an Allow entry: an allow entry a deny entry
// covers is removed, and a provider must be able to put a remaining deny
// entry first or the policy is refused. Ports cannot be expressed: no
// provider takes them per entry.
//
// A policy a provider cannot enforce is refused at Create with
// FailedPrecondition naming what is missing (Capabilities.NetworkPolicy
// says what each provider can do): a sandbox is never created more open
// than asked.
type NetworkPolicy struct {
	// Mode is the base rule. Empty means NetworkAllowList when Allow has
	// entries and NetworkAllowAll otherwise.
	Mode NetworkMode
	// Allow lists the destinations an allow-list policy lets through; it
	// must be empty in the other modes.
	Allow []string
	// Deny lists destinations refused in any mode; it must be empty with
	// NetworkDenyAll.
	Deny []string
}

// NetworkSupport declares which network policies a provider can put in
// force; see Capabilities.NetworkPolicy.
type NetworkSupport = driver.NetworkSupport

// netEntry is one validated policy entry: a domain or a prefix.
type netEntry struct {
	raw    string
	domain string       // normalised name, "*.x" for a wildcard
	prefix netip.Prefix // for an address or CIDR
}

func (e netEntry) isDomain() bool { return e.domain != "" }

func (e netEntry) String() string {
	if e.isDomain() {
		return e.domain
	}
	return e.prefix.String()
}

// covers reports whether every destination e matches is matched by d.
func (d netEntry) covers(e netEntry) bool {
	if d.isDomain() != e.isDomain() {
		return false
	}
	if !d.isDomain() {
		return d.prefix.Addr().Is4() == e.prefix.Addr().Is4() && d.prefix.Bits() <= e.prefix.Bits() && d.prefix.Contains(e.prefix.Addr())
	}
	if d.domain == e.domain {
		return true
	}
	suffix, ok := strings.CutPrefix(d.domain, "*")
	// "*.example.com" covers "a.example.com" and "*.a.example.com", not
	// "example.com".
	return ok && strings.HasSuffix(e.domain, suffix)
}

var domainProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.StrictDomainName(false))

// parseNetEntry validates and normalises one policy entry.
func parseNetEntry(s string) (netEntry, error) {
	e := netEntry{raw: s}
	switch {
	case s == "":
		return e, fmt.Errorf("empty entry")
	case s == "*" || s == "*.":
		return e, fmt.Errorf("%q matches everything: use NetworkAllowAll", s)
	case hasControl(s) || strings.ContainsAny(s, " \t"):
		return e, fmt.Errorf("%q holds spaces or control characters", printable(s))
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return e, fmt.Errorf("%q is not a CIDR prefix: %v", s, err)
		}
		e.prefix = unmap(p.Masked())
		return e, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return e, fmt.Errorf("%q has a zone, which a policy cannot name", s)
		}
		e.prefix = unmap(netip.PrefixFrom(a, a.BitLen()))
		return e, nil
	}
	name, wild := strings.CutPrefix(s, "*.")
	if strings.Contains(name, "*") {
		return e, fmt.Errorf("%q: a wildcard is allowed only as the whole first label (*.example.com)", s)
	}
	name = strings.TrimSuffix(name, ".")
	ascii, err := domainProfile.ToASCII(name)
	if err != nil {
		return e, fmt.Errorf("%q is not a domain name: %v", s, err)
	}
	ascii = strings.ToLower(ascii)
	if len(ascii) > 253 {
		return e, fmt.Errorf("%q is longer than 253 bytes", s)
	}
	labels := strings.Split(ascii, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return e, fmt.Errorf("%q is not a domain name: label %q must be 1-63 letters, digits or hyphens, not starting or ending with a hyphen", s, l)
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return e, fmt.Errorf("%q is not a domain name: label %q holds %q (a host name takes letters, digits and hyphens only)", s, l, r)
			}
		}
	}
	// Resolvers and URL parsers (inet_aton, the WHATWG URL parser) read a
	// name whose last label is a number, in decimal, 0x-hex or 0-octal,
	// as an IPv4 address: "0x7f000001" and "127.1" are 127.0.0.1. Such a
	// name would match no DNS name yet reach an address, so it is refused.
	if last := labels[len(labels)-1]; isNumericLabel(last) {
		if a, ok := inetAton(ascii); ok && !wild {
			return e, fmt.Errorf("%q is an IPv4 address written as a name (%s): write it as %s/32", s, a, a)
		}
		return e, fmt.Errorf("%q is neither an IP address nor a domain name (its last label %q is a number, which clients read as an IPv4 address): write addresses in CIDR form, such as 192.0.2.0/24", s, last)
	}
	if wild {
		ascii = "*." + ascii
	}
	e.domain = ascii
	return e, nil
}

// unmap turns an IPv4-mapped IPv6 prefix (::ffff:192.0.2.1/128) into the
// IPv4 prefix it reaches, so that it is compared with, and sent to the
// provider as, the IPv4 entries it means.
func unmap(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// isNumericLabel reports whether l is a number in a base inet_aton reads:
// decimal, octal with a leading 0, or hexadecimal after 0x.
func isNumericLabel(l string) bool {
	if h, ok := strings.CutPrefix(l, "0x"); ok {
		return strings.Trim(h, "0123456789abcdef") == ""
	}
	return strings.Trim(l, "0123456789") == ""
}

// inetAton parses s as inet_aton does: one to four numbers, each in
// decimal, 0-octal or 0x-hex, the last filling the remaining bytes.
func inetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var n []uint64
	for _, p := range parts {
		base, digits := 10, p
		if h, ok := strings.CutPrefix(p, "0x"); ok {
			base, digits = 16, h
		} else if len(p) > 1 && p[0] == '0' {
			base, digits = 8, p[1:]
		}
		v := uint64(0)
		if digits != "" {
			var err error
			if v, err = strconv.ParseUint(digits, base, 32); err != nil {
				return netip.Addr{}, false
			}
		} else if base != 16 {
			return netip.Addr{}, false
		}
		n = append(n, v)
	}
	var ip uint64
	for i, v := range n[:len(n)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		ip |= v << (24 - 8*i)
	}
	last := n[len(n)-1]
	if last >= 1<<(8*(5-len(n))) {
		return netip.Addr{}, false
	}
	ip |= last
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}), true
}

// normalizeNetwork validates p, resolves the NoNetwork shorthand and
// returns the policy to hand to the driver (nil when neither is set).
func normalizeNetwork(op, provider, id string, p *NetworkPolicy, noNetwork bool) (*driver.NetworkPolicy, error) {
	if p == nil {
		if noNetwork {
			return &driver.NetworkPolicy{Mode: NetworkDenyAll}, nil
		}
		return nil, nil
	}
	mode := p.Mode
	if mode == "" {
		mode = NetworkAllowAll
		if len(p.Allow) > 0 {
			mode = NetworkAllowList
		}
	}
	switch mode {
	case NetworkAllowAll, NetworkDenyAll, NetworkAllowList:
	default:
		return nil, invalid(op, provider, id, "network mode", "%q (known: %s, %s, %s)", printable(string(mode)), NetworkAllowAll, NetworkDenyAll, NetworkAllowList)
	}
	if noNetwork && mode != NetworkDenyAll {
		return nil, invalid(op, provider, id, "network policy", "NoNetwork asks for %s but Network.Mode is %s", NetworkDenyAll, mode)
	}
	if mode == NetworkDenyAll && (len(p.Allow) > 0 || len(p.Deny) > 0) {
		return nil, invalid(op, provider, id, "network policy", "mode %s takes no Allow or Deny entries", mode)
	}
	if mode == NetworkAllowAll && len(p.Allow) > 0 {
		return nil, invalid(op, provider, id, "network policy", "Allow entries need mode %s, not %s", NetworkAllowList, mode)
	}
	parse := func(what string, list []string) ([]netEntry, error) {
		var out []netEntry
		for _, s := range list {
			e, err := parseNetEntry(s)
			if err != nil {
				return nil, invalid(op, provider, id, "network "+what+" entry", "%v", err)
			}
			if !slices.ContainsFunc(out, func(o netEntry) bool { return o.String() == e.String() }) {
				out = append(out, e)
			}
		}
		return out, nil
	}
	allow, err := parse("allow", p.Allow)
	if err != nil {
		return nil, err
	}
	deny, err := parse("deny", p.Deny)
	if err != nil {
		return nil, err
	}
	// Deny wins: an allow entry a deny entry covers is gone.
	allow = slices.DeleteFunc(allow, func(a netEntry) bool {
		return slices.ContainsFunc(deny, func(d netEntry) bool { return d.covers(a) })
	})
	if mode == NetworkAllowAll && denies(deny, "0.0.0.0/0") && denies(deny, "::/0") {
		// Every address of both families is denied: that is deny-all,
		// said plainly, as providers report it.
		return &driver.NetworkPolicy{Mode: NetworkDenyAll}, nil
	}
	if mode == NetworkAllowList {
		if len(allow) == 0 {
			// Nothing left to allow: that is deny-all, said plainly.
			return &driver.NetworkPolicy{Mode: NetworkDenyAll}, nil
		}
		hasDomain := slices.ContainsFunc(allow, netEntry.isDomain)
		hasCIDR := slices.ContainsFunc(allow, func(e netEntry) bool { return !e.isDomain() })
		// A deny entry outside every allow entry denies nothing more. A
		// name may resolve into an allowed prefix, and an allowed name
		// into a denied prefix, so across kinds the entry stays.
		deny = slices.DeleteFunc(deny, func(d netEntry) bool {
			if d.isDomain() && hasCIDR || !d.isDomain() && hasDomain {
				return false
			}
			return !slices.ContainsFunc(allow, func(a netEntry) bool { return a.covers(d) })
		})
	}
	out := &driver.NetworkPolicy{Mode: mode}
	for _, e := range allow {
		if e.isDomain() {
			out.AllowDomains = append(out.AllowDomains, e.domain)
		} else {
			out.AllowCIDRs = append(out.AllowCIDRs, e.prefix.String())
		}
	}
	for _, e := range deny {
		if e.isDomain() {
			out.DenyDomains = append(out.DenyDomains, e.domain)
		} else {
			out.DenyCIDRs = append(out.DenyCIDRs, e.prefix.String())
		}
	}
	for _, l := range []*[]string{&out.AllowDomains, &out.AllowCIDRs, &out.DenyDomains, &out.DenyCIDRs} {
		slices.Sort(*l)
	}
	return out, nil
}

// denies reports whether a deny entry covers the whole prefix cidr.
func denies(deny []netEntry, cidr string) bool {
	all := netEntry{prefix: netip.MustParsePrefix(cidr)}
	return slices.ContainsFunc(deny, func(d netEntry) bool { return d.covers(all) })
}

// networkMissing returns what p needs that s does not declare, or "".
func networkMissing(p *driver.NetworkPolicy, s NetworkSupport) string {
	if p == nil {
		return ""
	}
	var miss []string
	switch p.Mode {
	case NetworkAllowAll:
		if !s.AllowAll {
			miss = append(miss, "allow-all")
		}
		if len(p.DenyDomains) > 0 && !s.DenyDomains {
			miss = append(miss, "deny-lists of domains")
		}
		if len(p.DenyCIDRs) > 0 && !s.DenyCIDRs {
			miss = append(miss, "deny-lists of CIDRs")
		}
	case NetworkDenyAll:
		if !s.DenyAll {
			miss = append(miss, "deny-all")
		}
	case NetworkAllowList:
		exact := slices.ContainsFunc(p.AllowDomains, func(d string) bool { return !strings.HasPrefix(d, "*.") })
		wild := slices.ContainsFunc(p.AllowDomains, func(d string) bool { return strings.HasPrefix(d, "*.") })
		if exact && !s.AllowDomains {
			miss = append(miss, "domain allow-lists")
		}
		if wild && !s.AllowWildcards {
			miss = append(miss, "wildcard (*.domain) allow-lists")
		}
		if len(p.AllowCIDRs) > 0 && !s.AllowCIDRs {
			miss = append(miss, "CIDR allow-lists")
		}
		if len(p.DenyDomains)+len(p.DenyCIDRs) > 0 && !s.DenyOverAllow {
			miss = append(miss, "deny entries that win over allow entries ("+strings.Join(slices.Concat(p.DenyDomains, p.DenyCIDRs), ", ")+")")
		}
	}
	cidrs := slices.Concat(p.AllowCIDRs, p.DenyCIDRs)
	if !s.IPv6CIDRs {
		if v6 := slices.DeleteFunc(slices.Clone(cidrs), func(c string) bool { return !strings.Contains(c, ":") }); len(v6) > 0 {
			miss = append(miss, "IPv6 CIDRs ("+strings.Join(v6, ", ")+")")
		}
	}
	if s.MaxCIDRs > 0 && len(cidrs) > s.MaxCIDRs {
		miss = append(miss, fmt.Sprintf("%d CIDR entries (at most %d)", len(cidrs), s.MaxCIDRs))
	}
	return strings.Join(miss, ", ")
}

// checkNetworkSupport refuses, with FailedPrecondition, a policy the
// provider does not declare it can enforce; noNetwork says the policy came
// from CreateOptions.NoNetwork, so that the error names what the caller
// set.
func (c *Client) checkNetworkSupport(op, id string, p *driver.NetworkPolicy, noNetwork bool) error {
	miss := networkMissing(p, c.caps.NetworkPolicy)
	if miss == "" {
		return nil
	}
	what := "network policy"
	if noNetwork {
		what = "NoNetwork (a deny-all network policy)"
	}
	msg := fmt.Sprintf("%s needs %s, which provider %s cannot enforce", what, miss, c.rt.Name())
	if n := c.caps.NetworkPolicy.Note; n != "" {
		msg += " (" + n + ")"
	}
	return c.wrap(op, id, "", fmt.Errorf("sandbox: %s: %w", msg, ErrFailedPrecondition))
}

// networkPolicyOf converts what a driver reports.
func networkPolicyOf(p *driver.NetworkPolicy) *NetworkPolicy {
	if p == nil {
		return nil
	}
	return &NetworkPolicy{
		Mode:  p.Mode,
		Allow: slices.Concat(p.AllowDomains, p.AllowCIDRs),
		Deny:  slices.Concat(p.DenyDomains, p.DenyCIDRs),
	}
}

// SetNetwork replaces the sandbox's network policy while it runs. Only
// the owner may change it (see Owned): on any other handle it fails with
// FailedPrecondition, as Pause, Resume and SetTimeout do. The policy is
// validated as at Create and refused with FailedPrecondition where the
// provider cannot enforce it; providers that cannot change it at run time
// (Capabilities.NetworkUpdate false) return an error matching
// ErrUnimplemented. A policy that would no longer let through a host the
// sandbox's brokered secrets are for (as Info reports them) is refused
// with InvalidArgument naming the host. On success Info reports the new
// policy. CallTimeouts.Lease bounds it, as it does SetTimeout: a provider
// may start or restart its enforcement point (local starts a proxy).
func (s *Sandbox) SetNetwork(ctx context.Context, p NetworkPolicy) (err error) {
	const op = "set-network"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	name := s.c.rt.Name()
	np, err := normalizeNetwork(op, name, s.id, &p, false)
	if err != nil {
		return err
	}
	if !s.owned {
		return s.notOwned(op, "change the network policy of")
	}
	for _, b := range s.Info().BrokeredSecrets {
		for _, h := range b.Hosts {
			if e, err := parseNetEntry(h); err == nil && !letThrough(np, e) {
				return invalid(op, name, s.id, "network policy", "it does not let host %s through, which brokered secret %s is for: the secret would be stranded", h, b.Header)
			}
		}
	}
	ns, ok := s.c.rt.(driver.NetworkSetter)
	if !ok {
		return s.wrap(op, "", fmt.Errorf("sandbox: provider %s cannot change a running sandbox's network policy: %w", name, ErrUnimplemented))
	}
	if err := s.c.checkNetworkSupport(op, s.id, np, false); err != nil {
		return err
	}
	ctx, end := bound(ctx, op, s.c.calls.Lease)
	err = end(s.c.retry(ctx, op, true, nil, func() error { return ns.SetNetwork(ctx, s.id, np.Clone()) }))
	if err != nil {
		return s.wrap(op, "", err)
	}
	s.mu.Lock()
	s.info.Network = networkPolicyOf(np)
	s.mu.Unlock()
	return nil
}
