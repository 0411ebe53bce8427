// Package e2b is the sandbox provider for E2B (https://e2b.dev): Firecracker
// microVMs driven through E2B's REST control plane and envd, the daemon in
// every sandbox (Connect RPC with the JSON codec, plus /files for streamed
// transfers). It speaks the wire protocol directly; no E2B SDK is needed.
//
// # Configuration
//
// New reads, in order of precedence, its options and then the environment:
//
//	E2B_API_KEY      the API key (e2b_…); required. Never put it in a URL.
//	E2B_API_URL      control-plane base URL (default https://api.<domain>)
//	E2B_DOMAIN       domain (default e2b.app)
//	E2B_SANDBOX_URL  envd base URL used for every sandbox, as the official
//	                 SDKs do (requests are routed by the E2b-Sandbox-Id header)
//
// # API version and self-hosted engines
//
// The adapter speaks E2B's API as E2B's SDKs do from 2.51: create is POST
// /v2/sandboxes and connect (resume) POST /v2/sandboxes/{id}/connect,
// which secure every sandbox's envd with an access token. A server that
// lacks them (an older E2B API, or an engine speaking the older protocol)
// is sent POST /sandboxes (with secure true) and POST
// /sandboxes/{id}/connect instead; the answer that says a route is
// missing (405, 501, a 404 that is not E2B's error body, or E2B's
// validator's "no matching operation" or "method not allowed") is learned
// once per Runtime and route. A refusal by the v2 route itself (an unknown
// template, a timeout out of range) is reported, never retried on the
// older route.
//
// An engine that speaks E2B's protocol on its own domain (openkruise/agents,
// AgentENV) is reached with WithDomain (URL: domain) and, when its API is
// not at https://api.<domain>, WithAPIURL (api_url): envd and user ports
// are then https://<port>-<id>.<domain>, or WithSandboxURL (sandbox_url)
// for one gateway routing by the E2b-Sandbox-Id header. The API key's
// form (e2b_ and hex digits) is checked only for E2B's own service.
//
// # URLs
//
// Importing the package registers the "e2b" scheme with sandbox.Open:
//
//	e2b://?template=base&domain=e2b.app&user=root
//
// Query parameters: template, domain, api_url, sandbox_url, user,
// file_access ("user", the default, or "root": see WithRootFileAccess),
// and api_key_env (the name of an environment variable holding the key).
// An API key in the URL itself is refused.
//
// # Provider options
//
// CreateOptions.ProviderOptions accepts "auto_resume" ("true": traffic to a
// paused sandbox resumes it), "secure" (deprecated, as in E2B's SDKs: the
// v2 create secures every sandbox; "false" makes the user ports public,
// and only on an older server leaves envd without an access token),
// OptPublicTraffic ("public_traffic") and OptName ("name").
//
// A sandbox's ports are private by default: it is created with public
// traffic off (network.allowPublicTraffic false), so E2B's edge refuses
// a request to a user port without the traffic access token, which
// Sandbox.Expose's endpoints carry in Header. "public_traffic"="true"
// (or "secure"="false", since E2B restricts traffic only for secure
// sandboxes) makes them reachable by anyone with the URL, as E2B's own
// SDKs do by default; their endpoints then report Public. E2B sandboxes have no name field: a name is kept
// as the metadata label "name" (NameLabel), so it shows in Info.Labels and List finds the sandbox by it.
// The same option names a Daytona sandbox, so one CreateOptions names a
// sandbox on both.
//
// # Network policy and brokered secrets
//
// A policy maps to allow_internet_access, network.allowOut and
// network.denyOut (see networkSupport's note for what E2B cannot say).
// Brokered secrets (CreateOptions.BrokeredSecrets) map to network.rules:
// for each of a secret's hosts a rule whose transform sets its header to
// the formatted value, so E2B's edge, outside the sandbox, puts it on the
// sandbox's HTTP and HTTPS requests to that domain and replaces a header
// of that name the sandbox sent. The sandbox's env holds the placeholder.
// E2B sets the header only: a placeholder inside another header or the
// body is forwarded as it is. GET /sandboxes/{id} returns the rules with
// their values; Get reports hosts and header names only. SetNetwork
// sends the rules in force again, since E2B's PUT clears what it is not
// sent.
//
// E2B reports a sandbox as "running" or "paused" (StateRunning,
// StatePaused). Any other state, or none, reads as StateUnknown with what
// E2B said in Info.Detail["state"]: never as running, since it says
// nothing of whether commands can run. List can ask for StateUnknown; E2B
// cannot filter on it, so such a List fetches every state and keeps the
// unknown ones.
//
// # Lost creates and GetOrCreate
//
// Every create carries a hidden metadata token ("sandboxkit.create-token",
// left out of Info.Labels). When the answer is lost (the connection cut
// after the server acted, or the caller's context ended first), the
// sandbox is found by its token: adopted while the caller still waits,
// destroyed otherwise. E2B has no unique names, so GetOrCreate across
// processes checks after creating: the oldest sandbox carrying the key's
// labels wins (ties by id) and a loser destroys its own and returns the
// winner (CreateKeyed). A list that does not yet show a sandbox just
// created can leave two until a lease ends.
//
// # Errors
//
// Control-plane and envd failures map onto sandbox Codes: 404 NotFound,
// 409 FailedPrecondition, 429 ResourceExhausted, 401/403 PermissionDenied.
// The edge proxy's 502 for a sandbox it cannot reach is classified with one
// control-plane lookup: a paused sandbox matches sberrors.ErrPaused, a gone
// one NotFound. A request that failed before a single byte of it was
// written (no connection, or a pooled connection already reset) wraps
// sberrors.ErrStaleTransport; a mutating request that failed after it was
// (even partly) written wraps sberrors.ErrOutcomeUnknown and is never
// re-sent, since the server may have acted on it. No error carries the
// API key or an access token.
//
// # Files
//
// Upload is atomic: envd writes a file in place, so the bytes go to a
// hidden temporary name next to the target (".<name>.<random>.sbx.tmp")
// and envd's Move, a rename(2), replaces the target after the last byte.
// On failure the temporary file is removed. A source that fails, or a
// context that ends, ends the request's body rather than aborting it, so
// envd has answered (and written its last byte) before the removal. A
// call whose context ended so returns once envd answered, or aborts the
// request when no answer came within 5 s (a source whose Read blocks, a
// stalled connection); should envd open the file after that removal, a
// hidden temporary file can stay behind, never the target.
//
// envd runs as root and its file API acts as root: an upload, MakeDir,
// Move or Remove succeeds where the sandbox's user may not write (an
// upload to /usr/x as "user" is written, then given to "user"). The
// contract says a place the sandbox's user may not write is
// PermissionDenied for the file methods as for a command, so before
// Upload, MkdirAll, Rename and Remove change a directory the adapter
// checks, from envd's Stat of it (owner, group, mode; the sticky bit for
// an entry replaced or removed), that the sandbox's user may, and refuses
// with PermissionDenied naming the path otherwise. Who the user is comes
// from the owner and group of its home, looked up once per sandbox. Where
// the mode alone cannot say (a directory writable by its group but not by
// others, or the reverse, of a group other than the user's own), a
// `test -w` run as the user decides. This check is made by the SDK, not a
// security boundary: code in the sandbox runs as that user anyway and
// could call envd itself. envd's Stat is an lstat and envd follows links
// as root, so where the directory that decides is a symbolic link (~/l ->
// /etc, /bin -> usr/bin) the check follows it, up to 40 links (more, a
// loop most likely, is InvalidArgument), and judges the real directory.
// envd's Remove of a directory is a recursive RemoveAll as root, so a
// directory is removed by "rm -rf" run as the user instead: an entry below
// it that the user may not remove is PermissionDenied, as for the user's
// own rm (what rm removed before stays removed). Reads are held to the
// same rule: before Download (ReadFile) the adapter checks that the user
// may search the file's directory and read the file, and refuses with
// PermissionDenied otherwise. It costs one Stat per change or read, one
// more per link followed (Upload: three round trips instead of two), none
// when the user is root. WithRootFileAccess (URL: file_access=root) turns
// all of it off, for callers who want envd's root rights. Either way a file written through the SDK is
// owned by the sandbox's user, as envd makes it.
//
// # Terminals
//
// StartTerminal runs a program on envd's pseudo-terminal: Process.Start
// with the pty field (the window size) starts it, its output arrives as
// pty data events, Process.SendInput with ProcessInput.pty types into it,
// Process.Update with a pty size resizes it, and Process.Connect by pid
// re-attaches to it, from any client. A terminal's ID is envd's pid of its
// program, in decimal; without Args the program is "/bin/bash -i -l", as
// the official SDKs' pty.create starts it, with TERM=xterm-256color unless
// Env sets TERM. Its lifetime (TerminalOptions.Timeout, or the longest
// lease) is sent as Connect-Timeout-Ms, as for Start. envd sends only
// SIGKILL and SIGTERM (Process.SendSignal): Signal with SIGINT, SIGQUIT or
// SIGTSTP is typed as the terminal's control character (Ctrl-C, Ctrl-\,
// Ctrl-Z), which the line discipline turns into that signal for the
// foreground process group, as a keyboard does (a program that switched
// the terminal to raw mode reads the byte instead); other signals are
// Unimplemented.
//
// # Directory watch and process list
//
// Watch is envd's Filesystem.WatchDir (inotify in the VM, events as they
// happen). envd ends a watch whose queue overflowed with an error; the
// adapter reports one FileOverflow event and watches again. Processes is
// envd's Process.List: the processes envd started (every command the SDK
// ran, foreground or background, and the template's start command), each
// attachable by PID, so each a handle; envd does not say when they started
// and does not list their children.
package e2b

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/errscrub"
	"github.com/sandboxkit/sandbox/internal/lostcreate"
	"github.com/sandboxkit/sandbox/internal/opts"
	"github.com/sandboxkit/sandbox/internal/wire"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/api"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/filesystem/filesystemconnect"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/process/processconnect"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Scheme is the URL scheme the package registers with sandbox.Open.
const Scheme = "e2b"

// DefaultTemplate is the template a sandbox is created from when
// CreateOptions.Template is empty.
const DefaultTemplate = "base"

// DefaultDomain is E2B's public domain.
const DefaultDomain = "e2b.app"

// envdPort is the port envd listens on inside every sandbox.
const envdPort = "49983"

// defaultLease is the lease the official SDKs send (300 s).
const defaultLease = 5 * time.Minute

// maxLease is the longest lease E2B accepts (Pro plan; Hobby is 1 h and
// the server refuses more).
const maxLease = 24 * time.Hour

// hobbyMaxLease is the longest lease on E2B's Hobby plan.
const hobbyMaxLease = time.Hour

var keyRE = regexp.MustCompile(`^e2b_[0-9a-f]+$`)

func init() {
	driver.Register(Scheme, func(ctx context.Context, u *url.URL, _ driver.OpenOptions) (driver.Runtime, error) {
		return openURL(u)
	})
}

// Runtime is the E2B provider. It is safe for concurrent use. It
// implements driver.Runtime, driver.Pauser, driver.ProcessRuntime,
// driver.TransportResetter, driver.Snapshotter and driver.Forker.
type Runtime struct {
	cfg       config
	transport http.RoundTripper
	counting  bool // transport is our clone, counting writes
	hc        *http.Client
	rpcDoer   roundTripper
	basicAuth string // "Basic …" selecting the user, or empty
	api       *api.Client
	routes    routes // which create and connect routes the server has (routes.go)

	mu     sync.Mutex
	conns  map[string]*conn
	rpc    map[string]*rpcClients
	leases map[string]time.Duration // the last lease asked for, per sandbox (see Resume)

	// sweep destroys what the server makes of creates whose caller gave
	// up, late; Close ends it.
	lost lostcreate.Sweeper
}

// execGrace is how long a command's or process's stream may run past its
// lifetime: ExecGrace, unless a test shortened it.
func (r *Runtime) execGrace() time.Duration {
	if r.cfg.grace > 0 {
		return r.cfg.grace
	}
	return ExecGrace
}

// conn is what the adapter knows about reaching one sandbox's envd.
type conn struct {
	token   string
	traffic string // traffic access token for user ports, "" when traffic is public
	domain  string
	home    string
	version string
	// owner and group own the home: the sandbox's user and its primary
	// group, as envd names them ("" until the home was looked up).
	owner, group string
}

type rpcClients struct {
	proc processconnect.ProcessClient
	fs   filesystemconnect.FilesystemClient
}

type config struct {
	apiKey     string
	apiURL     string
	domain     string
	sandboxURL string
	template   string
	user       string
	rootFiles  bool // WithRootFileAccess: no permission check before file writes
	transport  http.RoundTripper
	bad        opts.Errors // invalid option values, reported by New
	// grace replaces ExecGrace when positive; only the package's tests
	// set it (export_test.go), to see a stall end without waiting the
	// full grace.
	grace time.Duration
}

// Option configures a Runtime. New fails with an InvalidArgument error
// naming any option given an invalid value.
type Option func(*config)

// WithAPIKey sets the API key (default: E2B_API_KEY). An empty key is no
// key: New fails with PermissionDenied.
func WithAPIKey(key string) Option {
	return func(c *config) { c.apiKey = key }
}

// WithAPIURL sets the control plane's base URL (default: E2B_API_URL, or
// https://api.<domain>).
func WithAPIURL(u string) Option { return func(c *config) { c.apiURL = u } }

// WithDomain sets the E2B domain (default: E2B_DOMAIN, or e2b.app).
func WithDomain(d string) Option { return func(c *config) { c.domain = d } }

// WithSandboxURL sets the envd base URL used for every sandbox (default:
// E2B_SANDBOX_URL; when empty, derived from the domain and sandbox ID).
func WithSandboxURL(u string) Option { return func(c *config) { c.sandboxURL = u } }

// WithTemplate sets the template used when CreateOptions.Template is empty
// (default "base").
func WithTemplate(t string) Option { return func(c *config) { c.template = t } }

// WithUser sets the Linux user commands and file operations run as (default:
// the template's default user, "user" on E2B's templates).
func WithUser(u string) Option { return func(c *config) { c.user = u } }

// WithRootFileAccess lets the file methods write with envd's own rights,
// which are root's: envd writes as root and then gives what it created to
// the sandbox's user, so Upload, MkdirAll, Rename and Remove succeed in
// places (/usr, /etc, another user's files) where the sandbox's commands
// get "Permission denied", and Download reads any file. By default the
// adapter holds the file methods to the contract instead: before a change
// or a read it checks, from envd's Stat (owner, group, mode; links
// followed), that the sandbox's user may make it, removes a directory
// with the user's rm -rf, and refuses with PermissionDenied otherwise
// (see Files in the package doc). The URL
// parameter file_access=root sets it too.
func WithRootFileAccess() Option { return func(c *config) { c.rootFiles = true } }

// WithTransport sets the http.RoundTripper under the Runtime's own
// http.Client (default: a clone of http.DefaultTransport); rt must not be
// nil. It means the same as daytona.WithTransport: an *http.Transport is
// cloned, its transparent compression disabled and its dialer wrapped to
// count the bytes each connection writes, which is how a failed request is
// known not to have been sent; any other RoundTripper is used as it is,
// and then only a failed dial is. The adapter never sets a client-wide
// timeout: every call is bounded by its context.
func WithTransport(rt http.RoundTripper) Option {
	return func(c *config) {
		if rt == nil {
			c.bad.Invalid("WithTransport", "nil RoundTripper")
		}
		c.transport = rt
	}
}

// New returns an E2B Runtime configured by opts and the environment.
func New(opts ...Option) (*Runtime, error) {
	cfg := config{
		apiKey: os.Getenv("E2B_API_KEY"), apiURL: os.Getenv("E2B_API_URL"),
		domain: os.Getenv("E2B_DOMAIN"), sandboxURL: os.Getenv("E2B_SANDBOX_URL"),
	}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.bad.Err("e2b"); err != nil {
		return nil, err
	}
	return newRuntime(cfg)
}

func newRuntime(cfg config) (*Runtime, error) {
	if cfg.apiKey == "" {
		return nil, sberrors.Errorf(sberrors.PermissionDenied, "e2b: no API key: set E2B_API_KEY or use WithAPIKey")
	}
	if cfg.domain == "" {
		cfg.domain = DefaultDomain
	}
	if cfg.apiURL == "" {
		cfg.apiURL = "https://api." + cfg.domain
	}
	// E2B's keys are e2b_<hex>; a self-hosted engine's are its own
	// (agbx_…, ark_…), so the form is checked for E2B's service only.
	if strings.ContainsFunc(cfg.apiKey, func(c rune) bool { return c <= ' ' || c >= 0x7f }) {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "e2b: the API key holds spaces, control or non-ASCII characters")
	}
	if e2bService(cfg.apiURL) && !keyRE.MatchString(cfg.apiKey) {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "e2b: the API key is malformed (want e2b_ followed by hex digits)")
	}
	if cfg.template == "" {
		cfg.template = DefaultTemplate
	}
	for _, u := range []struct{ name, v string }{{"API URL", cfg.apiURL}, {"sandbox URL", cfg.sandboxURL}} {
		if u.v == "" {
			continue
		}
		pu, err := url.Parse(u.v)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || pu.User != nil {
			return nil, sberrors.Errorf(sberrors.InvalidArgument, "e2b: %s must be an http(s) URL without credentials", u.name)
		}
	}
	cfg.apiURL = strings.TrimRight(cfg.apiURL, "/")
	cfg.sandboxURL = strings.TrimRight(cfg.sandboxURL, "/")
	t, counting := wire.Transport(cfg.transport)
	r := &Runtime{cfg: cfg, transport: t, counting: counting, conns: map[string]*conn{}, rpc: map[string]*rpcClients{}, leases: map[string]time.Duration{}}
	// Every request carries the caller's trace context (W3C traceparent).
	// Requests to envd, which runs inside the sandbox, carry that only:
	// baggage (often user or tenant ids) stays out of untrusted code. The
	// control-plane API gets whatever the global propagator adds.
	pt := wire.Propagate(t)
	et := wire.PropagateTrace(t)
	r.hc = &http.Client{Transport: &envdTransport{next: et}}
	r.rpcDoer = roundTripper{&envdTransport{next: et}}
	if cfg.user != "" {
		r.basicAuth = "Basic " + base64.StdEncoding.EncodeToString([]byte(cfg.user+":"))
	}
	key := cfg.apiKey
	c, err := api.NewClient(cfg.apiURL, api.WithHTTPClient(&http.Client{Transport: pt}),
		api.WithRequestEditorFn(func(ctx context.Context, req *http.Request) error {
			req.Header.Set("X-API-Key", key)
			return nil
		}))
	if err != nil {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "e2b: API URL: %v", err)
	}
	r.api = c
	return r, nil
}

// e2bDomains are E2B's own domains, whose envd is reached through the
// shared host sandbox.<domain>, as the official SDKs list them.
var e2bDomains = []string{"e2b.app", "e2b.dev", "e2b.pro", "e2b-staging.dev"}

// e2bService reports whether apiURL is E2B's own control plane.
func e2bService(apiURL string) bool {
	u, err := url.Parse(apiURL)
	if err != nil {
		return false
	}
	h := strings.ToLower(u.Hostname())
	for _, d := range e2bDomains {
		if h == "api."+d {
			return true
		}
	}
	return false
}

// openURL builds a Runtime from an e2b:// URL.
func openURL(u *url.URL) (*Runtime, error) {
	if u.User != nil {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "e2b: credentials in the URL are refused; set E2B_API_KEY")
	}
	q := u.Query()
	var opts []Option
	for k, vs := range q {
		v := vs[0]
		switch k {
		case "template":
			opts = append(opts, WithTemplate(v))
		case "domain":
			opts = append(opts, WithDomain(v))
		case "api_url":
			opts = append(opts, WithAPIURL(v))
		case "sandbox_url":
			opts = append(opts, WithSandboxURL(v))
		case "user":
			opts = append(opts, WithUser(v))
		case "file_access":
			switch v {
			case "root":
				opts = append(opts, WithRootFileAccess())
			case "user":
			default:
				return nil, sberrors.Errorf(sberrors.InvalidArgument, "e2b: URL parameter file_access=%q: want \"user\" (the default) or \"root\"", v)
			}
		case "api_key_env":
			key := os.Getenv(v)
			if key == "" {
				return nil, sberrors.Errorf(sberrors.PermissionDenied, "e2b: environment variable %s named by api_key_env is empty", v)
			}
			opts = append(opts, WithAPIKey(key))
		case "api_key", "key", "apikey", "token":
			return nil, sberrors.Errorf(sberrors.InvalidArgument, "e2b: an API key in the URL is refused; set E2B_API_KEY or use api_key_env")
		default:
			return nil, sberrors.Errorf(sberrors.InvalidArgument, "e2b: unknown URL parameter %q (known: template, domain, api_url, sandbox_url, user, file_access, api_key_env)", k)
		}
	}
	return New(opts...)
}

// Name returns "e2b".
func (r *Runtime) Name() string { return Scheme }

// Capabilities reports what E2B offers.
func (r *Runtime) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		PauseKeepsMemory: true, AttachAcrossClients: true,
		ServerSideLabels: true, Persistent: true, Isolation: "microvm (Firecracker)",
		DefaultLease: defaultLease, MaxLease: maxLease, Network: true,
		ReportsSignal: true, NetworkPolicy: networkSupport,
		SnapshotModes: r.snapshotModes(),
	}
}

// ResetTransport drops every pooled connection, so the next request dials
// afresh. The portable layer calls it before retrying a stale-transport
// failure.
func (r *Runtime) ResetTransport() error {
	r.closeIdle()
	return nil
}

func (r *Runtime) closeIdle() {
	if t, ok := r.transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

// Close ends the background searches for sandboxes of abandoned creates
// and releases pooled connections.
func (r *Runtime) Close() error {
	r.lost.Close()
	r.closeIdle()
	return nil
}

// homeFor is the home directory of the configured user on E2B templates,
// used when the sandbox cannot be asked.
func (r *Runtime) homeFor() string {
	switch r.cfg.user {
	case "root":
		return "/root"
	case "":
		return "/home/user"
	}
	return "/home/" + r.cfg.user
}

// envdBase returns envd's base URL for sandbox id, as the official SDKs
// compute it.
func (r *Runtime) envdBase(id string, c *conn) string {
	if r.cfg.sandboxURL != "" {
		return r.cfg.sandboxURL
	}
	domain := c.domain
	if domain == "" {
		domain = r.cfg.domain
	}
	if slices.Contains(e2bDomains, domain) {
		return "https://sandbox." + domain
	}
	return "https://" + envdPort + "-" + id + "." + domain
}

func (r *Runtime) clients(base string) *rpcClients {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.rpc[base]; ok {
		return c
	}
	opts := []connect.ClientOption{connect.WithCodec(jsonCodec{}), connect.WithAcceptCompression("gzip", nil, nil)}
	c := &rpcClients{
		proc: processconnect.NewProcessClient(r.rpcDoer, base, opts...),
		fs:   filesystemconnect.NewFilesystemClient(r.rpcDoer, base, opts...),
	}
	r.rpc[base] = c
	return c
}

// setEnvdHeaders adds auth and routing headers to an envd request.
// The keys are in canonical form, so they are assigned directly.
func (r *Runtime) setEnvdHeaders(h http.Header, id string, c *conn) {
	if c.token != "" {
		h["X-Access-Token"] = []string{c.token}
	}
	if r.basicAuth != "" {
		h["Authorization"] = []string{r.basicAuth}
	}
	h["E2b-Sandbox-Id"] = []string{id}
	h["E2b-Sandbox-Port"] = envdPortHeader
}

var envdPortHeader = []string{envdPort}

// remember records what a control-plane response says about reaching envd.
func (r *Runtime) remember(id string, token, domain *string, version string) *conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.conns[id]
	if c == nil {
		c = &conn{}
		r.conns[id] = c
	}
	nc := *c
	if token != nil {
		nc.token = *token
	}
	if domain != nil {
		nc.domain = *domain
	}
	if version != "" {
		nc.version = version
	}
	r.conns[id] = &nc
	return &nc
}

func (r *Runtime) setHome(id, home, owner, group string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.conns[id]; c != nil {
		nc := *c
		nc.home, nc.owner, nc.group = home, owner, group
		r.conns[id] = &nc
	}
}

func (r *Runtime) cached(id string) *conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conns[id]
}

func (r *Runtime) forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns, id)
	delete(r.leases, id)
}

// setLease records the lease last asked for sandbox id.
func (r *Runtime) setLease(id string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leases[id] = d
}

// leaseFor returns the lease last asked for sandbox id, or E2B's default.
func (r *Runtime) leaseFor(id string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d, ok := r.leases[id]; ok {
		return d
	}
	return defaultLease
}

// conn returns how to reach sandbox id, asking the control plane when
// this Runtime has not seen the sandbox yet.
func (r *Runtime) conn(ctx context.Context, id string) (*conn, error) {
	if c := r.cached(id); c != nil {
		return c, nil
	}
	d, err := r.detail(ctx, id)
	if err != nil {
		return nil, err
	}
	if d.State == "paused" {
		return nil, pausedErr(id)
	}
	return r.cached(id), nil
}

func pausedErr(id string) error {
	return fmt.Errorf("e2b: sandbox %s is paused: %w", id, sberrors.ErrPaused)
}

// seconds rounds d up to whole seconds, as the SDKs do, within int32.
func seconds(d time.Duration) int32 {
	s := math.Ceil(d.Seconds())
	if s < 1 {
		s = 1
	}
	if s > math.MaxInt32 {
		s = math.MaxInt32
	}
	return int32(s)
}

// scrub hides the API key and access tokens should a server echo one, in
// every error of err's tree (see internal/errscrub).
func (r *Runtime) scrub(err error) error {
	if err == nil {
		return nil
	}
	secrets := []string{r.cfg.apiKey}
	r.mu.Lock()
	for _, c := range r.conns {
		if c.token != "" {
			secrets = append(secrets, c.token)
		}
		if c.traffic != "" {
			secrets = append(secrets, c.traffic)
		}
	}
	r.mu.Unlock()
	return errscrub.Chain(err, func(msg string) string {
		for _, s := range secrets {
			if s != "" {
				msg = strings.ReplaceAll(msg, s, "[REDACTED]")
			}
		}
		return msg
	})
}

// The adapter's error types, rebuilt by errscrub with redacted text.
func init() {
	errscrub.Register(func(err error, kids []error, redact func(string) string) (error, bool) {
		switch e := err.(type) {
		case *statusError:
			c := *e
			c.Message = redact(e.Message)
			return &c, true
		case *connect.Error:
			cause := errors.New(redact(e.Message()))
			if len(kids) > 0 && kids[0] != nil {
				cause = kids[0]
			}
			return connect.NewError(e.Code(), cause), true
		}
		return nil, false
	})
}

// roundTripper sends Connect calls straight to the transport: envd never
// redirects or sets cookies, so http.Client's per-request header copying
// for redirects is pure overhead on every RPC.
type roundTripper struct{ rt http.RoundTripper }

// inMemoryBody is the largest request body Do hands to the transport as a
// *bytes.Reader. Connect's unary request bodies are already in memory, but
// behind a type net/http does not recognise, so it would flush the headers
// in one write and the body in another: two syscalls, and a server that
// wakes twice, on every exec. A body net/http knows to be in memory goes
// out with its headers in a single write.
const inMemoryBody = 64 << 10

func (d roundTripper) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.ContentLength > 0 && req.ContentLength <= inMemoryBody {
		b := make([]byte, req.ContentLength)
		_, err := io.ReadFull(req.Body, b)
		_ = req.Body.Close()
		if err != nil {
			return nil, &url.Error{Op: req.Method, URL: req.URL.String(), Err: err}
		}
		req = req.WithContext(req.Context()) // a shallow copy: the caller's request is left as it was
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	return d.send(req)
}

// send sends req as it is (its body, if any, already in memory).
func (d roundTripper) send(req *http.Request) (*http.Response, error) {
	resp, err := d.rt.RoundTrip(req)
	if err != nil {
		return nil, &url.Error{Op: req.Method, URL: req.URL.String(), Err: err}
	}
	return resp, nil
}

var errNoResult = errors.New("e2b: the process stream ended without a result")

var (
	_ driver.Runtime           = (*Runtime)(nil)
	_ driver.Pauser            = (*Runtime)(nil)
	_ driver.ProcessRuntime    = (*Runtime)(nil)
	_ driver.TransportResetter = (*Runtime)(nil)
	_ driver.Closer            = (*Runtime)(nil)
)
