package local

import (
	"github.com/sandboxkit/sandbox/driver"
)

// netProxy is the network mode of a sandbox behind its egress proxy (see
// egressFile): its own network namespace with no route out, and a relay
// on its loopback to a proxy on the host that enforces the policy.
const netProxy = "proxy"

// netNote says what the lists would take where they are refused.
const netNote = "domain and CIDR allow-lists and deny-lists and brokered secrets need the egress proxy, which needs network namespaces (isolation L3 or higher)"

// netSupport is what the local provider can enforce: allow-all, deny-all
// where it can cut a sandbox off (L2 and up) and, with network namespaces
// (proxy, L3 and up), every list and brokered secrets through the egress
// proxy.
func netSupport(allowAll, denyAll, proxy bool) driver.NetworkSupport {
	// What is refused for want of a network stack is said first, in
	// either case: at L3 and up without pasta the lists work through the
	// proxy, but allow-all does not, and its refusal must name the
	// package that gives it.
	noAllowAll := ""
	if !allowAll {
		noAllowAll = "allow-all needs an isolated network (pasta, Debian package passt) or ?network=host; "
	}
	if proxy {
		return driver.NetworkSupport{
			AllowAll: allowAll, DenyAll: denyAll,
			AllowDomains: true, AllowWildcards: true, AllowCIDRs: true,
			DenyDomains: true, DenyCIDRs: true, DenyOverAllow: true, IPv6CIDRs: true,
			BrokeredSecrets: true,
			Note:            noAllowAll + "lists and brokered secrets are enforced by an HTTP/HTTPS/SOCKS5 egress proxy: other protocols have no route out",
		}
	}
	note := netNote
	if !denyAll {
		note = "deny-all needs isolation L2 or higher (a network namespace or seccomp); " + note
	}
	return driver.NetworkSupport{AllowAll: allowAll, DenyAll: denyAll, Note: noAllowAll + note}
}

// netPolicy is the policy in force in a sandbox with or without network.
func netPolicy(on bool) *driver.NetworkPolicy {
	if on {
		return &driver.NetworkPolicy{Mode: driver.NetworkAllowAll}
	}
	return &driver.NetworkPolicy{Mode: driver.NetworkDenyAll}
}

// needsProxy reports whether a sandbox with policy p and secrets needs the
// egress proxy: anything but deny-all and plain allow-all.
func needsProxy(p *driver.NetworkPolicy, secrets int) bool {
	if secrets > 0 {
		return true
	}
	if p == nil {
		return false
	}
	switch p.Mode {
	case driver.NetworkDenyAll:
		return false
	case driver.NetworkAllowAll:
		return len(p.DenyDomains)+len(p.DenyCIDRs) > 0
	}
	return true
}
