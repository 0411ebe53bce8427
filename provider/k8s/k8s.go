package k8s

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	agentsclientset "sigs.k8s.io/agent-sandbox/clients/k8s/clientset/versioned"
	extclientset "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/clientset/versioned"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/wire"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Scheme is the URL scheme the package registers with sandbox.Open.
const Scheme = "k8s"

// Defaults of the options.
const (
	// DefaultRESTPort and DefaultGRPCPort are sandboxd's default pod ports
	// (its --rest-port and --grpc-port flags).
	DefaultRESTPort = 8080
	DefaultGRPCPort = 9090
	// DefaultReadyTimeout bounds how long Create waits for a claim to
	// become Ready when the caller's context has no earlier deadline.
	DefaultReadyTimeout = 3 * time.Minute
	// defaultLease is the lease of a sandbox created without a timeout;
	// the portable layer always sends one, so it is what Capabilities
	// declares.
	defaultLease = 30 * time.Minute
	// cleanupTimeout bounds the detached deletion of a claim a failed or
	// cancelled Create leaves behind.
	cleanupTimeout = 30 * time.Second
)

func init() {
	driver.Register(Scheme, func(ctx context.Context, u *url.URL, o driver.OpenOptions) (driver.Runtime, error) {
		opts, err := optionsFromURL(u)
		if err != nil {
			return nil, err
		}
		opts = append(opts, WithLogger(o.Logger))
		return New(namespaceOf(u), opts...)
	})
}

// Runtime is the agent-sandbox provider: it implements driver.Runtime,
// driver.Pauser, driver.ProcessRuntime, driver.TransportResetter and
// driver.Closer. The control plane is the Kubernetes API (SandboxClaim,
// Sandbox, SandboxWarmPool of group agents.x-k8s.io/v1beta1); the data
// plane is sandboxd in each sandbox pod.
type Runtime struct {
	cfg       config
	agents    agentsclientset.Interface
	ext       extclientset.Interface
	transport *http.Transport
	hc        *http.Client

	mu    sync.Mutex
	grpc  map[string]*grpcConn // by target
	roots map[string]string    // sandbox id → sandboxd root
	procs map[string]*run      // background processes by procKey

	bg     sync.WaitGroup
	closed bool
}

type config struct {
	namespace  string
	template   string
	warmPool   string
	routerURL  string
	restPort   int
	grpcPort   int
	root       string
	kubeconfig string
	context    string
	restConfig *rest.Config
	agents     agentsclientset.Interface
	ext        extclientset.Interface
	dial       func(ctx context.Context, network, addr string) (net.Conn, error)
	log        *slog.Logger
	ready      time.Duration
}

// Option configures New.
type Option func(*config)

// WithTemplate names the SandboxTemplate sandboxes are claimed from when
// CreateOptions.Template is empty. A claim names a warm pool, so the
// provider claims from the SandboxWarmPool whose sandboxTemplateRef names
// the template (a pool with replicas: 0 is a cold start).
func WithTemplate(name string) Option { return func(c *config) { c.template = name } }

// WithWarmPool names the SandboxWarmPool sandboxes are claimed from when
// CreateOptions.Template is empty; it wins over WithTemplate.
func WithWarmPool(name string) Option { return func(c *config) { c.warmPool = name } }

// WithRouterURL sends sandboxd's REST file calls through the
// sandbox-router at u (with its X-Sandbox-ID, X-Sandbox-Namespace and
// X-Sandbox-Port headers) instead of to the pod's IP. The router proxies
// HTTP/1.1 only, so the gRPC process service is always reached on the
// pod's IP (or through the dialer WithDialer sets).
func WithRouterURL(u string) Option { return func(c *config) { c.routerURL = u } }

// WithSandboxdPorts sets the pod ports of sandboxd's REST and gRPC
// listeners (defaults 8080 and 9090, as sandboxd's flags).
func WithSandboxdPorts(rest, grpc int) Option {
	return func(c *config) { c.restPort, c.grpcPort = rest, grpc }
}

// WithRoot sets the root directory sandboxd serves (its --root-dir, in the
// pod /workspace by default). Without it the provider asks each sandbox's
// sandboxd where it starts commands, once per sandbox.
func WithRoot(dir string) Option { return func(c *config) { c.root = dir } }

// WithKubeconfig loads the cluster's address and credentials from the
// kubeconfig file at path (and its context ctxName, when not empty)
// instead of the usual places.
func WithKubeconfig(path, ctxName string) Option {
	return func(c *config) { c.kubeconfig, c.context = path, ctxName }
}

// WithRestConfig uses cfg to reach the Kubernetes API.
func WithRestConfig(cfg *rest.Config) Option { return func(c *config) { c.restConfig = cfg } }

// WithClientsets uses the given clientsets for the agents.x-k8s.io API
// (the generated fakes in tests, or clientsets a program already holds).
func WithClientsets(agents agentsclientset.Interface, ext extclientset.Interface) Option {
	return func(c *config) { c.agents, c.ext = agents, ext }
}

// WithDialer sets how connections to sandboxd (pod IPs, the router) are
// dialed, for a port-forward, a proxy or a test.
func WithDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) Option {
	return func(c *config) { c.dial = dial }
}

// WithReadyTimeout bounds how long Create waits for a claim to become
// Ready (default DefaultReadyTimeout); the caller's context may end it
// earlier. A claim that is not Ready by then is deleted.
func WithReadyTimeout(d time.Duration) Option { return func(c *config) { c.ready = d } }

// WithLogger sets where the provider logs its own events (a failed
// clean-up). nil discards.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// New returns a Runtime that claims sandboxes in namespace (empty:
// "default"). Without WithClientsets or WithRestConfig it finds the
// cluster as kubectl does: in a pod, the service account; elsewhere
// $KUBECONFIG or ~/.kube/config.
func New(namespace string, opts ...Option) (*Runtime, error) {
	cfg := config{restPort: DefaultRESTPort, grpcPort: DefaultGRPCPort, ready: DefaultReadyTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if namespace == "" {
		namespace = "default"
	}
	if !dnsLabel.MatchString(namespace) || len(namespace) > 63 {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "k8s: namespace %q is not a Kubernetes DNS label", namespace)
	}
	for _, n := range []struct{ what, v string }{{"template", cfg.template}, {"warm_pool", cfg.warmPool}} {
		if n.v != "" && (!dnsSubdomain.MatchString(n.v) || len(n.v) > 253) {
			return nil, sberrors.Errorf(sberrors.InvalidArgument, "k8s: %s %q is not a Kubernetes object name", n.what, n.v)
		}
	}
	for _, p := range []struct {
		what string
		v    int
	}{{"rest_port", cfg.restPort}, {"grpc_port", cfg.grpcPort}} {
		if p.v < 1 || p.v > 65535 {
			return nil, sberrors.Errorf(sberrors.InvalidArgument, "k8s: %s %d is not a port (1-65535)", p.what, p.v)
		}
	}
	if cfg.routerURL != "" {
		u, err := url.Parse(cfg.routerURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return nil, sberrors.Errorf(sberrors.InvalidArgument, "k8s: router_url must be an http(s) URL without credentials")
		}
		cfg.routerURL = strings.TrimRight(cfg.routerURL, "/")
	}
	if cfg.root != "" && !strings.HasPrefix(cfg.root, "/") {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "k8s: root %q is not an absolute path", cfg.root)
	}
	if cfg.ready <= 0 {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "k8s: ready timeout %v is not positive", cfg.ready)
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	cfg.namespace = namespace
	r := &Runtime{cfg: cfg, agents: cfg.agents, ext: cfg.ext, grpc: map[string]*grpcConn{}, roots: map[string]string{}}
	if r.agents == nil || r.ext == nil {
		rc := cfg.restConfig
		if rc == nil {
			var err error
			rc, err = loadRestConfig(cfg.kubeconfig, cfg.context)
			if err != nil {
				return nil, sberrors.Errorf(sberrors.FailedPrecondition, "k8s: no cluster: %v", err)
			}
		}
		hc, err := rest.HTTPClientFor(rc)
		if err != nil {
			return nil, sberrors.Errorf(sberrors.InvalidArgument, "k8s: cluster config: %v", err)
		}
		if r.agents, err = agentsclientset.NewForConfigAndClient(rc, hc); err != nil {
			return nil, sberrors.Errorf(sberrors.InvalidArgument, "k8s: cluster config: %v", err)
		}
		if r.ext, err = extclientset.NewForConfigAndClient(rc, hc); err != nil {
			return nil, sberrors.Errorf(sberrors.InvalidArgument, "k8s: cluster config: %v", err)
		}
	}
	t := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
		// Large uploads wait for sandboxd's 100 Continue (see Upload).
		ExpectContinueTimeout: expectWait,
	}
	if cfg.dial != nil {
		t.DialContext = cfg.dial
	} else {
		t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	wire.CountWrites(t)
	r.transport = t
	r.hc = &http.Client{Transport: t}
	return r, nil
}

// loadRestConfig finds the cluster: the in-cluster service account, else
// the kubeconfig loading rules kubectl uses ($KUBECONFIG, ~/.kube/config).
func loadRestConfig(path, ctxName string) (*rest.Config, error) {
	if path == "" && ctxName == "" {
		if rc, err := rest.InClusterConfig(); err == nil {
			return rc, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: ctxName}).ClientConfig()
}

// namespaceOf is the namespace a k8s:// URL names: its host, or its
// opaque part (k8s:NAMESPACE).
func namespaceOf(u *url.URL) string {
	if u.Host != "" {
		return u.Host
	}
	return u.Opaque
}

// optionsFromURL reads the query of a k8s:// URL.
func optionsFromURL(u *url.URL) ([]Option, error) {
	if u.User != nil {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "k8s: credentials in the URL are refused; use a kubeconfig")
	}
	if u.Path != "" && u.Path != "/" {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "k8s: URL path %q: want k8s://NAMESPACE?template=NAME", u.Path)
	}
	var opts []Option
	q := u.Query()
	var restPort, grpcPort = DefaultRESTPort, DefaultGRPCPort
	var kubeconfig, kctx string
	for k, vs := range q {
		v := vs[0]
		switch k {
		case "template":
			opts = append(opts, WithTemplate(v))
		case "warm_pool":
			opts = append(opts, WithWarmPool(v))
		case "router_url":
			opts = append(opts, WithRouterURL(v))
		case "root":
			opts = append(opts, WithRoot(v))
		case "kubeconfig":
			kubeconfig = v
		case "context":
			kctx = v
		case "ready_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, sberrors.Errorf(sberrors.InvalidArgument, "k8s: URL parameter ready_timeout=%q: want a positive duration such as 2m", v)
			}
			opts = append(opts, WithReadyTimeout(d))
		case "rest_port", "grpc_port":
			p, err := strconv.Atoi(v)
			if err != nil {
				return nil, sberrors.Errorf(sberrors.InvalidArgument, "k8s: URL parameter %s=%q: want a port number", k, v)
			}
			if k == "rest_port" {
				restPort = p
			} else {
				grpcPort = p
			}
		default:
			return nil, sberrors.Errorf(sberrors.InvalidArgument, "k8s: unknown URL parameter %q (known: template, warm_pool, router_url, rest_port, grpc_port, root, kubeconfig, context, ready_timeout)", k)
		}
	}
	opts = append(opts, WithSandboxdPorts(restPort, grpcPort))
	if kubeconfig != "" || kctx != "" {
		opts = append(opts, WithKubeconfig(kubeconfig, kctx))
	}
	return opts, nil
}

// Name returns "k8s".
func (r *Runtime) Name() string { return Scheme }

// Capabilities reports what agent-sandbox offers: a paused (Suspended)
// sandbox loses its pod, so only files on the template's volumes survive
// and running processes do not; labels are label selectors on the claims.
func (r *Runtime) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		PauseKeepsMemory:    false,
		AttachAcrossClients: false,
		ServerSideLabels:    true,
		Persistent:          true,
		Isolation:           "pod (the template's RuntimeClass: runc, gVisor or Kata)",
		DefaultLease:        defaultLease,
		Network:             true,
	}
}

// ResetTransport drops pooled connections to sandboxd and the router, so
// the next call dials afresh.
func (r *Runtime) ResetTransport() error {
	r.transport.CloseIdleConnections()
	r.mu.Lock()
	conns := r.grpc
	r.grpc = map[string]*grpcConn{}
	r.mu.Unlock()
	for _, c := range conns {
		_ = c.conn.Close()
	}
	return nil
}

// Close waits for the background deletions of claims that failed or
// cancelled Creates left, and releases connections.
func (r *Runtime) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.bg.Wait()
	return r.ResetTransport()
}

// errorf wraps err with the provider's prefix, keeping its chain.
func errorf(format string, args ...any) error {
	return fmt.Errorf("k8s: "+format, args...)
}
