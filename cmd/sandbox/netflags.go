package main

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/sandboxkit/sandbox"
)

// netFlags are the network flags of the commands that create sandboxes
// (create and mcp).
type netFlags struct {
	allow, deny, broker []string
	noNetwork           bool
}

const brokerSecretHelp = `brokered secret NAME=HOST[,HOST...][:HEADER[:FORMAT]] (repeatable): the value of NAME in the tool's environment is put on the sandbox's requests to the hosts (domains, "*.example.com" wildcards) by the provider's enforcement point outside the sandbox, and the sandbox gets NAME set to a placeholder only. HEADER defaults to Authorization with FORMAT "Bearer %s"; a HEADER given alone takes the value as it is ("%s"). The value is never on the command line and is redacted from everything the tool prints. A provider that cannot broker secrets refuses the sandbox`

func (n *netFlags) add(f *pflag.FlagSet) {
	f.StringArrayVar(&n.allow, "allow-host", nil, `let the sandbox reach only these destinations: a domain ("pypi.org"), a wildcard ("*.pythonhosted.org", every subdomain), an IP address or a CIDR (repeatable; without it the network is the provider's default, or allow-all with --deny-host or --broker-secret)`)
	f.StringArrayVar(&n.deny, "deny-host", nil, "refuse these destinations (domain, wildcard, IP or CIDR), winning over --allow-host (repeatable)")
	f.BoolVar(&n.noNetwork, "no-network", false, "cut the sandbox off from the network")
	f.StringArrayVar(&n.broker, "broker-secret", nil, brokerSecretHelp)
}

// options fills the network fields of opts. plain and secret are the
// names --env and --secret-env set, which a brokered secret's NAME may not
// reuse. Each brokered value is registered for redaction (see addSecret
// for streams).
func (n *netFlags) options(a *app, opts *sandbox.CreateOptions, plain, secret map[string]string, streams bool) error {
	if n.noNetwork && (len(n.allow) > 0 || len(n.deny) > 0 || len(n.broker) > 0) {
		return usagef("--no-network: cannot be combined with --allow-host, --deny-host or --broker-secret")
	}
	opts.NoNetwork = n.noNetwork
	if len(n.allow) > 0 || len(n.deny) > 0 {
		opts.Network = &sandbox.NetworkPolicy{Allow: n.allow, Deny: n.deny}
	}
	seen := map[string]bool{}
	for _, spec := range n.broker {
		name, rest, ok := strings.Cut(spec, "=")
		if !ok || !envNameRE.MatchString(name) || rest == "" {
			return usagef("--broker-secret %q: want NAME=HOST[,HOST...][:HEADER[:FORMAT]], NAME the environment variable holding the value", printableArg(spec))
		}
		if seen[name] {
			return usagef("--broker-secret %s: given twice", name)
		}
		seen[name] = true
		if _, dup := plain[name]; dup {
			return usagef("--broker-secret %s: %s is given by --env too (the sandbox gets %s set to the placeholder)", name, name, name)
		}
		if _, dup := secret[name]; dup {
			return usagef("--broker-secret %s: %s is given by --secret-env too (a brokered secret never enters the sandbox)", name, name)
		}
		parts := strings.SplitN(rest, ":", 3)
		s := sandbox.BrokeredSecret{Env: name, Header: "Authorization", Format: "Bearer %s"}
		for _, h := range strings.Split(parts[0], ",") {
			if h = strings.TrimSpace(h); h == "" {
				return usagef("--broker-secret %s: an empty host in %q", name, printableArg(parts[0]))
			}
			s.Hosts = append(s.Hosts, h)
		}
		if len(parts) > 1 {
			if parts[1] == "" {
				return usagef("--broker-secret %s: empty HEADER after ':'", name)
			}
			s.Header, s.Format = parts[1], "%s"
		}
		if len(parts) > 2 {
			s.Format = parts[2]
		}
		v := a.getenv(name)
		if v == "" {
			return usagef("--broker-secret %s: %s is unset or empty in the tool's environment", name, name)
		}
		s.Value = v
		a.addSecret("broker-secret "+name, v, streams)
		opts.BrokeredSecrets = append(opts.BrokeredSecrets, s)
	}
	return nil
}
