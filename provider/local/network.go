package local

import (
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

// netNote says why an allow-list or deny-list is refused: the local
// provider can cut a sandbox off or give it a network, nothing between.
const netNote = "domain and CIDR allow-lists and deny-lists need the egress proxy, not available on this provider yet"

// netSupport is what the local provider can enforce: allow-all, and
// deny-all where it can cut a sandbox off (L2 and up).
func netSupport(allowAll, denyAll bool) driver.NetworkSupport {
	note := netNote
	if !denyAll {
		note = "deny-all needs isolation L2 or higher (a network namespace or seccomp); " + note
	}
	if !allowAll {
		note = "allow-all needs an isolated network (pasta, Debian package passt) or ?network=host; " + note
	}
	return driver.NetworkSupport{AllowAll: allowAll, DenyAll: denyAll, Note: note}
}

// checkNetworkPolicy refuses a policy with entries, which nothing here
// enforces; the portable layer refuses it first from Capabilities, this
// keeps a driver-level caller from getting a silently open sandbox.
func checkNetworkPolicy(p *driver.NetworkPolicy) error {
	if p == nil || len(p.AllowDomains)+len(p.AllowCIDRs)+len(p.DenyDomains)+len(p.DenyCIDRs) == 0 && p.Mode != driver.NetworkAllowList {
		return nil
	}
	return sberrors.Errorf(sberrors.FailedPrecondition, "local: network policy %s with entries cannot be enforced: %s", p.Mode, netNote)
}

// netPolicy is the policy in force in a sandbox with or without network.
func netPolicy(on bool) *driver.NetworkPolicy {
	if on {
		return &driver.NetworkPolicy{Mode: driver.NetworkAllowAll}
	}
	return &driver.NetworkPolicy{Mode: driver.NetworkDenyAll}
}
