package driver

import "context"

// NetworkMode is the base rule of a NetworkPolicy.
type NetworkMode string

// The network modes.
const (
	// NetworkAllowAll lets the sandbox reach any destination, except those
	// in NetworkPolicy.Deny.
	NetworkAllowAll NetworkMode = "allow-all"
	// NetworkDenyAll cuts the sandbox off from the network.
	NetworkDenyAll NetworkMode = "deny-all"
	// NetworkAllowList lets the sandbox reach only the destinations in
	// NetworkPolicy.Allow, minus those in NetworkPolicy.Deny.
	NetworkAllowList NetworkMode = "allow-list"
)

// NetworkPolicy is a sandbox's egress policy as the portable layer hands
// it to a driver: validated and normalised. Domains are lower-case ASCII
// (IDNA A-labels) without a trailing dot, a wildcard only as a leading
// "*." label; CIDRs are canonical prefixes (an IP address becomes a /32 or
// /128, an IPv4-mapped IPv6 prefix its IPv4 prefix). Lists are sorted and free of duplicates; an allow entry a deny
// entry covers has been removed (deny wins), and in NetworkAllowList mode
// a deny entry that overlaps no allow entry has been dropped (it denies
// nothing more), so every deny entry left is one the provider must
// enforce.
type NetworkPolicy struct {
	Mode         NetworkMode
	AllowDomains []string
	AllowCIDRs   []string
	DenyDomains  []string
	DenyCIDRs    []string
}

// Clone returns a deep copy of p (nil for nil).
func (p *NetworkPolicy) Clone() *NetworkPolicy {
	if p == nil {
		return nil
	}
	c := *p
	c.AllowDomains = append([]string(nil), p.AllowDomains...)
	c.AllowCIDRs = append([]string(nil), p.AllowCIDRs...)
	c.DenyDomains = append([]string(nil), p.DenyDomains...)
	c.DenyCIDRs = append([]string(nil), p.DenyCIDRs...)
	return &c
}

// NetworkSupport declares which network policies a provider can put in
// force at Create (and, with NetworkSetter, on a running sandbox). The
// portable layer refuses, with FailedPrecondition naming what is missing,
// a policy that needs something not declared, so that no sandbox is ever
// created more open than asked.
type NetworkSupport struct {
	// AllowAll and DenyAll are the two base modes.
	AllowAll bool
	DenyAll  bool
	// AllowDomains: exact domain names in an allow-list.
	AllowDomains bool
	// AllowWildcards: "*.example.com" entries in an allow-list.
	AllowWildcards bool
	// AllowCIDRs: IP addresses and CIDR prefixes in an allow-list.
	AllowCIDRs bool
	// DenyDomains and DenyCIDRs: deny entries of each kind on an
	// allow-all policy (a block-list).
	DenyDomains bool
	DenyCIDRs   bool
	// DenyOverAllow: deny entries in an allow-list policy, evaluated before
	// the allow entries so that the deny wins (a provider whose allow
	// entries take precedence, as E2B's do, cannot declare it).
	DenyOverAllow bool
	// IPv6CIDRs: IPv6 addresses and prefixes among the CIDR entries (an
	// IPv4-mapped address such as ::ffff:192.0.2.1 counts as IPv4). A
	// provider whose lists take IPv4 only, as Daytona's networkAllowList,
	// leaves it false, and such a policy is refused before any request.
	IPv6CIDRs bool
	// MaxCIDRs, when positive, is the most CIDR entries (allow and deny
	// together) the provider takes in one policy; Daytona's
	// networkAllowList takes at most 10. Zero means no limit.
	MaxCIDRs int
	// NotEnforced is true when the provider records the policy and reports
	// it back but does not enforce it (the memory provider: it has no
	// network to enforce anything on). The kinds above then say what it
	// accepts, not what it enforces.
	NotEnforced bool
	// BrokeredSecrets: the provider can broker secrets (see BrokeredSecret)
	// for hosts its policy lets through, by an enforcement point outside
	// the sandbox. Without it, CreateRequest.Secrets is refused before
	// any request.
	BrokeredSecrets bool
	// Note, when set, is added to the error that refuses a policy the
	// provider cannot enforce: what it would take (for example "domain
	// allow-lists need the egress proxy, not available on this provider
	// yet").
	Note string
}

// NetworkSetter is implemented by providers that can change the network
// policy of a running sandbox (Sandbox.SetNetwork). The policy replaces
// the current one whole; it has been validated and checked against
// Capabilities.NetworkPolicy. A sandbox that does not exist is NotFound.
type NetworkSetter interface {
	SetNetwork(ctx context.Context, id string, p *NetworkPolicy) error
}

// BrokeredSecret is a secret the sandbox may use but never holds: the
// enforcement point outside the sandbox (an egress proxy, or the
// provider's edge) puts Value on requests to Hosts, and the sandbox sees
// only Placeholder. The portable layer has validated it: Hosts are
// normalised domains as in NetworkPolicy (exact or "*." wildcards), each
// one the policy lets through; Header is a canonical HTTP header name;
// Format holds exactly one "%s"; Placeholder is unique per secret and
// per sandbox, and, when the caller named an env variable, already set in
// CreateRequest.Env under that name.
type BrokeredSecret struct {
	// Value is the real secret. It must never reach the sandbox (files,
	// env, process list, output) nor any error or log.
	Value string
	// Hosts are the destinations that get the value.
	Hosts []string
	// Header is the request header that carries it, such as
	// "Authorization".
	Header string
	// Format builds the header's value from Value: "Bearer %s" sends
	// "Bearer <value>". It is "%s" when the caller gave none.
	Format string
	// Placeholder stands for the secret inside the sandbox. On a request
	// to one of Hosts the enforcement point sets Header (replacing what the
	// sandbox sent) and replaces Placeholder in every other header value
	// with Value; a request to any other host is forwarded unchanged, so
	// the placeholder reaches it and the value never does.
	Placeholder string
}
