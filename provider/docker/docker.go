package docker

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/opts"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Scheme is the URL scheme of this provider.
const Scheme = "docker"

// MinAPIVersion is the oldest Engine API version this provider speaks:
// Docker Engine 20.10, the engine Debian 12 packages as docker.io.
const MinAPIVersion = "1.41"

// Labels this provider puts on the containers it creates. User labels are
// stored under labelPrefix so they cannot collide with these.
const (
	labelManaged   = "dev.sandboxkit.managed"
	labelTemplate  = "dev.sandboxkit.template"
	labelLease     = "dev.sandboxkit.lease-end" // Unix seconds, the lease at Create
	labelAutoPause = "dev.sandboxkit.autopause"
	labelUser      = "dev.sandboxkit.user"
	labelHome      = "dev.sandboxkit.home"
	labelCreate    = "dev.sandboxkit.create-token" // finds a container whose Create was cancelled
	labelMemory    = "dev.sandboxkit.memory-mib"   // the limits set at Create
	labelCPUs      = "dev.sandboxkit.cpus"
	labelPids      = "dev.sandboxkit.pids-limit"
	labelPrefix    = "dev.sandboxkit.label."
	labelNetwork   = "dev.sandboxkit.network" // the network mode joined at Create
)

// stateDir is the directory in every sandbox that holds the provider's own
// files: the lease (as a file's modification time), the create-time
// environment and the markers of timed-out commands.
const stateDir = "/.sandboxkit"

// DefaultUser is the user commands run as when neither the user option nor
// the image names a non-root one.
const DefaultUser = "1000:1000"

// DefaultHome is the home of DefaultUser when the image names none.
const DefaultHome = "/home/sandbox"

// Default limits of a sandbox created with zero Resources (each zero field
// takes its default). The memory limit equals the local provider's, and
// swap is not allowed beyond it; the CPU limit is DefaultCPUs or the
// engine's CPU count, whichever is smaller; the pids limit stops fork
// bombs.
const (
	DefaultMemoryMiB = 2048
	DefaultCPUs      = 2
	DefaultPidsLimit = 1024
)

// minMemoryMiB is the lowest memory limit the engine accepts (it refuses
// less than 6 MB); a smaller Resources.MemoryMiB is InvalidArgument,
// named, before anything is created.
const minMemoryMiB = 6

// reapEvery is how often the reaper looks for sandboxes whose lease ended.
const reapEvery = 30 * time.Second

// Runtime is the docker provider: it implements driver.Runtime,
// driver.Pauser, driver.ProcessRuntime and driver.Closer over the Docker
// Engine API. Create one with New or through sandbox.Open("docker://").
type Runtime struct {
	config
	cli  *client.Client
	pids int64
	// removeDelay, when not 0, is removeContainer's first wait between
	// tries in place of 50 ms (a test's shorter one).
	removeDelay time.Duration

	keyMu sync.Mutex
	key   []byte // proves which containers this provider made (see owner.go); nil until read

	ncpuMu sync.Mutex
	ncpu   int // the engine's CPU count, 0 until known

	probeOnce sync.Once
	probeErr  error // why the egress proxy cannot run here; nil when it can

	ctx      context.Context // ends at Close: bounds the reaper
	cancel   context.CancelFunc
	reaperWG sync.WaitGroup
	bg       sync.WaitGroup // clean-ups after cancelled calls
	terms    termTable      // the terminals this Runtime started
	gates    sync.Map       // container id -> *execGate
	owned    sync.Map       // container id -> time.Time it was proven (or made) by this Runtime
	// experimental is what the engine's last Ping said of its
	// experimental mode (Docker-Experimental), which its checkpoint API
	// needs: engineUnknown before any Ping.
	experimental atomic.Int32

	// loseTail, set only by tests, stands between a follower's stream
	// and the caller's writers: it returns the writers round (0, 1, …)
	// of following a background process writes to.
	loseTail func(round int, stdout, stderr io.Writer) (io.Writer, io.Writer)
	// beforeAck, set only by tests, is told whether an Exec's exec was
	// still running when both end marks arrived, before the client
	// acknowledges them.
	beforeAck func(running bool)
}

// config is what the options set.
type config struct {
	host    string // for error messages: the socket or address
	image   string // default template
	user    string // "" = the image's user, or DefaultUser when that is root
	home    string
	runtime string // OCI runtime: "" (engine default, runc) or "runsc"
	network string // network mode when the caller allows network; default "none"
	keyFile string // the owner key's file; "" = DefaultKeyFile
	// readOnly makes the root file system read-only, with volumes for
	// home, /tmp and the provider's state.
	readOnly bool
	// egressHosts, egressRoots, egressDial: WithEgressHosts,
	// WithEgressRootCAs, WithEgressDialOverride.
	egressHosts map[string][]netip.Addr
	egressRoots string
	egressDial  map[netip.AddrPort]netip.AddrPort
	bad         opts.Errors
}

// Option configures a Runtime. New fails with an InvalidArgument error
// naming any option given an invalid value.
type Option func(*config)

// WithHost sets the engine's address, such as "unix:///run/docker.sock";
// the default is DOCKER_HOST, then the engine's default socket.
func WithHost(host string) Option { return func(c *config) { c.host = host } }

// WithImage sets the image used when CreateOptions.Template is empty.
func WithImage(image string) Option { return func(c *config) { c.image = image } }

// WithUser sets the user commands run as ("name", "uid" or "uid:gid"); the
// default is the image's user when it is not root, else DefaultUser.
func WithUser(user string) Option {
	return func(c *config) {
		if user != "" && !validUser(user) {
			c.bad.Invalid("WithUser", "%q: want a name, uid or uid:gid", user)
		}
		c.user = user
	}
}

// WithHome sets the home directory (created for the user if missing); the
// default is the image's working directory when the image names a non-root
// user, else DefaultHome.
func WithHome(home string) Option {
	return func(c *config) {
		if home != "" && !strings.HasPrefix(home, "/") {
			c.bad.Invalid("WithHome", "%q is not absolute", home)
		}
		c.home = home
	}
}

// WithRuntime selects the engine's OCI runtime, such as "runsc" for gVisor.
func WithRuntime(name string) Option { return func(c *config) { c.runtime = name } }

// WithNetwork sets the network sandboxes join when CreateOptions.NoNetwork
// is false. The default is "none": no network at all, not even the engine's
// default bridge.
func WithNetwork(name string) Option { return func(c *config) { c.network = name } }

// WithReadOnlyRoot makes every sandbox's root file system read-only, with
// writable volumes (copies of the image's directories, removed with the
// sandbox) for /tmp and the home directory's parent (the home itself when
// its parent is /). Writing elsewhere is PermissionDenied.
func WithReadOnlyRoot(on bool) Option { return func(c *config) { c.readOnly = on } }

// WithKeyFile sets the file holding the key that proves which containers
// this provider made (see the package doc); the default is DefaultKeyFile.
// Runtimes given the same key see the same sandboxes; a Runtime with
// another key sees none of them.
func WithKeyFile(path string) Option {
	return func(c *config) {
		if path == "" {
			c.bad.Invalid("WithKeyFile", "empty path")
		}
		c.keyFile = path
	}
}

// WithEgressHosts gives the egress proxy of sandboxes created from now on
// a table of names and the addresses it uses for them instead of asking
// DNS, as /etc/hosts does for a host. The policy still applies to the
// addresses: a name mapped to a loopback, private or link-local address
// is refused unless the policy's AllowCIDRs names it. Tests use it to
// reach servers on the host's loopback under names such as pypi.test.
// Names are matched without case and a trailing dot; it is not settable
// from a URL.
func WithEgressHosts(hosts map[string][]netip.Addr) Option {
	return func(c *config) {
		m := make(map[string][]netip.Addr, len(hosts))
		for name, addrs := range hosts {
			n, ok := validEgressName(name)
			if !ok {
				c.bad.Invalid("WithEgressHosts", "name %q", name)
				return
			}
			for _, a := range addrs {
				if !a.IsValid() {
					c.bad.Invalid("WithEgressHosts", "name %q: an invalid address", name)
					return
				}
			}
			m[n] = append(m[n], addrs...)
		}
		c.egressHosts = m
	}
}

// WithEgressDialOverride makes the egress proxy of sandboxes created from
// now on connect, after its checks, to the address each key maps to
// instead of the key itself. Tests use it with WithEgressHosts to serve a
// name the policy allows, resolved to an address it treats as public
// (192.0.2.0/24, reserved for documentation, is never routed), from the
// host's 127.0.0.1: the checks see the public address, the connection
// reaches the test's server, and nothing reaches beyond loopback. It is
// not settable from a URL.
func WithEgressDialOverride(m map[netip.AddrPort]netip.AddrPort) Option {
	return func(c *config) {
		for from, to := range m {
			if !from.IsValid() || !to.IsValid() {
				c.bad.Invalid("WithEgressDialOverride", "%v → %v: an invalid address", from, to)
				return
			}
		}
		c.egressDial = maps.Clone(m)
	}
}

// WithEgressRootCAs replaces the host's CA certificates, for the egress
// proxy's connections to hosts with brokered secrets, with those of pem.
// Tests use it to trust their own TLS servers; it is not settable from a
// URL.
func WithEgressRootCAs(pem []byte) Option {
	return func(c *config) {
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			c.bad.Invalid("WithEgressRootCAs", "no certificate in the PEM")
			return
		}
		c.egressRoots = string(pem)
	}
}

func init() {
	driver.Register(Scheme, openURL)
}

// openURL opens "docker://" URLs. Query parameters: host (the engine's
// address, default DOCKER_HOST), image (the default template), user, home,
// runtime (runsc for gVisor), network (default none), readonly (1: a
// read-only root file system), keyfile (the owner key's file).
func openURL(ctx context.Context, u *url.URL, _ driver.OpenOptions) (driver.Runtime, error) {
	var opts []Option
	for k, v := range u.Query() {
		val := v[len(v)-1]
		switch k {
		case "host":
			opts = append(opts, WithHost(val))
		case "image":
			opts = append(opts, WithImage(val))
		case "user":
			opts = append(opts, WithUser(val))
		case "home":
			opts = append(opts, WithHome(val))
		case "runtime":
			opts = append(opts, WithRuntime(val))
		case "network":
			opts = append(opts, WithNetwork(val))
		case "keyfile":
			opts = append(opts, WithKeyFile(val))
		case "readonly":
			on, err := strconv.ParseBool(val)
			if err != nil {
				return nil, fmt.Errorf("docker: URL parameter readonly=%q: want 1 or 0: %w", val, sberrors.ErrInvalidArgument)
			}
			opts = append(opts, WithReadOnlyRoot(on))
		default:
			return nil, fmt.Errorf("docker: unknown URL parameter %q (known: host, image, user, home, runtime, network, readonly, keyfile): %w", k, sberrors.ErrInvalidArgument)
		}
	}
	if u.Host != "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("docker: URL %q: give the engine as ?host=unix:///path/docker.sock or DOCKER_HOST, not in the URL's host or path: %w", u.Scheme+"://"+u.Host+u.Path, sberrors.ErrInvalidArgument)
	}
	r, err := New(opts...)
	if err != nil {
		return nil, err
	}
	if err := r.Ping(ctx); err != nil {
		r.Close()
		return nil, err
	}
	if r.runtime != "" {
		// Whether gVisor runs on this kernel must be probed, not assumed.
		if err := r.ProbeRuntime(ctx, r.image); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// New returns a Runtime for the engine at DOCKER_HOST (or WithHost). It
// does not contact the engine; Ping does, and the first call negotiates the
// API version. Nor does it read the owner key (WithKeyFile): the first
// call that needs it does, creating it the first time.
func New(opts ...Option) (*Runtime, error) {
	r := &Runtime{config: config{host: os.Getenv("DOCKER_HOST"), network: "none"}, pids: DefaultPidsLimit}
	if img := os.Getenv("SANDBOX_DOCKER_IMAGE"); img != "" {
		r.image = img
	}
	for _, o := range opts {
		o(&r.config)
	}
	if err := r.bad.Err("docker"); err != nil {
		return nil, err
	}
	if r.host == "" {
		r.host = client.DefaultDockerHost
	}
	// The engine's API version is negotiated (client.WithAPIVersionNegotiation)
	// so one client speaks to Debian's 20.10 engine (1.41) as to current ones;
	// Ping refuses engines older than MinAPIVersion.
	// The engine client's own HTTP spans (otelhttp, on the global provider
	// unless told otherwise) carry each request's full URL, and the URL of
	// a file call holds the sandbox's path, which may hold anything the
	// caller put in it: they stay off. The portable layer's spans cover
	// every call without the path.
	cli, err := client.New(client.WithHost(r.host), client.WithAPIVersionNegotiation(), client.WithTraceProvider(noop.NewTracerProvider()))
	if err != nil {
		return nil, fmt.Errorf("docker: engine address %q: %v: %w", r.host, err, sberrors.ErrInvalidArgument)
	}
	r.cli = cli
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.reaperWG.Add(1)
	go r.reaper()
	return r, nil
}

// Ping checks that the engine answers and speaks at least MinAPIVersion.
func (r *Runtime) Ping(ctx context.Context) error {
	p, err := r.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	if err != nil {
		return r.wrap(ctx, "ping", err)
	}
	if p.Experimental {
		r.experimental.Store(engineExperimental)
	} else {
		r.experimental.Store(engineStable)
	}
	if versionLess(p.APIVersion, MinAPIVersion) {
		return fmt.Errorf("docker: engine at %s speaks API %s, want at least %s (Docker Engine 20.10): %w", r.host, p.APIVersion, MinAPIVersion, sberrors.ErrUnavailable)
	}
	return nil
}

// Close stops the lease reaper and closes the engine connections. Sandboxes
// keep running: they are persistent.
func (r *Runtime) Close() error {
	r.cancel()
	r.reaperWG.Wait()
	r.bg.Wait()
	return r.cli.Close()
}

// Name returns "docker".
func (r *Runtime) Name() string { return Scheme }

// Capabilities reports what the docker provider does.
func (r *Runtime) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		PauseKeepsMemory:    true,
		AttachAcrossClients: true,
		ServerSideLabels:    true, Persistent: true,
		Isolation:     r.isolation(),
		DefaultLease:  15 * time.Minute,
		WatchLatency:  WatchInterval, // polled: see Watch
		Network:       r.network != "none",
		NetworkPolicy: r.netSupport(),
		SnapshotModes: snapshotModes(),
		SnapshotNote:  "filesystem snapshots are commits to images; mode full unavailable: " + r.fullMissing(),
	}
}

// netSupport is Capabilities.NetworkPolicy. Deny-all is the none
// network. Where the egress proxy can run (see proxyProbe), every list
// and brokered secrets are enforced by it, and allow-all too, through it,
// on a Runtime that joins no network; elsewhere allow-all needs a network
// to join (WithNetwork) and lists are refused.
func (r *Runtime) netSupport() driver.NetworkSupport {
	if err := r.proxyUsable(); err == nil {
		return driver.NetworkSupport{
			AllowAll: true, DenyAll: true,
			AllowDomains: true, AllowWildcards: true, AllowCIDRs: true,
			DenyDomains: true, DenyCIDRs: true, DenyOverAllow: true, IPv6CIDRs: true,
			BrokeredSecrets: true,
			Note:            "lists and brokered secrets are enforced by an HTTP/HTTPS/SOCKS5 egress proxy on the sandbox's loopback (127.0.0.1:3128): other protocols have no route out",
		}
	}
	return driver.NetworkSupport{AllowAll: r.network != "none", DenyAll: true,
		Note: "allow-all needs a network to join (?network=); domain and CIDR allow-lists, deny-lists and brokered secrets need the egress proxy, which cannot run here: " + r.proxyUsable().Error()}
}

// proxyUsable returns why the egress proxy cannot run for this Runtime's
// engine, or nil; probed once.
func (r *Runtime) proxyUsable() error {
	r.probeOnce.Do(func() { r.probeErr = proxyProbe(r.host, r.runtime) })
	return r.probeErr
}

func (r *Runtime) isolation() string {
	if r.runtime == "runsc" {
		return "gvisor"
	}
	return "container"
}

// wrap classifies an engine error into the sandbox error codes. It names
// the engine's address when the engine cannot be reached.
func (r *Runtime) wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || !cerrdefs.IsNotFound(err)) {
		return fmt.Errorf("docker: %s: %w", op, ctx.Err())
	}
	switch {
	case client.IsErrConnectionFailed(err):
		return fmt.Errorf("docker: %s: the engine at %s is unreachable (is dockerd running? set DOCKER_HOST or ?host=): %v: %w", op, r.host, err, sberrors.ErrUnavailable)
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("docker: %s: %v: %w", op, err, sberrors.ErrNotFound)
	case strings.Contains(err.Error(), "received 409"):
		// An exec's start refused: the container is paused or stopped.
		return fmt.Errorf("docker: %s: the sandbox is paused or stopped: %v: %w", op, err, sberrors.ErrPaused)
	case cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "is paused"):
		return fmt.Errorf("docker: %s: %v: %w", op, err, sberrors.ErrPaused)
	case cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "is not running"):
		return fmt.Errorf("docker: %s: %v: %w", op, err, sberrors.ErrPaused)
	case cerrdefs.IsConflict(err):
		return fmt.Errorf("docker: %s: %v: %w", op, err, sberrors.ErrFailedPrecondition)
	case cerrdefs.IsInvalidArgument(err):
		return fmt.Errorf("docker: %s: %v: %w", op, err, sberrors.ErrInvalidArgument)
	case cerrdefs.IsPermissionDenied(err) || cerrdefs.IsUnauthorized(err):
		return fmt.Errorf("docker: %s: %v: %w", op, err, sberrors.ErrPermission)
	case cerrdefs.IsUnavailable(err):
		return fmt.Errorf("docker: %s: %v: %w", op, err, sberrors.ErrUnavailable)
	}
	return fmt.Errorf("docker: %s: %w", op, err)
}

// versionLess reports whether API version a is older than b ("1.41").
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) || i < len(pb); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// validUser accepts "name", "uid", "name:group" or "uid:gid" made of
// letters, digits, '_', '-' and '.'.
func validUser(u string) bool {
	parts := strings.Split(u, ":")
	if len(parts) > 2 {
		return false
	}
	for _, p := range parts {
		if p == "" {
			return false
		}
		for _, c := range p {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
				return false
			}
		}
	}
	return true
}

// numericIDs returns the uid and gid of a "uid" or "uid:gid" user.
func numericIDs(u string) (uid, gid int, ok bool) {
	a, b, has := strings.Cut(u, ":")
	uid, err := strconv.Atoi(a)
	if err != nil {
		return 0, 0, false
	}
	gid = uid
	if has {
		if gid, err = strconv.Atoi(b); err != nil {
			return 0, 0, false
		}
	}
	return uid, gid, true
}

func isRoot(u string) bool {
	name, _, _ := strings.Cut(u, ":")
	return name == "" || name == "root" || name == "0"
}

// HasImage reports (as a NotFound error) whether the engine has image.
func (r *Runtime) HasImage(ctx context.Context, image string) error {
	if _, err := r.cli.ImageInspect(ctx, image); err != nil {
		return r.wrap(ctx, "image "+image, err)
	}
	return nil
}

// ProbeRuntime checks that the engine knows the runtime this Runtime was
// configured with (WithRuntime; "" means the engine's default) and that a
// container of image runs a command under it, as gVisor's runsc may not on
// every kernel. The error says why not. With an empty image it only checks
// that the engine lists the runtime.
func (r *Runtime) ProbeRuntime(ctx context.Context, image string) error {
	if r.runtime != "" {
		info, err := r.cli.Info(ctx, client.InfoOptions{})
		if err != nil {
			return r.wrap(ctx, "probe", err)
		}
		if _, ok := info.Info.Runtimes[r.runtime]; !ok {
			known := slices.Sorted(maps.Keys(info.Info.Runtimes))
			return fmt.Errorf("docker: the engine at %s has no runtime %q (it has %s; start dockerd with --add-runtime %s=/usr/bin/%s): %w", r.host, r.runtime, strings.Join(known, ", "), r.runtime, r.runtime, sberrors.ErrUnimplemented)
		}
	}
	if image == "" {
		return nil
	}
	yes := true
	res, err := r.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"exit 0"}},
		HostConfig: &container.HostConfig{Runtime: r.runtime, NetworkMode: "none", Init: &yes},
	})
	if err != nil {
		return r.wrap(ctx, "probe "+r.runtime, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = r.removeContainer(cctx, res.ID)
	}()
	if _, err := r.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		if strings.Contains(err.Error(), "root network namespace") {
			// runsc's own network stack refuses the engine's none
			// network; registered with --network=none it runs.
			return fmt.Errorf("docker: runtime %q cannot start a container here: register it with its network off, e.g. {\"runtimes\": {%q: {\"path\": \"/usr/bin/runsc\", \"runtimeArgs\": [\"--network=none\"]}}} in the daemon's config file: %w", r.runtime, r.runtime, r.wrap(ctx, "probe", err))
		}
		return fmt.Errorf("docker: runtime %q cannot start a container here: %w", r.runtime, r.wrap(ctx, "probe", err))
	}
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
		ins, err := r.cli.ContainerInspect(ctx, res.ID, client.ContainerInspectOptions{})
		if err != nil {
			return r.wrap(ctx, "probe "+r.runtime, err)
		}
		if st := ins.Container.State; st != nil && (st.Status == container.StateExited || st.Status == container.StateDead) {
			if st.ExitCode != 0 {
				return fmt.Errorf("docker: under runtime %q a container's `exit 0` ended with status %d (%s): %w", r.runtime, st.ExitCode, st.Error, sberrors.ErrUnavailable)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("docker: probe %q: %w", r.runtime, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// engineCPUs returns the engine's CPU count (asked once), which bounds the
// default CPU limit: the engine refuses a limit above it.
func (r *Runtime) engineCPUs(ctx context.Context) (int, error) {
	r.ncpuMu.Lock()
	defer r.ncpuMu.Unlock()
	if r.ncpu > 0 {
		return r.ncpu, nil
	}
	res, err := r.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return 0, r.wrap(ctx, "create: reading the engine's CPU count", err)
	}
	r.ncpu = max(res.Info.NCPU, 1)
	return r.ncpu, nil
}
