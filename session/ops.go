package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/fsbackend"
	"github.com/sandboxkit/sandbox/internal/pathsafe"
	"github.com/sandboxkit/sandbox/internal/telemetry"
)

// leaseSlack is added to a command's timeout when extending the lease
// before running it, so the sandbox outlives the command.
const leaseSlack = time.Minute

// Session is one key's sandbox, held by a Manager. Its methods are safe for
// concurrent use. Each operation extends the lease first and, after a
// failure, tells a gone sandbox (the session ends, the error matches
// ErrGone) from a degraded one (kept, the error returned as is).
type Session struct {
	m             *Manager
	key           string
	sb            *sandbox.Sandbox
	adopted       bool     // reattached by label rather than created
	parent        *Session // the session whose per-call template this sandbox is for; nil for a key's own
	perCall       string   // with parent: the template asked for (the key in parent.variants)
	template      string
	usedRequested bool
	workspace     string

	// Guarded by m.mu.
	active   int
	lastUsed time.Time
	ended    bool
	variants map[string]*Session // per-call templates' sessions, by template

	flights singleflight.Group // creates of per-call templates' sandboxes

	mu          sync.Mutex
	lease       time.Duration // extended to before each operation; only grows (SetLease)
	lastRefresh time.Time
	primed      bool
	packages    []string
}

func (m *Manager) newSession(sl slot, sb *sandbox.Sandbox, created bool) *Session {
	ws, err := pathsafe.Resolve(sb.Home(), m.opts.Workspace)
	if err != nil { // validated by NewManager; keep the home as a last resort
		ws = sb.Home()
	}
	s := &Session{m: m, key: sl.key, sb: sb, adopted: !created, workspace: ws, parent: sl.parent, lease: m.lease}
	if sl.parent != nil {
		s.perCall = sl.template
		s.lease = sl.parent.leaseNow() // a lease the session extended covers its later sandboxes
	}
	if s.adopted {
		s.template = sb.Info().Template
		req := sl.template
		s.usedRequested = req == "" || s.template == req
	}
	return s
}

// Key returns the session key.
func (s *Session) Key() string { return s.key }

// ID returns the id of the session's sandbox.
func (s *Session) ID() string { return s.sb.ID() }

// Sandbox returns the session's sandbox. Calls made on it directly do not
// extend the lease or classify failures, and are not confined to the
// workspace; prefer the Session's methods or Do.
//
// Relative paths differ between the two: the Session's methods (WriteFile,
// ReadFile, ReadDir, Remove, Path, and Exec's default directory) start at
// the workspace, while the Sandbox's start at its home directory
// (Sandbox.Home), of which the workspace is a subdirectory by default
// (Options.Workspace). A file written with Session.WriteFile("a.txt") is
// Sandbox.ReadFile(path.Join(s.Workspace(), "a.txt")), not
// Sandbox.ReadFile("a.txt"): give the Sandbox absolute paths, from
// Workspace or Path.
func (s *Session) Sandbox() *sandbox.Sandbox { return s.sb }

// Owned reports whether the manager owns the sandbox, so that Release,
// reaping and Close destroy it: true for a sandbox it created and for one
// it adopted after a restart (see Adopted), so that nothing leaks.
func (s *Session) Owned() bool { return s.sb.Owned() }

// Adopted reports whether the manager reattached to a sandbox it found by
// the key's label (left by an earlier process) rather than creating it.
// Adoption makes the manager the owner.
func (s *Session) Adopted() bool { return s.adopted }

// Template returns the template the sandbox was created from: the
// requested one, or the fallback (see UsedRequestedTemplate). For an
// attached sandbox it is what the provider reports.
func (s *Session) Template() string { return s.template }

// UsedRequestedTemplate reports whether the sandbox was created from
// Options.Create.Template (always true when none was requested).
func (s *Session) UsedRequestedTemplate() bool { return s.usedRequested }

// Workspace returns the absolute path of the session's workspace directory:
// where the Session's relative paths start. Join it to a relative path
// before handing the path to Sandbox() or to a command run elsewhere than
// the workspace (Path does so and applies the jail too).
func (s *Session) Workspace() string { return s.workspace }

// Packages returns the packages installed (or found installed) at setup,
// without those the template ships.
func (s *Session) Packages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.packages)
}

// Path maps p into the workspace with the rules of the fsbackend jail (see
// "Paths" in the package documentation): relative paths start at the
// workspace, an absolute path is re-rooted under it, a backslash reads as a
// slash, and a path that climbs above the workspace, holds a control
// character or names fsbackend's metadata directory is refused with an
// InvalidArgument error wrapping a *backend.Error of Code
// backend.CodeInvalidPath (an escape also matches sandbox.ErrPathEscape).
// With Options.UnconfinedPaths, p is resolved against the workspace and
// absolute paths are kept.
func (s *Session) Path(p string) (string, error) { return s.path("path", p) }

// path is Path for the operation op: a refusal is a *sandbox.Error of Op
// op (the method the caller called) with the caller's p in its Path slot,
// so the message names the call and the path once, as Go's %q shows it.
func (s *Session) path(op, p string) (string, error) {
	if s.m.opts.UnconfinedPaths {
		abs, err := pathsafe.Resolve(s.workspace, p)
		if err != nil {
			return "", s.pathErr(op, p, sandbox.Errorf(sandbox.InvalidArgument, "session: invalid path: %w", err))
		}
		return abs, nil
	}
	abs, err := confine(s.workspace, p)
	if err != nil {
		return "", s.pathErr(op, p, err)
	}
	return abs, nil
}

// pathErr is the InvalidArgument error for op refusing the caller's path p.
func (s *Session) pathErr(op, p string, err error) error {
	return &sandbox.Error{Op: op, Provider: s.m.c.Provider(), SandboxID: s.sb.ID(), Path: p,
		Code: sandbox.InvalidArgument, Err: err}
}

// begin marks an operation in progress, so the reaper leaves the session.
// The session of a per-call template counts as its parent's use too, so
// that the parent is not reaped under it.
func (s *Session) begin(op string) error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if s.ended || s.parent != nil && s.parent.ended {
		return &sandbox.Error{Op: op, Provider: s.m.c.Provider(), SandboxID: s.sb.ID(), Path: s.key,
			Code: sandbox.FailedPrecondition, Err: fmt.Errorf("%w: acquire the key again", ErrEnded)}
	}
	now := s.m.now()
	for x := s; x != nil; x = x.parent {
		x.active++
		x.lastUsed = now
	}
	return nil
}

func (s *Session) end() {
	s.m.mu.Lock()
	now := s.m.now()
	for x := s; x != nil; x = x.parent {
		x.active--
		x.lastUsed = now
	}
	s.m.mu.Unlock()
}

// goneErr reports that the sandbox no longer exists.
func (s *Session) goneErr(op string, cause error) error {
	return &sandbox.Error{Op: op, Provider: s.m.c.Provider(), SandboxID: s.sb.ID(), Path: s.key,
		Code: sandbox.NotFound, Err: fmt.Errorf("%w: %w", ErrGone, cause)}
}

// lose forgets a gone session; a sandbox that still exists in the error
// state is destroyed if the manager created it.
func (s *Session) lose(why string) {
	s.m.forget(s)
	vs := s.m.detachVariants(s)
	s.m.log.Warn("session: sandbox gone; the next Acquire creates a fresh one", "key", s.key, "id", s.sb.ID(), "why", why)
	if s.Owned() {
		_ = s.m.destroy(s, "gone: "+why)
	}
	if len(vs) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), s.m.opts.CleanupTimeout)
		defer cancel()
		_ = s.m.destroyAll(ctx, vs, "session's sandbox gone: "+why)
	}
}

type health int

const (
	healthAlive   health = iota // running
	healthWoken                 // was paused, resumed now
	healthGone                  // does not exist or is in the error state
	healthUnknown               // the provider could not tell
)

// check asks the provider what became of the sandbox, waking it if paused.
func (s *Session) check(ctx context.Context) health {
	in, err := s.sb.Refresh(ctx)
	switch {
	case sandbox.CodeOf(err) == sandbox.NotFound:
		return healthGone
	case err != nil:
		return healthUnknown
	case in.State == sandbox.StateError:
		return healthGone
	case in.State == sandbox.StateUnknown:
		return healthUnknown
	case in.State == sandbox.StatePaused:
		if err := s.sb.Resume(ctx); err != nil {
			if sandbox.CodeOf(err) == sandbox.NotFound {
				return healthGone
			}
			return healthUnknown
		}
		return healthWoken
	}
	return healthAlive
}

func (s *Session) isGone(ctx context.Context) bool { return s.check(ctx) == healthGone }

// prime creates the workspace, each attempt bounded by PrimeTimeout, and
// retries once after refreshing (and waking) the sandbox. It reports gone
// when the provider says the sandbox no longer exists; a live sandbox that
// cannot be primed is kept (degraded): the workspace is made on demand.
func (s *Session) prime(ctx context.Context) (gone bool, err error) {
	try := func() error {
		pctx, cancel := context.WithTimeout(ctx, s.m.opts.PrimeTimeout)
		defer cancel()
		return s.sb.MkdirAll(pctx, s.workspace)
	}
	for attempt := 0; ; attempt++ {
		err := try()
		if err == nil {
			s.mu.Lock()
			s.primed = true
			s.mu.Unlock()
			return false, nil
		}
		if ctx.Err() != nil {
			return false, err
		}
		h := s.check(ctx)
		if h == healthGone {
			return true, nil
		}
		if attempt == 1 {
			s.m.log.Warn("session: workspace prime failed twice on a live sandbox; continuing", "key", s.key, "id", s.sb.ID(), "err", err)
			return false, nil
		}
		s.m.log.Debug("session: workspace prime failed; retrying once", "key", s.key, "id", s.sb.ID(), "err", err)
	}
}

// leaseNow returns the session's lease: Options.Create.Timeout (or the
// provider's default) unless SetLease extended it.
func (s *Session) leaseNow() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease
}

// noRefresh, as prepare's need, skips the lease extension: the operation
// sets the lease itself (SetLease).
const noRefresh = -1

// prepare extends the lease to at least need (and the session's lease),
// wakes a paused sandbox and makes a missing workspace.
func (s *Session) prepare(ctx context.Context, need time.Duration) error {
	base := s.leaseNow()
	lease := max(base, need)
	if ml := s.m.c.Capabilities().MaxLease; ml > 0 && lease > ml {
		lease = ml
	}
	now := s.m.now()
	s.mu.Lock()
	skip := need == noRefresh || s.m.opts.LeaseRefreshInterval > 0 && need <= base && !s.lastRefresh.IsZero() &&
		now.Sub(s.lastRefresh) < s.m.opts.LeaseRefreshInterval
	primed := s.primed
	s.mu.Unlock()
	if !skip {
		err := s.sb.SetTimeout(ctx, lease)
		if err != nil && ctx.Err() == nil && s.sb.Info().State == sandbox.StatePaused {
			// Some providers refuse to extend a paused sandbox's lease.
			if rerr := s.sb.Resume(ctx); rerr != nil {
				return rerr
			}
			err = s.sb.SetTimeout(ctx, lease)
		}
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			// A NotFound here may come from a route the server lacks or a
			// proxy: the sandbox is gone only when Get says so.
			if sandbox.CodeOf(err) == sandbox.NotFound && s.isGone(ctx) {
				return err
			}
			s.m.log.Warn("session: lease refresh failed on a live sandbox (degraded); continuing", "key", s.key, "id", s.sb.ID(), "err", err)
		} else {
			s.mu.Lock()
			s.lastRefresh = now
			s.mu.Unlock()
		}
	}
	if s.sb.Info().State == sandbox.StatePaused {
		if err := s.sb.Resume(ctx); err != nil {
			return err
		}
	}
	if !primed {
		if err := s.sb.MkdirAll(ctx, s.workspace); err == nil {
			s.mu.Lock()
			s.primed = true
			s.mu.Unlock()
		}
	}
	return nil
}

// worthChecking reports whether a failure may mean the sandbox is gone or
// paused, rather than bad input.
func worthChecking(err error) bool {
	if errors.Is(err, sandbox.ErrPaused) {
		return true
	}
	switch sandbox.CodeOf(err) {
	case sandbox.InvalidArgument, sandbox.AlreadyExists, sandbox.FailedPrecondition, sandbox.Canceled:
		return false
	}
	return true
}

// Do runs f on the session's sandbox after extending its lease and waking
// it if paused. When f fails, the provider is asked what became of the
// sandbox: if it is gone the session ends and the error matches ErrGone; if
// it was paused and f's error matches sandbox.ErrPaused, it is resumed and
// f runs once more; otherwise f's error is returned and the session kept.
//
// With WithTemplate, f runs on the session's sandbox for that template.
func (s *Session) Do(ctx context.Context, f func(ctx context.Context, sb *sandbox.Sandbox) error, opts ...CallOption) error {
	t, err := s.target(ctx, opts)
	if err != nil {
		return err
	}
	return t.do(ctx, "do", 0, f)
}

func (s *Session) do(ctx context.Context, op string, need time.Duration, f func(context.Context, *sandbox.Sandbox) error) (err error) {
	ctx, span := s.m.span(ctx, op, s.key, telemetry.SandboxID.String(s.sb.ID()))
	defer func() { telemetry.End(span, err) }()
	if err := s.begin(op); err != nil {
		return err
	}
	defer s.end()
	if err := s.prepare(ctx, need); err != nil {
		if sandbox.CodeOf(err) == sandbox.NotFound {
			s.lose("lease refresh: not found")
			return s.goneErr(op, err)
		}
		return err
	}
	err = f(ctx, s.sb)
	if err == nil || ctx.Err() != nil || !worthChecking(err) {
		return err
	}
	switch s.check(ctx) {
	case healthGone:
		s.lose(op + " failed")
		return s.goneErr(op, err)
	case healthWoken:
		if !errors.Is(err, sandbox.ErrPaused) {
			return err
		}
		// The provider refused the call because the sandbox was paused:
		// nothing ran, so running f again is safe.
		if err = f(ctx, s.sb); err != nil && ctx.Err() == nil && worthChecking(err) && s.isGone(ctx) {
			s.lose(op + " failed after resume")
			return s.goneErr(op, err)
		}
	}
	return err
}

// SetLease changes the session's lease to d now: the sandbox's lease is
// set to end d from now at once (through sandbox.Sandbox.SetTimeout), the
// extension before each later operation extends to d rather than to
// Options.Create.Timeout, and so do the sandboxes of the session's
// per-call templates (see ForTemplate), those it holds now and those it
// makes later. Other sessions of the Manager keep their lease.
//
// A lease only extends, as SetTimeout's does: a d shorter than the
// session's current lease, zero or negative, or over the provider's
// maximum lease (Capabilities.MaxLease) is refused with InvalidArgument
// naming both values, and nothing changes. Setting the current value
// again re-extends the lease from now. Like every Session operation it
// wakes a paused sandbox and tells a gone sandbox from a degraded one.
func (s *Session) SetLease(ctx context.Context, d time.Duration) error {
	const op = "set-lease"
	cur := s.leaseNow()
	switch {
	case d <= 0:
		return s.m.invalid(op, s.key, "lease %v is not positive", d)
	case d < cur:
		return s.m.invalid(op, s.key, "lease %v is shorter than the session's lease %v: a session's lease only extends", d, cur)
	}
	if ml := s.m.c.Capabilities().MaxLease; ml > 0 && d > ml {
		return s.m.invalid(op, s.key, "lease %v exceeds the provider's maximum lease %v", d, ml)
	}
	err := s.do(ctx, op, noRefresh, func(ctx context.Context, sb *sandbox.Sandbox) error { return sb.SetTimeout(ctx, d) })
	if err != nil {
		return s.m.wrap(op, s.key, s.sb.ID(), err)
	}
	now := s.m.now()
	s.mu.Lock()
	s.lease = max(s.lease, d)
	s.lastRefresh = now
	s.mu.Unlock()
	s.m.mu.Lock()
	vs := make([]*Session, 0, len(s.variants))
	for _, v := range s.variants {
		vs = append(vs, v)
	}
	s.m.mu.Unlock()
	var errs []error
	for _, v := range vs {
		if v.leaseNow() < d {
			errs = append(errs, v.SetLease(ctx, d))
		}
	}
	return errors.Join(errs...)
}

// Exec runs cmd in the sandbox (see sandbox.Sandbox.Exec). cmd.Dir defaults
// to the workspace and cmd.Timeout to Options.CommandTimeout; the lease is
// extended to outlive the command. The Result says which layer ended a
// timed-out command and after how long: TimeoutCommand (cmd.Timeout),
// TimeoutContext (ctx's deadline, returned with ctx's error) or
// TimeoutProvider (the provider reported a deadline of its own while ctx was
// live; returned as a Result with a nil error, like a command timeout).
//
// The Result carries the Diagnostics of the sandbox that ran cmd. With
// WithTemplate, cmd runs in the session's sandbox for that template
// (created on first use, see ForTemplate).
func (s *Session) Exec(ctx context.Context, cmd sandbox.Command, opts ...CallOption) (*Result, error) {
	t, err := s.target(ctx, opts)
	if err != nil {
		return nil, err
	}
	return t.exec(ctx, cmd)
}

func (s *Session) exec(ctx context.Context, cmd sandbox.Command) (*Result, error) {
	if cmd.Timeout == 0 {
		cmd.Timeout = s.m.opts.CommandTimeout
	}
	if cmd.Dir == "" {
		cmd.Dir = s.workspace
	}
	var res *sandbox.Result
	var execFailed bool
	attempts := 0
	started := time.Now()
	err := s.do(ctx, "exec", cmd.Timeout+leaseSlack, func(ctx context.Context, sb *sandbox.Sandbox) error {
		attempts++
		var err error
		res, err = sb.Exec(ctx, cmd)
		execFailed = err != nil
		return err
	})
	res, err = providerTimeout(ctx, res, err, execFailed, cmd.Timeout, started)
	return s.result(res, attempts), err
}

// providerTimeout turns a DeadlineExceeded error of the command itself
// (execFailed: the last Exec returned it, not an upload or a resume before
// it) that did not come from ctx into a Result timed out by the provider.
func providerTimeout(ctx context.Context, res *sandbox.Result, err error, execFailed bool, timeout time.Duration, started time.Time) (*sandbox.Result, error) {
	if err == nil || !execFailed || ctx.Err() != nil || sandbox.CodeOf(err) != sandbox.DeadlineExceeded || errors.Is(err, ErrGone) {
		return res, err
	}
	if res == nil {
		res = &sandbox.Result{Stdout: []byte{}, Stderr: []byte{}}
	}
	res.ExitCode, res.TimedOut, res.TimeoutBy, res.Timeout = -1, true, sandbox.TimeoutProvider, timeout
	res.Duration = time.Since(started)
	return res, nil
}

// WriteFile writes data to path (relative to the workspace) and verifies
// the size the sandbox reports. With WithTemplate, it writes in the
// session's sandbox for that template.
func (s *Session) WriteFile(ctx context.Context, p string, data []byte, opts ...CallOption) error {
	s, err := s.target(ctx, opts)
	if err != nil {
		return err
	}
	abs, err := s.path("write", p)
	if err != nil {
		return err
	}
	return s.do(ctx, "write", 0, func(ctx context.Context, sb *sandbox.Sandbox) error {
		return upload(ctx, sb, []sandbox.File{{Path: abs, Data: data}})
	})
}

// ReadFile returns the content of path (relative to the workspace, see
// "Paths" in the package documentation). A file larger than
// Options.MaxReadFile is refused with an error matching sandbox.ErrLimit.
// With WithTemplate, it reads from the session's sandbox for that template.
func (s *Session) ReadFile(ctx context.Context, p string, opts ...CallOption) ([]byte, error) {
	s, err := s.target(ctx, opts)
	if err != nil {
		return nil, err
	}
	abs, err := s.path("read", p)
	if err != nil {
		return nil, err
	}
	var data []byte
	err = s.do(ctx, "read", 0, func(ctx context.Context, sb *sandbox.Sandbox) error {
		var err error
		data, err = sb.ReadFileLimit(ctx, abs, s.m.maxRead())
		return err
	})
	return data, err
}

// ReadDir lists the directory at path (relative to the workspace, see
// "Paths" in the package documentation), sorted by name, with the jail of
// ReadFile and WriteFile: a path outside the workspace is refused before
// the provider is asked. The file tools' metadata directory is left out of
// the workspace's listing, as Path refuses to name it. The FileInfo paths
// are absolute. With WithTemplate, it lists in the session's sandbox for
// that template.
func (s *Session) ReadDir(ctx context.Context, p string, opts ...CallOption) ([]sandbox.FileInfo, error) {
	s, err := s.target(ctx, opts)
	if err != nil {
		return nil, err
	}
	abs, err := s.path("readdir", p)
	if err != nil {
		return nil, err
	}
	var list []sandbox.FileInfo
	err = s.do(ctx, "readdir", 0, func(ctx context.Context, sb *sandbox.Sandbox) error {
		var err error
		list, err = sb.ReadDir(ctx, abs)
		return err
	})
	if err != nil {
		return nil, err
	}
	if abs == s.workspace && !s.m.opts.UnconfinedPaths {
		list = slices.DeleteFunc(list, func(fi sandbox.FileInfo) bool { return path.Base(fi.Path) == fsbackend.MetadataDir })
	}
	return list, nil
}

// Remove removes the file or directory tree at path (relative to the
// workspace, see "Paths" in the package documentation), with the jail of
// ReadFile and WriteFile: a path outside the workspace is refused before
// the provider is asked, and so is the workspace itself ("", ".", "/" or
// its absolute path), which the session needs. A missing path is an error
// matching sandbox.ErrNotFound and fs.ErrNotExist. With WithTemplate, it
// removes in the session's sandbox for that template.
func (s *Session) Remove(ctx context.Context, p string, opts ...CallOption) error {
	s, err := s.target(ctx, opts)
	if err != nil {
		return err
	}
	abs, err := s.path("remove", p)
	if err != nil {
		return err
	}
	if abs == s.workspace {
		return s.pathErr("remove", p, &pathError{why: "it is the workspace itself"})
	}
	return s.do(ctx, "remove", 0, func(ctx context.Context, sb *sandbox.Sandbox) error {
		return sb.Remove(ctx, abs)
	})
}

// maxRead is the cap ReadFile applies (zero or less: none).
func (m *Manager) maxRead() int64 {
	if m.opts.MaxReadFile == 0 {
		return m.c.MaxReadFile()
	}
	return m.opts.MaxReadFile
}

// upload writes files (absolute paths) a few at a time, then checks that
// each one has the expected size in the sandbox.
func upload(ctx context.Context, sb *sandbox.Sandbox, files []sandbox.File) error {
	return sb.WriteFilesVerified(ctx, files, sandbox.VerifyOptions{})
}

// RunOptions configures Session.Run. The zero value runs main.py with
// python3 in the workspace.
type RunOptions struct {
	// Entrypoint is the path of the program, relative to the workspace
	// (default "main.py"). It must stay inside the workspace.
	Entrypoint string
	// Files are uploaded next to the entrypoint; their paths are relative
	// to the workspace and must stay inside it.
	Files []sandbox.File
	// Prelude is Python code run before the program. Leading
	// "from __future__" imports of the program (and a module docstring
	// before them) are hoisted above it, so they stay first.
	Prelude string
	// Python is the interpreter (default "python3").
	Python string
	// Args are passed to the program.
	Args []string
	// Env adds environment variables; SecretEnv adds ones whose values are
	// redacted from output.
	Env, SecretEnv map[string]string
	// Stdin, Stdout and Stderr are as in sandbox.Command.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Timeout bounds the run (Options.CommandTimeout when zero).
	Timeout time.Duration
	// MaxOutput caps the captured bytes per stream (the client's default
	// when zero).
	MaxOutput int
	// Template, when set, runs the program in the session's sandbox for
	// this template instead of its own, as WithTemplate does for Exec
	// (see Session.ForTemplate). Empty means the session's own sandbox.
	Template string
}

// Run uploads code as the entrypoint, plus opts.Files, verifies the
// uploads, and runs the entrypoint with python3 in the workspace. The
// Result reports timeouts as Exec does and carries the Diagnostics of the
// sandbox that ran the program.
func (s *Session) Run(ctx context.Context, code string, opts RunOptions) (*Result, error) {
	if opts.Template != "" {
		t, err := s.ForTemplate(ctx, opts.Template)
		if err != nil {
			return nil, err
		}
		s = t
	}
	const op = "run"
	entry := opts.Entrypoint
	if entry == "" {
		entry = "main.py"
	}
	files := make([]sandbox.File, 0, len(opts.Files)+1)
	seen := map[string]bool{}
	add := func(name, p string, data []byte) error {
		abs, err := pathsafe.Jail(s.workspace, p)
		if err != nil {
			return s.m.wrap(op, "", s.sb.ID(), sandbox.Errorf(sandbox.InvalidArgument, "session: invalid %s %q: %v", name, p, err))
		}
		if abs == s.workspace || seen[abs] {
			return s.m.wrap(op, "", s.sb.ID(), sandbox.Errorf(sandbox.InvalidArgument, "session: %s %q is the workspace or given twice", name, p))
		}
		seen[abs] = true
		files = append(files, sandbox.File{Path: abs, Data: data})
		return nil
	}
	for _, f := range opts.Files {
		if err := add("file path", f.Path, f.Data); err != nil {
			return nil, err
		}
	}
	if err := add("entrypoint", entry, []byte(joinPrelude(code, opts.Prelude))); err != nil {
		return nil, err
	}
	python := opts.Python
	if python == "" {
		python = "python3"
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = s.m.opts.CommandTimeout
	}
	cmd := sandbox.Command{
		Args: append([]string{python, files[len(files)-1].Path}, opts.Args...),
		Dir:  s.workspace, Env: opts.Env, SecretEnv: opts.SecretEnv,
		Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr,
		Timeout: timeout, MaxOutput: opts.MaxOutput,
	}
	var res *sandbox.Result
	var execFailed bool
	attempts := 0
	started := time.Now()
	err := s.do(ctx, op, timeout+leaseSlack, func(ctx context.Context, sb *sandbox.Sandbox) error {
		attempts++
		execFailed = false
		if err := upload(ctx, sb, files); err != nil {
			return err
		}
		var err error
		res, err = sb.Exec(ctx, cmd)
		execFailed = err != nil
		return err
	})
	res, err = providerTimeout(ctx, res, err, execFailed, timeout, started)
	return s.result(res, attempts), err
}

// markerPath is where setup records the packages it installed, so a
// process that reattaches knows whether setup finished.
func (s *Session) markerPath() string { return path.Join(s.sb.Home(), ".sandboxkit-session-setup") }
