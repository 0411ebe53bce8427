package eino

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/cloudwego/eino/adk"
	fsmw "github.com/cloudwego/eino/adk/middlewares/filesystem"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/fsbackend"
	"github.com/sandboxkit/sandbox/session"
)

var _ adk.ChatModelAgentMiddleware = (*middleware)(nil)

// maxErrorText bounds the text of a tool failure returned to the model:
// eino's argument errors quote the arguments, which may be as large as a
// request.
const maxErrorText = 4 << 10

// Tool descriptions that say what eino's defaults do not: what a path is
// relative to, the caps, and what happens to binary files.
const (
	descLs = `Lists the entries of a directory of the workspace (not recursive), one path per line, sorted; a directory ends in "/".

- path is relative to the workspace root; omit it (or give "/") for the root. An absolute path is taken as relative to the workspace root too, and ".." cannot climb out of the workspace.
- Paths returned are relative to the workspace root: use them as they are with the other tools and in commands.
- At most %d entries are listed; the result says how many more there are.`
	descRead = `Reads a text file of the workspace. Lines are returned numbered, cat -n style: spaces, the line number, a tab, then the line.

- file_path is relative to the workspace root (an absolute path is taken as relative to it too; ".." cannot climb out of the workspace, nor can a symbolic link lead out).
- offset is the 1-based line to start at (default 1); limit is the number of lines (default 2000).
- At most %d bytes are returned per call: a longer window ends with a line "[Output truncated ...]" that gives the offset to read on from.
- Binary files (images, archives, anything not text) are refused with an error: inspect them with execute (file, xxd, unzip -l) if it is available.
- Reading a file that does not exist returns an error naming the path.`
	descWrite = `Creates or replaces a text file of the workspace with the given content. Missing parent directories are created.

- file_path is relative to the workspace root (an absolute path is taken as relative to it too; ".." cannot climb out of the workspace).
- Prefer edit_file to change part of an existing file.`
	descEdit = `Replaces an exact string in a text file of the workspace.

- file_path is relative to the workspace root (an absolute path is taken as relative to it too).
- old_string must match the file exactly, indentation included, without the line-number prefix read_file adds. It must occur exactly once unless replace_all is true; otherwise the edit fails saying how often it was found.
- Binary files cannot be edited.`
	descGlob = `Finds files and directories of the workspace whose paths match a glob pattern, sorted by path.

- A pattern without "/" matches base names at any depth ("*.go"); one with "/" matches paths relative to path ("src/**/*.ts"); "**" matches any number of directories; braces list alternatives ("*.{js,ts}").
- path is the directory to search, relative to the workspace root; omit it for the root.
- At most %d paths are returned; the result says how many more there are.`
	descGrep = `Searches the text files of the workspace for a regular expression, line by line.

- The pattern is RE2 syntax (Go's regexp, much like ripgrep's without backreferences or lookaround); escape literal braces and dots ("interface\{\}", "config\.json"). Multiline search is not supported.
- path is a directory or file relative to the workspace root; omit it for the root. glob (such as "*.go", "**/*.{ts,tsx}") or type (such as "go", "py", "js") filter the files.
- output_mode: "files_with_matches" (default) lists the files, "content" the matching lines as path:line:text (with -A/-B/-C context lines), "count" the matches per file.
- At most %d matches are returned; the result says when there were more, and names files that were not searched (binary, over the size limit, unreadable).`
	descExecute = `Runs a shell command (sh -c) in the sandbox and returns its combined stdout and stderr, then its exit code when it is not 0.

- The working directory is the workspace root: the paths the file tools show are valid relative paths here. Each call is a new shell: cd and variables do not carry over.
- Each command is ended after %s; output past %d bytes is cut, and the result says so.
- Output arrives as the command runs. The sandbox is isolated from the host: only its own files and programs are reachable.
- Prefer the grep, glob and read_file tools to searching and reading with shell commands.`
	sysPrompt = `You work in a sandbox. Its workspace directory holds your files; the file tools take paths relative to the workspace root (absolute paths are re-rooted under it) and cannot reach outside it. Failures come back as tool results starting with "Error:", which say what went wrong and what to change.`
)

// NewMiddleware returns eino's own filesystem middleware (adk/middlewares/
// filesystem.New) over b, for adk.ChatModelAgentConfig.Handlers, with three
// changes that make it fit for a model working in a sandbox:
//
//   - A tool's failure is returned to the model as the tool's result, a
//     text starting "Error: ", instead of ending the agent's run: eino's
//     middleware returns a Backend error as the tool's Go error, and the
//     agent's run stops on a tool's Go error. This covers the failures the
//     model can act on (a missing file, a path outside the workspace, an
//     ambiguous edit, invalid arguments) and those it may retry (a sandbox
//     gone, which the next call replaces; a provider call that failed).
//     Only the end of the run's context, a closed Backend or manager and a
//     missing session key (ErrNoSessionKey) still end the run: nothing the
//     model does can help them.
//   - Each result says what eino's interface has no room for: entries or
//     matches beyond the caps, files grep passed over.
//   - The tools are described for this backend (paths relative to the
//     workspace root, the caps, binary files), and the execute tool, when
//     Options.AllowExecute is set, streams its output
//     (MiddlewareConfig.StreamingShell).
//
// cfg may be nil. Fields it sets are kept: a Backend other than b, a Shell
// or StreamingShell, tool names, descriptions, CustomTool, Disable, a
// CustomSystemPrompt. Failures of every tool the middleware registers are
// handed to the model, custom tools included; other tools of the agent are
// left alone.
func NewMiddleware(ctx context.Context, b *Backend, cfg *fsmw.MiddlewareConfig) (adk.ChatModelAgentMiddleware, error) {
	if b == nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "eino: NewMiddleware: the backend is nil")
	}
	var c fsmw.MiddlewareConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Backend == nil {
		c.Backend = b
	}
	if c.Shell == nil && c.StreamingShell == nil && b.opts.AllowExecute {
		c.StreamingShell = b
	}
	c.LsToolConfig = describe(c.LsToolConfig, c.CustomLsToolDesc, fmt.Sprintf(descLs, b.opts.MaxEntries))
	c.ReadFileToolConfig = describe(c.ReadFileToolConfig, c.CustomReadFileToolDesc, fmt.Sprintf(descRead, b.opts.MaxReadOutput))
	c.WriteFileToolConfig = describe(c.WriteFileToolConfig, c.CustomWriteFileToolDesc, descWrite)
	c.EditFileToolConfig = describe(c.EditFileToolConfig, c.CustomEditToolDesc, descEdit)
	c.GlobToolConfig = describe(c.GlobToolConfig, c.CustomGlobToolDesc, fmt.Sprintf(descGlob, b.opts.MaxEntries))
	c.GrepToolConfig = describe(c.GrepToolConfig, c.CustomGrepToolDesc, fmt.Sprintf(descGrep, b.opts.MaxGrepMatches))
	if c.CustomSystemPrompt == nil {
		p := sysPrompt
		c.CustomSystemPrompt = &p
	}
	inner, err := fsmw.New(ctx, &c)
	if err != nil {
		return nil, fmt.Errorf("eino: filesystem middleware: %w", err)
	}
	// The names of the tools the middleware adds, as it registers them.
	_, rc, err := inner.BeforeAgent(ctx, &adk.ChatModelAgentContext{})
	if err != nil {
		return nil, fmt.Errorf("eino: filesystem middleware: %w", err)
	}
	m := &middleware{ChatModelAgentMiddleware: inner, b: b, names: map[string]bool{}}
	if c.StreamingShell != nil || c.Shell != nil {
		timeout := b.opts.ExecuteTimeout
		if timeout <= 0 {
			timeout = fsbackend.DefaultExecuteTimeout
		}
		m.execDesc = fmt.Sprintf(descExecute, timeout, b.opts.MaxExecuteOutput)
	}
	for _, t := range rc.Tools {
		info, err := t.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("eino: filesystem middleware: %w", err)
		}
		m.names[info.Name] = true
	}
	return m, nil
}

// describe returns tc with desc as its description unless one was set
// there or through the deprecated Custom*Desc field.
func describe(tc *fsmw.ToolConfig, legacy *string, desc string) *fsmw.ToolConfig {
	if legacy != nil || (tc != nil && tc.Desc != nil) {
		return tc
	}
	var c fsmw.ToolConfig
	if tc != nil {
		c = *tc
	}
	c.Desc = &desc
	return &c
}

// middleware is eino's filesystem middleware with the failures of its
// tools returned to the model.
type middleware struct {
	adk.ChatModelAgentMiddleware
	b        *Backend
	names    map[string]bool
	execDesc string // the execute tool's description; "" without one
}

// BeforeAgent adds the middleware's tools and instruction, with the
// execute tool described for this backend (eino's middleware has no
// setting for its description).
func (m *middleware) BeforeAgent(ctx context.Context, rc *adk.ChatModelAgentContext) (context.Context, *adk.ChatModelAgentContext, error) {
	ctx, rc, err := m.ChatModelAgentMiddleware.BeforeAgent(ctx, rc)
	if err != nil || rc == nil || m.execDesc == "" {
		return ctx, rc, err
	}
	tools := make([]tool.BaseTool, len(rc.Tools))
	for i, t := range rc.Tools {
		tools[i] = t
		info, err := t.Info(ctx)
		if err != nil || info.Name != fsmw.ToolNameExecute {
			continue
		}
		d := *info
		d.Desc = m.execDesc
		switch t := t.(type) {
		case tool.StreamableTool:
			tools[i] = &describedStreamTool{StreamableTool: t, info: &d}
		case tool.InvokableTool:
			tools[i] = &describedTool{InvokableTool: t, info: &d}
		}
	}
	n := *rc
	n.Tools = tools
	return ctx, &n, nil
}

type describedTool struct {
	tool.InvokableTool
	info *schema.ToolInfo
}

func (t *describedTool) Info(context.Context) (*schema.ToolInfo, error) { return t.info, nil }

type describedStreamTool struct {
	tool.StreamableTool
	info *schema.ToolInfo
}

func (t *describedStreamTool) Info(context.Context) (*schema.ToolInfo, error) { return t.info, nil }

// WrapInvokableToolCall returns the failures of the middleware's tools to
// the model as their result, and appends the notes the backend left.
func (m *middleware) WrapInvokableToolCall(ctx context.Context, endpoint adk.InvokableToolCallEndpoint, tc *adk.ToolContext) (adk.InvokableToolCallEndpoint, error) {
	endpoint, err := m.ChatModelAgentMiddleware.WrapInvokableToolCall(ctx, endpoint, tc)
	if err != nil || tc == nil || !m.names[tc.Name] {
		return endpoint, err
	}
	name := tc.Name
	return func(ctx context.Context, args string, opts ...tool.Option) (string, error) {
		ctx, n := withNotes(ctx)
		out, err := endpoint(ctx, args, opts...)
		if err != nil {
			if fatal(ctx, err) {
				return "", err
			}
			return m.errorText(name, err), nil
		}
		if extra := n.text(); extra != "" {
			out += "\n" + extra
		}
		return m.b.redact(out), nil
	}, nil
}

// WrapStreamableToolCall does for the streaming execute tool what
// WrapInvokableToolCall does for the others: a failure, before the stream
// or in it, ends the stream with its text instead of an error.
func (m *middleware) WrapStreamableToolCall(ctx context.Context, endpoint adk.StreamableToolCallEndpoint, tc *adk.ToolContext) (adk.StreamableToolCallEndpoint, error) {
	endpoint, err := m.ChatModelAgentMiddleware.WrapStreamableToolCall(ctx, endpoint, tc)
	if err != nil || tc == nil || !m.names[tc.Name] {
		return endpoint, err
	}
	name := tc.Name
	return func(ctx context.Context, args string, opts ...tool.Option) (*schema.StreamReader[string], error) {
		ctx, n := withNotes(ctx)
		in, err := endpoint(ctx, args, opts...)
		if err != nil {
			if fatal(ctx, err) {
				return nil, err
			}
			return schema.StreamReaderFromArray([]string{m.errorText(name, err)}), nil
		}
		sr, sw := schema.Pipe[string](16)
		go func() {
			defer sw.Close()
			defer in.Close()
			sentAny := false
			for {
				chunk, err := in.Recv()
				if errors.Is(err, io.EOF) {
					if extra := n.text(); extra != "" {
						sw.Send(m.b.redact("\n"+extra), nil)
					}
					return
				}
				if err != nil {
					if fatal(ctx, err) {
						sw.Send("", err)
						return
					}
					text := m.errorText(name, err)
					if sentAny {
						text = "\n" + text
					}
					sw.Send(text, nil)
					return
				}
				sentAny = sentAny || chunk != ""
				if sw.Send(m.b.redact(chunk), nil) {
					return // the reader was closed
				}
			}
		}()
		return sr, nil
	}, nil
}

// fatal reports whether a tool's error must end the agent's run: the run's
// context ended, the Backend or the session manager was closed, the
// context names no session, or eino asked to interrupt the run.
func fatal(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, ErrNoSessionKey) || errors.Is(err, sandbox.ErrClosed) {
		return true
	}
	if _, ok := compose.ExtractInterruptInfo(err); ok {
		return true
	}
	_, ok := compose.IsInterruptRerunError(err)
	return ok
}

// errorText renders a tool's failure for the model: a *backend.Error as
// its text ("Error: " and a message naming the path), anything else as
// "Error: " and what failed, redacted and bounded.
func (m *middleware) errorText(name string, err error) string {
	var text string
	if be, ok := errors.AsType[*backend.Error](err); ok {
		text = be.Text()
	} else {
		msg := err.Error()
		// eino's function tools wrap the error of the function as
		// "[LocalFunc] failed to invoke tool, toolName=..., err=%w":
		// the model needs the inner message.
		if inner := errors.Unwrap(err); inner != nil && strings.HasPrefix(msg, "[LocalFunc] failed to invoke") {
			msg = inner.Error()
		}
		text = fmt.Sprintf("Error: %s failed: %s", name, msg)
		if errors.Is(err, session.ErrGone) {
			text += "\n[The sandbox was lost; the next call starts a new one, whose workspace is empty.]"
		}
	}
	text = m.b.redact(text)
	if len(text) > maxErrorText {
		cut := maxErrorText
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + fmt.Sprintf(" ... [error cut: %d bytes in all]", len(text))
	}
	return text
}
