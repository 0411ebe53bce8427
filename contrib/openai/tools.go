package openai

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/openai/openai-go/v3/responses"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/fsbackend"
	"github.com/sandboxkit/sandbox/session"
)

// Defaults for the zero fields of Options.
const (
	// DefaultTimeout bounds a shell command when the call sets no
	// timeout_ms: long enough for a package install or a test suite.
	DefaultTimeout = 2 * time.Minute
	// DefaultMaxTimeout is the longest timeout a call may ask for.
	DefaultMaxTimeout = 10 * time.Minute
	// DefaultMaxOutputLength is the characters of output one command
	// returns when the call sets no max_output_length, and the most it
	// may ask for.
	DefaultMaxOutputLength = 32 << 10
	// DefaultWorkspace is the workspace, relative to the sandbox's home,
	// when Options.Workspace is empty.
	DefaultWorkspace = "workspace"
)

// Options configures Tools. The zero value is usable: the workspace is
// $HOME/workspace in the sandbox, commands get DefaultTimeout and
// DefaultMaxOutputLength.
type Options struct {
	// Workspace is the absolute path of the workspace in the sandbox:
	// the working directory of commands and the root apply_patch paths
	// are relative to. Empty means the sandbox's home joined with
	// DefaultWorkspace, or the session's workspace for Conversations and
	// NewSession.
	Workspace string
	// Env is set for every command.
	Env map[string]string
	// SecretEnv is set for every command, and its values are replaced by
	// "[REDACTED]" in all output sent to the model.
	SecretEnv map[string]string
	// Timeout bounds a command when the call sets no timeout_ms
	// (DefaultTimeout when zero).
	Timeout time.Duration
	// MaxTimeout caps the timeout a call may ask for (DefaultMaxTimeout
	// when zero).
	MaxTimeout time.Duration
	// MaxOutputLength is the characters of output one command returns
	// when the call sets no max_output_length, and the most a call may
	// ask for (DefaultMaxOutputLength when zero).
	MaxOutputLength int
	// Logger receives a line per call handled. Nil discards.
	Logger *slog.Logger
}

// Tools runs the Responses API's client-executed tools in one sandbox.
// It is safe for concurrent use; Close releases the file backend.
type Tools struct {
	sb     *sandbox.Sandbox
	sess   *session.Session // nil for a bare sandbox
	fb     *fsbackend.FilesystemBackend
	ws     string
	opts   Options
	redact *strings.Replacer
	log    *slog.Logger

	mu    sync.Mutex
	ready bool // the workspace directory is known to exist
}

// New returns Tools over sb. It makes no call to the sandbox.
func New(sb *sandbox.Sandbox, opts Options) (*Tools, error) {
	if sb == nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "openai: nil sandbox")
	}
	ws := opts.Workspace
	if ws == "" {
		ws = path.Join(sb.Home(), DefaultWorkspace)
	}
	return newTools(sb, nil, ws, opts)
}

// NewSession returns Tools over a session's sandbox: every call extends
// the session's lease and wakes a paused sandbox first, and a sandbox that
// is gone ends the session (the error matches session.ErrGone). The
// workspace is the session's unless Options.Workspace is set.
func NewSession(s *session.Session, opts Options) (*Tools, error) {
	if s == nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "openai: nil session")
	}
	ws := opts.Workspace
	if ws == "" {
		ws = s.Workspace()
	}
	return newTools(s.Sandbox(), s, ws, opts)
}

func newTools(sb *sandbox.Sandbox, sess *session.Session, ws string, opts Options) (*Tools, error) {
	if !strings.HasPrefix(ws, "/") {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "openai: workspace %q must be an absolute path", ws)
	}
	switch {
	case opts.Timeout < 0:
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "openai: negative Timeout %v", opts.Timeout)
	case opts.MaxTimeout < 0:
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "openai: negative MaxTimeout %v", opts.MaxTimeout)
	case opts.MaxOutputLength < 0:
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "openai: negative MaxOutputLength %d", opts.MaxOutputLength)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxTimeout == 0 {
		opts.MaxTimeout = DefaultMaxTimeout
	}
	opts.Timeout = min(opts.Timeout, opts.MaxTimeout)
	if opts.MaxOutputLength == 0 {
		opts.MaxOutputLength = DefaultMaxOutputLength
	}
	opts.Env, opts.SecretEnv = maps.Clone(opts.Env), maps.Clone(opts.SecretEnv)
	ws = path.Clean(ws)
	fb, err := fsbackend.New(sb, fsbackend.Options{BaseDir: ws, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Tools{sb: sb, sess: sess, fb: fb, ws: ws, opts: opts, redact: secretReplacer(opts.SecretEnv), log: log}, nil
}

// secretReplacer replaces secret values, longest first so that a value
// containing another is replaced whole.
func secretReplacer(secrets map[string]string) *strings.Replacer {
	vals := slices.Collect(maps.Values(secrets))
	vals = slices.DeleteFunc(vals, func(v string) bool { return v == "" })
	if len(vals) == 0 {
		return nil
	}
	slices.SortFunc(vals, func(a, b string) int { return len(b) - len(a) })
	var pairs []string
	for _, v := range vals {
		pairs = append(pairs, v, "[REDACTED]")
	}
	return strings.NewReplacer(pairs...)
}

func (t *Tools) scrub(s string) string {
	if t.redact == nil {
		return s
	}
	return t.redact.Replace(s)
}

// Close releases the file backend. It does not destroy the sandbox.
func (t *Tools) Close() error { return t.fb.Close() }

// Sandbox returns the sandbox the tools run in.
func (t *Tools) Sandbox() *sandbox.Sandbox { return t.sb }

// Workspace returns the workspace's absolute path in the sandbox.
func (t *Tools) Workspace() string { return t.ws }

// ShellTool declares the shell tool with a local environment: the model's
// shell calls are executed by the client (Tools.Shell), not in a
// container of OpenAI's.
func ShellTool() responses.ToolUnionParam {
	return responses.ToolUnionParam{OfShell: &responses.FunctionShellToolParam{
		Environment: responses.FunctionShellToolEnvironmentUnionParam{OfLocal: &responses.LocalEnvironmentParam{}},
	}}
}

// ApplyPatchTool declares the apply_patch tool (Tools.ApplyPatch runs its
// calls).
func ApplyPatchTool() responses.ToolUnionParam {
	return responses.ToolUnionParam{OfApplyPatch: &responses.ApplyPatchToolParam{}}
}

// LocalShellTool declares the legacy local_shell tool, for the models
// that use it instead of shell (Tools.LocalShell runs its calls).
func LocalShellTool() responses.ToolUnionParam {
	return responses.ToolUnionParam{OfLocalShell: &responses.ToolLocalShellParam{}}
}

// Params returns the tools to declare in a request: shell and apply_patch.
func (t *Tools) Params() []responses.ToolUnionParam {
	return []responses.ToolUnionParam{ShellTool(), ApplyPatchTool()}
}

// Instructions returns text for the request's instructions that tells the
// model how these tools behave here: what paths are relative to, how
// commands run, the caps, and binary files. The built-in tools carry no
// description of their own. Run adds it to every request unless
// RunOptions.NoInstructions.
func (t *Tools) Instructions() string {
	return fmt.Sprintf(`You work in a sandbox. Its workspace is %[1]s.
- shell: each command runs in a new "sh -c" with the workspace as its working directory; cd and exported variables do not carry to the next command (chain with && instead). A command is stopped after timeout_ms (default %[2]s, at most %[3]s) and then reports a timeout outcome; the call's later commands are not run. Each command returns at most max_output_length characters of output (at most %[4]d): a longer output keeps its start and end, with a "[... N bytes truncated ...]" line where the middle was cut.
- apply_patch: paths are relative to the workspace root (an absolute path is taken as relative to it; ".." may not leave it). create_file fails if the file exists (use update_file), update_file needs an existing text file (binary files cannot be patched: use shell), delete_file removes a file, not a directory. A diff whose context or removed lines do not match the file exactly fails and leaves the file unchanged: read the file again and resend.`,
		t.ws, t.opts.Timeout, t.opts.MaxTimeout, t.opts.MaxOutputLength)
}

// exec runs a command through the session when there is one, so that the
// lease is extended first and a gone sandbox ends the session.
func (t *Tools) exec(ctx context.Context, cmd sandbox.Command) (*sandbox.Result, error) {
	if t.sess != nil {
		r, err := t.sess.Exec(ctx, cmd)
		if r != nil {
			return r.Result, err
		}
		return nil, err
	}
	return t.sb.Exec(ctx, cmd)
}

// do runs f through the session when there is one (see exec).
func (t *Tools) do(ctx context.Context, f func(ctx context.Context) error) error {
	if t.sess != nil {
		return t.sess.Do(ctx, func(ctx context.Context, _ *sandbox.Sandbox) error { return f(ctx) })
	}
	return f(ctx)
}

// ensureWorkspace creates the workspace directory once, so that the first
// command has a working directory.
func (t *Tools) ensureWorkspace(ctx context.Context, again bool) error {
	t.mu.Lock()
	ready := t.ready
	t.mu.Unlock()
	if ready && !again {
		return nil
	}
	if err := t.do(ctx, func(ctx context.Context) error { return t.sb.MkdirAll(ctx, t.ws) }); err != nil {
		return fmt.Errorf("openai: creating the workspace %s: %w", t.ws, err)
	}
	t.mu.Lock()
	t.ready = true
	t.mu.Unlock()
	return nil
}
