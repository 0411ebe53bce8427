package egress

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/idna"

	"github.com/sandboxkit/sandbox/driver"
)

// policy is a NetworkPolicy compiled for matching.
type policy struct {
	mode       driver.NetworkMode
	allowExact map[string]bool
	allowWild  []string // ".example.com" for "*.example.com"
	denyExact  map[string]bool
	denyWild   []string
	allowCIDR  []netip.Prefix
	denyCIDR   []netip.Prefix
	// own reports whether an address is the proxy's host's own; nil
	// knows none.
	own func(netip.Addr) bool
}

// compilePolicy checks p's entries and compiles them; nil is deny-all.
func compilePolicy(p *driver.NetworkPolicy) (*policy, error) {
	if p == nil {
		return &policy{mode: driver.NetworkDenyAll}, nil
	}
	switch p.Mode {
	case driver.NetworkAllowAll, driver.NetworkDenyAll, driver.NetworkAllowList:
	default:
		return nil, fmt.Errorf("egress: network mode %q is not one of %s, %s, %s", p.Mode, driver.NetworkAllowAll, driver.NetworkDenyAll, driver.NetworkAllowList)
	}
	c := &policy{mode: p.Mode, allowExact: map[string]bool{}, denyExact: map[string]bool{}}
	var err error
	if c.allowWild, err = compileDomains("allow", p.AllowDomains, c.allowExact); err != nil {
		return nil, err
	}
	if c.denyWild, err = compileDomains("deny", p.DenyDomains, c.denyExact); err != nil {
		return nil, err
	}
	if c.allowCIDR, err = compileCIDRs("allow", p.AllowCIDRs); err != nil {
		return nil, err
	}
	if c.denyCIDR, err = compileCIDRs("deny", p.DenyCIDRs); err != nil {
		return nil, err
	}
	return c, nil
}

// compileDomains adds the exact names of list to exact and returns the
// wildcard suffixes.
func compileDomains(what string, list []string, exact map[string]bool) ([]string, error) {
	var wild []string
	for _, d := range list {
		name, isWild := strings.CutPrefix(d, "*.")
		n, err := normalizeName(name)
		if err != nil {
			return nil, fmt.Errorf("egress: %s domain %q: %w", what, d, err)
		}
		if isWild {
			wild = append(wild, "."+n)
		} else {
			exact[n] = true
		}
	}
	return wild, nil
}

func compileCIDRs(what string, list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("egress: %s CIDR %q is not a prefix: %w", what, s, err)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		p = p.Masked()
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		out = append(out, p)
	}
	return out, nil
}

var nameProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.StrictDomainName(false))

// normalizeName returns the lower-case ASCII form of a host name without
// its trailing dot, or an error saying why it is not a host name.
func normalizeName(h string) (string, error) {
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return "", fmt.Errorf("empty host name")
	}
	a, err := nameProfile.ToASCII(h)
	if err != nil {
		return "", fmt.Errorf("not a host name: %w", err)
	}
	a = strings.ToLower(a)
	if len(a) > 253 {
		return "", fmt.Errorf("longer than 253 bytes")
	}
	labels := strings.Split(a, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", fmt.Errorf("label %q must be 1-63 bytes", l)
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return "", fmt.Errorf("label %q holds %q", l, r)
			}
		}
	}
	// Resolvers read a name whose last label is a number ("127.1",
	// "0x7f000001") as an IPv4 address: such a name matches no policy
	// domain and is no DNS name.
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x") && strings.Trim(last[2:], "0123456789abcdef") == "" {
		return "", fmt.Errorf("its last label %q is a number, which clients read as an IPv4 address", last)
	}
	return a, nil
}

func matchDomain(name string, exact map[string]bool, wild []string) bool {
	if exact[name] {
		return true
	}
	for _, w := range wild {
		if len(name) > len(w) && strings.HasSuffix(name, w) {
			return true
		}
	}
	return false
}

// refusal is why the proxy does not relay a request: the status the
// client gets, the SOCKS reply code, and a one-line message that names
// the host and the reason (never a secret).
type refusal struct {
	status int
	socks  byte
	msg    string
}

func (r *refusal) Error() string { return r.msg }

// SOCKS5 reply codes (RFC 1928 §6).
const (
	socksOK             = 0x00
	socksFailure        = 0x01
	socksNotAllowed     = 0x02
	socksNetUnreachable = 0x03
	socksHostUnreach    = 0x04
	socksConnRefused    = 0x05
	socksCmdUnsupported = 0x07
	socksAddrUnsupport  = 0x08
)

func forbidden(format string, args ...any) *refusal {
	return &refusal{status: http.StatusForbidden, socks: socksNotAllowed, msg: "egress: " + fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *refusal {
	return &refusal{status: http.StatusBadRequest, socks: socksFailure, msg: "egress: " + fmt.Sprintf(format, args...)}
}

// checkName applies the domain rules to a normalised name: the deny-list
// first (deny wins), then, in allow-list mode, the allow-list.
func (c *policy) checkName(name string) *refusal {
	switch {
	case c.mode == driver.NetworkDenyAll:
		return forbidden("%s: the network policy denies all egress", name)
	case matchDomain(name, c.denyExact, c.denyWild):
		return forbidden("%s is in the deny-list", name)
	case c.mode == driver.NetworkAllowList && !matchDomain(name, c.allowExact, c.allowWild):
		return forbidden("%s is not in the allow-list", name)
	}
	return nil
}

// checkLiteral applies the CIDR rules to an IP address the client named
// itself: in allow-list mode only an AllowCIDR lets it through.
func (c *policy) checkLiteral(a netip.Addr) *refusal {
	switch {
	case c.mode == driver.NetworkDenyAll:
		return forbidden("%s: the network policy denies all egress", a)
	case c.mode == driver.NetworkAllowList && !c.covered(c.allowCIDR, a):
		return forbidden("%s is an IP address no allowed CIDR covers", a)
	}
	return c.checkAddr(a.String(), a)
}

// covered reports whether a prefix of list covers a or the IPv4 address
// a embeds.
func (c *policy) covered(list []netip.Prefix, a netip.Addr) bool {
	for _, p := range list {
		if p.Contains(a) {
			return true
		}
		if v4, ok := embeddedV4(a); ok && p.Contains(v4) {
			return true
		}
	}
	return false
}

// checkAddr checks one address the proxy would connect to for host: a
// DenyCIDR refuses it, and so does a special-purpose address (loopback,
// private, link-local, ..., or the proxy's host's own) no AllowCIDR
// names (see admits).
func (c *policy) checkAddr(host string, a netip.Addr) *refusal {
	a = a.Unmap()
	resolves := host + " resolves to " + a.String() + ","
	if host == a.String() {
		resolves = host + " is"
	}
	for _, p := range c.denyCIDR {
		v4, ok := embeddedV4(a)
		if p.Contains(a) || ok && p.Contains(v4) {
			return forbidden("%s in the deny-list (%s)", resolves, p)
		}
	}
	kind := specialKind(a)
	own := c.own != nil && c.own(a)
	if own && kind == "" {
		kind = "an address of the proxy's host"
	}
	if kind == "" || c.admits(a, own) {
		return nil
	}
	return forbidden("%s %s the policy does not allow", resolves, kind)
}

// admits reports whether an AllowCIDR names the special-purpose address
// a: one that covers a and lies inside a special range a is in (so
// 127.0.0.1/32 or 127.0.0.0/8 names loopback, 0.0.0.0/0 names nothing
// special). For an address of the proxy's host, the range is the
// address itself, unless it is also in another special range (a private
// or loopback address), whose rule then applies. The IPv4 address an
// IPv6 address embeds (NAT64, 6to4, mapped) is judged the same way.
func (c *policy) admits(a netip.Addr, own bool) bool {
	for _, p := range c.allowCIDR {
		if admitsOne(p, a, own) {
			return true
		}
		if v4, ok := embeddedV4(a); ok && admitsOne(p, v4, own) {
			return true
		}
	}
	return false
}

func admitsOne(p netip.Prefix, a netip.Addr, own bool) bool {
	if !p.Contains(a) {
		return false
	}
	if own && p.Bits() == a.BitLen() {
		return true
	}
	for _, s := range specials {
		if s.p.Contains(a) && s.p.Bits() <= p.Bits() && s.p.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

type special struct {
	p    netip.Prefix
	kind string
}

var specials = func() []special {
	var out []special
	for _, s := range [][2]string{
		{"0.0.0.0/8", "an unspecified (this-network) address"},
		{"10.0.0.0/8", "a private address"},
		{"100.64.0.0/10", "a shared (CGNAT) address"},
		{"127.0.0.0/8", "a loopback address"},
		{"169.254.0.0/16", "a link-local address (the range of the cloud metadata service)"},
		{"172.16.0.0/12", "a private address"},
		{"192.0.0.0/24", "an IETF protocol address"},
		{"192.168.0.0/16", "a private address"},
		{"198.18.0.0/15", "a benchmarking (private) address"},
		{"224.0.0.0/4", "a multicast address"},
		{"255.255.255.255/32", "the broadcast address"},
		{"240.0.0.0/4", "a reserved address"},
		{"::/128", "an unspecified address"},
		{"::1/128", "a loopback address"},
		{"::/96", "an IPv4-compatible (deprecated) address"},
		{"64:ff9b:1::/48", "a local-use NAT64 address"},
		{"100::/64", "a discard-only address"},
		{"fc00::/7", "a private (unique local) address"},
		{"fe80::/10", "a link-local address"},
		{"fec0::/10", "a site-local address"},
		{"ff00::/8", "a multicast address"},
	} {
		out = append(out, special{netip.MustParsePrefix(s[0]), s[1]})
	}
	return out
}()

var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4  = netip.MustParsePrefix("2002::/16")
	mapped4 = netip.MustParsePrefix("::ffff:0:0/96")
)

// embeddedV4 returns the IPv4 address an IPv6 address reaches through a
// translation: IPv4-mapped, NAT64 (64:ff9b::/96) or 6to4 (2002::/16).
func embeddedV4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case mapped4.Contains(a), nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixTo4.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// specialKind names the kind of special-purpose address a is (or the
// IPv4 address it embeds), or "" for an ordinary public address.
func specialKind(a netip.Addr) string {
	a = a.WithZone("")
	for _, s := range specials {
		if s.p.Contains(a) {
			return s.kind
		}
	}
	if v4, ok := embeddedV4(a); ok {
		if k := specialKind(v4); k != "" {
			via := "a NAT64"
			if sixTo4.Contains(a) {
				via = "a 6to4"
			}
			return via + " form of " + v4.String() + ", " + k
		}
	}
	return ""
}

// parsePort checks a port from a request.
func parsePort(s string) (string, *refusal) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != s {
		return "", badRequest("port %q is not a number from 1 to 65535", printable(s))
	}
	return s, nil
}

// printable cuts s to 100 bytes and quotes control characters, for
// echoing client input in a message.
func printable(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	if strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) < 0 {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// hostMatches reports whether name matches one of the brokered-secret
// host patterns (exact names or "*." wildcards).
func hostMatches(name string, hosts []string) bool {
	return slices.ContainsFunc(hosts, func(h string) bool {
		if w, ok := strings.CutPrefix(h, "*"); ok {
			return len(name) > len(w) && strings.HasSuffix(name, w)
		}
		return h == name
	})
}
