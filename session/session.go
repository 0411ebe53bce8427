// Package session keeps one sandbox per session key (a conversation, a
// user, a job) on any provider, above the portable sandbox.Client.
//
// A Manager creates nothing until Acquire is first called for a key. Acquire
// returns the session already held in memory, else reattaches to a running
// or paused sandbox that carries the key's label (so a process restart does
// not orphan a paid sandbox), else creates one. Concurrent Acquire calls for
// one key share a single create; a cap on live sandboxes fails with
// sandbox.ErrLimit before anything is created.
//
// Nothing is orphaned: a sandbox that was created but could not be primed,
// set up or registered is destroyed before Acquire returns its error.
//
// Every operation on a Session (Exec, Run, Do, WriteFile, ReadFile) first
// extends the sandbox's lease (extend-only) and wakes a paused sandbox.
// After a failure the manager asks the provider what happened: a sandbox
// that no longer exists (or is in the error state) is "gone", the session is
// forgotten and the error matches ErrGone, so the next Acquire creates a
// fresh one; a sandbox that still exists is "degraded" and kept, and the
// error is returned as is.
//
// # Paths
//
// WriteFile, ReadFile, ReadDir, Remove and Path confine their path to the workspace with the
// rules fsbackend's file tools use, so that a model-chosen path reaches no
// further through a Session than through the file tools: a relative path
// starts at the workspace; an absolute path is re-rooted under it (the
// workspace's own absolute prefix is accepted as such); a backslash reads
// as a slash; a path that climbs above the workspace with "..", is empty,
// holds a control character or is not UTF-8, or names fsbackend's metadata
// directory is refused before any call to the provider, with an
// InvalidArgument *sandbox.Error that wraps a *backend.Error of Code
// backend.CodeInvalidPath (an escape also matches sandbox.ErrPathEscape).
// Symbolic links are not resolved: the jail is lexical, like Run's.
// Trusted callers opt out with Options.UnconfinedPaths.
//
// Session.Sandbox() is not confined, and its relative paths start at the
// sandbox's home, not at the workspace (a subdirectory of it by default):
// hand it absolute paths, from Session.Workspace or Session.Path.
//
// Setup follows one policy for every provider: a missing template either
// falls back to a configured template or fails fast; packages are validated
// against injection and installed after create with an argv (never a shell
// line) under a timeout, skipped when the template already ships them.
// A package may be tied to the one template it works on
// (Options.PackageTemplates): on a sandbox that ended up on another
// template (a fallback, another template or alias, a per-call template)
// the package is refused by a built-in rule, the sandbox destroyed and
// the error matches ErrTemplateMismatch, rather than relying on a
// SelectPackages hook to notice. Session.InstallPackagesWith installs
// more packages later with a timeout of the call's own.
//
// # Lease
//
// A session's lease starts as Options.Create.Timeout and is what every
// operation extends the sandbox's lease to. Session.SetLease lengthens it
// for one session now: the sandbox's lease is extended at once, and later
// extensions and the session's per-call sandboxes use the new value. It
// only extends; a shorter value is refused with InvalidArgument.
//
// Templates are not built on demand (a build takes minutes and belongs
// outside a request): a missing
// template falls back or fails fast, as above, and the image is the
// caller's to prepare: with E2B's template build (e2b template build, from
// a Dockerfile) ahead of time, or on Daytona with the provider option
// "image" (daytona.OptImage), which creates the sandbox from a container
// image directly. Building in the middle of an Acquire would hold the
// caller for minutes under an API this library does not yet speak.
//
// Every Result of Exec and Run carries the Diagnostics of the sandbox that
// ran it (id, provider, template, fallback used, per-call template,
// adopted, lease end, attempts); Session.Diagnostics gives the same
// between calls.
//
// # Per-call templates
//
// A call may ask for another template than the session's with
// WithTemplate (Exec, Do, WriteFile, ReadFile) or RunOptions.Template.
// The session then holds a second
// sandbox for that template, made on first use like its own (template
// policy, packages, workspace) and reused by later calls; it is keyed by
// the session key and the template (labels LabelKey+".of" and
// LabelKey+".template"), reattached after a restart, counted in MaxLive,
// and destroyed when the session ends, however it ends. See
// Session.ForTemplate.
//
// Sessions idle for Options.IdleTimeout are reaped. Release ends one session
// by the sandbox id it captured, so it never destroys a newer sandbox of the
// same key. Close destroys the sandboxes the manager owns: those it created
// and those it adopted by reattaching after a restart, so nothing leaks.
//
// # Reattach
//
// A failed look-up is not a reason to create: a look-up, attach or wake
// that fails for a transient reason (Unavailable, ResourceExhausted,
// DeadlineExceeded, Internal, Unknown) is retried with jittered backoff
// within the ctx's deadline, or ReattachTimeout when it has none, and
// Acquire fails if it never succeeds. Unknown, an error no layer
// classified, counts as transient because it does not say the sandbox is
// gone: creating on it could leave two sandboxes for one key. A fresh sandbox is created only after a look-up that
// succeeded found nothing usable. A candidate is skipped only when the
// provider says it is gone or in the error state.
//
// # Defaults
//
// The defaults of a zero Options, in one place: label key
// DefaultLabelKey; at most DefaultMaxLive (50) live sandboxes; sessions
// reaped after DefaultIdleTimeout (15 min) idle; each workspace prime
// attempt bounded by DefaultPrimeTimeout (30 s); package installs by
// DefaultInstallTimeout (5 min); look-up retries on reattach by
// DefaultReattachTimeout (1 min); each Destroy the manager issues on its
// own by DefaultCleanupTimeout (30 s); commands by the client's command
// timeout (sandbox.DefaultCommandTimeout, 10 min); ReadFile capped at the
// client's read cap (sandbox.DefaultMaxReadFile, 10 MiB); paths confined
// to the workspace DefaultWorkspace under the sandbox's home. The client's
// default bounds of provider calls made with a ctx that has no deadline
// (sandbox.CallTimeouts) apply to every call the manager makes.
package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/namerule"
	"github.com/sandboxkit/sandbox/internal/pathsafe"
	"github.com/sandboxkit/sandbox/internal/telemetry"
)

// Defaults for the zero fields of Options.
const (
	DefaultLabelKey       = "sandboxkit.session"
	DefaultMaxLive        = 50
	DefaultIdleTimeout    = 15 * time.Minute
	DefaultPrimeTimeout   = 30 * time.Second
	DefaultInstallTimeout = 5 * time.Minute
	// NoTimeoutBound is the timeout an install with a negative
	// InstallTimeout gets when its ctx has no deadline.
	NoTimeoutBound         = 24 * time.Hour
	DefaultCleanupTimeout  = 30 * time.Second
	DefaultReattachTimeout = time.Minute
	DefaultWorkspace       = "workspace"
)

// defaultInstallCommand is the argv prefix packages are installed with; the
// validated package names are appended after the "--".
var defaultInstallCommand = []string{"pip", "install", "--quiet", "--"}

// ErrGone matches errors reporting that a session's sandbox no longer
// exists (deleted, expired, or in the provider's error state). The session
// has been forgotten; Acquire the key again for a fresh sandbox. Such errors
// also match sandbox.ErrNotFound.
var ErrGone = errors.New("session: sandbox is gone")

// ErrEnded matches errors from operations on a Session that was released,
// reaped, closed with its Manager, or found gone. Acquire the key again.
// Such errors also match sandbox.ErrFailedPrecondition.
var ErrEnded = errors.New("session: session has ended")

// TemplatePolicy says what Acquire does when the requested template does
// not exist.
type TemplatePolicy int

const (
	// FailFast returns the provider's NotFound error: no sandbox is created.
	FailFast TemplatePolicy = iota
	// Fallback creates the sandbox from Options.FallbackTemplate instead
	// ("" means the provider's default template); the Session reports
	// UsedRequestedTemplate() == false.
	Fallback
)

// Options configures a Manager. The zero value is usable: the provider's
// default template and lease, no packages, at most DefaultMaxLive live
// sandboxes, sessions reaped after DefaultIdleTimeout idle.
type Options struct {
	// Create is used for every sandbox the manager creates. Create.Timeout
	// is the lease, re-extended before each operation (zero: the provider's
	// default lease). The key's label (LabelKey) is added to Create.Labels;
	// reattaching looks for sandboxes carrying all of those labels. The
	// network policy (Create.Network, Create.NoNetwork) and brokered
	// secrets (Create.BrokeredSecrets) apply to every sandbox created, and
	// a reattached sandbox's handle redacts the brokered values as the
	// creating one does (the reattached sandbox keeps the policy and
	// secrets it was created with). Create.FromSnapshot starts every
	// session's sandbox from a snapshot (sandbox.Sandbox.Snapshot) rather
	// than a template: set an environment up once, snapshot it, and every
	// session starts from it (Create.Template must then be empty;
	// per-call template sandboxes, WithTemplate, start from their
	// template, not from the snapshot).
	Create sandbox.CreateOptions
	// LabelKey is the label whose value is the session key
	// (DefaultLabelKey when empty).
	LabelKey string

	// OnMissingTemplate decides what happens when Create.Template does
	// not exist: FailFast (the zero value) or Fallback.
	OnMissingTemplate TemplatePolicy
	// FallbackTemplate is the template used under Fallback; empty means
	// the provider's default.
	FallbackTemplate string

	// Packages are installed after create. Each must be a package name with
	// optional extras and version specifiers (e.g. "numpy>=1.26,<3");
	// anything else, shell metacharacters included, is rejected naming it.
	Packages []string
	// SelectPackages, when set, replaces Packages: it is called after create
	// with the effective template ("" for the provider's default) and
	// returns the packages to install. An error destroys the sandbox and is
	// returned by Acquire.
	SelectPackages func(effectiveTemplate string) ([]string, error)
	// TemplatePackages lists, per template name, packages the template
	// already ships; those are not installed again.
	TemplatePackages map[string][]string
	// PackageTemplates names, per package, the one template the package
	// works on (say, a native extension built for that image's Python).
	// Keys are package names, compared as pip does (case-insensitive,
	// "-", "_" and "." alike), whatever extras or version specifiers the
	// package is given with; values are template names.
	//
	// The built-in rule: a package is installed only in a sandbox made
	// from the template it names. When the sandbox runs another one (the
	// requested template was missing and OnMissingTemplate fell back, the
	// sandbox was made from another template or alias, or it is the
	// sandbox of a per-call template), Acquire and ForTemplate destroy it
	// and return an error matching ErrTemplateMismatch (Code
	// FailedPrecondition) that names the package, the template it needs
	// and the one the sandbox got, instead of installing a package that
	// would fail later in a way harder to read. A sandbox found on
	// reattach on another template is destroyed and a fresh one made
	// (refused in turn if it too lands on another template). It applies
	// to the packages Packages or SelectPackages give, and to
	// Session.InstallPackages (which refuses without destroying).
	PackageTemplates map[string]string
	// InstallCommand is the argv prefix packages are appended to
	// (["pip", "install", "--quiet", "--"] when empty). It runs without a
	// shell.
	InstallCommand []string
	// InstallTimeout bounds the install command (DefaultInstallTimeout
	// when zero). Negative means no timeout of its own: the install is
	// bounded only by ctx's deadline, or by NoTimeoutBound when ctx has
	// none (a command always carries a timeout on the wire).
	InstallTimeout time.Duration

	// Workspace is the working directory of commands and the root of Run's
	// files; relative to the sandbox's home (DefaultWorkspace when empty).
	Workspace string
	// MaxReadFile caps the size of a file ReadFile returns: zero means the
	// client's cap (sandbox.DefaultMaxReadFile, 10 MiB, unless the client
	// was opened with sandbox.WithMaxReadFile), negative means no cap. A
	// larger file is refused with an error matching sandbox.ErrLimit
	// (ResourceExhausted) that names its size.
	MaxReadFile int64
	// UnconfinedPaths lets WriteFile, ReadFile and Path reach any path in
	// the sandbox: relative paths still start at the workspace, absolute
	// ones are kept and ".." may climb out of it. Set it only when the
	// paths come from trusted code, never from a model (see "Paths" in the
	// package documentation). Run's files stay confined either way.
	UnconfinedPaths bool
	// PrimeTimeout bounds each attempt to create the workspace
	// (DefaultPrimeTimeout when zero). A failed attempt is retried once
	// after refreshing (and if needed waking) the sandbox.
	PrimeTimeout time.Duration

	// MaxLive caps the sandboxes this manager holds or is creating
	// (DefaultMaxLive when zero; negative: no cap). Reattaching to an
	// existing sandbox is allowed at the cap: it creates nothing.
	MaxLive int
	// IdleTimeout is how long a session may go unused before it is reaped
	// (DefaultIdleTimeout when zero; negative: never).
	IdleTimeout time.Duration
	// ReapInterval is how often the reaper looks for idle sessions (zero:
	// IdleTimeout/4, between 1s and 1m; negative: no reaper goroutine, call
	// ReapIdle yourself).
	ReapInterval time.Duration
	// LeaseRefreshInterval skips the lease extension before an operation
	// when the last one was more recent; zero extends before every
	// operation.
	LeaseRefreshInterval time.Duration
	// CommandTimeout is the timeout of Exec and Run commands that set none
	// (the client's CommandTimeout when zero).
	CommandTimeout time.Duration
	// ReattachTimeout bounds the retries of a failed look-up, attach or
	// wake of a sandbox to reattach when Acquire's ctx has no deadline
	// (DefaultReattachTimeout when zero). Acquire fails, rather than create
	// a second sandbox for the key, when the look-up never succeeds.
	ReattachTimeout time.Duration
	// CleanupTimeout bounds each Destroy the manager issues on its own
	// (DefaultCleanupTimeout when zero).
	CleanupTimeout time.Duration

	// OnCreate, when set, is called after a new sandbox is created and set
	// up, before its session is registered (for example to record the
	// mapping elsewhere). An error destroys the sandbox and is returned.
	OnCreate func(ctx context.Context, s *Session) error

	// Logger receives events the manager handles on its own (reattach,
	// fallback, cleanup, reaping). Nil discards.
	Logger *slog.Logger
	// Clock returns the current time for idle accounting (time.Now when nil).
	Clock func() time.Time
}

// Manager hands out one session per key. It is safe for concurrent use.
// Create it with NewManager and end it with Close.
type Manager struct {
	c      *sandbox.Client
	opts   Options
	optErr error
	log    *slog.Logger
	now    func() time.Time
	lease  time.Duration

	packageTemplates map[string]string // Options.PackageTemplates by normalised name

	base     context.Context // cancelled by Close: ends in-flight creates
	stopBase context.CancelFunc

	flights singleflight.Group
	wg      sync.WaitGroup // in-flight acquires and the reaper; Add only under mu while !closed

	mu        sync.Mutex
	sessions  map[string]*Session
	creating  int
	nvariants int // sandboxes of per-call templates held by sessions
	closed    bool
	reaper    bool
	stop      chan struct{}
}

var (
	// A key is only ever a label value (and shown in errors and logs),
	// never a file name or a command argument, so any of these characters
	// may start it.
	keyRE      = namerule.Rule{Pattern: `^[A-Za-z0-9._-]{1,128}$`, Max: 128, Extra: "._-"}
	labelKeyRE = namerule.Rule{Pattern: `^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$`, Max: 128, FirstAlnum: true, Extra: "._/-"}
)

// NewManager returns a Manager over client. Invalid options are reported
// by every Acquire. The Manager does not close the client.
func NewManager(client *sandbox.Client, opts Options) *Manager {
	o := opts
	o.Create.Labels = maps.Clone(opts.Create.Labels)
	o.Create.Env = maps.Clone(opts.Create.Env)
	o.Create.SecretEnv = maps.Clone(opts.Create.SecretEnv)
	o.Create.ProviderOptions = maps.Clone(opts.Create.ProviderOptions)
	if n := opts.Create.Network; n != nil {
		c := *n
		c.Allow, c.Deny = slices.Clone(n.Allow), slices.Clone(n.Deny)
		o.Create.Network = &c
	}
	o.Create.BrokeredSecrets = slices.Clone(opts.Create.BrokeredSecrets)
	for i, b := range o.Create.BrokeredSecrets {
		o.Create.BrokeredSecrets[i].Hosts = slices.Clone(b.Hosts)
	}
	o.TemplatePackages = maps.Clone(opts.TemplatePackages)
	o.PackageTemplates = maps.Clone(opts.PackageTemplates)
	o.Packages = slices.Clone(opts.Packages)
	o.InstallCommand = slices.Clone(opts.InstallCommand)
	if o.LabelKey == "" {
		o.LabelKey = DefaultLabelKey
	}
	if o.MaxLive == 0 {
		o.MaxLive = DefaultMaxLive
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.ReapInterval == 0 && o.IdleTimeout > 0 {
		o.ReapInterval = min(max(o.IdleTimeout/4, time.Second), time.Minute)
	}
	if o.PrimeTimeout <= 0 {
		o.PrimeTimeout = DefaultPrimeTimeout
	}
	if o.InstallTimeout == 0 {
		o.InstallTimeout = DefaultInstallTimeout
	}
	if len(o.InstallCommand) == 0 {
		o.InstallCommand = defaultInstallCommand
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = client.CommandTimeout()
	}
	if o.CleanupTimeout <= 0 {
		o.CleanupTimeout = DefaultCleanupTimeout
	}
	if o.ReattachTimeout <= 0 {
		o.ReattachTimeout = DefaultReattachTimeout
	}
	if o.Workspace == "" {
		o.Workspace = DefaultWorkspace
	}
	m := &Manager{c: client, opts: o, log: o.Logger, now: o.Clock, sessions: map[string]*Session{}, stop: make(chan struct{})}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.now == nil {
		m.now = time.Now
	}
	m.lease = o.Create.Timeout
	if m.lease <= 0 {
		m.lease = client.Capabilities().DefaultLease
		if m.lease <= 0 {
			m.lease = 5 * time.Minute
		}
	}
	m.packageTemplates = map[string]string{}
	for p, t := range o.PackageTemplates {
		m.packageTemplates[normalizePackage(p)] = t
	}
	m.base, m.stopBase = context.WithCancel(context.Background())
	m.optErr = m.validate()
	return m
}

func (m *Manager) validate() error {
	o := m.opts
	switch {
	case !labelKeyRE.MatchString(o.LabelKey):
		return m.invalid("new-manager", "", "label key %q must match %s", o.LabelKey, labelKeyRE)
	case pathsafe.Check(o.Workspace) != nil:
		return m.invalid("new-manager", "", "workspace %q: %v", o.Workspace, pathsafe.Check(o.Workspace))
	case o.OnMissingTemplate != FailFast && o.OnMissingTemplate != Fallback:
		return m.invalid("new-manager", "", "template policy %d is unknown", o.OnMissingTemplate)
	case o.InstallCommand[0] == "":
		return m.invalid("new-manager", "", "install command: program is empty")
	}
	if o.Create.FromSnapshot != "" && o.Create.Template != "" {
		return m.invalid("new-manager", "", "Create.Template %q and Create.FromSnapshot %q are both set: a session's sandbox starts from one or the other",
			o.Create.Template, o.Create.FromSnapshot)
	}
	if _, ok := o.Create.Labels[o.LabelKey]; ok {
		return m.invalid("new-manager", "", "Create.Labels must not set the session label %q", o.LabelKey)
	}
	if err := ValidatePackages(o.Packages); err != nil {
		return m.wrap("new-manager", "", "", err)
	}
	for _, p := range slices.Sorted(maps.Keys(o.PackageTemplates)) {
		if len(p) > maxPackageLen || !pkgNameRE.MatchString(p) || pkgNameRE.FindString(p) != p {
			return m.invalid("new-manager", "", "PackageTemplates: %q is not a package name", p)
		}
		if t := o.PackageTemplates[p]; t == "" || len(t) > maxTemplateLen || containsControl(t) {
			return m.invalid("new-manager", "", "PackageTemplates[%q]: template %q: want a name of at most %d bytes without control characters", p, t, maxTemplateLen)
		}
	}
	return nil
}

// Client returns the client the manager works through.
func (m *Manager) Client() *sandbox.Client { return m.c }

// wrap makes err an *sandbox.Error about the session key; it keeps an
// *sandbox.Error that already names its operation.
func (m *Manager) wrap(op, key, id string, err error) error {
	if err == nil {
		return nil
	}
	var se *sandbox.Error
	if errors.As(err, &se) && se.Op == op {
		return err
	}
	return &sandbox.Error{Op: op, Provider: m.c.Provider(), SandboxID: id, Path: key, Code: sandbox.CodeOf(err), Err: err}
}

func (m *Manager) invalid(op, key, format string, args ...any) error {
	return m.wrap(op, key, "", sandbox.Errorf(sandbox.InvalidArgument, "session: "+format, args...))
}

// checkKey validates a session key; the error names the key.
func (m *Manager) checkKey(key string) error {
	if !keyRE.MatchString(key) {
		k := key
		if len(k) > 80 {
			k = k[:80] + "..."
		}
		return m.wrap("acquire", "", "", sandbox.Errorf(sandbox.InvalidArgument,
			"session: invalid key %q: must match %s", k, keyRE))
	}
	return nil
}

// leaderDone marks a flight that failed because its leader's context (or
// the manager) ended: a waiter with a live context tries again.
type leaderDone struct{ err error }

func (e *leaderDone) Error() string { return e.err.Error() }
func (e *leaderDone) Unwrap() error { return e.err }

// Acquire returns the session for key: the one held in memory, else one
// reattached to a running or paused sandbox labelled with key (resumed if
// paused), else a new sandbox (primed, packages installed). Concurrent calls
// for one key wait for a single attempt; a caller whose ctx ends stops
// waiting without cancelling the others' attempt unless it led it.
func (m *Manager) Acquire(ctx context.Context, key string) (_ *Session, err error) {
	const op = "acquire"
	ctx, span := m.span(ctx, op, key)
	defer func() { telemetry.End(span, err) }()
	if m.optErr != nil {
		return nil, m.optErr
	}
	if err := m.checkKey(key); err != nil {
		return nil, err
	}
	for {
		s, err := m.lookup(key, true)
		if s != nil || err != nil {
			return s, err
		}
		ch := m.flights.DoChan(key, func() (any, error) { return m.acquireSlow(ctx, key) })
		select {
		case r := <-ch:
			if r.Err == nil {
				s := r.Val.(*Session)
				m.touch(s)
				return s, nil
			}
			var ld *leaderDone
			if errors.As(r.Err, &ld) {
				if m.isClosed() {
					return nil, m.wrap(op, key, "", sandbox.ErrClosed)
				}
				if ctx.Err() == nil {
					continue // another caller's context ended: try again
				}
				return nil, ld.err
			}
			return nil, r.Err
		case <-ctx.Done():
			return nil, m.wrap(op, key, "", ctx.Err())
		}
	}
}

// Lookup returns the session held in memory for key, without creating or
// reattaching anything and without counting as a use.
func (m *Manager) Lookup(key string) (*Session, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[key]
	return s, ok
}

// Len returns how many sessions the manager holds.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// lookup returns the registered session (touched when use is set), or an
// ErrClosed error after Close.
func (m *Manager) lookup(key string, use bool) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, m.wrap("acquire", key, "", sandbox.ErrClosed)
	}
	s := m.sessions[key]
	if s != nil && use {
		s.lastUsed = m.now()
	}
	return s, nil
}

func (m *Manager) touch(s *Session) {
	m.mu.Lock()
	s.lastUsed = m.now()
	m.mu.Unlock()
}

// acquireSlow runs once per flight: reattach, else create.
func (m *Manager) acquireSlow(callerCtx context.Context, key string) (any, error) {
	const op = "acquire"
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, m.wrap(op, key, "", sandbox.ErrClosed)
	}
	if s := m.sessions[key]; s != nil { // registered by a flight that just ended
		m.mu.Unlock()
		return s, nil
	}
	m.wg.Add(1)
	m.mu.Unlock()
	defer m.wg.Done()

	// The attempt is bounded by the leader's context and by Close.
	ctx, cancel := context.WithCancel(callerCtx)
	defer cancel()
	defer context.AfterFunc(m.base, cancel)()

	sl := m.primary(key)
	s, err := m.reattach(ctx, sl)
	if err == nil && s == nil {
		s, err = m.create(ctx, sl)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, &leaderDone{m.wrap(op, key, "", err)}
		}
		return nil, m.wrap(op, key, "", err)
	}
	return s, nil
}

// labels returns the labels of key's sandboxes.
func (m *Manager) labels(key string) map[string]string {
	l := maps.Clone(m.opts.Create.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[m.opts.LabelKey] = key
	return l
}

// slot names the sandbox a reattach or create is for: key's own (parent
// nil), or the one of a per-call template held by the session parent.
type slot struct {
	key      string
	template string // the template requested
	labels   map[string]string
	parent   *Session
}

// primary returns the slot of key's own sandbox.
func (m *Manager) primary(key string) slot {
	return slot{key: key, template: m.opts.Create.Template, labels: m.labels(key)}
}

// publish makes s the session of its slot.
func (m *Manager) publish(sl slot, s *Session) error {
	if sl.parent != nil {
		return m.registerVariant(sl.parent, s)
	}
	return m.register(s)
}

// reattach looks for a live or paused sandbox labelled with key. It returns
// (nil, nil) when there is none usable. A candidate that turns out to be
// gone between the list and its use is skipped.
//
// A look-up, attach or wake that fails for a transient reason is retried
// with backoff within ctx's deadline (ReattachTimeout when ctx has none):
// a fresh sandbox is created only after a look-up that succeeded found
// nothing usable, never on an unknown state, which could leave two
// sandboxes for one key. A candidate that cannot be woken is skipped only
// when the provider says it is gone or in the error state.
func (m *Manager) reattach(ctx context.Context, sl slot) (*Session, error) {
	key := sl.key
	lctx := ctx // look-up, attach and wake, retried within this budget
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		lctx, cancel = context.WithTimeout(ctx, m.opts.ReattachTimeout)
		defer cancel()
	}
	// StateUnknown too: a sandbox whose state the provider did not name is
	// no reason to create a second one for the key.
	states := []sandbox.State{sandbox.StateRunning, sandbox.StatePaused, sandbox.StateStarting, sandbox.StateUnknown}
	var cands []sandbox.Info
	err := m.retryTransient(lctx, "look-up", key, "", func() error {
		cands = cands[:0]
		for in, err := range m.c.List(lctx, sandbox.ListOptions{Labels: sl.labels, States: states}) {
			if err != nil {
				return err
			}
			cands = append(cands, in)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("looking for a sandbox to reattach: %w", err)
	}
	for _, in := range cands {
		var sb *sandbox.Sandbox
		err := m.retryTransient(lctx, "attach", key, in.ID, func() error {
			var err error
			sb, err = m.c.AttachWith(lctx, in.ID, sandbox.AttachOptions{SecretEnv: m.opts.Create.SecretEnv, BrokeredSecrets: m.opts.Create.BrokeredSecrets, Own: true})
			return err
		})
		if sandbox.CodeOf(err) == sandbox.NotFound {
			m.log.Info("session: labelled sandbox gone before reattach", "key", key, "id", in.ID)
			continue
		}
		if err != nil {
			return nil, err
		}
		if sb.Info().State == sandbox.StateError {
			m.log.Info("session: labelled sandbox is in the error state; skipping it", "key", key, "id", in.ID)
			continue
		}
		s := m.newSession(sl, sb, false)
		if st := sb.Info().State; st == sandbox.StatePaused {
			err := m.retryTransient(lctx, "wake", key, in.ID, func() error { return sb.Resume(lctx) })
			if err != nil {
				if sandbox.CodeOf(err) == sandbox.NotFound || lctx.Err() == nil && s.check(lctx) == healthGone {
					m.log.Info("session: labelled sandbox could not be woken and is gone or in error; skipping it", "key", key, "id", in.ID)
					continue
				}
				return nil, fmt.Errorf("session: waking sandbox %s for key %q: %w", in.ID, key, err)
			}
		}
		if gone, err := s.prime(ctx); err != nil {
			return nil, err
		} else if gone {
			m.log.Warn("session: reattached sandbox is gone; looking further", "key", key, "id", in.ID)
			continue
		}
		if err := m.ensurePackages(ctx, s); err != nil {
			if errors.Is(err, ErrTemplateMismatch) {
				// The built-in rule of PackageTemplates: a sandbox on the
				// wrong template is not kept for the key. A fresh one
				// may get the right template; if not, create refuses it.
				m.log.Warn("session: labelled sandbox is on a template a package does not work on; destroying it", "key", key, "id", in.ID, "err", err)
				_ = m.destroy(s, "template mismatch")
				continue
			}
			if ctx.Err() == nil && s.isGone(ctx) {
				continue
			}
			return nil, err
		}
		if err := m.publish(sl, s); err != nil {
			return nil, err
		}
		m.log.Info("session: reattached", "key", key, "id", in.ID, "template", sl.template)
		if sl.parent == nil {
			m.adoptVariants(lctx, s)
		}
		return s, nil
	}
	return nil, nil
}

// retryTransient runs f until it succeeds, fails for a reason retrying
// cannot fix, or ctx ends, with jittered exponential backoff between
// attempts (100 ms doubling to 5 s).
func (m *Manager) retryTransient(ctx context.Context, what, key, id string, f func() error) error {
	delay := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		wait := delay/2 + rand.N(delay/2+1)
		m.log.Info("session: transient failure; retrying", "what", what, "key", key, "id", id, "attempt", attempt, "in", wait, "code", sandbox.CodeOf(err))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// transient reports whether err may go away if the call is repeated.
func transient(err error) bool {
	switch sandbox.CodeOf(err) {
	case sandbox.Unavailable, sandbox.ResourceExhausted, sandbox.DeadlineExceeded, sandbox.Internal, sandbox.Unknown:
		return true
	}
	return false
}

// reserve takes a slot under the cap for one create.
func (m *Manager) reserve(key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.opts.MaxLive > 0 && len(m.sessions)+m.nvariants+m.creating >= m.opts.MaxLive {
		return m.wrap("acquire", key, "", fmt.Errorf("session: %d live sandboxes (the MaxLive cap); refusing to create another: %w",
			m.opts.MaxLive, sandbox.ErrLimit))
	}
	m.creating++
	return nil
}

func (m *Manager) unreserve() {
	m.mu.Lock()
	m.creating--
	m.mu.Unlock()
}

// create makes, sets up and registers a new sandbox for sl. Whatever fails
// after the provider created it, the sandbox is destroyed.
func (m *Manager) create(ctx context.Context, sl slot) (*Session, error) {
	key := sl.key
	if err := m.reserve(key); err != nil {
		return nil, err
	}
	defer m.unreserve()

	opts := m.opts.Create
	opts.Labels = sl.labels
	opts.Template = sl.template
	if sl.parent != nil {
		opts.FromSnapshot = "" // a per-call template's sandbox starts from that template
		if l := sl.parent.leaseNow(); l > m.lease {
			opts.Timeout = l // the session's lease, extended by SetLease
		}
	}
	requested := opts.Template
	sb, err := m.c.Create(ctx, opts)
	usedRequested := true
	if err != nil && requested != "" && sandbox.CodeOf(err) == sandbox.NotFound && ctx.Err() == nil {
		if m.opts.OnMissingTemplate != Fallback {
			return nil, fmt.Errorf("session: template %q does not exist (no fallback configured): %w", requested, err)
		}
		m.log.Warn("session: template missing, falling back", "template", requested, "fallback", m.opts.FallbackTemplate, "err", err)
		opts.Template = m.opts.FallbackTemplate
		usedRequested = false
		sb, err = m.c.Create(ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	s := m.newSession(sl, sb, true)
	s.usedRequested = usedRequested
	s.template = opts.Template
	registered := false
	defer func() { // covers errors and panics alike
		if !registered {
			m.destroy(s, "create did not complete")
		}
	}()
	gone, err := s.prime(ctx)
	if err != nil {
		return nil, err
	}
	if gone {
		return nil, s.goneErr("prime", fmt.Errorf("sandbox %s vanished while priming its workspace: %w", sb.ID(), sandbox.ErrNotFound))
	}
	if err := m.ensurePackages(ctx, s); err != nil {
		return nil, err
	}
	if m.opts.OnCreate != nil {
		if err := m.opts.OnCreate(ctx, s); err != nil {
			return nil, fmt.Errorf("session: OnCreate: %w", err)
		}
	}
	if err := m.publish(sl, s); err != nil {
		return nil, err
	}
	registered = true
	m.log.Info("session: created", "key", key, "id", sb.ID(), "template", s.template, "requested_template_used", usedRequested)
	return s, nil
}

// register publishes s as key's session and starts the reaper if needed.
func (m *Manager) register(s *Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return sandbox.ErrClosed
	}
	if old := m.sessions[s.key]; old != nil {
		// Only one flight per key runs at a time, so this is a session
		// registered by a flight that ended just before ours began.
		return sandbox.Errorf(sandbox.AlreadyExists, "session: key %q registered concurrently", s.key)
	}
	s.lastUsed = m.now()
	m.sessions[s.key] = s
	if !m.reaper && m.opts.IdleTimeout > 0 && m.opts.ReapInterval > 0 {
		m.reaper = true
		m.wg.Add(1)
		go m.reap()
	}
	return nil
}

// forget removes s from the registry if it is still key's session (never a
// newer one) and marks it ended. It reports whether s was registered.
func (m *Manager) forget(s *Session) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.ended = true
	if p := s.parent; p != nil {
		if p.variants[s.perCall] == s {
			delete(p.variants, s.perCall)
			m.nvariants--
			return true
		}
		return false
	}
	if m.sessions[s.key] == s {
		delete(m.sessions, s.key)
		return true
	}
	return false
}

// destroy destroys s's sandbox by its captured id, bounded by CleanupTimeout.
func (m *Manager) destroy(s *Session, why string) error {
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.CleanupTimeout)
	defer cancel()
	err := s.sb.Destroy(ctx)
	if err != nil {
		m.log.Error("session: could not destroy sandbox", "key", s.key, "id", s.sb.ID(), "why", why, "err", err)
		return err
	}
	m.log.Info("session: destroyed sandbox", "key", s.key, "id", s.sb.ID(), "why", why)
	return nil
}

// Release ends session s: it is forgotten if it is still its key's session
// and its sandbox (the one s captured, whoever created it) is destroyed. A
// newer session of the same key is never touched. Releasing twice is not
// an error.
func (m *Manager) Release(ctx context.Context, s *Session) error {
	const op = "release"
	if s == nil || s.m != m {
		return m.wrap(op, "", "", sandbox.Errorf(sandbox.InvalidArgument, "session: Release of a session this manager did not hand out"))
	}
	m.forget(s)
	vs := m.detachVariants(s)
	var errs []error
	if err := s.sb.Destroy(ctx); err != nil {
		errs = append(errs, m.wrap(op, s.key, s.sb.ID(), err))
	}
	if err := m.destroyAll(ctx, vs, "session released"); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ReapIdle ends the sessions unused for IdleTimeout and not running an
// operation, and returns how many it ended. Their sandboxes, created or
// adopted, are destroyed (see Session.Owned), with those of their
// per-call templates (see Session.ForTemplate).
func (m *Manager) ReapIdle(ctx context.Context) int {
	if m.opts.IdleTimeout <= 0 {
		return 0
	}
	now := m.now()
	var idle, ended []*Session
	m.mu.Lock()
	for k, s := range m.sessions {
		if s.active == 0 && now.Sub(s.lastUsed) >= m.opts.IdleTimeout {
			s.ended = true
			delete(m.sessions, k)
			idle = append(idle, s)
			ended = append(ended, s)
			ended = append(ended, m.detachVariantsLocked(s)...)
		}
	}
	m.mu.Unlock()
	m.destroyAll(ctx, ended, "idle")
	return len(idle)
}

// destroyAll destroys the owned sandboxes of ss, a few at a time.
func (m *Manager) destroyAll(ctx context.Context, ss []*Session, why string) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 8)
	)
	for _, s := range ss {
		if !s.Owned() {
			m.log.Info("session: forgetting attached sandbox", "key", s.key, "id", s.sb.ID(), "why", why)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			dctx, cancel := context.WithTimeout(ctx, m.opts.CleanupTimeout)
			defer cancel()
			if err := s.sb.Destroy(dctx); err != nil {
				m.log.Error("session: could not destroy sandbox", "key", s.key, "id", s.sb.ID(), "why", why, "err", err)
				mu.Lock()
				errs = append(errs, m.wrap("close", s.key, s.sb.ID(), err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (m *Manager) reap() {
	defer m.wg.Done()
	t := time.NewTicker(m.opts.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			ctx := context.WithoutCancel(m.base)
			if n := m.ReapIdle(ctx); n > 0 {
				m.log.Info("session: reaped idle sessions", "n", n)
			}
		}
	}
}

// Close ends the manager: later Acquire calls fail with sandbox.ErrClosed,
// in-flight creates are cancelled (and their sandboxes destroyed), the
// reaper stops, and the sandboxes the manager owns (created or adopted,
// see Session.Owned) are destroyed. ctx bounds the destroys. The client is
// not closed. Calling Close again does nothing.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.stop)
	ss := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		s.ended = true
		ss = append(ss, s)
		ss = append(ss, m.detachVariantsLocked(s)...)
	}
	clear(m.sessions)
	m.mu.Unlock()
	m.stopBase()
	m.wg.Wait() // in-flight creates end promptly once base is cancelled
	return m.destroyAll(ctx, ss, "manager closed")
}
