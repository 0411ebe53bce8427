package sandbox

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/errscrub"
	"github.com/sandboxkit/sandbox/internal/namerule"
	"github.com/sandboxkit/sandbox/internal/opts"
	"github.com/sandboxkit/sandbox/internal/wire"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"
)

// Client is the portable handle on one provider. It is safe for concurrent
// use. Create it with Open or NewClient.
type Client struct {
	rt   driver.Runtime
	caps Capabilities
	log  *slog.Logger
	tel  *telemetry
	// reportsLeaseEnd: the provider says when it ended a sandbox at its
	// lease end (driver.Capabilities.ReportsLeaseEnd).
	reportsLeaseEnd bool

	cmdTimeout time.Duration
	maxOutput  int
	maxRead    int64
	cleanup    time.Duration
	calls      CallTimeouts

	flights singleflight.Group // GetOrCreate, by key
	bg      sync.WaitGroup     // abandoned creates and their clean-up

	badOpts error // the invalid options given to NewClient: every call fails with it

	mu        sync.Mutex
	listeners map[int]func()
	nextID    int
	closed    bool
}

// Option configures a Client at construction. An option given an invalid
// value makes Open fail with an InvalidArgument error naming it; a Client
// from NewClient returns that error from every call instead (NewClient
// cannot fail, like sql.OpenDB).
type Option func(*options)

// options are what the Options set.
type options struct {
	log        *slog.Logger
	cmdTimeout time.Duration
	maxOutput  int
	maxRead    int64
	cleanup    time.Duration
	calls      CallTimeouts
	tp         trace.TracerProvider
	mp         metric.MeterProvider
	cmdLines   bool
	bad        opts.Errors
}

// WithLogger sets the logger for retries, orphan cleanups and other events
// the library handles on its own. The default (and nil) discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithCommandTimeout sets the default Command.Timeout (DefaultCommandTimeout
// otherwise). It must be positive.
func WithCommandTimeout(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.bad.Invalid("WithCommandTimeout", "%v is not positive", d)
		}
		o.cmdTimeout = d
	}
}

// WithMaxOutput sets the default Command.MaxOutput (DefaultMaxOutput
// otherwise). It must be positive.
func WithMaxOutput(n int) Option {
	return func(o *options) {
		if n <= 0 {
			o.bad.Invalid("WithMaxOutput", "%d is not positive", n)
		}
		o.maxOutput = n
	}
}

// WithMaxReadFile sets the largest file Sandbox.ReadFile reads
// (DefaultMaxReadFile otherwise); zero or less reads files of any size.
// Download is never capped.
func WithMaxReadFile(n int64) Option { return func(o *options) { o.maxRead = n } }

// WithCleanupTimeout bounds the Destroy the library issues on its own for
// a sandbox that would otherwise be orphaned (default 30s). It must be
// positive.
func WithCleanupTimeout(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.bad.Invalid("WithCleanupTimeout", "%v is not positive", d)
		}
		o.cleanup = d
	}
}

// newOptions applies opts over the defaults.
func newOptions(opts []Option) *options {
	o := &options{
		log:        slog.New(slog.DiscardHandler),
		cmdTimeout: DefaultCommandTimeout, maxOutput: DefaultMaxOutput, maxRead: DefaultMaxReadFile, cleanup: 30 * time.Second,
	}
	for _, opt := range opts {
		opt(o)
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	o.calls = o.calls.withDefaults()
	return o
}

// NewClient returns a Client over rt. Providers' constructors call it; most
// programs call Open instead. If an option is invalid, every call of the
// Client fails with the InvalidArgument error that names it.
func NewClient(rt driver.Runtime, opts ...Option) *Client {
	return newClient(rt, newOptions(opts))
}

func newClient(rt driver.Runtime, o *options) *Client {
	return &Client{
		rt: rt, caps: capabilities(rt), log: o.log, tel: newTelemetry(rt.Name(), o), reportsLeaseEnd: rt.Capabilities().ReportsLeaseEnd,
		cmdTimeout: o.cmdTimeout, maxOutput: o.maxOutput, maxRead: o.maxRead, cleanup: o.cleanup, calls: o.calls,
		badOpts:   o.bad.Err("sandbox"),
		listeners: map[int]func(){},
	}
}

// Runtime returns the provider under the Client, for provider-specific
// features. Calls made on it bypass the portable layer's policy.
func (c *Client) Runtime() driver.Runtime { return c.rt }

// Provider returns the provider's name.
func (c *Client) Provider() string { return c.rt.Name() }

// CommandTimeout returns the timeout a Command without one gets (before
// the ctx deadline bounds it).
func (c *Client) CommandTimeout() time.Duration { return c.cmdTimeout }

// MaxReadFile returns the largest file Sandbox.ReadFile reads; zero means
// no cap (see WithMaxReadFile).
func (c *Client) MaxReadFile() int64 { return max(c.maxRead, 0) }

// Capabilities returns the provider's capabilities: what it declares, with
// Pause and Processes derived from the interfaces it implements.
func (c *Client) Capabilities() Capabilities {
	caps := c.caps
	caps.SnapshotModes = slices.Clone(caps.SnapshotModes)
	return caps
}

// capabilities is the one place where the capabilities an optional
// interface shows are derived from it, so they cannot drift: Pause is
// whether rt is a driver.Pauser, Processes whether it is a
// driver.ProcessRuntime, Ports whether it is a driver.PortExposer,
// Terminals whether it is a driver.TerminalRuntime; the
// declared facts about those features (PauseKeepsMemory,
// AttachAcrossClients) hold only with the feature.
func capabilities(rt driver.Runtime) Capabilities {
	caps := capabilitiesOf(rt.Capabilities())
	_, caps.Pause = rt.(driver.Pauser)
	_, caps.Processes = rt.(driver.ProcessRuntime)
	_, caps.Ports = rt.(driver.PortExposer)
	_, caps.NetworkUpdate = rt.(driver.NetworkSetter)
	_, caps.Watch = rt.(driver.Watcher)
	_, caps.ProcessList = rt.(driver.ProcessLister)
	if !caps.Watch {
		caps.WatchLatency = 0
	}
	_, caps.Terminals = rt.(driver.TerminalRuntime)
	_, caps.Metrics = rt.(driver.MetricsReader)
	caps.PauseKeepsMemory = caps.PauseKeepsMemory && caps.Pause
	caps.AttachAcrossClients = caps.AttachAcrossClients && caps.Processes
	_, caps.Snapshots = rt.(driver.Snapshotter)
	_, caps.NativeFork = rt.(driver.Forker)
	caps.Fork = caps.Snapshots || caps.NativeFork
	if !caps.Snapshots {
		caps.SnapshotModes, caps.SnapshotNote = nil, ""
	}
	return caps
}

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
// they live on until their lease ends. Close first waits for the clean-up
// of creates abandoned when their context ended (each bounded by
// WithCleanupTimeout), so that no sandbox they made outlives it. Calls made after Close, through the
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
	c.waitBackground()
	c.tel.close()
	if cl, ok := c.rt.(driver.Closer); ok {
		return c.wrap("close", "", "", cl.Close())
	}
	return nil
}

// waitBackground waits for the Client's background work: abandoned
// creates end when their provider call returns (prompt once its context
// ended) and their clean-up is bounded by the cleanup timeout. The wait is
// bounded too, in case a provider ignores its context.
func (c *Client) waitBackground() {
	done := make(chan struct{})
	go func() {
		c.bg.Wait()
		close(done)
	}()
	t := time.NewTimer(2*c.cleanup + time.Minute)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		c.log.Error("sandbox: Close gave up waiting for the clean-up of abandoned creates", "provider", c.rt.Name())
	}
}

func (c *Client) checkOpen(op, id string) error {
	if c.badOpts != nil {
		return c.wrap(op, id, "", c.badOpts)
	}
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
	if r, ok := c.rt.(driver.TransportResetter); ok {
		if err := r.ResetTransport(); err != nil {
			c.log.Warn("sandbox: transport reset failed", "provider", c.rt.Name(), "err", err)
		}
	}
	c.mu.Lock()
	fs := slices.Collect(maps.Values(c.listeners))
	c.mu.Unlock()
	for _, f := range fs {
		c.runListener(f)
	}
}

// runListener runs one transport-reset listener; a panic in it is logged
// and recovered, so a faulty listener cannot kill the caller's call (or
// keep the other listeners from running).
func (c *Client) runListener(f func()) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("sandbox: a transport-reset listener panicked; recovered", "provider", c.rt.Name(), "panic", fmt.Sprint(r))
		}
	}()
	f()
}

// retry runs f, and once more after a transport reset when f failed
// because of a stale transport and may run again. idempotent widens the
// rule from the driver's explicit ErrStaleTransport to every error the
// wire package classifies as a closed transport (wire.Closed); again, when non-nil,
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
	isStale := errors.Is(err, ErrStaleTransport) || (idempotent && wire.Closed(err))
	if !isStale || (again != nil && !again()) {
		return err
	}
	c.tel.staleRetry(ctx, op, err)
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
	// NoNetwork cuts the sandbox off from the network: the shorthand for
	// Network with Mode NetworkDenyAll.
	NoNetwork bool
	// Network is the sandbox's egress policy; nil means the provider's
	// default network (none with NoNetwork). A policy the provider cannot
	// enforce is refused with FailedPrecondition before anything is
	// created; see NetworkPolicy.
	Network *NetworkPolicy
	// BrokeredSecrets are secrets the sandbox may use on requests to their
	// hosts without ever holding them; see BrokeredSecret. With Network
	// nil they imply an allow-all policy.
	BrokeredSecrets []BrokeredSecret
	// ProviderOptions holds provider-specific settings by key, documented
	// by each provider.
	ProviderOptions map[string]string
	// FromSnapshot, when set, is the ID of a snapshot (Sandbox.Snapshot)
	// the sandbox starts from: its files, and with a full snapshot its
	// processes, are the snapshot's. Template must then be empty (the
	// snapshot's template applies). A provider without snapshots returns
	// an error matching ErrUnimplemented; a snapshot that does not exist
	// is NotFound. A snapshot keeps files, not the source's environment,
	// network policy or secrets: SecretEnv, Network and BrokeredSecrets
	// are this call's alone, so a sandbox started from a snapshot of one
	// with brokered secrets has them (and the point that brokers them in
	// front of it) only if given here again; a placeholder the source's
	// files hold is not the new sandbox's.
	FromSnapshot string
}

var (
	idRE       = namerule.Rule{Pattern: `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`, Max: 128, FirstAlnum: true, Extra: "._-"}
	labelKeyRE = namerule.Rule{Pattern: `^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$`, Max: 128, FirstAlnum: true, Extra: "._/-"}
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

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// Create creates a sandbox and returns it ready to run commands. If ctx
// ends while the provider is creating it, Create returns at once with
// ctx's error and the sandbox is destroyed in the background (bounded by
// WithCleanupTimeout; Close waits for it) rather than left running unseen.
func (c *Client) Create(ctx context.Context, opts CreateOptions) (sb *Sandbox, err error) {
	const op = "create"
	ctx, tc := c.tel.start(ctx, op, "")
	defer func() { tc.end(ctx, err) }()
	ctx, end := bound(ctx, op, c.calls.Create)
	info, _, secrets, err := c.create(ctx, op, opts, func(ctx context.Context, req *driver.CreateRequest) (driver.Info, bool, error) {
		info, err := c.rt.Create(ctx, req)
		return info, true, err
	})
	err = end(err)
	if err != nil {
		return nil, err
	}
	tc.setID(info.ID)
	c.tel.sandboxCreated(ctx, info.ID)
	sb = c.handle(info, secrets)
	sb.owned = true
	sb.brokered = slices.Clone(opts.BrokeredSecrets)
	return sb, nil
}

// createFunc asks the provider for a sandbox; created is false when it
// returned one that existed already.
type createFunc func(ctx context.Context, req *driver.CreateRequest) (info driver.Info, created bool, err error)

// create validates opts, turns them into a CreateRequest and runs mk on a
// goroutine the Client tracks, so that the caller gets control back as
// soon as ctx ends while an abandoned create finishes, and is cleaned up,
// in the background. A sandbox mk created that the caller will not get is
// destroyed: before create returns while ctx is live, in the background
// otherwise.
func (c *Client) create(ctx context.Context, op string, opts CreateOptions, mk createFunc) (Info, bool, [][]byte, error) {
	name := c.rt.Name()
	req, err := c.createRequest(op, opts)
	if err != nil {
		return Info{}, false, nil, err
	}
	secrets := createSecrets(opts)
	mk = c.retryingCreate(ctx, mk)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return Info{}, false, nil, c.wrap(op, "", "", ErrClosed)
	}
	c.bg.Add(1)
	c.mu.Unlock()

	type result struct {
		info    driver.Info
		created bool
		err     error
	}
	var (
		mu        sync.Mutex
		res       result
		have      bool
		abandoned bool
		done      = make(chan struct{})
	)
	go func() {
		defer c.bg.Done()
		defer close(done)
		var r result
		r.err = c.retry(ctx, op, false, nil, func() error {
			var err error
			r.info, r.created, err = mk(ctx, req)
			return err
		})
		mu.Lock()
		orphan := r.created && r.info.ID != "" && (r.err != nil || abandoned || ctx.Err() != nil)
		if orphan && r.err == nil {
			r.err = context.Cause(ctx)
		}
		res, have = r, true
		mu.Unlock()
		if orphan {
			// The provider made a sandbox the caller will never see.
			c.destroyOrphan(r.info.ID, r.err)
		}
	}()
	var r result
	select {
	case <-done:
		r = res
	case <-ctx.Done():
		mu.Lock()
		if !have {
			abandoned = true
			mu.Unlock()
			c.log.Info("sandbox: create abandoned as its context ended; any sandbox made is destroyed in the background", "provider", name)
			return Info{}, false, nil, c.wrap(op, "", "", fmt.Errorf("sandbox: create: %w", context.Cause(ctx)))
		}
		r = res
		mu.Unlock()
	}
	if r.err != nil {
		id := r.info.ID
		if !r.created {
			id = ""
		}
		return Info{}, false, nil, redactErr(c.wrap(op, id, "", r.err), secrets)
	}
	info := infoOf(r.info)
	if r.created && len(req.Secrets) > 0 {
		// The sandbox was made with these: report them whole (with Env and
		// placeholder), whatever the provider tells back.
		envs := make([]string, len(opts.BrokeredSecrets))
		for i, s := range opts.BrokeredSecrets {
			envs[i] = s.Env
		}
		info.BrokeredSecrets = brokeredInfoOf(req.Secrets, envs)
	}
	return info, r.created, secrets, nil
}

// createRequest validates opts and applies the defaults.
func (c *Client) createRequest(op string, opts CreateOptions) (*driver.CreateRequest, error) {
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
	if opts.FromSnapshot != "" {
		if opts.Template != "" {
			return nil, invalid(op, name, "", "template", "%q set with FromSnapshot %q: a sandbox starts from a template or from a snapshot, not both",
				printable(opts.Template), printable(opts.FromSnapshot))
		}
		if err := checkSnapshotID(op, name, opts.FromSnapshot); err != nil {
			return nil, err
		}
		if _, err := c.snapshotter(op, ""); err != nil {
			return nil, err
		}
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
	np, err := normalizeNetwork(op, name, "", opts.Network, opts.NoNetwork)
	if err != nil {
		return nil, err
	}
	if np == nil && len(opts.BrokeredSecrets) > 0 {
		// A brokered secret needs the enforcement point in front of the
		// sandbox: without a policy that is allow-all, put in force by it.
		np = &driver.NetworkPolicy{Mode: NetworkAllowAll}
	}
	env := make(map[string]string, len(opts.Env)+len(opts.SecretEnv)+len(opts.BrokeredSecrets))
	maps.Copy(env, opts.Env)
	maps.Copy(env, opts.SecretEnv)
	secrets, err := brokeredSecrets(op, name, opts, np, env)
	if err != nil {
		return nil, err
	}
	if len(secrets) > 0 && !c.caps.NetworkPolicy.BrokeredSecrets {
		msg := fmt.Sprintf("BrokeredSecrets need an enforcement point outside the sandbox that provider %s does not have", name)
		if n := c.caps.NetworkPolicy.Note; n != "" {
			msg += " (" + n + ")"
		}
		return nil, c.wrap(op, "", "", fmt.Errorf("sandbox: %s: %w", msg, ErrFailedPrecondition))
	}
	if err := c.checkNetworkSupport(op, "", np, opts.NoNetwork); err != nil {
		return nil, err
	}
	return &driver.CreateRequest{
		Template: opts.Template, Labels: maps.Clone(opts.Labels), Env: env, Timeout: lease,
		AutoPause: opts.AutoPause, Resources: opts.Resources.toDriver(),
		NoNetwork: np != nil && np.Mode == NetworkDenyAll, Network: np, Secrets: secrets,
		Options: maps.Clone(opts.ProviderOptions), FromSnapshot: opts.FromSnapshot,
	}, nil
}

// createSecrets are the values a handle on a sandbox made with opts
// redacts: the SecretEnv values and the brokered secrets' values.
func createSecrets(opts CreateOptions) [][]byte {
	out := append(secretValues(opts.SecretEnv), brokeredValues(opts.BrokeredSecrets)...)
	// Longest first, so a secret that contains another is redacted whole.
	slices.SortFunc(out, func(a, b []byte) int { return len(b) - len(a) })
	return out
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
// the sandbox's lease or state; a paused sandbox stays paused. The handle
// does not own the sandbox: its Destroy leaves the sandbox running (use
// AttachOptions.Own or Client.Destroy to destroy it), its Pause, Resume and
// SetTimeout fail with FailedPrecondition, and its commands run within the
// lease the owner set (see Sandbox.Owned). A sandbox that does not exist
// is NotFound.
func (c *Client) Attach(ctx context.Context, id string) (*Sandbox, error) {
	return c.AttachWith(ctx, id, AttachOptions{})
}

// AttachOptions configures AttachWith.
type AttachOptions struct {
	// SecretEnv lists the secret env values the sandbox was created with,
	// so that this handle redacts them from output and errors as the
	// creating handle did.
	SecretEnv map[string]string
	// BrokeredSecrets lists the brokered secrets the sandbox was created
	// with, so that this handle redacts their values as the creating handle
	// did. Only their values are used: the provider holds the rest, and a
	// handle attached without them never learns a value.
	BrokeredSecrets []BrokeredSecret
	// Own makes the handle the sandbox's owner, as if this process had
	// created it: its Destroy destroys the sandbox, and it may Pause,
	// Resume and SetTimeout, and extend the lease for its commands.
	// Without it, Destroy on the handle only forgets the sandbox (see
	// Sandbox.Destroy) and the other lifecycle calls fail with
	// FailedPrecondition.
	Own bool
}

// AttachWith is Attach with options.
func (c *Client) AttachWith(ctx context.Context, id string, opts AttachOptions) (_ *Sandbox, err error) {
	const op = "attach"
	ctx, tc := c.tel.start(ctx, op, id)
	defer func() { tc.end(ctx, err) }()
	if err := checkID(op, c.rt.Name(), id); err != nil {
		return nil, err
	}
	if err := c.checkOpen(op, id); err != nil {
		return nil, err
	}
	var info driver.Info
	ctx, end := bound(ctx, op, c.calls.Lookup)
	err = end(c.retry(ctx, op, true, nil, func() error {
		var err error
		info, err = c.rt.Get(ctx, id)
		return err
	}))
	if err != nil {
		return nil, c.wrap(op, id, "", err)
	}
	sb := c.handle(infoOf(info), createSecrets(CreateOptions{SecretEnv: opts.SecretEnv, BrokeredSecrets: opts.BrokeredSecrets}))
	sb.owned = opts.Own
	return sb, nil
}

// ListOptions filters List. The zero value lists every sandbox.
type ListOptions struct {
	// Labels must all be present with equal values.
	Labels map[string]string
	// States, when non-empty, keeps sandboxes in any of these states.
	States []State
	// PageSize is how many sandboxes to fetch per provider call (default 100).
	PageSize int
	// ExcludeIDs are sandboxes left out of the results: a caller looking
	// for "another" sandbox with the same labels passes the ones it holds,
	// rather than paging past them itself. They are handed to the
	// provider, which leaves them out before filling a page where it can
	// (local, memory), and filtered again here; a page that held only
	// excluded sandboxes does not end the listing while more pages exist.
	ExcludeIDs []string
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
		req := &driver.ListRequest{Labels: maps.Clone(opts.Labels), States: statesToDriver(opts.States), PageSize: cmp.Or(opts.PageSize, 100),
			ExcludeIDs: slices.Clone(opts.ExcludeIDs)}
		seen := map[string]bool{}
		for _, id := range opts.ExcludeIDs {
			seen[id] = true // never yielded, like a sandbox already yielded
		}
		// The Lookup bound covers the whole look-up, every page of it,
		// but not the time the caller's loop spends between pages.
		var spent time.Duration
		for {
			var page []driver.Info
			var next string
			pctx, tc := c.tel.start(ctx, op, "")
			ctx, end := boundLeft(pctx, op, c.calls.Lookup, spent)
			t0 := time.Now()
			err := end(c.retry(ctx, op, true, nil, func() error {
				var err error
				page, next, err = c.rt.List(ctx, req)
				return err
			}))
			spent += time.Since(t0)
			tc.end(pctx, err)
			if err != nil {
				yield(Info{}, c.wrap(op, "", "", err))
				return
			}
			for _, d := range page {
				in := infoOf(d)
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

func matches(in Info, opts ListOptions) bool {
	for k, v := range opts.Labels {
		if got, ok := in.Labels[k]; !ok || got != v {
			return false
		}
	}
	return len(opts.States) == 0 || slices.Contains(opts.States, in.State)
}

// GetOrCreate returns a live or paused sandbox carrying all of
// opts.Labels (resuming it if paused; the oldest when several do), or
// creates one with opts. created
// reports which: among concurrent callers, only the one whose call made
// the sandbox sees true. opts.Labels must not be empty.
//
// Concurrent calls on one Client with the same key (opts.Template and
// opts.Labels) share one look-up and at most one create: the first
// caller's other options (Env, SecretEnv values, Timeout, Resources,
// ProviderOptions, Network, BrokeredSecrets...) apply to the sandbox every
// caller gets; each caller's handle redacts its own opts.SecretEnv and
// brokered values. A caller whose ctx ends stops
// waiting at once; when the caller doing the work gives up, the others
// try again.
//
// Across Clients and OS processes the guarantee is the provider's
// ([driver.KeyedCreator]); see each provider's documentation: local takes a lock
// in its root directory, Daytona names the sandbox after the key, E2B
// checks after creating and keeps the oldest. memory has no other
// process. Without a KeyedCreator, two processes may both create.
func (c *Client) GetOrCreate(ctx context.Context, opts CreateOptions) (sb *Sandbox, created bool, err error) {
	const op = "get-or-create"
	ctx, tc := c.tel.start(ctx, op, "")
	defer func() {
		if sb != nil {
			tc.setID(sb.id)
			if tc.span.IsRecording() {
				tc.span.SetAttributes(AttrCreated.Bool(created))
			}
		}
		tc.end(ctx, err)
	}()
	name := c.rt.Name()
	if len(opts.Labels) == 0 {
		return nil, false, invalid(op, name, "", "labels", "empty: GetOrCreate finds sandboxes by labels")
	}
	if err := checkLabels(op, name, opts.Labels); err != nil {
		return nil, false, err
	}
	if hasControl(opts.Template) {
		return nil, false, invalid(op, name, "", "template", "%q holds control characters", printable(opts.Template))
	}
	ctx, end := bound(ctx, op, c.calls.Create)
	sb, created, err = c.getOrCreate(ctx, opts)
	return sb, created, end(err)
}

func (c *Client) getOrCreate(ctx context.Context, opts CreateOptions) (*Sandbox, bool, error) {
	const op = "get-or-create"
	tmpl := opts.Template
	if opts.FromSnapshot != "" {
		tmpl = "\x01snapshot\x00" + opts.FromSnapshot // never a template: those hold no control characters
	}
	fkey := flightKey(tmpl, opts.Labels)
	for {
		ran := false
		ch := c.flights.DoChan(fkey, func() (any, error) {
			ran = true
			return c.findOrCreate(ctx, opts, fkey)
		})
		var res singleflight.Result
		select {
		case <-ctx.Done():
			return nil, false, c.wrap(op, "", "", fmt.Errorf("sandbox: get-or-create: %w", context.Cause(ctx)))
		case res = <-ch:
		}
		if res.Err != nil {
			if !ran && ctx.Err() == nil && (errors.Is(res.Err, context.Canceled) || errors.Is(res.Err, context.DeadlineExceeded)) {
				continue // the caller doing the work gave up; this one has not
			}
			return nil, false, res.Err
		}
		f := res.Val.(flight)
		sb := c.handle(f.info, createSecrets(opts))
		sb.owned = f.created && ran
		if sb.owned {
			sb.brokered = slices.Clone(opts.BrokeredSecrets)
		}
		return sb, sb.owned, nil
	}
}

// flight is what one GetOrCreate flight found or made.
type flight struct {
	info    Info
	created bool
}

// flightKey is GetOrCreate's key: the template and the labels in a
// canonical order. Labels hold no control characters, so NUL separates.
func flightKey(template string, labels map[string]string) string {
	var b strings.Builder
	b.WriteString(template)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		b.WriteByte(0)
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(labels[k])
	}
	return b.String()
}

// providerKey is the key a KeyedCreator gets: 32 hex digits of the
// SHA-256 of the flight key.
func providerKey(fkey string) string {
	sum := sha256.Sum256([]byte(fkey))
	return hex.EncodeToString(sum[:16])
}

// findOrCreate is one GetOrCreate flight.
func (c *Client) findOrCreate(ctx context.Context, opts CreateOptions, fkey string) (flight, error) {
	const op = "get-or-create"
	var found []Info
	// A sandbox in a state the provider did not name is taken too: creating
	// beside it could leave two for one key.
	for info, err := range c.List(ctx, ListOptions{Labels: opts.Labels, States: []State{StateRunning, StatePaused, StateStarting, StateUnknown}}) {
		if err != nil {
			return flight{}, err
		}
		found = append(found, info)
	}
	// The oldest (ties by id), the rule every process applies alike.
	slices.SortFunc(found, func(a, b Info) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	for _, info := range found {
		info, err := c.wake(ctx, info)
		if err != nil {
			if CodeOf(err) == NotFound {
				continue // deleted between list and use
			}
			return flight{}, err
		}
		return flight{info: info}, nil
	}
	mk := func(ctx context.Context, req *driver.CreateRequest) (driver.Info, bool, error) {
		info, err := c.rt.Create(ctx, req)
		return info, true, err
	}
	if kc, ok := c.rt.(driver.KeyedCreator); ok {
		key := providerKey(fkey)
		mk = func(ctx context.Context, req *driver.CreateRequest) (driver.Info, bool, error) {
			return kc.CreateKeyed(ctx, key, req)
		}
	}
	cctx, end := bound(ctx, op, c.calls.Create)
	info, created, _, err := c.create(cctx, op, opts, mk)
	err = end(err)
	if err != nil {
		return flight{}, err
	}
	if created {
		c.tel.sandboxCreated(ctx, info.ID)
	}
	if !created {
		if info, err = c.wake(ctx, info); err != nil {
			return flight{}, err
		}
	}
	return flight{info: info, created: created}, nil
}

// wake resumes a paused sandbox found by GetOrCreate.
func (c *Client) wake(ctx context.Context, info Info) (Info, error) {
	if info.State != StatePaused {
		return info, nil
	}
	sb := c.handle(info, nil)
	if err := sb.resume(ctx); err != nil {
		return info, err
	}
	return sb.Info(), nil
}

// redactErr hides secret values in the text of every error of err's tree
// (see internal/errscrub), keeping what errors.Is and CodeOf match.
func redactErr(err error, secrets [][]byte) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	all := withQuoted(secrets)
	return errscrub.Chain(err, func(s string) string { return string(redact([]byte(s), all)) })
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
