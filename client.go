package sandbox

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sandboxkit/sandbox/internal/stale"
)

// Client is the portable handle on one provider. It is safe for concurrent
// use. Create it with Open or NewClient.
type Client struct {
	rt   Runtime
	caps Capabilities
	log  *slog.Logger

	cmdTimeout time.Duration
	maxOutput  int
	cleanup    time.Duration

	mu        sync.Mutex
	listeners map[int]func()
	nextID    int
	closed    bool
}

// Option configures a Client at construction.
type Option func(*Client)

// WithLogger sets the logger for retries, orphan cleanups and other events
// the library handles on its own. The default discards.
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// WithCommandTimeout sets the default Command.Timeout (DefaultCommandTimeout
// otherwise). It must be positive.
func WithCommandTimeout(d time.Duration) Option { return func(c *Client) { c.cmdTimeout = d } }

// WithMaxOutput sets the default Command.MaxOutput (DefaultMaxOutput
// otherwise). It must be positive.
func WithMaxOutput(n int) Option { return func(c *Client) { c.maxOutput = n } }

// WithCleanupTimeout bounds the Destroy the library issues on its own for
// a sandbox that would otherwise be orphaned (default 30s).
func WithCleanupTimeout(d time.Duration) Option { return func(c *Client) { c.cleanup = d } }

// NewClient returns a Client over rt. Providers' constructors call it; most
// programs call Open instead.
func NewClient(rt Runtime, opts ...Option) *Client {
	c := &Client{
		rt: rt, caps: rt.Capabilities(),
		log:        slog.New(slog.DiscardHandler),
		cmdTimeout: DefaultCommandTimeout, maxOutput: DefaultMaxOutput, cleanup: 30 * time.Second,
		listeners: map[int]func(){},
	}
	for _, o := range opts {
		o(c)
	}
	if c.cmdTimeout <= 0 {
		c.cmdTimeout = DefaultCommandTimeout
	}
	if c.maxOutput <= 0 {
		c.maxOutput = DefaultMaxOutput
	}
	if c.cleanup <= 0 {
		c.cleanup = 30 * time.Second
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c
}

// Runtime returns the provider under the Client, for provider-specific
// features. Calls made on it bypass the portable layer's policy.
func (c *Client) Runtime() Runtime { return c.rt }

// Provider returns the provider's name.
func (c *Client) Provider() string { return c.rt.Name() }

// CommandTimeout returns the timeout a Command without one gets (before
// the ctx deadline bounds it).
func (c *Client) CommandTimeout() time.Duration { return c.cmdTimeout }

// Capabilities returns the provider's declared capabilities.
func (c *Client) Capabilities() Capabilities { return c.caps }

// OnTransportReset registers f to run each time the Client resets the
// provider's transport after a stale-transport failure (before the single
// retry). Caches bound to the old transport should be dropped in f. The
// returned func unregisters f.
func (c *Client) OnTransportReset(f func()) (unregister func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.nextID
	c.nextID++
	c.listeners[id] = f
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.listeners, id)
	}
}

// Close releases the provider's resources. Sandboxes are not destroyed:
// they live on until their lease ends. Calls made after Close, through the
// Client or its Sandbox handles, fail with ErrClosed (Process.Close and
// Wait on an already finished Process excepted).
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	if cl, ok := c.rt.(Closer); ok {
		return c.wrap("close", "", "", cl.Close())
	}
	return nil
}

func (c *Client) checkOpen(op, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.wrap(op, id, "", ErrClosed)
	}
	return nil
}

// resetTransport resets the driver's transport and tells the listeners.
func (c *Client) resetTransport(op string, cause error) {
	// The cause's text is not logged: it may quote a secret.
	c.log.Info("sandbox: stale transport, resetting and retrying once", "op", op, "provider", c.rt.Name(), "code", CodeOf(cause))
	if r, ok := c.rt.(TransportResetter); ok {
		if err := r.ResetTransport(); err != nil {
			c.log.Warn("sandbox: transport reset failed", "provider", c.rt.Name(), "err", err)
		}
	}
	c.mu.Lock()
	fs := slices.Collect(maps.Values(c.listeners))
	c.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// retry runs f, and once more after a transport reset when f failed
// because of a stale transport and may run again. idempotent widens the
// rule from the driver's explicit ErrStaleTransport to every error the
// stale package classifies as a closed transport; again, when non-nil,
// says whether f can still be repeated (for example no input was consumed).
func (c *Client) retry(ctx context.Context, op string, idempotent bool, again func() bool, f func() error) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	err := f()
	if err == nil || ctx.Err() != nil || errors.Is(err, ErrOutcomeUnknown) {
		return err
	}
	isStale := errors.Is(err, ErrStaleTransport) || (idempotent && stale.Is(err))
	if !isStale || (again != nil && !again()) {
		return err
	}
	c.resetTransport(op, err)
	return f()
}

// wrap turns err into an *Error carrying op, the provider, id and path.
func (c *Client) wrap(op, id, path string, err error) error {
	if err == nil {
		return nil
	}
	var se *Error
	if errors.As(err, &se) && se.Op != "" && se.Provider != "" {
		return err
	}
	return &Error{Op: op, Provider: c.rt.Name(), SandboxID: id, Path: path, Code: CodeOf(err), Err: err}
}

// CreateOptions configures a new sandbox. The zero value asks for the
// provider's default template and lease.
type CreateOptions struct {
	// Template is the provider's template, snapshot or image name; empty
	// means the provider's default.
	Template string
	// Labels are key/value pairs to find the sandbox by later (E2B
	// metadata, Daytona labels). Keys match [A-Za-z0-9][A-Za-z0-9._/-]*
	// (at most 128 bytes); values are at most 256 bytes without control
	// characters.
	Labels map[string]string
	// Env is set for every command in the sandbox.
	Env map[string]string
	// SecretEnv is like Env, but its values are redacted from output and
	// errors returned through this Sandbox handle.
	SecretEnv map[string]string
	// Timeout is the lease: the sandbox ends (or pauses, with AutoPause)
	// this long after creation unless extended by SetTimeout. Zero means
	// Capabilities.DefaultLease.
	Timeout time.Duration
	// AutoPause pauses instead of destroying the sandbox when the lease ends.
	AutoPause bool
	// Resources requests CPU, memory and disk; zero fields take defaults.
	Resources Resources
	// NoNetwork cuts the sandbox off from the network.
	NoNetwork bool
	// ProviderOptions holds provider-specific settings by key, documented
	// by each provider.
	ProviderOptions map[string]string
}

var (
	idRE       = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	labelKeyRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$`)
	envKeyRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func checkID(op, provider, id string) error {
	if id == "" {
		return invalid(op, provider, "", "sandbox id", "empty")
	}
	if !idRE.MatchString(id) {
		return invalid(op, provider, "", "sandbox id", "%q must match %s", printable(id), idRE)
	}
	return nil
}

func checkLabels(op, provider string, labels map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if !labelKeyRE.MatchString(k) {
			return invalid(op, provider, "", "label key", "%q must match %s", printable(k), labelKeyRE)
		}
		v := labels[k]
		if len(v) > 256 || hasControl(v) {
			return invalid(op, provider, "", "label value", "for key %q: at most 256 bytes without control characters", k)
		}
	}
	return nil
}

// checkEnv validates env keys and values; secret values are never quoted.
func checkEnv(op, provider, id string, env map[string]string, secret bool) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !envKeyRE.MatchString(k) {
			return invalid(op, provider, id, "env name", "%q must match %s", printable(k), envKeyRE)
		}
		for _, r := range env[k] {
			if r == 0 {
				if secret {
					return invalid(op, provider, id, "secret env value", "value of %s holds NUL", k)
				}
				return invalid(op, provider, id, "env value", "value of %s holds NUL", k)
			}
		}
	}
	return nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// printable quotes s safely for an error message, bounded in length.
func printable(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	q := fmt.Sprintf("%q", s)
	return q[1 : len(q)-1]
}

// Create creates a sandbox and returns it ready to run commands. If ctx
// ends while the provider is creating it, the sandbox is destroyed rather
// than left running unseen.
func (c *Client) Create(ctx context.Context, opts CreateOptions) (*Sandbox, error) {
	const op = "create"
	name := c.rt.Name()
	if err := c.checkOpen(op, ""); err != nil {
		return nil, err
	}
	if err := checkLabels(op, name, opts.Labels); err != nil {
		return nil, err
	}
	if err := checkEnv(op, name, "", opts.Env, false); err != nil {
		return nil, err
	}
	if err := checkEnv(op, name, "", opts.SecretEnv, true); err != nil {
		return nil, err
	}
	if hasControl(opts.Template) {
		return nil, invalid(op, name, "", "template", "%q holds control characters", printable(opts.Template))
	}
	if opts.Timeout < 0 {
		return nil, invalid(op, name, "", "timeout", "%v is negative", opts.Timeout)
	}
	if r := opts.Resources; r.CPUs < 0 || r.MemoryMiB < 0 || r.DiskGiB < 0 {
		return nil, invalid(op, name, "", "resources", "%+v has a negative field", r)
	}
	lease := opts.Timeout
	if lease == 0 {
		lease = c.caps.DefaultLease
		if lease == 0 {
			lease = 5 * time.Minute
		}
	}
	if c.caps.MaxLease > 0 && lease > c.caps.MaxLease {
		return nil, invalid(op, name, "", "timeout", "%v exceeds the provider's maximum lease %v", lease, c.caps.MaxLease)
	}
	env := make(map[string]string, len(opts.Env)+len(opts.SecretEnv))
	maps.Copy(env, opts.Env)
	maps.Copy(env, opts.SecretEnv)
	req := &CreateRequest{
		Template: opts.Template, Labels: maps.Clone(opts.Labels), Env: env, Timeout: lease,
		AutoPause: opts.AutoPause, Resources: opts.Resources, NoNetwork: opts.NoNetwork,
		Options: maps.Clone(opts.ProviderOptions),
	}
	secrets := secretValues(opts.SecretEnv)
	var info Info
	err := c.retry(ctx, op, false, nil, func() error {
		var err error
		info, err = c.rt.Create(ctx, req)
		return err
	})
	if info.ID != "" && (err != nil || ctx.Err() != nil) {
		// The provider made a sandbox the caller will never see: destroy it.
		c.destroyOrphan(info.ID, err)
		if err == nil {
			err = ctx.Err()
		}
	}
	if err != nil {
		return nil, c.wrap(op, info.ID, "", redactErr(err, secrets))
	}
	return c.handle(info, secrets), nil
}

func (c *Client) destroyOrphan(id string, cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cleanup)
	defer cancel()
	if err := c.rt.Destroy(ctx, id); err != nil {
		c.log.Error("sandbox: could not destroy a sandbox orphaned by a failed create", "provider", c.rt.Name(), "id", id, "code", CodeOf(err))
		return
	}
	c.log.Info("sandbox: destroyed a sandbox whose create did not complete", "provider", c.rt.Name(), "id", id, "code", CodeOf(cause))
}

func (c *Client) handle(info Info, secrets [][]byte) *Sandbox {
	if info.Home == "" {
		info.Home = "/"
	}
	return &Sandbox{c: c, id: info.ID, info: info, secrets: secrets}
}

// Attach returns a handle on an existing sandbox by id. It does not change
// the sandbox's lease or state; a paused sandbox stays paused. A sandbox
// that does not exist is NotFound.
func (c *Client) Attach(ctx context.Context, id string) (*Sandbox, error) {
	return c.AttachWith(ctx, id, AttachOptions{})
}

// AttachOptions configures AttachWith.
type AttachOptions struct {
	// SecretEnv lists the secret env values the sandbox was created with,
	// so that this handle redacts them from output and errors as the
	// creating handle did.
	SecretEnv map[string]string
}

// AttachWith is Attach with options.
func (c *Client) AttachWith(ctx context.Context, id string, opts AttachOptions) (*Sandbox, error) {
	const op = "attach"
	if err := checkID(op, c.rt.Name(), id); err != nil {
		return nil, err
	}
	if err := c.checkOpen(op, id); err != nil {
		return nil, err
	}
	var info Info
	err := c.retry(ctx, op, true, nil, func() error {
		var err error
		info, err = c.rt.Get(ctx, id)
		return err
	})
	if err != nil {
		return nil, c.wrap(op, id, "", err)
	}
	return c.handle(info, secretValues(opts.SecretEnv)), nil
}

// ListOptions filters List. The zero value lists every sandbox.
type ListOptions struct {
	// Labels must all be present with equal values.
	Labels map[string]string
	// States, when non-empty, keeps sandboxes in any of these states.
	States []State
	// PageSize is how many sandboxes to fetch per provider call (default 100).
	PageSize int
}

// List yields the sandboxes that match opts, fetching pages as the loop
// advances. A failure is yielded once as the error, and ends the sequence.
func (c *Client) List(ctx context.Context, opts ListOptions) iter.Seq2[Info, error] {
	const op = "list"
	return func(yield func(Info, error) bool) {
		name := c.rt.Name()
		if err := checkLabels(op, name, opts.Labels); err != nil {
			yield(Info{}, err)
			return
		}
		if opts.PageSize < 0 {
			yield(Info{}, invalid(op, name, "", "page size", "%d is negative", opts.PageSize))
			return
		}
		if err := c.checkOpen(op, ""); err != nil {
			yield(Info{}, err)
			return
		}
		req := &ListRequest{Labels: maps.Clone(opts.Labels), States: slices.Clone(opts.States), PageSize: cmp0(opts.PageSize, 100)}
		seen := map[string]bool{}
		for {
			var page []Info
			var next string
			err := c.retry(ctx, op, true, nil, func() error {
				var err error
				page, next, err = c.rt.List(ctx, req)
				return err
			})
			if err != nil {
				yield(Info{}, c.wrap(op, "", "", err))
				return
			}
			for _, in := range page {
				if seen[in.ID] || !matches(in, opts) {
					continue
				}
				seen[in.ID] = true
				if !yield(in, nil) {
					return
				}
			}
			if next == "" || next == req.PageToken {
				return
			}
			req.PageToken = next
		}
	}
}

func cmp0(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func matches(in Info, opts ListOptions) bool {
	for k, v := range opts.Labels {
		if got, ok := in.Labels[k]; !ok || got != v {
			return false
		}
	}
	return len(opts.States) == 0 || slices.Contains(opts.States, in.State)
}

// GetOrCreate returns a live or paused sandbox carrying all of
// opts.Labels (resuming it if paused), or creates one with opts. created
// reports which. opts.Labels must not be empty. Two concurrent callers in
// different processes may both create; within one process, use the
// session layer for single-flight creation.
func (c *Client) GetOrCreate(ctx context.Context, opts CreateOptions) (sb *Sandbox, created bool, err error) {
	const op = "get-or-create"
	if len(opts.Labels) == 0 {
		return nil, false, invalid(op, c.rt.Name(), "", "labels", "empty: GetOrCreate finds sandboxes by labels")
	}
	for info, err := range c.List(ctx, ListOptions{Labels: opts.Labels, States: []State{StateRunning, StatePaused, StateStarting}}) {
		if err != nil {
			return nil, false, err
		}
		sb := c.handle(info, secretValues(opts.SecretEnv))
		if info.State == StatePaused {
			if err := sb.Resume(ctx); err != nil {
				if CodeOf(err) == NotFound {
					continue // deleted between list and use
				}
				return nil, false, err
			}
		}
		return sb, false, nil
	}
	sb, err = c.Create(ctx, opts)
	return sb, err == nil, err
}

func secretValues(env map[string]string) [][]byte {
	var out [][]byte
	for _, v := range env {
		if v != "" {
			out = append(out, []byte(v))
		}
	}
	// Longest first, so a secret that contains another is redacted whole.
	slices.SortFunc(out, func(a, b []byte) int { return len(b) - len(a) })
	return out
}

// redactErr hides secret values in err's text while keeping its chain.
func redactErr(err error, secrets [][]byte) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := err.Error()
	red := string(redact([]byte(msg), withQuoted(secrets)))
	if red == msg {
		return err
	}
	return &redactedError{msg: red, err: err}
}

// withQuoted adds the form each secret takes inside a Go-quoted string
// (%q, JSON), where it differs, since error texts often quote values.
func withQuoted(secrets [][]byte) [][]byte {
	out := slices.Clone(secrets)
	for _, s := range secrets {
		if q := strconv.Quote(string(s)); len(q) > 2 && q[1:len(q)-1] != string(s) {
			out = append(out, []byte(q[1:len(q)-1]))
		}
	}
	slices.SortFunc(out, func(a, b []byte) int { return len(b) - len(a) })
	return out
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
