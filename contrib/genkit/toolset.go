package sandboxgenkit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/fsbackend"
	"github.com/sandboxkit/sandbox/session"
)

// Defaults of the zero Options.
const (
	// DefaultMaxOutput caps the text of each tool result, in bytes: about
	// 16k tokens, enough for a page of code or a screen of a command's
	// output, small enough that one call cannot fill a model's context.
	DefaultMaxOutput = 64 << 10
	// MiddlewareName is the name the Toolset gives Genkit as middleware.
	MiddlewareName = "sandboxkit/sandbox"
	// maxPrefix is the longest Options.Prefix.
	maxPrefix = 32
)

// ErrNoConversation is returned (as the one Go error a tool returns) by a
// tool call whose context carries no conversation key: wrap the context of
// Generate with WithConversation, or set Options.Key.
var ErrNoConversation = errors.New("sandboxgenkit: no conversation key in the tool call's context: wrap the context with WithConversation or set Options.Key")

// Options configures a Toolset. The zero value gives the file tools
// (no execute) with the workspace of the session manager, the key from
// WithConversation and outputs capped at DefaultMaxOutput.
type Options struct {
	// Key returns the conversation key of a tool call from its context:
	// the calls of one key share one sandbox. Nil means ConversationKey,
	// the key set with WithConversation. An error, or an empty key, ends
	// the Generate call with an error matching ErrNoConversation.
	Key func(ctx context.Context) (string, error)
	// AllowExecute adds the execute tool, which runs shell commands in
	// the workspace.
	AllowExecute bool
	// Env is set for the commands execute runs.
	Env map[string]string
	// SecretEnv is set for the commands execute runs, and its values are
	// replaced by "[REDACTED]" in every tool's output and error messages.
	SecretEnv map[string]string
	// Secrets are more values redacted from every output (the values of
	// brokered secrets, a key the sandbox was created with), never set
	// for commands.
	Secrets []string
	// ExecuteTimeout is execute's default and longest timeout: a model's
	// timeout_seconds above it is lowered to it (the result says so).
	// Zero means fsbackend.DefaultExecuteTimeout (2 min).
	ExecuteTimeout time.Duration
	// MaxOutput caps the text of each tool's result in bytes; longer text
	// is cut, with a note saying how to read on (DefaultMaxOutput when
	// zero).
	MaxOutput int
	// MaxReadBytes is fsbackend's cap on a file read in one call
	// (fsbackend.DefaultMaxReadBytes when zero): larger files get
	// too_large from edit_file, and grep passes over them.
	MaxReadBytes int
	// Prefix is put before every tool name ("sandbox_" gives
	// sandbox_read_file), to keep them apart from other tools. Letters,
	// digits, '_' and '-' only, at most 32 bytes.
	Prefix string
	// Logger receives the backend's warnings. Nil discards them.
	Logger *slog.Logger
}

// Toolset is the sandbox's tools for Genkit, over one sandbox per
// conversation key. It is safe for concurrent use. Pass it to Generate as
// middleware (ai.WithUse), register its tools with Define, or take them
// with Tools.
type Toolset struct {
	mgr    *session.Manager
	opts   Options
	redact *redactor

	mu     sync.Mutex
	byKey  map[string]*convo
	closed bool
}

// convo is the backend of one conversation key, rebuilt when the
// manager hands out a new session for the key.
type convo struct {
	sess *session.Session
	fsb  *fsbackend.FilesystemBackend
}

// New returns the tools over the sandboxes of mgr: each conversation key
// gets the session mgr holds for it. mgr stays the caller's to close.
func New(mgr *session.Manager, opts Options) (*Toolset, error) {
	if mgr == nil {
		return nil, fmt.Errorf("sandboxgenkit: New: the session manager is nil")
	}
	if opts.MaxOutput < 0 {
		return nil, fmt.Errorf("sandboxgenkit: Options.MaxOutput %d must not be negative", opts.MaxOutput)
	}
	if opts.MaxOutput == 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	if opts.ExecuteTimeout < 0 {
		return nil, fmt.Errorf("sandboxgenkit: Options.ExecuteTimeout %v must not be negative", opts.ExecuteTimeout)
	}
	if opts.ExecuteTimeout == 0 {
		opts.ExecuteTimeout = fsbackend.DefaultExecuteTimeout
	}
	if opts.MaxReadBytes < 0 {
		return nil, fmt.Errorf("sandboxgenkit: Options.MaxReadBytes %d must not be negative", opts.MaxReadBytes)
	}
	if err := checkPrefix(opts.Prefix); err != nil {
		return nil, err
	}
	if opts.Key == nil {
		opts.Key = func(ctx context.Context) (string, error) {
			if k, ok := ConversationKey(ctx); ok {
				return k, nil
			}
			return "", ErrNoConversation
		}
	}
	secrets := make([]string, 0, len(opts.SecretEnv)+len(opts.Secrets))
	for _, v := range opts.SecretEnv {
		secrets = append(secrets, v)
	}
	secrets = append(secrets, opts.Secrets...)
	return &Toolset{mgr: mgr, opts: opts, redact: newRedactor(secrets), byKey: map[string]*convo{}}, nil
}

// checkPrefix accepts the characters every model API accepts in a tool
// name.
func checkPrefix(p string) error {
	if len(p) > maxPrefix {
		return fmt.Errorf("sandboxgenkit: Options.Prefix %q is longer than %d bytes", p, maxPrefix)
	}
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("sandboxgenkit: Options.Prefix %q holds %q: use letters, digits, '_' and '-'", p, r)
		}
	}
	return nil
}

type conversationKey struct{}

// WithConversation returns ctx carrying the conversation key the tools
// use when Options.Key is nil: every tool call under it works in the
// key's sandbox.
func WithConversation(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, conversationKey{}, key)
}

// ConversationKey returns the key set with WithConversation, and whether
// a non-empty one was set.
func ConversationKey(ctx context.Context) (string, bool) {
	k, _ := ctx.Value(conversationKey{}).(string)
	return k, k != ""
}

// Names returns the names of the tools, in the order Tools returns them.
func (t *Toolset) Names() []string {
	var names []string
	for _, s := range t.specs() {
		names = append(names, s.name)
	}
	return names
}

// Tools returns new, unregistered Genkit tools, to pass to Generate with
// ai.WithTools. Each call returns new values, so that two Generate calls
// never share a tool Genkit registers on its own.
func (t *Toolset) Tools() []ai.Tool {
	var tools []ai.Tool
	for _, s := range t.specs() {
		tools = append(tools, s.newTool())
	}
	return tools
}

// Define registers the tools with g (as genkit.DefineTool does; defining
// them twice on one g panics, as Genkit does for any tool) and returns
// references to them for ai.WithTools, and for prompts, which name them.
func (t *Toolset) Define(g *genkit.Genkit) []ai.ToolRef {
	var refs []ai.ToolRef
	for _, s := range t.specs() {
		refs = append(refs, s.define(g))
	}
	return refs
}

// Name returns MiddlewareName. Together with New it makes the Toolset an
// ai.Middleware: ai.WithUse(tools) gives the model the tools and guards
// the generate loop (see the package documentation).
func (t *Toolset) Name() string { return MiddlewareName }

// New returns the hooks of one Generate call: the tools, the guard that
// turns a refused input into a tool result, and a check that the
// context is live before each model call. It implements ai.Middleware.
func (t *Toolset) New(ctx context.Context) (*ai.Hooks, error) {
	return &ai.Hooks{Tools: t.Tools(), WrapTool: t.wrapTool, WrapModel: wrapModel}, nil
}

// Guard returns middleware that only guards the tools (no tools of its
// own): for Generate calls that name the tools registered with Define,
// ai.WithUse(tools.Guard()).
func (t *Toolset) Guard() ai.Middleware {
	return ai.MiddlewareFunc(func(context.Context) (*ai.Hooks, error) {
		return &ai.Hooks{WrapTool: t.wrapTool, WrapModel: wrapModel}, nil
	})
}

// maxErrorText bounds the text of an error result made from a refused
// input: Genkit's message quotes the input, which may be as large as the
// model's whole answer.
const maxErrorText = 4 << 10

// wrapTool runs a tool and turns an error of one of this Toolset's tools
// (Genkit's refusal of an input that does not match the schema) into a
// tool result the model reads. A missing conversation key and an
// interrupt are passed on.
func (t *Toolset) wrapTool(ctx context.Context, p *ai.ToolParams, next ai.ToolNext) (*ai.MultipartToolResponse, error) {
	resp, err := next(ctx, p)
	if err == nil || !t.owns(p.Tool.Name()) || errors.Is(err, ErrNoConversation) {
		return resp, err
	}
	if interrupt, _ := ai.IsToolInterruptError(err); interrupt {
		return resp, err
	}
	msg := t.redact.text(err.Error())
	if len(msg) > maxErrorText {
		msg = cutUTF8(msg, maxErrorText) + fmt.Sprintf(" ... [error cut: %d bytes in all]", len(msg))
	}
	return &ai.MultipartToolResponse{Output: failure{Error: &ToolError{Code: codeOfGenkit(err), Message: msg}}}, nil
}

// owns reports whether name is one of this Toolset's tools.
func (t *Toolset) owns(name string) bool {
	for _, s := range t.specs() {
		if s.name == name {
			return true
		}
	}
	return false
}

// wrapModel refuses a model call once the context has ended: the tools
// answer a cancelled call with a result (see the package documentation),
// and this ends the loop there whatever the model plugin does with a dead
// context.
func wrapModel(ctx context.Context, p *ai.ModelParams, next ai.ModelNext) (*ai.ModelResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sandboxgenkit: the context ended before the model call: %w", err)
	}
	return next(ctx, p)
}

// backend returns the session and file backend of the conversation of
// ctx, acquiring the key's session (creating its sandbox on first use).
func (t *Toolset) backend(ctx context.Context) (*session.Session, *fsbackend.FilesystemBackend, error) {
	key, err := t.opts.Key(ctx)
	if err == nil && key == "" {
		err = ErrNoConversation
	}
	if err != nil {
		if !errors.Is(err, ErrNoConversation) {
			err = fmt.Errorf("%w: %w", ErrNoConversation, err)
		}
		return nil, nil, err
	}
	sess, err := t.mgr.Acquire(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, nil, sandbox.Errorf(sandbox.FailedPrecondition, "sandboxgenkit: the toolset is closed")
	}
	c := t.byKey[key]
	if c != nil && c.sess == sess {
		return c.sess, c.fsb, nil
	}
	fsb, err := fsbackend.New(sess.Sandbox(), fsbackend.Options{
		BaseDir:          sess.Workspace(),
		AllowExecute:     t.opts.AllowExecute,
		Env:              t.opts.Env,
		SecretEnv:        t.opts.SecretEnv,
		ExecuteTimeout:   t.opts.ExecuteTimeout,
		MaxExecuteOutput: t.opts.MaxOutput,
		MaxReadBytes:     t.opts.MaxReadBytes,
		Logger:           t.opts.Logger,
	})
	if err != nil {
		return nil, nil, err
	}
	if c != nil {
		c.fsb.Close()
	}
	t.pruneLocked()
	t.byKey[key] = &convo{sess: sess, fsb: fsb}
	return sess, fsb, nil
}

// pruneLocked forgets the backends of keys whose session the manager no
// longer holds (released, reaped, found gone), so that the map does not
// grow with every conversation ever seen.
func (t *Toolset) pruneLocked() {
	for k, c := range t.byKey {
		if s, ok := t.mgr.Lookup(k); !ok || s != c.sess {
			c.fsb.Close()
			delete(t.byKey, k)
		}
	}
}

// Release ends the conversation of key: its sandbox is destroyed
// (session.Manager.Release) and its backend forgotten. Releasing a key
// that has no session is not an error.
func (t *Toolset) Release(ctx context.Context, key string) error {
	t.mu.Lock()
	if c := t.byKey[key]; c != nil {
		c.fsb.Close()
		delete(t.byKey, key)
	}
	t.mu.Unlock()
	s, ok := t.mgr.Lookup(key)
	if !ok {
		return nil
	}
	return t.mgr.Release(ctx, s)
}

// Close forgets every conversation's backend. It does not destroy the
// sandboxes: the session manager owns them (close it to destroy them).
// Tool calls after Close return a failed_precondition result.
func (t *Toolset) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for k, c := range t.byKey {
		c.fsb.Close()
		delete(t.byKey, k)
	}
	return nil
}
