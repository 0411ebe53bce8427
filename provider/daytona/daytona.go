package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/errscrub"
	"github.com/sandboxkit/sandbox/internal/lostcreate"
	"github.com/sandboxkit/sandbox/internal/opts"
	"github.com/sandboxkit/sandbox/internal/wire"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/api"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/toolbox"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Scheme is the URL scheme the package registers with sandbox.Open.
const Scheme = "daytona"

// DefaultAPIURL is the main API of Daytona's cloud.
const DefaultAPIURL = "https://app.daytona.io/api"

// sdkVersion is sent as X-Daytona-SDK-Version: the toolbox daemon splits
// session output into stdout and stderr only for 0.167.0 and later.
const sdkVersion = "0.190.0"

func init() {
	driver.Register(Scheme, openURL)
}

// openURL opens "daytona://" URLs. Query parameters: api_url, target,
// snapshot, organization_id, toolbox=legacy. The API key comes only from
// DAYTONA_API_KEY: never put a key in a URL.
func openURL(ctx context.Context, u *url.URL, _ driver.OpenOptions) (driver.Runtime, error) {
	q := u.Query()
	var opts []Option
	for k, v := range q {
		switch k {
		case "api_url":
			opts = append(opts, WithAPIURL(v[0]))
		case "target":
			opts = append(opts, WithTarget(v[0]))
		case "snapshot":
			opts = append(opts, WithSnapshot(v[0]))
		case "organization_id":
			opts = append(opts, WithOrganizationID(v[0]))
		case "toolbox":
			if v[0] != "legacy" {
				return nil, sberrors.Errorf(sberrors.InvalidArgument, "daytona: URL parameter toolbox=%q: only \"legacy\" is known", v[0])
			}
			opts = append(opts, WithLegacyToolbox())
		default:
			return nil, sberrors.Errorf(sberrors.InvalidArgument, "daytona: unknown URL parameter %q (known: api_url, target, snapshot, organization_id, toolbox)", k)
		}
	}
	return New(opts...)
}

// Option configures a Runtime. New fails with an InvalidArgument error
// naming any option given an invalid value.
type Option func(*config)

// config is what the options set.
type config struct {
	key, apiURL, target, org, snapshot string
	scratch                            string
	legacy, noWake                     bool
	previewBase                        string // WithPreviewBaseURL
	transport                          http.RoundTripper
	bad                                opts.Errors // invalid option values, reported by New
	// grace replaces ExecGrace when positive; only the package's tests
	// set it (export_test.go), to see a stall end without waiting the
	// full grace.
	grace time.Duration
	// watchEvery replaces WatchInterval when positive; only the
	// package's tests set it (export_test.go), so that the watch
	// conformance subtests do not wait out the shipped interval.
	watchEvery time.Duration
}

// watchInterval is how often Watch polls: WatchInterval, unless a test
// shortened it.
func (c *config) watchInterval() time.Duration {
	if c.watchEvery > 0 {
		return c.watchEvery
	}
	return WatchInterval
}

// execGrace is how long Exec may run past Command.Timeout: ExecGrace,
// unless a test shortened it.
func (c *config) execGrace() time.Duration {
	if c.grace > 0 {
		return c.grace
	}
	return ExecGrace
}

// WithAPIKey sets the API key (default: DAYTONA_API_KEY).
// An empty key is no key: New fails with PermissionDenied.
func WithAPIKey(key string) Option {
	return func(c *config) { c.key = key }
}

// WithAPIURL sets the main API's base URL, ending in /api (default:
// DAYTONA_API_URL, then DefaultAPIURL).
func WithAPIURL(u string) Option { return func(c *config) { c.apiURL = u } }

// WithTarget sets the region new sandboxes are created in (default:
// DAYTONA_TARGET, then the organization's default).
func WithTarget(t string) Option { return func(c *config) { c.target = t } }

// WithOrganizationID sends X-Daytona-Organization-ID on every call
// (default: DAYTONA_ORGANIZATION_ID). Daytona requires it with a JWT and
// ignores it with an API key, which is scoped to one organization.
func WithOrganizationID(id string) Option { return func(c *config) { c.org = id } }

// WithSnapshot sets the snapshot used when CreateRequest.Template is empty
// (default: the server's default snapshot).
func WithSnapshot(s string) Option { return func(c *config) { c.snapshot = s } }

// WithLegacyToolbox reaches the toolbox through the main API's older path
// {apiURL}/toolbox/{id}/toolbox/... instead of the toolbox proxy.
func WithLegacyToolbox() Option { return func(c *config) { c.legacy = true } }

// scratchRE is what a scratch directory may look like.
var scratchRE = regexp.MustCompile(`^(/|~/)[A-Za-z0-9._/-]*$`)

// WithScratchDir sets the directory in the sandbox that holds the
// per-command files of Exec and background processes (default
// /tmp/.sandboxkit). A leading "~/" means the sandbox's home.
func WithScratchDir(dir string) Option {
	return func(c *config) {
		if !scratchRE.MatchString(dir) {
			c.bad.Invalid("WithScratchDir", "%q must match %s (it is used unquoted in shell scripts)", dir, scratchRE)
		}
		c.scratch = dir
	}
}

// WithTransport sets the http.RoundTripper under the Runtime's own
// http.Client (default: a clone of http.DefaultTransport); rt must not be
// nil. It means the same as e2b.WithTransport: an *http.Transport is
// cloned, its transparent compression disabled and its dialer wrapped to
// count the bytes each connection writes, which is how a failed request is
// known not to have been sent; any other RoundTripper is used as it is,
// and then only a failed dial is. The client never has a global timeout:
// every deadline comes from the context.
func WithTransport(rt http.RoundTripper) Option {
	return func(c *config) {
		if rt == nil {
			c.bad.Invalid("WithTransport", "nil RoundTripper")
		}
		c.transport = rt
	}
}

// WithoutAutoWake turns off waking a sandbox that was stopped behind the
// Runtime's back (by auto-stop) when a toolbox call finds it stopped; the
// call then fails with sberrors.ErrPaused.
func WithoutAutoWake() Option { return func(c *config) { c.noWake = true } }

// Runtime is the Daytona provider. It implements driver.Runtime,
// driver.Pauser, driver.ProcessRuntime, driver.TransportResetter and
// driver.Closer.
// It is safe for concurrent use.
type Runtime struct {
	config
	starts   startLog // processes started lately, for Processes (watch.go)
	counting bool     // transport is our clone, counting writes

	hc     *http.Client // control-plane API requests
	toolhc *http.Client // toolbox requests: into the sandbox, trace context only
	api    *api.Client

	mu       sync.Mutex
	toolURLs map[string]string // sandbox id → toolbox base URL (…/{id})
	homes    map[string]string
	paused   map[string]bool            // paused (stopped) through this Runtime
	spent    map[string][]string        // finished Exec file prefixes not yet removed
	clients  map[string]*toolbox.Client // by toolbox base URL

	bg sync.WaitGroup // clean-ups of cancelled snapshots (snapshot.go); Close waits
	// sweep destroys what the server makes of creates whose caller gave
	// up, late; Close ends it.
	lost lostcreate.Sweeper
}

var (
	_ driver.Runtime           = (*Runtime)(nil)
	_ driver.Pauser            = (*Runtime)(nil)
	_ driver.ProcessRuntime    = (*Runtime)(nil)
	_ driver.TransportResetter = (*Runtime)(nil)
	_ driver.Closer            = (*Runtime)(nil)
)

// New returns a Runtime configured by opts and, for what they leave
// unset, by DAYTONA_API_KEY, DAYTONA_API_URL (or the older
// DAYTONA_SERVER_URL), DAYTONA_TARGET and DAYTONA_ORGANIZATION_ID. A
// missing key is a PermissionDenied error.
func New(opts ...Option) (*Runtime, error) {
	r := &Runtime{
		config: config{key: os.Getenv("DAYTONA_API_KEY"), apiURL: os.Getenv("DAYTONA_API_URL"),
			target: os.Getenv("DAYTONA_TARGET"), org: os.Getenv("DAYTONA_ORGANIZATION_ID")},
		toolURLs: map[string]string{}, homes: map[string]string{}, paused: map[string]bool{}, spent: map[string][]string{}, clients: map[string]*toolbox.Client{},
	}
	if r.apiURL == "" {
		r.apiURL = os.Getenv("DAYTONA_SERVER_URL")
	}
	for _, o := range opts {
		o(&r.config)
	}
	if err := r.bad.Err("daytona"); err != nil {
		return nil, err
	}
	if r.apiURL == "" {
		r.apiURL = DefaultAPIURL
	}
	if r.scratch == "" {
		r.scratch = execRoot
	}
	r.apiURL = strings.TrimRight(r.apiURL, "/")
	if r.key == "" {
		return nil, sberrors.Errorf(sberrors.PermissionDenied, "daytona: no API key: set DAYTONA_API_KEY or use WithAPIKey")
	}
	if u, err := url.Parse(r.apiURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "daytona: API URL %q is not an http(s) URL", r.apiURL)
	}
	// An *http.Transport counts what each connection writes: that is how
	// a failed request is known not to have left (see wire.Attempt.NotSent).
	r.transport, r.counting = wire.Transport(r.transport)
	// No Client.Timeout (daytonaio/daytona#4750): long execs and transfers
	// are bounded by their contexts only.
	// Both clients send the caller's trace context (W3C traceparent). The
	// control-plane API's also sends whatever the global propagator adds
	// (such as baggage); the toolbox's does not, since the toolbox runs
	// inside the sandbox and baggage often holds user or tenant ids.
	r.hc = &http.Client{Transport: wire.Propagate(r.transport)}
	r.toolhc = &http.Client{Transport: wire.PropagateTrace(r.transport)}
	c, err := api.NewClient(r.apiURL, api.WithHTTPClient(r.hc), api.WithRequestEditorFn(r.headers))
	if err != nil {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "daytona: %v", err)
	}
	r.api = c
	return r, nil
}

// Name returns "daytona".
func (r *Runtime) Name() string { return Scheme }

// Capabilities reports Daytona's facts: pause is a stop (processes end,
// files stay), labels are filtered by the server, sandboxes persist, and
// the lease is the auto-stop interval (15 minutes by default).
func (r *Runtime) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		PauseKeepsMemory:    false,
		AttachAcrossClients: true,
		ServerSideLabels:    true, Persistent: true,
		Isolation: "container (Daytona cloud)", DefaultLease: 15 * time.Minute,
		Network: true, NetworkPolicy: networkSupport,
		WatchLatency:  r.watchInterval(), // polled: see Watch
		SnapshotModes: []driver.SnapshotMode{driver.SnapshotFilesystem},
	}
}

// ResetTransport drops every idle connection, so the retry after a stale
// transport dials afresh.
func (r *Runtime) ResetTransport() error {
	if t, ok := r.transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
	return nil
}

// Close drops the Runtime's idle connections. Sandboxes are not touched.
func (r *Runtime) Close() error {
	r.lost.Close()
	r.bg.Wait()
	return r.ResetTransport()
}

// headers adds the headers of every request, on both APIs.
func (r *Runtime) headers(ctx context.Context, req *http.Request) error {
	req.Header.Set("Authorization", "Bearer "+r.key)
	req.Header.Set("X-Daytona-Source", "sandboxkit")
	req.Header.Set("X-Daytona-SDK-Version", sdkVersion)
	req.Header.Set("User-Agent", "sandboxkit-daytona/"+sdkVersion)
	if r.org != "" {
		req.Header.Set("X-Daytona-Organization-ID", r.org)
	}
	return nil
}

// HTTPError is a Daytona API call answered with an error status. It
// matches (errors.Is) the sandbox sentinel of its classification, such as
// sberrors.ErrNotFound or sberrors.ErrPaused.
type HTTPError struct {
	Op      string // the operation, e.g. "create" or "toolbox upload"
	Status  int    // the HTTP status code
	Code    string // the toolbox's error code (NOT_FOUND, ...), if any
	Message string // the server's message, if the body had one
	// RetryAfter is how long a 429 asks to wait (from Retry-After or
	// Retry-After-<throttler>), zero when not given.
	RetryAfter time.Duration
	kind       error
}

// Error describes the failure without credentials.
func (e *HTTPError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = strings.ToLower(http.StatusText(e.Status))
	}
	return fmt.Sprintf("daytona: %s: HTTP %d: %s", e.Op, e.Status, msg)
}

// Unwrap returns the sentinel the error is classified as.
func (e *HTTPError) Unwrap() error { return e.kind }

// RetryDelay returns RetryAfter, so that the portable layer waits as long
// as the service asked before retrying a create (sandbox.RetryDelayer).
func (e *HTTPError) RetryDelay() time.Duration { return e.RetryAfter }

// errorBody is the union of the main API's (NestJS) and the toolbox's
// (gin) error bodies.
type errorBody struct {
	StatusCode int             `json:"statusCode"`
	Message    json.RawMessage `json:"message"`
	Error      string          `json:"error"`
	Code       string          `json:"code"`
}

// responseError builds the HTTPError of a response with an error status
// and closes its body.
func (r *Runtime) responseError(op string, resp *http.Response) *HTTPError {
	var env []string
	if resp.Request != nil {
		env = envValues(resp.Request.Context())
	}
	e := r.parseErrorEnv(op, resp.StatusCode, readError(resp), env)
	for k, v := range resp.Header {
		if k == "Retry-After" || strings.HasPrefix(k, "Retry-After-") {
			if n, err := strconv.Atoi(strings.TrimSpace(v[0])); err == nil && n >= 0 {
				e.RetryAfter = max(e.RetryAfter, time.Duration(n)*time.Second)
			}
		}
	}
	return e
}

// parseError builds the HTTPError of a response with an error status,
// from whichever body shape (or none) it has.
func (r *Runtime) parseError(op string, status int, body []byte) *HTTPError {
	return r.parseErrorEnv(op, status, body, nil)
}

// envValuesKey keys the environment values a request's command carries.
type envValuesKey struct{}

// withEnvValues notes in ctx the values of env, which the requests made
// with ctx carry in a command's export lines: an error body that echoes
// the command is cleaned of their shell quoting (see parseErrorEnv).
func withEnvValues(ctx context.Context, env map[string]string) context.Context {
	if len(env) == 0 {
		return ctx
	}
	vs := make([]string, 0, len(env))
	for _, v := range env {
		if v != "" {
			vs = append(vs, v)
		}
	}
	return context.WithValue(ctx, envValuesKey{}, vs)
}

func envValues(ctx context.Context) []string {
	vs, _ := ctx.Value(envValuesKey{}).([]string)
	return vs
}

// unquoteEnv replaces in msg the shell-quoted form of each value (the form
// the export lines give it, in which a value with a quote is in pieces) by
// the value itself, so that the portable layer's redaction of the secret
// ones finds them whole.
func unquoteEnv(msg string, env []string) string {
	for _, v := range env {
		if q := shellQuote(v); !strings.Contains(q, v) && strings.Contains(msg, q) {
			msg = strings.ReplaceAll(msg, q, v)
		}
	}
	return msg
}

// cutAvoiding returns where to cut msg to at most n bytes, at the start of
// a character and not inside any of the values (a secret cut in two would
// no longer be found by the redaction).
func cutAvoiding(msg string, n int, env []string) int {
	for n > 0 && !utf8.RuneStart(msg[n]) {
		n--
	}
	for moved := true; moved; {
		moved = false
		for _, v := range env {
			for at := max(0, n-len(v)+1); at < n; at++ {
				if strings.HasPrefix(msg[at:], v) {
					n, moved = at, true
					break
				}
			}
		}
	}
	return n
}

// parseErrorEnv is parseError for the response to a request whose command
// carried the environment values env.
func (r *Runtime) parseErrorEnv(op string, status int, body []byte, env []string) *HTTPError {
	e := &HTTPError{Op: op, Status: status}
	var eb errorBody
	if len(bytes.TrimSpace(body)) > 0 {
		if json.Unmarshal(body, &eb) == nil {
			e.Code = eb.Code
			var s string
			var list []string
			switch {
			case json.Unmarshal(eb.Message, &s) == nil:
				e.Message = s
			case json.Unmarshal(eb.Message, &list) == nil:
				e.Message = strings.Join(list, ", ")
			case eb.Error != "":
				e.Message = eb.Error
			}
		} else {
			e.Message = strings.TrimSpace(string(body))
		}
	}
	// Redact first: a key cut in two by the truncation would no longer be
	// found, and its first half would stay in the message.
	e.Message = unquoteEnv(r.redact(e.Message), env)
	if len(e.Message) > 500 {
		e.Message = strings.ToValidUTF8(e.Message[:cutAvoiding(e.Message, 500, env)], "") + "…"
	}
	lower := strings.ToLower(e.Message)
	switch {
	case status == http.StatusBadRequest && strings.Contains(lower, "is the sandbox started"):
		e.kind = sberrors.ErrPaused
	case status == http.StatusBadRequest && (strings.Contains(lower, "state") || strings.Contains(lower, "failed to start") || strings.Contains(lower, "not stopped")):
		e.kind = sberrors.ErrFailedPrecondition
	case status == http.StatusBadRequest && (strings.Contains(lower, "limit") || strings.Contains(lower, "quota") || strings.Contains(lower, "exceeds maximum")):
		e.kind = sberrors.ErrLimit
	case status == http.StatusBadRequest:
		e.kind = sberrors.ErrInvalidArgument
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.kind = sberrors.ErrPermission
	case status == http.StatusNotFound:
		e.kind = sberrors.ErrNotFound
	case status == http.StatusInternalServerError && strings.Contains(lower, "session not found"):
		// The daemon answers an exec in a session that is gone (its
		// shell ended, or the daemon restarted) with an untyped 500.
		e.kind = sberrors.ErrNotFound
	case status == http.StatusConflict && strings.Contains(lower, "already exists"):
		e.kind = sberrors.ErrAlreadyExists
	case status == http.StatusConflict || status == http.StatusUnprocessableEntity:
		e.kind = sberrors.ErrFailedPrecondition
	case status == http.StatusTooManyRequests:
		e.kind = sberrors.ErrLimit
	case status == http.StatusRequestTimeout:
		e.kind = sberrors.Errorf(sberrors.DeadlineExceeded, "request timeout")
	case status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
		e.kind = sberrors.ErrUnavailable
	default:
		e.kind = sberrors.ErrInternal
	}
	return e
}

// redact removes the API key from s, should a server or a library ever
// echo it.
func (r *Runtime) redact(s string) string {
	if r.key != "" && strings.Contains(s, r.key) {
		s = strings.ReplaceAll(s, r.key, "[REDACTED]")
	}
	return s
}

// clean makes sure no error in err's tree holds the key in its text (see
// internal/errscrub): the chain a caller walks is redacted too.
func (r *Runtime) clean(err error) error {
	if err == nil || r.key == "" {
		return err
	}
	return errscrub.Chain(err, r.redact)
}

// *HTTPError is rebuilt by errscrub with its message redacted.
func init() {
	errscrub.Register(func(err error, kids []error, redact func(string) string) (error, bool) {
		e, ok := err.(*HTTPError)
		if !ok {
			return nil, false
		}
		c := *e
		c.Op, c.Message = redact(e.Op), redact(e.Message)
		if len(kids) > 0 {
			c.kind = kids[0]
		}
		return &c, true
	})
}

// transportError classifies a failed round trip. mutating says whether
// the request may change something (then a request that left is an
// outcome-unknown failure; otherwise it is Unavailable).
func (r *Runtime) transportError(ctx context.Context, op string, a *wire.Attempt, mutating bool, err error) error {
	return wire.Classify(ctx, "daytona: "+op, a, r.counting, mutating, err)
}

// readError reads (a bounded prefix of) an error response's body and
// closes it.
func readError(resp *http.Response) []byte {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return b
}

// call runs one main-API request through f and returns the response when
// its status is in ok; any other status is an *HTTPError.
func (r *Runtime) call(ctx context.Context, op string, mutating bool, f func(ctx context.Context) (*http.Response, error), ok ...int) (*http.Response, error) {
	tctx, a := wire.Trace(ctx)
	resp, err := f(tctx)
	if err != nil {
		return nil, r.transportError(ctx, op, a, mutating, err)
	}
	for _, s := range ok {
		if resp.StatusCode == s {
			return resp, nil
		}
	}
	return nil, r.responseError(op, resp)
}

// decode reads a JSON response body into v.
func decode(op string, resp *http.Response, v any) error {
	defer wire.DrainClose(resp.Body)
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		var ne net.Error
		if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("daytona: %s: reading the response: %w: %w", op, sberrors.ErrUnavailable, err)
		}
		return fmt.Errorf("daytona: %s: decoding the response: %w: %w", op, sberrors.ErrInternal, err)
	}
	return nil
}

// toolboxClient returns the generated client for a sandbox's toolbox,
// made once per toolbox base URL.
func (r *Runtime) toolboxClient(ctx context.Context, id string) (*toolbox.Client, error) {
	base, err := r.toolboxURL(ctx, id)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	c := r.clients[base]
	r.mu.Unlock()
	if c != nil {
		return c, nil
	}
	c, err = toolbox.NewClient(base, toolbox.WithHTTPClient(r.toolhc), toolbox.WithRequestEditorFn(r.headers))
	if err != nil {
		return nil, fmt.Errorf("daytona: toolbox URL: %w: %w", sberrors.ErrInternal, err)
	}
	r.mu.Lock()
	r.clients[base] = c
	r.mu.Unlock()
	return c, nil
}

// toolboxURL returns {toolboxProxyUrl}/{id} (or the older path), asking the
// API when no Sandbox seen so far carried it.
func (r *Runtime) toolboxURL(ctx context.Context, id string) (string, error) {
	if r.legacy {
		return r.apiURL + "/toolbox/" + url.PathEscape(id) + "/toolbox", nil
	}
	r.mu.Lock()
	u, ok := r.toolURLs[id]
	r.mu.Unlock()
	if ok {
		return u, nil
	}
	resp, err := r.call(ctx, "toolbox-proxy-url", false, func(ctx context.Context) (*http.Response, error) {
		return r.api.GetToolboxProxyUrl(ctx, id)
	}, http.StatusOK)
	if err != nil {
		return "", err
	}
	var out api.Url
	if err := decode("toolbox-proxy-url", resp, &out); err != nil {
		return "", err
	}
	return r.rememberToolbox(id, out.Url), nil
}

func (r *Runtime) rememberToolbox(id, proxy string) string {
	u := strings.TrimRight(proxy, "/") + "/" + url.PathEscape(id)
	r.mu.Lock()
	r.toolURLs[id] = u
	r.mu.Unlock()
	return u
}

// forget drops what the Runtime cached about a sandbox that is gone.
func (r *Runtime) forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.clients, r.toolURLs[id])
	delete(r.toolURLs, id)
	delete(r.homes, id)
	delete(r.paused, id)
	delete(r.spent, id)
}
