package anthropic

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/fsbackend"
	"github.com/sandboxkit/sandbox/session"
)

// Defaults for the zero values of Options.
const (
	// DefaultMaxOutput is the most characters a tool result carries: the
	// cap Claude's own bash tool applies to a command's output. Longer
	// output is cut and ends with a truncation mark.
	DefaultMaxOutput = 30000
	// DefaultBashTimeout bounds a bash command (fsbackend's execute
	// default: package installs and test suites often need more than 30 s).
	DefaultBashTimeout = fsbackend.DefaultExecuteTimeout
	// DefaultViewLines is how many lines view and read return when no
	// view_range is given; a longer file ends with a note saying how to
	// read on.
	DefaultViewLines = 2000
	// ReleaseTimeout bounds the release of a worker session's sandbox
	// when its tools are closed.
	ReleaseTimeout = 30 * time.Second
)

// Tool names, as Claude calls them.
const (
	// BashToolName is the name of the bash client tool (bash_20250124) and
	// of the agent toolset's bash.
	BashToolName = "bash"
	// TextEditorToolName is the name of the text editor client tool
	// (text_editor_20250728).
	TextEditorToolName = "str_replace_based_edit_tool"
)

// Options configures a tool set. The zero value runs bash with
// DefaultBashTimeout, caps results at DefaultMaxOutput characters and uses
// fsbackend's default workspace ($HOME/workspace in the sandbox).
type Options struct {
	// BaseDir is the workspace, an absolute path in the sandbox, that
	// every path the model gives is jailed to and bash starts in. Empty
	// means fsbackend's default for New and the session's workspace for
	// ForSession (where a non-empty BaseDir is an error).
	BaseDir string
	// Env is set for bash commands.
	Env map[string]string
	// SecretEnv is like Env, but its values are replaced by "[REDACTED]"
	// in everything the tools return to the model, as are the sandbox's
	// own secret values (sandbox.CreateOptions.SecretEnv).
	SecretEnv map[string]string
	// BashTimeout bounds each bash command (DefaultBashTimeout when 0).
	// A model's timeout_ms (agent toolset) can only shorten it.
	BashTimeout time.Duration
	// MaxOutput caps the characters of one tool result (DefaultMaxOutput
	// when 0). Longer results are cut and end with a line saying so.
	MaxOutput int
	// MaxReadBytes is fsbackend.Options.MaxReadBytes: the largest file
	// read or edited in one call.
	MaxReadBytes int
	// Logger is fsbackend's logger. Nil discards.
	Logger *slog.Logger
}

func (o Options) validate() error {
	switch {
	case o.BashTimeout < 0:
		return fmt.Errorf("anthropic: Options.BashTimeout %v is negative: %w", o.BashTimeout, sandbox.ErrInvalidArgument)
	case o.MaxOutput < 0:
		return fmt.Errorf("anthropic: Options.MaxOutput %d is negative: %w", o.MaxOutput, sandbox.ErrInvalidArgument)
	case o.MaxReadBytes < 0:
		return fmt.Errorf("anthropic: Options.MaxReadBytes %d is negative: %w", o.MaxReadBytes, sandbox.ErrInvalidArgument)
	case o.BaseDir != "" && !strings.HasPrefix(o.BaseDir, "/"):
		return fmt.Errorf("anthropic: Options.BaseDir %q is not an absolute path: %w", o.BaseDir, sandbox.ErrInvalidArgument)
	}
	return nil
}

// Tools is Claude's client-side tool set over one sandbox: bash and the
// text editor (the versioned client tools), and the agent toolset's
// bash, read, write, edit, glob and grep. Every path is jailed to the
// workspace by fsbackend. A failure the model can act on (a missing file,
// a path outside the workspace, an ambiguous edit, a command that exited
// non-zero) is a tool result with is_error set; so is a failure of the
// sandbox itself: no tool call ends the runner's loop. Tools is safe for
// concurrent use; bash commands run one at a time.
type Tools struct {
	opts Options

	// fixed is the sandbox of New; nil for ForSession.
	fixed   *sandbox.Sandbox
	manager *session.Manager
	key     string
	release bool // release the session's sandbox on Close (worker sessions)

	mu     sync.Mutex
	sess   *session.Session
	state  *boundState // the sandbox the tools work in, made on first use
	closed bool

	bashTurn chan struct{} // one bash command at a time
	bashID   string        // names the bash state file; a restart changes it
	oldBash  string        // a state file to remove with the next command

	closeOnce sync.Once
	closeErr  error
}

// boundState is what the tools hold for one sandbox.
type boundState struct {
	sb     *sandbox.Sandbox
	fb     *fsbackend.FilesystemBackend
	base   string
	redact func([]byte) []byte
	pinned atomic.Bool
}

// New returns the tool set over sb. It makes no call to the sandbox.
// Close it when done (it does not destroy sb).
func New(sb *sandbox.Sandbox, opts Options) (*Tools, error) {
	if sb == nil {
		return nil, fmt.Errorf("anthropic: New: the sandbox is nil: %w", sandbox.ErrInvalidArgument)
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return newTools(opts, sb, nil, "", false), nil
}

// ForSession returns the tool set over the sandbox of key's session in m:
// one sandbox per conversation. The session is acquired on the first tool
// call, every call extends its lease first, and when the sandbox is found
// gone the call is an error result and the next call acquires a fresh
// sandbox (with an empty workspace). The workspace is the session's.
// Close does not release the session: the Manager owns it.
func ForSession(m *session.Manager, key string, opts Options) (*Tools, error) {
	if m == nil {
		return nil, fmt.Errorf("anthropic: ForSession: the manager is nil: %w", sandbox.ErrInvalidArgument)
	}
	if key == "" {
		return nil, fmt.Errorf("anthropic: ForSession: the session key is empty: %w", sandbox.ErrInvalidArgument)
	}
	if opts.BaseDir != "" {
		return nil, fmt.Errorf("anthropic: ForSession: Options.BaseDir %q is set, but the workspace is the session's (session.Options.Workspace): %w", opts.BaseDir, sandbox.ErrInvalidArgument)
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return newTools(opts, nil, m, key, false), nil
}

func newTools(opts Options, sb *sandbox.Sandbox, m *session.Manager, key string, release bool) *Tools {
	if opts.MaxOutput == 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	if opts.BashTimeout == 0 {
		opts.BashTimeout = DefaultBashTimeout
	}
	return &Tools{
		opts: opts, fixed: sb, manager: m, key: key, release: release,
		bashTurn: make(chan struct{}, 1), bashID: newID(),
	}
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Close releases the tools' fsbackend (and, for the tools of a worker
// session, destroys the session's sandbox). Calling it again does nothing.
func (t *Tools) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		st, s := t.state, t.sess
		t.state, t.sess = nil, nil
		t.mu.Unlock()
		if st != nil {
			t.closeErr = st.fb.Close()
		}
		if t.release && s != nil {
			ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
			defer cancel()
			t.closeErr = errors.Join(t.closeErr, t.manager.Release(ctx, s))
		}
	})
	return t.closeErr
}

// errClosed is the error of a call after Close.
var errClosed = fmt.Errorf("anthropic: the tools are closed: %w", sandbox.ErrClosed)

// do runs f with the tools' sandbox: for a session, through Session.Do, so
// that the lease is extended and a gone sandbox is told apart.
func (t *Tools) do(ctx context.Context, f func(ctx context.Context, st *boundState) error) error {
	if t.fixed != nil {
		st, err := t.bind(ctx, t.fixed, "")
		if err != nil {
			return err
		}
		return f(ctx, st)
	}
	s, err := t.session(ctx)
	if err != nil {
		return err
	}
	err = s.Do(ctx, func(ctx context.Context, sb *sandbox.Sandbox) error {
		st, err := t.bind(ctx, sb, s.Workspace())
		if err != nil {
			return err
		}
		return f(ctx, st)
	})
	if errors.Is(err, session.ErrGone) || errors.Is(err, session.ErrEnded) {
		t.forget(s)
	}
	return err
}

func (t *Tools) session(ctx context.Context) (*session.Session, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errClosed
	}
	if s := t.sess; s != nil {
		t.mu.Unlock()
		return s, nil
	}
	t.mu.Unlock()
	s, err := t.manager.Acquire(ctx, t.key)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errClosed
	}
	if t.sess == nil {
		t.sess = s
	}
	return t.sess, nil
}

// forget drops a session whose sandbox is gone, so that the next call
// acquires a fresh one.
func (t *Tools) forget(s *session.Session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sess != s {
		return
	}
	t.sess = nil
	if t.state != nil {
		_ = t.state.fb.Close()
		t.state = nil
	}
	t.oldBash, t.bashID = "", newID()
}

// bind returns the state for sb, making it on first use: the fsbackend
// and the redaction of the sandbox's secret values (one trivial command,
// once per sandbox).
func (t *Tools) bind(ctx context.Context, sb *sandbox.Sandbox, workspace string) (*boundState, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errClosed
	}
	if st := t.state; st != nil && st.sb == sb {
		t.mu.Unlock()
		return st, nil
	}
	t.mu.Unlock()

	base := t.opts.BaseDir
	if workspace != "" {
		base = workspace
	}
	fb, err := fsbackend.New(sb, fsbackend.Options{
		BaseDir: base, AllowExecute: false, MaxReadBytes: t.opts.MaxReadBytes, Logger: t.opts.Logger,
		// SecretEnv lets the backend's cuts keep a secret whole.
		SecretEnv: t.opts.SecretEnv,
	})
	if err != nil {
		return nil, fmt.Errorf("anthropic: file tools: %w", err)
	}
	if base == "" {
		if base, err = fb.BaseDir(ctx); err != nil {
			_ = fb.Close()
			return nil, fmt.Errorf("anthropic: resolve the workspace: %w", err)
		}
	}
	res, redact, err := sb.ExecUnredacted(ctx, sandbox.Command{Args: []string{"true"}, SecretEnv: t.opts.SecretEnv, Timeout: fsbackend.ProbeTimeout})
	if err != nil || redact == nil {
		_ = fb.Close()
		if err == nil {
			err = errors.New("no redaction")
		}
		return nil, fmt.Errorf("anthropic: first contact with the sandbox: %w", err)
	}
	_ = res
	st := &boundState{sb: sb, fb: fb, base: path.Clean(base), redact: redact}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		_ = fb.Close()
		return nil, errClosed
	}
	if t.state != nil && t.state.sb == sb {
		_ = fb.Close()
		return t.state, nil
	}
	if t.state != nil {
		_ = t.state.fb.Close()
	}
	t.state = st
	return st, nil
}

// rel maps a path the model gave to a workspace path for fsbackend: the
// workspace's own absolute path (which the tool descriptions name) is
// taken as the workspace, not re-rooted under it; any other path goes to
// fsbackend's jail as given.
func (st *boundState) rel(p string) string {
	if p == st.base {
		return ""
	}
	if strings.HasPrefix(p, st.base+"/") {
		return strings.TrimPrefix(p, st.base+"/")
	}
	return p
}

// toolError is a failure returned to the model: the runner turns it into a
// tool result with is_error set and the text "Error: " + its message.
type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }

// failf returns a toolError.
func failf(format string, args ...any) error {
	return &toolError{msg: fmt.Sprintf(format, args...)}
}

// backendError turns a backend result error into a toolError.
func backendError(e *backend.Error) error { return &toolError{msg: e.Message} }

// result renders text for the model: redacted, capped.
func (t *Tools) result(st *boundState, text string) []sdk.BetaToolResultBlockParamContentUnion {
	return []sdk.BetaToolResultBlockParamContentUnion{{OfText: &sdk.BetaTextBlockParam{Text: t.finish(st, text)}}}
}

// finish redacts and caps text. An empty text becomes a short note: the
// API refuses an empty text block.
func (t *Tools) finish(st *boundState, text string) string {
	if st != nil && st.redact != nil {
		text = string(st.redact([]byte(text)))
	}
	text = capText(text, t.opts.MaxOutput)
	if text == "" {
		text = "(no output)"
	}
	return text
}

// capText cuts text to at most max characters, on a character boundary,
// and says so on a line of its own.
func capText(text string, max int) string {
	n := utf8.RuneCountInString(text)
	if n <= max {
		return text
	}
	cut, i := 0, 0
	for i = range text {
		if cut == max {
			break
		}
		cut++
	}
	return text[:i] + fmt.Sprintf("\n[Output truncated: showing the first %d of %d characters]", max, n)
}

// sandboxFailure is the error result for a failure of the sandbox itself
// (not of the model's input): it says what happened without ending the
// runner's loop. Errors from the sandbox layer never carry secret values.
func (t *Tools) sandboxFailure(tool string, err error) error {
	switch {
	case errors.Is(err, session.ErrGone):
		return failf("%s: the sandbox is gone (expired or deleted); the next call gets a fresh sandbox with an empty workspace", tool)
	case errors.Is(err, sandbox.ErrClosed), errors.Is(err, session.ErrEnded):
		return failf("%s: the sandbox is no longer available: %v", tool, err)
	}
	return failf("%s: the sandbox failed: %v", tool, err)
}

// run is the body of every tool: it binds the sandbox, runs f, and turns a
// Go error of the sandbox into an error result.
func (t *Tools) run(ctx context.Context, tool string, f func(ctx context.Context, st *boundState) (string, error)) ([]sdk.BetaToolResultBlockParamContentUnion, error) {
	var (
		text  string
		bound *boundState
		terr  error
	)
	err := t.do(ctx, func(ctx context.Context, st *boundState) error {
		bound = st
		var err error
		text, err = f(ctx, st)
		var te *toolError
		if errors.As(err, &te) {
			terr = err
			return nil
		}
		return err
	})
	if err != nil {
		var te *toolError
		if errors.As(err, &te) {
			return nil, err
		}
		return nil, &toolError{msg: t.finish(bound, t.sandboxFailure(tool, err).Error())}
	}
	if terr != nil {
		return nil, &toolError{msg: t.finish(bound, terr.Error())}
	}
	return t.result(bound, text), nil
}
