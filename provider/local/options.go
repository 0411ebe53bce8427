package local

import (
	"crypto/x509"
	"log/slog"
	"maps"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox/internal/opts"
	"github.com/sandboxkit/sandbox/sberrors"
)

// DefaultLease is the lease of a sandbox created without a timeout.
const DefaultLease = 5 * time.Minute

// config is what the options set.
type config struct {
	root     string
	log      *slog.Logger
	force    *Level // WithIsolation or SANDBOX_LOCAL_ISOLATION
	min      Level
	lease    time.Duration
	reapEach time.Duration
	warm     int
	asRoot   bool   // WithCommandsAsRoot
	network  string // WithNetwork: "", "isolated" or "host"
	// egressHosts and egressRoots: WithEgressHosts, WithEgressRootCAs.
	egressHosts map[string][]netip.Addr
	egressRoots string
	egressDial  map[netip.AddrPort]netip.AddrPort
	halfClose   time.Duration // WithHalfCloseTimeout
	now         func() time.Time
	bad         opts.Errors // invalid option values, reported by New
}

func defaultConfig() config {
	return config{log: slog.New(slog.DiscardHandler), lease: DefaultLease, reapEach: 2 * time.Second, halfClose: DefaultHalfCloseTimeout, now: time.Now}
}

// apply applies opts to c and returns the InvalidArgument error naming
// every option given an invalid value.
func (c *config) apply(opts []Option) error {
	for _, o := range opts {
		o(c)
	}
	return c.bad.Err("local")
}

// Option configures New. New fails with an InvalidArgument error naming
// any option given an invalid value.
type Option func(*config)

// WithClock sets the clock leases are set and checked by (time.Now by
// default), so tests can end a lease without waiting. It does not reach
// the agent's lease backstop at L2 and above, which runs on the real
// clock (and acts only past the lease's grace).
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now == nil {
			c.bad.Invalid("WithClock", "nil clock")
			return
		}
		c.now = now
	}
}

// WithRoot sets the directory that holds the sandboxes (default
// <user cache dir>/sandboxkit/local). It is created if missing.
func WithRoot(dir string) Option {
	return func(r *config) {
		if dir == "" {
			r.bad.Invalid("WithRoot", "empty root directory")
			return
		}
		r.root = dir
	}
}

// WithIsolation gives every sandbox exactly level l instead of the best
// the host offers; New fails with *IsolationError if the host cannot.
// It takes precedence over the SANDBOX_LOCAL_ISOLATION variable.
func WithIsolation(l Level) Option {
	return func(r *config) {
		if l < L0 || l > L4 {
			r.bad.Invalid("WithIsolation", "isolation %v out of range", l)
			return
		}
		r.force = &l
	}
}

// WithMinIsolation makes New fail with *IsolationError when the host
// cannot give at least level l, and Create fail when a sandbox gets less.
func WithMinIsolation(l Level) Option {
	return func(r *config) {
		if l < L0 || l > L4 {
			r.bad.Invalid("WithMinIsolation", "isolation %v out of range", l)
			return
		}
		r.min = l
	}
}

// WithLogger sets the logger for degraded isolation, lease enforcement and
// clean-up failures. The default discards.
func WithLogger(l *slog.Logger) Option {
	return func(r *config) {
		if l != nil {
			r.log = l
		}
	}
}

// WithDefaultLease sets the lease reported in Capabilities.DefaultLease
// (DefaultLease otherwise).
func WithDefaultLease(d time.Duration) Option {
	return func(r *config) {
		if d <= 0 {
			r.bad.Invalid("WithDefaultLease", "default lease %v is not positive", d)
			return
		}
		r.lease = d
	}
}

// DefaultHalfCloseTimeout is how long a connection relayed to an exposed
// port stays open once one of its directions ended and the other moves
// nothing, when WithHalfCloseTimeout is not given.
const DefaultHalfCloseTimeout = 15 * time.Second

// WithHalfCloseTimeout sets how long a connection relayed to an exposed
// port (Expose) stays open once one side closed or half-closed its
// direction and nothing moves the other way (DefaultHalfCloseTimeout by
// default; an endpoint's IdleTimeout, if shorter, applies instead). A
// client that left is not kept waiting on a server that never closes its
// side for longer, and a client that half-closes after its request still
// gets an answer that starts within it.
func WithHalfCloseTimeout(d time.Duration) Option {
	return func(r *config) {
		if d <= 0 {
			r.bad.Invalid("WithHalfCloseTimeout", "half-close timeout %v is not positive", d)
			return
		}
		r.halfClose = d
	}
}

// WithReapInterval sets how often the Runtime looks for sandboxes whose
// lease ended (default 2s).
func WithReapInterval(d time.Duration) Option {
	return func(r *config) {
		if d <= 0 {
			r.bad.Invalid("WithReapInterval", "reap interval %v is not positive", d)
			return
		}
		r.reapEach = d
	}
}

// WithWarmPool keeps n sandboxes started ahead of need (at L2 and above),
// so that a Create with default settings (network on, no Resources, no
// template) costs a rename and a metadata write instead of a process
// start. Each pooled sandbox holds an idle agent process; Close destroys
// them. Default 0 (no pool).
func WithWarmPool(n int) Option {
	return func(r *config) {
		if n < 0 || n > 64 {
			r.bad.Invalid("WithWarmPool", "warm pool of %d: want 0 to 64", n)
			return
		}
		r.warm = n
	}
}

// WithCommandsAsRoot keeps commands at L0 to L2 running as root when the
// program runs as root. By default a root host runs them as an
// unprivileged uid of each sandbox's own instead, and the file methods
// then serve the host's file system with that user's rights; with this
// option they serve the home only (root without capabilities still owns
// every root-owned file: the other sandboxes' agents, the root directory,
// the cgroups). Levels L3 and L4 always map the sandbox user to uid 65534
// on a root host, whatever this option says.
func WithCommandsAsRoot() Option {
	return func(r *config) {
		r.asRoot = true
	}
}

// Network modes (WithNetwork, and the provider option "network" of one
// sandbox).
const (
	// NetworkIsolated gives the sandbox its own network namespace with
	// outbound access through the user-space network stack pasta (Debian
	// package passt): the host's loopback and its other local addresses
	// are out of reach. It needs namespaces (L3 or higher) and pasta;
	// asking for it without them is FailedPrecondition.
	NetworkIsolated = "isolated"
	// NetworkHost shares the host's network: sandboxed code reaches every
	// service of the host's loopback. Only when asked for.
	NetworkHost = "host"
	// NetworkNone, for WithNetwork only, keeps off the network every
	// sandbox whose create does not ask for one: it gets only its own
	// loopback, as with CreateOptions.NoNetwork, and no user-space
	// network stack is started for it. A create with a network policy
	// still gets what the policy asks (an explicit allow-all: the
	// isolated network; lists or brokered secrets: the egress proxy), and
	// SetNetwork can open the sandbox later through the egress proxy.
	// Fork and a create from a snapshot follow the same rule: without a
	// policy, a child of a networked sandbox gets no network. It
	// needs isolation L2 or higher: at L0 and L1 a create without a
	// policy is FailedPrecondition rather than given the host's network.
	NetworkNone = "none"
)

// WithNetwork sets the network of sandboxes created with the network on
// (CreateOptions.NoNetwork unset) and no "network" provider option:
// NetworkIsolated, NetworkHost or NetworkNone. By default a sandbox gets
// an isolated network where it can (L3 and L4 with pasta installed) and
// no network elsewhere at L2 to L4; at L0 and L1 commands always use the
// host's network. Info.Detail["network"] says what each sandbox got and
// why.
func WithNetwork(mode string) Option {
	return func(r *config) {
		if mode != NetworkIsolated && mode != NetworkHost && mode != NetworkNone {
			r.bad.Invalid("WithNetwork", "network %q: want %q, %q or %q", mode, NetworkIsolated, NetworkHost, NetworkNone)
			return
		}
		r.network = mode
	}
}

// WithEgressHosts gives the egress proxy of sandboxes created from now on
// (those whose network policy has lists or brokered secrets, at L3 and
// L4) a table of names and the addresses it uses for them instead of
// asking DNS, as /etc/hosts does for a host. The policy still applies to
// the addresses: a name mapped to a loopback, private or link-local
// address is refused unless the policy's AllowCIDRs names it. Tests use
// it to reach servers on 127.0.0.1 under names such as pypi.test. Names
// are matched without case and a trailing dot; it is not settable from a
// URL.
func WithEgressHosts(hosts map[string][]netip.Addr) Option {
	return func(r *config) {
		m := make(map[string][]netip.Addr, len(hosts))
		for name, addrs := range hosts {
			n := strings.ToLower(strings.TrimSuffix(name, "."))
			if n == "" || strings.ContainsAny(n, " /*") {
				r.bad.Invalid("WithEgressHosts", "name %q", name)
				return
			}
			for _, a := range addrs {
				if !a.IsValid() {
					r.bad.Invalid("WithEgressHosts", "name %q: an invalid address", name)
					return
				}
			}
			m[n] = append(m[n], addrs...)
		}
		r.egressHosts = m
	}
}

// WithEgressDialOverride makes the egress proxy of sandboxes created from
// now on connect, after its checks, to the address each key maps to
// instead of the key itself. Tests use it with WithEgressHosts to serve a
// name the policy allows, resolved to an address it treats as public
// (192.0.2.0/24, reserved for documentation, is never routed), from
// 127.0.0.1: the checks see the public address, the connection reaches
// the test's server, and nothing reaches beyond loopback. It is not
// settable from a URL.
func WithEgressDialOverride(m map[netip.AddrPort]netip.AddrPort) Option {
	return func(r *config) {
		for from, to := range m {
			if !from.IsValid() || !to.IsValid() {
				r.bad.Invalid("WithEgressDialOverride", "%v → %v: an invalid address", from, to)
				return
			}
		}
		r.egressDial = maps.Clone(m)
	}
}

// WithEgressRootCAs sets, as PEM, the CA certificates the egress proxy
// trusts when it connects, with TLS of its own, to the hosts of brokered
// secrets (the host's trust store by default). Tests use it for servers
// with certificates of their own.
func WithEgressRootCAs(pem []byte) Option {
	return func(r *config) {
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			r.bad.Invalid("WithEgressRootCAs", "no PEM certificate in %d bytes", len(pem))
			return
		}
		r.egressRoots = string(pem)
	}
}

// optionsFromURL maps local:///root?isolation=l3&min_isolation=l2 to options.
func optionsFromURL(u *url.URL) ([]Option, error) {
	var opts []Option
	if u.Host != "" {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "local: URL has host %q; use local:///absolute/root", u.Host)
	}
	if u.Path != "" && u.Path != "/" {
		opts = append(opts, WithRoot(u.Path))
	}
	q := u.Query()
	for k, vs := range q {
		v := vs[len(vs)-1]
		switch k {
		case "isolation":
			l, err := ParseLevel(v)
			if err != nil {
				return nil, err
			}
			opts = append(opts, WithIsolation(l))
		case "min_isolation":
			l, err := ParseLevel(v)
			if err != nil {
				return nil, err
			}
			opts = append(opts, WithMinIsolation(l))
		case "warm_pool":
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, sberrors.Errorf(sberrors.InvalidArgument, "local: warm_pool %q: not a number", v)
			}
			opts = append(opts, WithWarmPool(n))
		case "commands_as_root":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, sberrors.Errorf(sberrors.InvalidArgument, "local: commands_as_root %q: want true or false", v)
			}
			if b {
				opts = append(opts, WithCommandsAsRoot())
			}
		case "network":
			opts = append(opts, WithNetwork(v))
		case "lease":
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, sberrors.Errorf(sberrors.InvalidArgument, "local: lease %q: %v", v, err)
			}
			opts = append(opts, WithDefaultLease(d))
		default:
			return nil, sberrors.Errorf(sberrors.InvalidArgument, "local: unknown URL parameter %q (known: isolation, min_isolation, lease, warm_pool, commands_as_root, network)", k)
		}
	}
	return opts, nil
}
