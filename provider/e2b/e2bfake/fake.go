// Package e2bfake is an in-process fake of E2B: the control-plane REST API
// and envd, the daemon inside each sandbox (Connect RPC and /files), on two
// httptest servers. It speaks the real wire protocol and executes commands
// and file operations for real through a backing driver.Runtime (for
// example provider/local, or provider/memory in unit tests).
//
// The fake enforces what E2B enforces, so a client bug shows up against it:
// the X-API-Key and X-Access-Token headers, 404 for a gone sandbox, the
// default lease when a create omits the timeout (300 s on POST
// /v2/sandboxes, 15 s on the older POST /sandboxes), a 60 s command
// lifetime when a Start carries no Connect-Timeout-Ms, the proxy's 502 for
// a paused or gone sandbox, v2 list pagination and metadata encoding, and
// the exact error bodies. Faults can be injected with Server.Inject.
//
// # Deliberate differences from the real service
//
//   - envd itself has no default command timeout; the 60 s the fake applies
//     to a Start without Connect-Timeout-Ms is the official SDKs' default,
//     enforced to catch a client that forgets to send one
//     (WithDefaultCommandTimeout changes it).
//   - A shell wrapper "/bin/bash -l -c LINE" runs in the backend's bash
//     ("bash -c LINE", not a login shell: the host's profile is not the
//     template's), or its shell where it has no bash; "sh -c LINE" runs in
//     its shell. Other commands go to the backend as an argv behind a
//     small sh script that names a missing program as envd's nice(1)
//     wrapper does. An argv over Linux's limits (128 KiB an argument,
//     2 MiB in all with the environment, the limits of the usual 8 MiB
//     stack) is refused as envd's exec refuses it.
//   - Users: "user" (the default) and "root" are accepted, others refused
//     as envd does, but the backend runs everything as its own user, and
//     relative paths resolve against the backend sandbox's home whatever
//     the user. Stat reports a directory's owner and group as the
//     sandbox names them (found with a stat command run in the sandbox,
//     one per Stat); files, and the entries of ListDir, MakeDir and Move,
//     are reported as "user"'s.
//   - envd's file API (/files and the Filesystem RPCs) acts as root: it
//     writes where the sandbox's user may not and hands what it creates
//     to the user. The fake acts with its backend's file rights: over
//     provider/memory with memory.WithRootFileAccess those are root's and
//     the fake answers as envd does; over a backend whose file methods
//     have the user's rights (provider/local) such a write is refused, as
//     envd's own open fails (500 "permission denied").
//   - /files: a download's Content-Type and single byte ranges are as
//     envd's http.ServeContent gives them; a request of several ranges
//     gets the whole file, and conditional requests are not answered.
//     No signed URLs (signature query parameters), no X-Metadata headers,
//     no 507.
//   - Processes: no PTY (Start with a pty and Update are unimplemented),
//     no tags from templates (no "startCmd" process), pids are the
//     backend's. Exited processes are remembered for 30 s, as envd does.
//   - Lease expiry is applied lazily, when the next request arrives, not by
//     a timer. Pause, resume and kill are instant: the 409 "transitioning"
//     answers and connect's waits cannot happen. autoResume is accepted but
//     never resumes a paused sandbox on envd traffic (the proxy's 502 is
//     always returned). The envd access token is regenerated on resume.
//   - Pause keeps processes only if the backend's Pause does.
//   - Egress rules (allow_internet_access, network.allowOut and denyOut on
//     create, PUT /sandboxes/{id}/network) are validated as the API does
//     (an allowOut entry must be an IP, CIDR or domain, a denyOut entry an
//     IP or CIDR: 400 otherwise), recorded and reported back by GET.
//     Header-transform rules (network.rules, on create and PUT, which
//     clears them when left out) are validated (a key must be a domain as
//     allowOut takes it, a header name an HTTP token, a header value free
//     of control characters: 400 otherwise, with this fake's wording,
//     which never echoes a value), recorded, reported back by GET with
//     their values as the API's SandboxDetail carries them, and readable
//     with Server.Rules. The rules of a create are enforced where the
//     backend enforces allow-lists and brokered secrets (the local
//     provider, by its egress proxy): the backend sandbox gets them as its
//     network policy (allow_internet_access false is deny-all; allowOut
//     with denyOut 0.0.0.0/0 an allow-list; denyOut alone deny entries of
//     allow-all, where allowOut entries that would win over them on E2B
//     are dropped), and each header transform as a brokered secret for its
//     domain, which sets that header on HTTPS requests to it, replacing
//     what the sandbox sent, as E2B's edge does. Where the semantics
//     differ from E2B's: the proxy is an HTTP/HTTPS/SOCKS5 proxy that
//     programs reach through the proxy variables (E2B filters every
//     connection), plain http:// to a domain with a rule is refused (E2B
//     sets the header), and a denyOut entry that an allowOut entry covers
//     in allow-all mode still denies. PUT /sandboxes/{id}/network is
//     recorded only, and on any other backend (or a sandbox from a
//     snapshot) the rules are recorded only: commands reach whatever the
//     backend lets them reach. egressProxy is not modelled.
//   - Only the v2 list, create (POST /v2/sandboxes, which secures every
//     sandbox, and the older POST /sandboxes), get, kill, timeout, pause,
//     connect (POST /v2/sandboxes/{id}/connect and the older
//     /sandboxes/{id}/connect), network, snapshot (create, list, delete
//     as a template) and fork endpoints exist (no v1 list, refreshes,
//     deprecated resume, other template endpoints or logs);
//     WithoutV2Routes removes the v2 create and connect, as on E2B's API
//     before SDK 2.51. A v2 connect's memory false (resume from disk only)
//     is accepted and resumes as the backend does; metrics are sampled from the backend when
//     asked for (see metrics.go). Snapshots keep files (see
//     snapshots.go), not memory, unless the backend's own snapshots do.
//     cpuCount, memoryMB and diskSizeMB are
//     constants; clientID is the constant the API returns for paused
//     sandboxes; the Hobby plan's 1 h max lease is the default limit
//     (WithMaxLease).
//   - Only HTTP/1.1 (as envd itself); the real edge proxy also speaks h2.
package e2bfake

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/conntrack"
	"github.com/sandboxkit/sandbox/internal/fakeserve"
	"github.com/sandboxkit/sandbox/internal/inflight"
	"github.com/sandboxkit/sandbox/internal/opts"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/api"
)

// EnvdVersion is the envd version the fake advertises.
const EnvdVersion = "0.6.13"

// EnvdPort is the port envd listens on inside a sandbox.
const EnvdPort = 49983

const clientID = "6532622b"

// Server is a running fake. Close it when done.
type Server struct {
	backend driver.Runtime
	portTr  *http.Transport // the edge's connections to user ports (ports.go)
	writes  inflight.Writes // uploads in progress, by backend id and path
	config

	defaultLease   time.Duration
	exitedRetained time.Duration

	api, envd *fakeserve.Server

	closing   chan struct{}
	closeOnce sync.Once

	mu     sync.Mutex
	boxes  map[string]*box
	faults []*Fault
	snaps  snapStore // snapshots.go
	// conns follows both servers' connections for ResetBeforeAdmission.
	conns   conntrack.Tracker
	counts  map[string]int
	nextPID uint32
	bg      sync.WaitGroup
	// bash records, by backend sandbox id, whether bash runs there.
	bash sync.Map
}

type box struct {
	id, backendID, template string
	version                 string
	home                    string
	metadata, env           map[string]string
	startedAt, endAt        time.Time
	paused                  bool
	autoPause               bool
	token                   string // "" when not secure
	traffic                 string // traffic access token for user ports; "" when public
	internet                *bool  // allow_internet_access as last sent
	allowOut, denyOut       []string
	rules                   api.SandboxNetworkRules
	procs                   map[uint32]*proc
	metrics                 metricsLog // samples served by GET /sandboxes/{id}/metrics (metrics.go)
}

// config is what the options set.
type config struct {
	apiKey            string
	envdVersion       string
	maxLease          time.Duration
	defaultCmd        time.Duration
	maxSandboxes      int
	templates         []string
	now               func() time.Time
	apiAddr, envdAddr string
	onRequest         func(*http.Request)
	noV2              bool   // WithoutV2Routes
	domain            string // WithDomain
	tls               bool   // WithTLS
	bad               opts.Errors
}

// Option configures a Server. New panics, as httptest.NewServer does when
// it cannot listen, with an InvalidArgument error naming any option given
// an invalid value.
type Option func(*config)

// WithRequestHook makes the fake call f with each request it receives,
// on the control plane and envd alike, before it answers: tests use it to
// see what reached the service (headers such as traceparent). f must not
// keep or change the request, and must be safe for concurrent use.
func WithRequestHook(f func(*http.Request)) Option { return func(c *config) { c.onRequest = f } }

// WithAPIKey sets the API key clients must send (a random e2b_… key by default).
func WithAPIKey(k string) Option {
	return func(c *config) {
		if k == "" {
			c.bad.Invalid("WithAPIKey", "empty key")
		}
		c.apiKey = k
	}
}

// WithDomain makes the fake a self-hosted engine serving the sandbox
// domain d, as openkruise/agents and other engines that speak E2B's
// protocol are deployed: envd and user ports are reached at
// <port>-<sandboxID>.<d>, routed by that host name as E2B's edge routes
// it. The E2b-Sandbox-Id and E2b-Sandbox-Port headers are then honoured
// only on a request to localhost, an IP literal or sandbox.<d>, as on
// the edge; a host under another domain is refused (400 "invalid host").
// A client reaches such names through its own dialer (a test maps them to
// SandboxURL's address). Without it, the headers route any request.
func WithDomain(d string) Option {
	return func(c *config) {
		if d == "" || strings.ContainsAny(d, "/:@ ") || strings.HasPrefix(d, ".") {
			c.bad.Invalid("WithDomain", "%q: want a domain name such as example.com", d)
		}
		c.domain = d
	}
}

// WithTLS makes both servers serve HTTPS with httptest's certificate
// (Certificate), valid for 127.0.0.1, example.com and *.example.com: with
// WithDomain("example.com") a client addresses the fake as it would a
// self-hosted engine, https://api.example.com and
// https://49983-<id>.example.com.
func WithTLS() Option { return func(c *config) { c.tls = true } }

// WithoutV2Routes makes the fake an E2B API from before SDK 2.51, which
// had no POST /v2/sandboxes (create) and no POST
// /v2/sandboxes/{id}/connect: it answers those as that API did, from its
// request validator, with 400 "validation error: method not allowed" and
// 404 "validation error: no matching operation was found". Clients then
// use POST /sandboxes and POST /sandboxes/{id}/connect.
func WithoutV2Routes() Option { return func(c *config) { c.noV2 = true } }

// WithMaxLease sets the longest lease the fake accepts (1 h by default, the
// Hobby plan's limit).
func WithMaxLease(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.bad.Invalid("WithMaxLease", "%v is not positive", d)
		}
		c.maxLease = d
	}
}

// WithDefaultCommandTimeout sets the lifetime of a process started without
// Connect-Timeout-Ms (60 s by default).
func WithDefaultCommandTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.bad.Invalid("WithDefaultCommandTimeout", "%v is not positive", d)
		}
		c.defaultCmd = d
	}
}

// WithMaxSandboxes sets the concurrency limit above which create answers
// 429 (0, the default, means no limit).
func WithMaxSandboxes(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.bad.Invalid("WithMaxSandboxes", "%d is negative", n)
		}
		c.maxSandboxes = n
	}
}

// WithTemplates sets the template names create accepts ("base" by default).
func WithTemplates(names ...string) Option {
	return func(c *config) {
		if len(names) == 0 || slices.Contains(names, "") {
			c.bad.Invalid("WithTemplates", "%q: want one or more non-empty names", names)
		}
		c.templates = names
	}
}

// WithEnvdVersion sets the envd version the fake advertises (EnvdVersion
// by default); clients use it to pick protocol features.
func WithEnvdVersion(v string) Option {
	return func(c *config) {
		if v == "" {
			c.bad.Invalid("WithEnvdVersion", "empty version")
		}
		c.envdVersion = v
	}
}

// WithAddrs makes the control plane listen on api and envd on envd
// (loopback "host:port"; "" picks a free port, the default). Restart
// serves again on the same addresses.
func WithAddrs(api, envd string) Option {
	return func(c *config) { c.apiAddr, c.envdAddr = api, envd }
}

// Restart stops both servers as a crash would and serves again on the
// same addresses: idle keep-alive connections are reset (TCP RST, so a
// client's next write on one fails and it can tell nothing was sent) and
// every other connection is closed, so requests in flight get no answer.
// Sandboxes and their processes survive.
func (s *Server) Restart() error {
	s.conns.ResetIdle(func(string) bool { return true })
	if err := s.api.Restart(); err != nil {
		return err
	}
	return s.envd.Restart()
}

// WithClock sets the clock used for leases.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now == nil {
			c.bad.Invalid("WithClock", "nil clock")
			return
		}
		c.now = now
	}
}

// New starts a fake whose sandboxes are sandboxes of backend.
func New(backend driver.Runtime, opts ...Option) *Server {
	cfg := config{apiKey: "e2b_" + randHex(20), maxLease: time.Hour, defaultCmd: 60 * time.Second,
		templates: []string{"base"}, now: time.Now, envdVersion: EnvdVersion}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.bad.Err("e2bfake"); err != nil {
		panic(err)
	}
	s := &Server{
		backend: backend, config: cfg,
		defaultLease: 15 * time.Second, exitedRetained: 30 * time.Second,
		closing: make(chan struct{}), boxes: map[string]*box{}, counts: map[string]int{},
		nextPID: 400, portTr: &http.Transport{},
	}
	var err error
	serve := fakeserve.Start
	if s.tls {
		serve = fakeserve.StartTLS
	}
	if s.api, err = serve(s.apiAddr, s.faulty(s.apiHandler()), func(hs *http.Server) { s.conns.Serve(hs, "api") }); err != nil {
		panic("e2bfake: " + err.Error())
	}
	if s.envd, err = serve(s.envdAddr, s.faulty(s.envdHandler()), func(hs *http.Server) { s.conns.Serve(hs, "envd") }); err != nil {
		s.api.Close()
		panic("e2bfake: " + err.Error())
	}
	return s
}

// Close stops the servers, ends every process and destroys every backend
// sandbox the fake created.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.api.Close()
		s.envd.Close()
		s.portTr.CloseIdleConnections()
		s.mu.Lock()
		boxes := slices.Collect(maps.Values(s.boxes))
		s.boxes = map[string]*box{}
		s.mu.Unlock()
		for _, b := range boxes {
			s.destroyBox(b)
		}
		s.closeSnapshots()
		s.bg.Wait()
	})
}

// APIKey returns the API key clients must send.
func (s *Server) APIKey() string { return s.apiKey }

// APIURL returns the control plane's base URL (for E2B_API_URL).
func (s *Server) APIURL() string { return s.api.URL }

// Certificate returns the certificate both servers serve under WithTLS
// (nil otherwise), for a client to trust.
func (s *Server) Certificate() *x509.Certificate { return s.api.Certificate() }

// SandboxURL returns envd's base URL for every sandbox (for
// E2B_SANDBOX_URL); requests are routed by the E2b-Sandbox-Id header.
func (s *Server) SandboxURL() string { return s.envd.URL }

// Count returns how many requests reached the handler named key, which is
// "METHOD /path" with the sandbox ID replaced by {id}, such as
// "POST /process.Process/Start" or "GET /sandboxes/{id}". Requests that a
// fault answered are not counted.
func (s *Server) Count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[key]
}

// Kill removes a sandbox as if it had ended behind the client's back (an
// eviction, or another client's kill).
func (s *Server) Kill(id string) bool {
	s.mu.Lock()
	b, ok := s.boxes[id]
	delete(s.boxes, id)
	s.mu.Unlock()
	if ok {
		s.destroyBox(b)
	}
	return ok
}

// Sandboxes returns the IDs of the sandboxes that exist (running or paused).
func (s *Server) Sandboxes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.boxes))
}

// BackendID returns the backend's ID for the sandbox id.
func (s *Server) BackendID(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.boxes[id]
	if !ok {
		return "", false
	}
	return b.backendID, true
}

// Running returns how many processes envd started in the sandbox are
// still running.
func (s *Server) Running(id string) int {
	s.mu.Lock()
	b, ok := s.boxes[id]
	var procs []*proc
	if ok {
		for _, p := range b.procs {
			procs = append(procs, p)
		}
	}
	s.mu.Unlock()
	n := 0
	for _, p := range procs {
		select {
		case <-p.done:
		default:
			n++
		}
	}
	return n
}

// Lease returns when the sandbox's lease ends.
func (s *Server) Lease(id string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.boxes[id]
	if !ok {
		return time.Time{}, false
	}
	return b.endAt, true
}

func randHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

func newSandboxID() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return "i" + string(b)
}

// writeError writes the control plane's and envd's error body.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.Error{Code: int32(status), Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func notFoundMsg(id string) string {
	return fmt.Sprintf("Sandbox %q doesn't exist or you don't have access to it", id)
}

// expire applies lease ends: a sandbox whose lease ended is removed, or
// paused when it was created with autoPause.
func (s *Server) expire() {
	now := s.now()
	var gone, pause []*box
	s.mu.Lock()
	for id, b := range s.boxes {
		if b.paused || now.Before(b.endAt) {
			continue
		}
		if b.autoPause {
			b.paused = true
			b.endAt = now
			pause = append(pause, b)
			continue
		}
		delete(s.boxes, id)
		gone = append(gone, b)
	}
	s.mu.Unlock()
	for _, b := range gone {
		s.destroyBox(b)
	}
	for _, b := range pause {
		if p, ok := s.backend.(driver.Pauser); ok {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = p.Pause(ctx, b.backendID)
			cancel()
		}
	}
}

func (s *Server) destroyBox(b *box) {
	s.mu.Lock()
	procs := slices.Collect(maps.Values(b.procs))
	s.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.backend.Destroy(ctx, b.backendID)
	for _, p := range procs {
		select {
		case <-p.done:
		case <-ctx.Done():
		}
	}
}

// ---------------------------------------------------------------------------
// Control plane

type controlPlane struct{ s *Server }

var _ api.ServerInterface = controlPlane{}

var sandboxIDRE = regexp.MustCompile(`^[a-z0-9]+$`)

func (s *Server) apiHandler() http.Handler {
	h := api.HandlerWithOptions(controlPlane{s}, api.StdHTTPServerOptions{
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, http.StatusBadRequest, err.Error())
		},
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.noV2 && r.Method == http.MethodPost && isV2Route(r.URL.Path) {
			// Before these routes, E2B's API answered them from its
			// OpenAPI request validator, which runs before the API key
			// is looked at: a method the path lacks is 400, a path it
			// lacks 404. Such a request is counted.
			s.count(r)
			if r.URL.Path == "/v2/sandboxes" {
				writeError(w, http.StatusBadRequest, "validation error: method not allowed")
			} else {
				writeError(w, http.StatusNotFound, "validation error: no matching operation was found")
			}
			return
		}
		if r.URL.Path != "/health" && r.Header.Get("X-API-Key") != s.apiKey {
			writeError(w, http.StatusUnauthorized, "Invalid API key, please visit https://e2b.dev/docs/api-key for more information.")
			return
		}
		s.expire()
		s.count(r)
		h.ServeHTTP(w, r)
	})
}

// isV2Route reports whether p is one of the routes E2B's SDKs 2.51 moved
// create and connect to.
func isV2Route(p string) bool {
	if p == "/v2/sandboxes" {
		return true
	}
	rest, ok := strings.CutPrefix(p, "/v2/sandboxes/")
	if !ok {
		return false
	}
	_, tail, _ := strings.Cut(rest, "/")
	return tail == "connect"
}

func (s *Server) count(r *http.Request) {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/sandboxes/"):
		parts := strings.SplitN(p, "/", 4)
		parts[2] = "{id}"
		p = strings.Join(parts, "/")
	case strings.HasPrefix(p, "/v2/sandboxes/"):
		parts := strings.SplitN(p, "/", 5)
		parts[3] = "{id}"
		p = strings.Join(parts, "/")
	}
	s.mu.Lock()
	s.counts[r.Method+" "+p]++
	s.mu.Unlock()
}

func (c controlPlane) GetHealth(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusNoContent)
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "request body has an error: "+err.Error())
		return false
	}
	return true
}

// PostSandboxes is the create of E2B's SDKs before 2.51: the lease
// defaults to 15 s, and envd is secured only when the request says so.
func (c controlPlane) PostSandboxes(w http.ResponseWriter, r *http.Request) {
	var req api.NewSandbox
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Timeout != nil && *req.Timeout <= 0 {
		writeError(w, http.StatusBadRequest, "Timeout must be greater than 0")
		return
	}
	c.create(w, r, req, c.s.defaultLease)
}

// PostV2Sandboxes is the create of E2B's SDKs from 2.51: the lease
// defaults to 300 s, and envd is always secured (the request has no
// secure field).
func (c controlPlane) PostV2Sandboxes(w http.ResponseWriter, r *http.Request) {
	var v2 api.NewSandboxV2
	if !decodeBody(w, r, &v2) {
		return
	}
	if v2.Timeout != nil && *v2.Timeout < 1 {
		writeError(w, http.StatusBadRequest, `request body has an error: doesn't match schema: Error at "/timeout": number must be at least 1`)
		return
	}
	if v2.AutoPauseMemory != nil && !*v2.AutoPauseMemory {
		switch {
		case v2.AutoPause == nil || !*v2.AutoPause:
			writeError(w, http.StatusBadRequest, "autoPauseMemory can be set to false only together with autoPause")
			return
		case v2.AutoResume != nil && v2.AutoResume.Enabled:
			writeError(w, http.StatusBadRequest, "autoPauseMemory false cannot be combined with autoResume")
			return
		}
	}
	secure := true
	req := api.NewSandbox{
		TemplateID: v2.TemplateID, Timeout: v2.Timeout, AutoPause: v2.AutoPause, AutoResume: v2.AutoResume,
		Secure: &secure, AllowInternetAccess: v2.AllowInternetAccess, Network: v2.Network,
		Metadata: v2.Metadata, EnvVars: v2.EnvVars,
	}
	c.create(w, r, req, v2DefaultLease)
}

// v2DefaultLease is the lease of a v2 create or connect that sends none.
const v2DefaultLease = 300 * time.Second

// create serves both creates, req holding what either asked (a v2 create
// as a secure one); lease is the route's default.
func (c controlPlane) create(w http.ResponseWriter, r *http.Request, req api.NewSandbox, lease time.Duration) {
	s := c.s
	if req.TemplateID == "" {
		writeError(w, http.StatusBadRequest, `request body has an error: doesn't match schema: Error at "/templateID": property "templateID" is missing`)
		return
	}
	if msg, ok := s.knownTemplate(req.TemplateID); !ok {
		writeError(w, http.StatusNotFound, msg)
		return
	}
	if req.Timeout != nil {
		lease = time.Duration(*req.Timeout) * time.Second
	}
	if lease > s.maxLease {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Timeout cannot be greater than %d hours", int(s.maxLease.Hours())))
		return
	}
	s.mu.Lock()
	n := len(s.boxes)
	s.mu.Unlock()
	if s.maxSandboxes > 0 && n >= s.maxSandboxes {
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("you have reached the maximum number of concurrent E2B sandboxes (%d). If you need more, please visit 'https://e2b.dev/docs/billing'", s.maxSandboxes))
		return
	}
	var allowOut, denyOut []string
	if n := req.Network; n != nil {
		if n.AllowOut != nil {
			allowOut = slices.Clone(*n.AllowOut)
		}
		if n.DenyOut != nil {
			denyOut = slices.Clone(*n.DenyOut)
		}
	}
	if err := checkEgress(allowOut, denyOut); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var rules api.SandboxNetworkRules
	if req.Network != nil {
		rules = cloneRules(req.Network.Rules)
	}
	if err := checkRules(rules); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	env := map[string]string{}
	if req.EnvVars != nil {
		env = maps.Clone(*req.EnvVars)
	}
	backendLease := 24 * time.Hour
	if m := s.backend.Capabilities().MaxLease; m > 0 && m < backendLease {
		backendLease = m
	}
	info, err := s.createBackend(r.Context(), req.TemplateID, env, backendLease, s.backendNetwork(req.AllowInternetAccess, allowOut, denyOut, rules))
	if err != nil {
		if info.ID != "" {
			_ = s.backend.Destroy(context.Background(), info.ID)
		}
		writeError(w, http.StatusInternalServerError, "Failed to create sandbox")
		return
	}
	now := s.now()
	b := &box{
		id: newSandboxID(), backendID: info.ID, template: req.TemplateID, home: info.Home, version: s.envdVersion,
		env: env, startedAt: now, endAt: now.Add(lease), procs: map[uint32]*proc{},
		autoPause: req.AutoPause != nil && *req.AutoPause,
		internet:  req.AllowInternetAccess, allowOut: allowOut, denyOut: denyOut, rules: rules,
	}
	if b.home == "" {
		b.home = "/"
	}
	if req.Metadata != nil {
		b.metadata = maps.Clone(*req.Metadata)
	}
	if req.Secure != nil && *req.Secure {
		b.token = randHex(32)
	}
	if req.Network != nil && req.Network.AllowPublicTraffic != nil && !*req.Network.AllowPublicTraffic {
		// Checked before the backend's create in the real API; here
		// the backend sandbox is destroyed again.
		if b.token == "" {
			_ = s.backend.Destroy(context.Background(), info.ID)
			writeError(w, http.StatusBadRequest, "You cannot create a sandbox without public access unless you enable secure mode")
			return
		}
		b.traffic = randHex(32)
	}
	s.mu.Lock()
	s.boxes[b.id] = b
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, b.sandbox())
}

func (b *box) sandbox() api.Sandbox {
	out := api.Sandbox{SandboxID: b.id, TemplateID: b.template, Alias: &b.template, ClientID: clientID, EnvdVersion: b.version}
	if b.token != "" {
		t := b.token
		out.EnvdAccessToken = &t
	}
	if b.traffic != "" {
		t := b.traffic
		out.TrafficAccessToken = &t
	}
	return out
}

func (b *box) state() api.SandboxState {
	if b.paused {
		return "paused"
	}
	return "running"
}

// lookup returns the sandbox or writes the error response.
func (c controlPlane) lookup(w http.ResponseWriter, id string) (*box, bool) {
	if !sandboxIDRE.MatchString(id) {
		writeError(w, http.StatusBadRequest, "Invalid sandbox ID")
		return nil, false
	}
	c.s.mu.Lock()
	b, ok := c.s.boxes[id]
	c.s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, notFoundMsg(id))
		return nil, false
	}
	return b, true
}

func (c controlPlane) GetSandbox(w http.ResponseWriter, r *http.Request, id api.SandboxID) {
	b, ok := c.lookup(w, id)
	if !ok {
		return
	}
	c.s.mu.Lock()
	d := api.SandboxDetail{
		SandboxID: b.id, TemplateID: b.template, Alias: &b.template, ClientID: clientID,
		StartedAt: b.startedAt, EndAt: b.endAt, EnvdVersion: b.version, State: b.state(),
		CpuCount: 2, MemoryMB: 512, DiskSizeMB: 10240,
	}
	if b.metadata != nil {
		m := api.SandboxMetadata(maps.Clone(b.metadata))
		d.Metadata = &m
	}
	if b.token != "" {
		t := b.token
		d.EnvdAccessToken = &t
	}
	if b.internet != nil {
		v := *b.internet
		d.AllowInternetAccess = &v
	}
	if len(b.allowOut) > 0 || len(b.denyOut) > 0 || b.traffic != "" || len(b.rules) > 0 {
		n := &api.SandboxNetworkConfig{}
		if len(b.rules) > 0 {
			r := cloneRules(&b.rules)
			n.Rules = &r
		}
		if len(b.allowOut) > 0 {
			a := slices.Clone(b.allowOut)
			n.AllowOut = &a
		}
		if len(b.denyOut) > 0 {
			dn := slices.Clone(b.denyOut)
			n.DenyOut = &dn
		}
		if b.traffic != "" {
			f := false
			n.AllowPublicTraffic = &f
		}
		d.Network = n
	}
	c.s.mu.Unlock()
	writeJSON(w, http.StatusOK, d)
}

// PutSandboxNetwork replaces the sandbox's egress rules: a field left out
// is cleared (allow_internet_access back to its default, true).
func (c controlPlane) PutSandboxNetwork(w http.ResponseWriter, r *http.Request, id api.SandboxID) {
	var req api.SandboxNetworkUpdateConfig
	if !decodeBody(w, r, &req) {
		return
	}
	var allowOut, denyOut []string
	if req.AllowOut != nil {
		allowOut = slices.Clone(*req.AllowOut)
	}
	if req.DenyOut != nil {
		denyOut = slices.Clone(*req.DenyOut)
	}
	if err := checkEgress(allowOut, denyOut); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rules := cloneRules(req.Rules)
	if err := checkRules(rules); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	b, ok := c.lookup(w, id)
	if !ok {
		return
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if b.paused {
		writeError(w, http.StatusConflict, fmt.Sprintf("Sandbox %s is not running", id))
		return
	}
	b.internet, b.allowOut, b.denyOut, b.rules = req.AllowInternetAccess, allowOut, denyOut, rules
	w.WriteHeader(http.StatusNoContent)
}

// domainRE is what the API takes for a domain in allowOut: labels of
// letters, digits and hyphens, optionally led by a "*." wildcard.
var domainRE = regexp.MustCompile(`^(\*\.)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// checkEgress validates allowOut and denyOut entries, with the API's
// messages.
func checkEgress(allowOut, denyOut []string) error {
	for _, e := range allowOut {
		if !isCIDROrIP(e) && !domainRE.MatchString(e) {
			return fmt.Errorf("invalid allowOut entry: %q is not a valid CIDR, IP, or domain", e)
		}
	}
	for _, e := range denyOut {
		if !isCIDROrIP(e) {
			return fmt.Errorf("domains are not supported in denyOut: %q is not a valid CIDR or IP address", e)
		}
	}
	return nil
}

func isCIDROrIP(s string) bool {
	if _, err := netip.ParsePrefix(s); err == nil {
		return true
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}

func (c controlPlane) DeleteSandbox(w http.ResponseWriter, r *http.Request, id api.SandboxID) {
	b, ok := c.lookup(w, id)
	if !ok {
		return
	}
	c.s.mu.Lock()
	_, still := c.s.boxes[id]
	delete(c.s.boxes, id)
	c.s.mu.Unlock()
	if !still {
		writeError(w, http.StatusNotFound, notFoundMsg(id))
		return
	}
	c.s.destroyBox(b)
	w.WriteHeader(http.StatusNoContent)
}

func (c controlPlane) PostSandboxTimeout(w http.ResponseWriter, r *http.Request, id api.SandboxID) {
	var req api.TimeoutRequest
	if !decodeBody(w, r, &req) {
		return
	}
	b, ok := c.lookup(w, id)
	if !ok {
		return
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.paused {
		writeError(w, http.StatusNotFound, notFoundMsg(id))
		return
	}
	now := s.now()
	limit := b.startedAt.Add(s.maxLease)
	if !now.Before(limit) {
		writeError(w, http.StatusBadRequest, "Max instance length exceeded")
		return
	}
	end := now.Add(time.Duration(max(req.Timeout, 0)) * time.Second)
	if end.After(limit) {
		end = limit
	}
	b.endAt = end
	w.WriteHeader(http.StatusNoContent)
}

func (c controlPlane) PostSandboxPause(w http.ResponseWriter, r *http.Request, id api.SandboxID) {
	if r.ContentLength != 0 {
		var req api.PauseRequest
		if !decodeBody(w, r, &req) {
			return
		}
	}
	b, ok := c.lookup(w, id)
	if !ok {
		return
	}
	s := c.s
	s.mu.Lock()
	if b.paused {
		s.mu.Unlock()
		writeError(w, http.StatusConflict, fmt.Sprintf("Error pausing sandbox - sandbox '%s' is already paused", id))
		return
	}
	b.paused = true
	b.endAt = s.now()
	s.mu.Unlock()
	if p, ok := s.backend.(driver.Pauser); ok {
		if err := p.Pause(r.Context(), b.backendID); err != nil {
			writeError(w, http.StatusInternalServerError, "Error pausing sandbox")
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// PostSandboxConnect is the connect of E2B's SDKs before 2.51: the body
// and its timeout are required.
func (c controlPlane) PostSandboxConnect(w http.ResponseWriter, r *http.Request, id api.SandboxID) {
	var req api.ConnectSandbox
	if !decodeBody(w, r, &req) {
		return
	}
	c.connect(w, r, id, time.Duration(req.Timeout)*time.Second)
}

// PostV2SandboxConnect is the connect of E2B's SDKs from 2.51: the body
// is optional and the lease defaults to 300 s. memory false (resume a
// paused sandbox from its disk only) is accepted; the fake resumes it as
// its backend does either way.
func (c controlPlane) PostV2SandboxConnect(w http.ResponseWriter, r *http.Request, id api.SandboxID) {
	var req api.ConnectSandboxV2
	if r.ContentLength != 0 {
		if !decodeBody(w, r, &req) {
			return
		}
	}
	d := v2DefaultLease
	if req.Timeout != nil {
		if *req.Timeout < 1 {
			writeError(w, http.StatusBadRequest, `request body has an error: doesn't match schema: Error at "/timeout": number must be at least 1`)
			return
		}
		d = time.Duration(*req.Timeout) * time.Second
	}
	c.connect(w, r, id, d)
}

// connect extends a running sandbox's lease to d from now (never
// shortening it) or resumes a paused one with the lease d.
func (c controlPlane) connect(w http.ResponseWriter, r *http.Request, id api.SandboxID, d time.Duration) {
	s := c.s
	if d > s.maxLease {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Timeout cannot be greater than %d hours", int(s.maxLease.Hours())))
		return
	}
	b, ok := c.lookup(w, id)
	if !ok {
		return
	}
	s.mu.Lock()
	now := s.now()
	if !b.paused {
		if end := now.Add(d); end.After(b.endAt) {
			b.endAt = end
		}
		out := b.sandbox()
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, out)
		return
	}
	b.paused = false
	b.startedAt = now
	b.endAt = now.Add(d)
	if b.token != "" {
		b.token = randHex(32)
	}
	out := b.sandbox()
	s.mu.Unlock()
	if p, ok := s.backend.(driver.Pauser); ok {
		if _, err := p.Resume(r.Context(), b.backendID); err != nil {
			writeError(w, http.StatusInternalServerError, "Failed to resume sandbox")
			return
		}
	}
	writeJSON(w, http.StatusCreated, out)
}

func (c controlPlane) GetV2Sandboxes(w http.ResponseWriter, r *http.Request, params api.GetV2SandboxesParams) {
	s := c.s
	var filter map[string]string
	if params.Metadata != nil && *params.Metadata != "" {
		f, err := parseMetadataFilter(*params.Metadata)
		if err != nil {
			writeError(w, http.StatusBadRequest, "Error parsing metadata: "+err.Error())
			return
		}
		filter = f
	}
	states := []api.SandboxState{"running", "paused"}
	if params.State != nil && len(*params.State) > 0 {
		states = *params.State
		for _, st := range states {
			if !st.Valid() {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid state %q", st))
				return
			}
		}
	}
	limit := 100
	if params.Limit != nil {
		if *params.Limit < 1 || *params.Limit > 100 {
			writeError(w, http.StatusBadRequest, "parameter \"limit\" in query has an error: number must be between 1 and 100")
			return
		}
		limit = int(*params.Limit)
	}
	var after *cursor
	if params.NextToken != nil && *params.NextToken != "" {
		cur, err := parseCursor(*params.NextToken)
		if err != nil {
			writeError(w, http.StatusBadRequest, "Invalid next token")
			return
		}
		after = &cur
	}
	s.mu.Lock()
	var all []api.ListedSandbox
	running := 0
	for _, b := range s.boxes {
		if !slices.Contains(states, b.state()) || !matchMetadata(b.metadata, filter) {
			continue
		}
		if !b.paused {
			running++
		}
		ls := api.ListedSandbox{
			SandboxID: b.id, TemplateID: b.template, Alias: &b.template, ClientID: clientID,
			StartedAt: b.startedAt, EndAt: b.endAt, EnvdVersion: b.version, State: b.state(),
			CpuCount: 2, MemoryMB: 512, DiskSizeMB: 10240,
		}
		if b.metadata != nil {
			m := api.SandboxMetadata(maps.Clone(b.metadata))
			ls.Metadata = &m
		}
		all = append(all, ls)
	}
	s.mu.Unlock()
	// Newest first; equal start times by ID ascending.
	slices.SortFunc(all, func(a, b api.ListedSandbox) int {
		if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(a.SandboxID, b.SandboxID)
	})
	if after != nil {
		i := 0
		for i < len(all) && !after.before(all[i]) {
			i++
		}
		all = all[i:]
	}
	if len(all) > limit {
		last := all[limit-1]
		w.Header().Set("X-Next-Token", cursor{last.StartedAt, last.SandboxID}.String())
		all = all[:limit]
	}
	if slices.Contains(states, "running") {
		w.Header().Set("X-Total-Running", strconv.Itoa(running))
	}
	if all == nil {
		all = []api.ListedSandbox{}
	}
	writeJSON(w, http.StatusOK, all)
}

type cursor struct {
	t  time.Time
	id string
}

func (c cursor) String() string {
	return base64.URLEncoding.EncodeToString([]byte(c.t.UTC().Format(time.RFC3339Nano) + "__" + c.id))
}

// before reports whether l comes after the cursor in list order.
func (c cursor) before(l api.ListedSandbox) bool {
	if cmp := c.t.Compare(l.StartedAt); cmp != 0 {
		return cmp > 0
	}
	return l.SandboxID > c.id
}

func parseCursor(tok string) (cursor, error) {
	raw, err := base64.URLEncoding.DecodeString(tok)
	if err != nil {
		return cursor{}, err
	}
	ts, id, ok := strings.Cut(string(raw), "__")
	if !ok || id == "" {
		return cursor{}, errors.New("malformed")
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return cursor{}, err
	}
	return cursor{t, id}, nil
}

// parseMetadataFilter decodes the metadata query value the way the real
// API does: the value (already unescaped once as a query parameter) is
// unescaped again, split on & and =, and each key and value unescaped.
func parseMetadataFilter(v string) (map[string]string, error) {
	q, err := url.QueryUnescape(v)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, pair := range strings.Split(q, "&") {
		kv := strings.Split(pair, "=")
		if len(kv) != 2 {
			return nil, fmt.Errorf("invalid key value pair in query")
		}
		k, err := url.QueryUnescape(kv[0])
		if err != nil {
			return nil, err
		}
		val, err := url.QueryUnescape(kv[1])
		if err != nil {
			return nil, err
		}
		out[k] = val
	}
	return out, nil
}

func matchMetadata(have, want map[string]string) bool {
	if len(want) == 0 {
		return true
	}
	if len(have) == 0 {
		return false
	}
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// cloneRules deep-copies network.rules (nil for none).
func cloneRules(in *api.SandboxNetworkRules) api.SandboxNetworkRules {
	if in == nil || len(*in) == 0 {
		return nil
	}
	out := api.SandboxNetworkRules{}
	for host, rules := range *in {
		out[host] = []api.SandboxNetworkRule{}
		for _, r := range rules {
			c := api.SandboxNetworkRule{}
			if r.Transform != nil {
				t := api.SandboxNetworkTransform{}
				if r.Transform.Headers != nil {
					h := maps.Clone(*r.Transform.Headers)
					t.Headers = &h
				}
				c.Transform = &t
			}
			out[host] = append(out[host], c)
		}
	}
	return out
}

// checkRules validates network.rules: keys are domains as allowOut takes
// them, header names HTTP tokens, header values free of control
// characters. The messages never show a header's value.
func checkRules(rules api.SandboxNetworkRules) error {
	for _, host := range slices.Sorted(maps.Keys(rules)) {
		if isCIDROrIP(host) || !domainRE.MatchString(host) {
			return fmt.Errorf("invalid rules entry: %q is not a valid domain", host)
		}
		for _, r := range rules[host] {
			if r.Transform == nil || r.Transform.Headers == nil {
				continue
			}
			for name, v := range *r.Transform.Headers {
				if !headerTokenRE.MatchString(name) {
					return fmt.Errorf("invalid rules entry for %q: %q is not a valid header name", host, name)
				}
				if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
					return fmt.Errorf("invalid rules entry for %q: the value of header %q holds control characters", host, name)
				}
			}
		}
	}
	return nil
}

// headerTokenRE is an HTTP header name (a token, RFC 9110 §5.6.2).
var headerTokenRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// Rules returns the header-transform rules (network.rules) of the
// sandbox with E2B id id as last set: for each domain, the headers of each
// of its rules, values included, so that a test can check what an adapter
// asked E2B to inject. nil when none or the sandbox is unknown.
func (s *Server) Rules(id string) map[string][]map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.boxes[id]
	if !ok || len(b.rules) == 0 {
		return nil
	}
	out := map[string][]map[string]string{}
	for host, rules := range b.rules {
		for _, r := range rules {
			h := map[string]string{}
			if r.Transform != nil && r.Transform.Headers != nil {
				h = maps.Clone(*r.Transform.Headers)
			}
			out[host] = append(out[host], h)
		}
	}
	return out
}
