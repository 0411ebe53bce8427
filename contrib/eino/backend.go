package eino

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/adk/filesystem"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/fsbackend"
	"github.com/sandboxkit/sandbox/session"
)

// Compile-time proof that Backend is what eino's filesystem middleware
// takes: the file backend and both of its shell interfaces.
var (
	_ filesystem.Backend        = (*Backend)(nil)
	_ filesystem.Shell          = (*Backend)(nil)
	_ filesystem.StreamingShell = (*Backend)(nil)
)

// SessionKey is the name of the adk session value (adk.WithSessionValues,
// adk.AddSessionValue) that names the conversation whose sandbox a tool
// call uses, when the Backend was made by New over a session.Manager and
// Options.Key is nil. WithSessionKey sets it on a plain context instead.
const SessionKey = "sandboxkit.session"

// Defaults of the zero Options, in one place.
const (
	// DefaultMaxReadOutput caps the bytes of file content one read_file
	// call returns to the model: 256 KiB, about 64k tokens, enough for
	// 2000 lines of ordinary source and far below what would crowd out a
	// model's context. A longer window ends at the last whole line that
	// fits, followed by a line saying so and where to read on.
	DefaultMaxReadOutput = 256 << 10
	// DefaultMaxGrepMatches caps the matches one grep call returns.
	DefaultMaxGrepMatches = 1000
	// DefaultMaxEntries caps the entries one ls or glob call returns.
	DefaultMaxEntries = 1000
)

// ErrNoSessionKey is returned (wrapped, with code InvalidArgument) by every
// method of a Backend made by New when the call's context names no
// conversation: neither WithSessionKey nor the adk session value SessionKey
// is set, or Options.Key returned "". It is a mistake in the program, not
// something a model can fix, so the middleware lets it end the run.
var ErrNoSessionKey = errors.New("eino: the context names no session key (set the adk session value \"" + SessionKey + "\" or use WithSessionKey)")

// Options configures a Backend. The zero value is a backend with execute
// disabled and the default caps.
type Options struct {
	// Key returns the session key of the conversation a call belongs to
	// (New only). Nil means the key set by WithSessionKey, else the adk
	// session value SessionKey (a string).
	Key func(ctx context.Context) (string, error)
	// AllowExecute enables the shell (Execute, ExecuteStreaming); without
	// it they return a permission_denied error and NewMiddleware adds no
	// execute tool.
	AllowExecute bool
	// Env is set for commands run by the shell.
	Env map[string]string
	// SecretEnv is like Env, but its values are redacted ("[REDACTED]")
	// from everything the backend returns: command output (live and
	// captured), file content, grep lines, listings and error messages.
	SecretEnv map[string]string
	// ExecuteTimeout bounds each command (fsbackend.DefaultExecuteTimeout,
	// 2 min, when 0).
	ExecuteTimeout time.Duration
	// MaxExecuteOutput caps a command's output as the model sees it
	// (fsbackend.DefaultMaxExecuteOutput, 256 KiB, when 0); the response
	// says when output was cut.
	MaxExecuteOutput int
	// MaxReadOutput caps the file content one Read returns
	// (DefaultMaxReadOutput when 0). A file of any size can be read in
	// windows; see Backend.Read.
	MaxReadOutput int
	// MaxFileBytes caps the files edit reads whole and grep searches
	// (fsbackend.DefaultMaxReadBytes, 32 MiB, when 0): larger files are
	// refused by edit with too_large and passed over by grep, saying so.
	MaxFileBytes int
	// MaxGrepMatches caps the matches one grep returns
	// (DefaultMaxGrepMatches when 0).
	MaxGrepMatches int
	// MaxEntries caps the entries one ls or glob returns
	// (DefaultMaxEntries when 0).
	MaxEntries int
	// Logger receives the file backend's warnings (a damaged binary index,
	// a pin that could not be persisted). Nil discards them.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxReadOutput <= 0 {
		o.MaxReadOutput = DefaultMaxReadOutput
	}
	if o.MaxGrepMatches <= 0 {
		o.MaxGrepMatches = DefaultMaxGrepMatches
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxExecuteOutput <= 0 {
		o.MaxExecuteOutput = fsbackend.DefaultMaxExecuteOutput
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = fsbackend.DefaultMaxReadBytes
	}
	return o
}

// Backend implements eino's filesystem.Backend (ls, read, grep, glob,
// write, edit), filesystem.Shell and filesystem.StreamingShell over
// sandboxes, through fsbackend: every path is jailed to the sandbox's
// workspace (relative paths start there, absolute paths are re-rooted under
// it, ".." may not climb out and no symbolic link leads out), reads are
// capped, binary files are refused by the text tools, and secret values are
// redacted.
//
// A failure the model can act on (a missing file, a path outside the
// workspace, an ambiguous edit, a binary file) is returned as a
// *backend.Error, whose message names the path and says what to do; eino's
// Backend interface has no other channel for it. eino's filesystem
// middleware turns any error of a tool into an error of the agent's run,
// so use NewMiddleware, which hands these errors back to the model as the
// tool's result instead.
//
// A Backend is safe for concurrent use. Close it when done.
type Backend struct {
	opts   Options
	redact func(string) string
	// secrets is what redact replaces, for holding back streamed output
	// that may continue one.
	secrets []string

	// One of mgr (New) or fixed (NewFromSandbox).
	mgr   *session.Manager
	fixed *target

	mu      sync.Mutex
	entries map[string]*entry // by session key
	closed  bool
}

// target is the file backends over one sandbox: fsb for everything but
// Read, rd for Read, whose size cap is the one of a read's output.
type target struct {
	fsb, rd *fsbackend.FilesystemBackend
}

func (t *target) close() {
	t.fsb.Close()
	t.rd.Close()
}

type entry struct {
	sess *session.Session
	t    *target
}

// New returns a Backend that gives each conversation its own sandbox from
// mgr: each call finds its session key in its context (see Options.Key),
// acquires the key's session (created on first use, reattached after a
// restart) and works in the session's workspace, extending its lease.
// A sandbox that is gone is reported to the model, and the next call gets a
// fresh one. The manager stays the caller's to close.
func New(mgr *session.Manager, opts Options) (*Backend, error) {
	if mgr == nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "eino: New: the session manager is nil")
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	return &Backend{opts: opts, redact: newRedactor(opts.SecretEnv), secrets: redactedValues(opts.SecretEnv), mgr: mgr, entries: map[string]*entry{}}, nil
}

// NewFromSandbox returns a Backend over one sandbox for every call, with
// its workspace at baseDir (an absolute path in the sandbox; "" means
// $HOME/workspace, as fsbackend). The sandbox stays the caller's.
func NewFromSandbox(sb *sandbox.Sandbox, baseDir string, opts Options) (*Backend, error) {
	if sb == nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "eino: NewFromSandbox: the sandbox is nil")
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	t, err := newTarget(sb, baseDir, opts)
	if err != nil {
		return nil, err
	}
	return &Backend{opts: opts, redact: newRedactor(opts.SecretEnv), secrets: redactedValues(opts.SecretEnv), fixed: t}, nil
}

func (o Options) check() error {
	for name, v := range map[string]int{"MaxExecuteOutput": o.MaxExecuteOutput, "MaxReadOutput": o.MaxReadOutput,
		"MaxFileBytes": o.MaxFileBytes, "MaxGrepMatches": o.MaxGrepMatches, "MaxEntries": o.MaxEntries} {
		if v < 0 {
			return sandbox.Errorf(sandbox.InvalidArgument, "eino: Options.%s is negative (%d)", name, v)
		}
	}
	if o.ExecuteTimeout < 0 {
		return sandbox.Errorf(sandbox.InvalidArgument, "eino: Options.ExecuteTimeout is negative (%s)", o.ExecuteTimeout)
	}
	return nil
}

func newTarget(sb *sandbox.Sandbox, baseDir string, opts Options) (*target, error) {
	fo := fsbackend.Options{
		BaseDir: baseDir, AllowExecute: opts.AllowExecute, Env: opts.Env, SecretEnv: opts.SecretEnv,
		ExecuteTimeout: opts.ExecuteTimeout, MaxExecuteOutput: opts.MaxExecuteOutput,
		MaxReadBytes: opts.MaxFileBytes, Logger: opts.Logger,
	}
	fsb, err := fsbackend.New(sb, fo)
	if err != nil {
		return nil, fmt.Errorf("eino: %w", err)
	}
	fo.MaxReadBytes = opts.MaxReadOutput
	rd, err := fsbackend.New(sb, fo)
	if err != nil {
		fsb.Close()
		return nil, fmt.Errorf("eino: %w", err)
	}
	return &target{fsb: fsb, rd: rd}, nil
}

// Close releases the file backends the Backend holds. It destroys no
// sandbox: those belong to the session manager or the caller.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if b.fixed != nil {
		b.fixed.close()
	}
	for k, e := range b.entries {
		e.t.close()
		delete(b.entries, k)
	}
	return nil
}

type keyCtx struct{}

// WithSessionKey returns a context whose tool calls use the sandbox of
// the session key (see New). It takes precedence over the adk session
// value SessionKey.
func WithSessionKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtx{}, key)
}

func (b *Backend) key(ctx context.Context) (string, error) {
	if b.opts.Key != nil {
		k, err := b.opts.Key(ctx)
		if err != nil {
			return "", fmt.Errorf("eino: session key: %w", err)
		}
		if k == "" {
			return "", sandbox.Errorf(sandbox.InvalidArgument, "%w", ErrNoSessionKey)
		}
		return k, nil
	}
	if k, ok := ctx.Value(keyCtx{}).(string); ok && k != "" {
		return k, nil
	}
	if v, ok := adk.GetSessionValue(ctx, SessionKey); ok {
		if k, ok := v.(string); ok && k != "" {
			return k, nil
		}
		return "", sandbox.Errorf(sandbox.InvalidArgument, "eino: the adk session value %q is a %T, not a non-empty string", SessionKey, v)
	}
	return "", sandbox.Errorf(sandbox.InvalidArgument, "%w", ErrNoSessionKey)
}

// do runs f with the file backends of the call's sandbox: the fixed one,
// or the session's, inside Session.Do (lease extended, a paused sandbox
// woken, a gone one told apart).
func (b *Backend) do(ctx context.Context, f func(ctx context.Context, t *target) error) error {
	sess, t, err := b.resolve(ctx)
	if err != nil {
		return err
	}
	return b.run(ctx, sess, t, f)
}

// resolve returns the call's session (nil for NewFromSandbox) and its file
// backends.
func (b *Backend) resolve(ctx context.Context) (*session.Session, *target, error) {
	if b.fixed != nil {
		if b.isClosed() {
			return nil, nil, sandbox.Errorf(sandbox.FailedPrecondition, "eino: %w", sandbox.ErrClosed)
		}
		return nil, b.fixed, nil
	}
	key, err := b.key(ctx)
	if err != nil {
		return nil, nil, err
	}
	sess, err := b.mgr.Acquire(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	e, err := b.entry(key, sess)
	if err != nil {
		return nil, nil, err
	}
	return sess, e.t, nil
}

func (b *Backend) run(ctx context.Context, sess *session.Session, t *target, f func(ctx context.Context, t *target) error) error {
	if sess == nil {
		return f(ctx, t)
	}
	return sess.Do(ctx, func(ctx context.Context, _ *sandbox.Sandbox) error { return f(ctx, t) })
}

func (b *Backend) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// entry returns the file backends of sess, made on first use and again
// when the key's session changed (a gone sandbox replaced). Making one
// also drops the entries whose session the manager no longer holds
// (released, reaped), so a long-lived Backend does not keep them all.
func (b *Backend) entry(key string, sess *session.Session) (*entry, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, "eino: %w", sandbox.ErrClosed)
	}
	if e := b.entries[key]; e != nil && e.sess == sess {
		return e, nil
	}
	t, err := newTarget(sess.Sandbox(), sess.Workspace(), b.opts)
	if err != nil {
		return nil, err
	}
	if old := b.entries[key]; old != nil {
		old.t.close()
	}
	e := &entry{sess: sess, t: t}
	b.entries[key] = e
	for k, o := range b.entries {
		if k == key {
			continue
		}
		if cur, ok := b.mgr.Lookup(k); !ok || cur != o.sess {
			o.t.close()
			delete(b.entries, k)
		}
	}
	return e, nil
}

// fail returns the result error of a file operation as the Go error eino's
// interface has room for, redacted.
func (b *Backend) fail(e *backend.Error) error {
	c := *e
	c.Message = b.redact(c.Message)
	c.Path = b.redact(c.Path)
	return &c
}

// LsInfo lists a directory of the workspace ("" or "/" is its root), sorted
// by path, each path relative to the workspace root. At most
// Options.MaxEntries entries are returned; through NewMiddleware the model
// is told how many more there are.
func (b *Backend) LsInfo(ctx context.Context, req *filesystem.LsInfoRequest) ([]filesystem.FileInfo, error) {
	var out []filesystem.FileInfo
	err := b.do(ctx, func(ctx context.Context, t *target) error {
		r, err := t.fsb.Ls(ctx, &backend.LsRequest{Path: req.Path})
		if err != nil {
			return err
		}
		if r.Error != nil {
			return b.fail(r.Error)
		}
		out = b.infos(ctx, r.Files, nil)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (b *Backend) infos(ctx context.Context, files []backend.FileInfo, unreadable []string) []filesystem.FileInfo {
	n := min(len(files), b.opts.MaxEntries)
	out := make([]filesystem.FileInfo, 0, n)
	for _, f := range files[:n] {
		fi := filesystem.FileInfo{Path: b.redact(f.Path), IsDir: f.IsDir, Size: f.Size}
		if fi.IsDir {
			fi.Path += "/"
		}
		if !f.ModTime.IsZero() {
			fi.ModifiedAt = f.ModTime.UTC().Format(time.RFC3339)
		}
		out = append(out, fi)
	}
	if len(files) > n {
		addNote(ctx, fmt.Sprintf("[%d more entries not shown (at most %d are listed): narrow the path or pattern]", len(files)-n, n))
	}
	if len(unreadable) > 0 {
		addNote(ctx, b.redact("[could not be read (permission denied or an I/O error): "+strings.Join(unreadable, ", ")+"]"))
	}
	return out
}

// Read returns a window of a text file's lines, without line numbers
// (eino's read_file tool numbers them): from the 1-based req.Offset (1
// when less), req.Limit lines (to the end of the file when 0). A file of
// any size can be read: the window stops at Options.MaxReadOutput bytes,
// at the last whole line that fits, and then ends with a line saying that
// the output was truncated, which lines were shown and the offset to read
// on from. A binary file (written as bytes, or not text) is refused with
// binary_file; a window past the end is empty content.
func (b *Backend) Read(ctx context.Context, req *filesystem.ReadRequest) (*filesystem.FileContent, error) {
	offset := max(req.Offset, 1)
	limit := req.Limit
	if limit <= 0 {
		limit = math.MaxInt
	}
	var out *filesystem.FileContent
	err := b.do(ctx, func(ctx context.Context, t *target) error {
		r, err := t.rd.Read(ctx, &backend.ReadRequest{Path: req.FilePath, Offset: offset - 1, Limit: limit})
		if err != nil {
			return err
		}
		if r.Error != nil {
			return b.fail(r.Error)
		}
		content, n := unnumber(r.Content)
		if r.Truncated {
			last := offset + n - 1
			if n <= 1 {
				content += fmt.Sprintf("\n[Output truncated: line %d is longer than the read limit of %d bytes and only its start is shown; call read_file with offset=%d to read on, or look at the line with execute]",
					offset, b.opts.MaxReadOutput, offset+1)
			} else {
				content += fmt.Sprintf("\n[Output truncated at the read limit of %d bytes: lines %d-%d of %d shown; call read_file with offset=%d to read on]",
					b.opts.MaxReadOutput, offset, last, r.TotalLines, last+1)
			}
		}
		out = &filesystem.FileContent{Content: b.redact(content)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// unnumber strips the "%6d\t" line numbers of a backend.ReadResult's
// content and returns the lines and their count.
func unnumber(numbered string) (string, int) {
	if numbered == "" {
		return "", 0
	}
	lines := strings.Split(numbered, "\n")
	for i, l := range lines {
		if j := strings.IndexByte(l, '\t'); j >= 0 {
			lines[i] = l[j+1:]
		}
	}
	return strings.Join(lines, "\n"), len(lines)
}

// GrepRaw searches the workspace's text files for a regular expression (RE2
// syntax, Go's regexp: ripgrep's syntax without backreferences and
// lookaround) in one round trip, with req.BeforeLines and req.AfterLines of
// context returned as matches of their own, as eino's in-memory backend
// does. req.Glob and req.FileType (ripgrep's type names, such as "go",
// "py", "js") filter the files; an unknown type is refused naming it.
// Multiline search is refused: the search is line by line. At most
// Options.MaxGrepMatches matches are returned; through NewMiddleware the
// model is told when more exist, and which files were not searched (too
// large, hard links, unreadable).
func (b *Backend) GrepRaw(ctx context.Context, req *filesystem.GrepRequest) ([]filesystem.GrepMatch, error) {
	if req.EnableMultiline {
		return nil, backend.InvalidArgument(req.Path, "multiline", "multiline search is not supported here: search for a pattern within one line")
	}
	glob := req.Glob
	var typeGlob string
	if req.FileType != "" {
		g, ok := typeGlobs[req.FileType]
		if !ok {
			return nil, backend.InvalidArgument(req.Path, "type", fmt.Sprintf("unknown file type %q; use glob instead (for example \"*.ext\"), or one of: %s", b.redact(req.FileType), knownTypes()))
		}
		typeGlob = g
		if glob == "" {
			glob, typeGlob = g, ""
		}
	}
	var out []filesystem.GrepMatch
	err := b.do(ctx, func(ctx context.Context, t *target) error {
		r, err := t.fsb.Grep(ctx, &backend.GrepRequest{
			Pattern: req.Pattern, Regex: true, IgnoreCase: req.CaseInsensitive,
			Before: max(req.BeforeLines, 0), After: max(req.AfterLines, 0),
			Path: req.Path, Glob: glob, MaxCount: b.opts.MaxGrepMatches,
		})
		if err != nil {
			return err
		}
		if r.Error != nil {
			return b.fail(r.Error)
		}
		out = make([]filesystem.GrepMatch, 0, len(r.Matches))
		for _, m := range r.Matches {
			if typeGlob != "" {
				if ok, _ := backend.MatchGlob(typeGlob, m.Path); !ok {
					continue
				}
			}
			out = append(out, filesystem.GrepMatch{Path: b.redact(m.Path), Line: m.Line, Content: b.redact(m.Text)})
		}
		if r.Truncated {
			addNote(ctx, fmt.Sprintf("[results truncated at %d matches: narrow the pattern, path or glob]", b.opts.MaxGrepMatches))
		}
		var skipped []string
		for _, s := range r.Skipped {
			if !contains(r.Unreadable, s) {
				skipped = append(skipped, s)
			}
		}
		if len(skipped) > 0 {
			addNote(ctx, b.redact("[not searched (too large, or a hard link): "+strings.Join(skipped, ", ")+"]"))
		}
		if len(r.Unreadable) > 0 {
			addNote(ctx, b.redact("[could not be read (permission denied or an I/O error): "+strings.Join(r.Unreadable, ", ")+"]"))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// GlobInfo returns the files and directories under req.Path (the workspace
// root when "") whose paths match req.Pattern: "*.go" matches by base name
// at any depth, "src/**/*.go" matches paths relative to req.Path. At most
// Options.MaxEntries are returned.
func (b *Backend) GlobInfo(ctx context.Context, req *filesystem.GlobInfoRequest) ([]filesystem.FileInfo, error) {
	var out []filesystem.FileInfo
	err := b.do(ctx, func(ctx context.Context, t *target) error {
		r, err := t.fsb.Glob(ctx, &backend.GlobRequest{Pattern: req.Pattern, Path: req.Path})
		if err != nil {
			return err
		}
		if r.Error != nil {
			return b.fail(r.Error)
		}
		out = b.infos(ctx, r.Files, r.Unreadable)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Write creates or replaces a text file in the workspace, creating missing
// parent directories, in one round trip.
func (b *Backend) Write(ctx context.Context, req *filesystem.WriteRequest) error {
	return b.do(ctx, func(ctx context.Context, t *target) error {
		r, err := t.fsb.Write(ctx, &backend.WriteRequest{Path: req.FilePath, Content: req.Content})
		if err != nil {
			return err
		}
		if r.Error != nil {
			return b.fail(r.Error)
		}
		return nil
	})
}

// Edit replaces req.OldString with req.NewString in a text file;
// OldString must occur exactly once unless req.ReplaceAll is set
// (no_match, ambiguous_match otherwise).
func (b *Backend) Edit(ctx context.Context, req *filesystem.EditRequest) error {
	return b.do(ctx, func(ctx context.Context, t *target) error {
		r, err := t.fsb.Edit(ctx, &backend.EditRequest{Path: req.FilePath, OldString: req.OldString, NewString: req.NewString, ReplaceAll: req.ReplaceAll})
		if err != nil {
			return err
		}
		if r.Error != nil {
			return b.fail(r.Error)
		}
		return nil
	})
}
