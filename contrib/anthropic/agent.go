package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/tools/agenttoolset"

	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/session"
)

// Bash returns the bash tool (client tool bash_20250124: command, restart).
func (t *Tools) Bash() sdk.BetaTool { return &bashTool{t: t} }

// TextEditor returns the text editor tool (client tool
// text_editor_20250728, named str_replace_based_edit_tool: view, create,
// str_replace, insert).
func (t *Tools) TextEditor() sdk.BetaTool { return &editorTool{t: t} }

// ClientTools returns bash and the text editor, for a BetaToolRunner. Put
// ToolParams in BetaMessageNewParams.Tools so that the model gets the
// Anthropic-defined versions of these tools, which it is trained on; the
// runner then sends no definition of its own for them.
func (t *Tools) ClientTools() []sdk.BetaTool { return []sdk.BetaTool{t.Bash(), t.TextEditor()} }

// ToolParams returns the definitions of the versioned client tools that
// ClientTools implements: bash_20250124 and text_editor_20250728 (with
// max_characters set to Options.MaxOutput).
func (t *Tools) ToolParams() []sdk.BetaToolUnionParam {
	return []sdk.BetaToolUnionParam{
		{OfBashTool20250124: &sdk.BetaToolBash20250124Param{}},
		{OfTextEditor20250728: &sdk.BetaToolTextEditor20250728Param{MaxCharacters: sdk.Int(int64(t.opts.MaxOutput))}},
	}
}

// AgentToolset returns the tools of agent_toolset_20260401, with its names
// and inputs, over the sandbox: bash (command, restart, timeout_ms), read
// (file_path, view_range), write (file_path, content), edit (file_path,
// old_string, new_string, replace_all), glob (pattern, path) and grep
// (pattern, path). Each tool's Close closes the tool set, as the
// environment worker closes the tools of a session when it ends.
func (t *Tools) AgentToolset() []sdk.BetaTool {
	return []sdk.BetaTool{
		&bashTool{t: t, agent: true},
		&fileTool{t: t, name: "read", run: t.agentRead,
			desc: "Read a text file in the sandbox's workspace, as text without line numbers (view_range [start_line, end_line], 1-based, inclusive; end_line -1 for the end). " +
				"Without view_range at most the first " + fmt.Sprint(DefaultViewLines) + " lines are returned, with a note saying how to read on.",
			props: map[string]any{
				"file_path":  map[string]any{"type": "string", "description": "The file, relative to the workspace (an absolute path is taken inside it)."},
				"view_range": map[string]any{"type": "array", "items": map[string]any{"type": "integer"}, "description": "[start_line, end_line], 1-based and inclusive."},
			}, required: []string{"file_path"}},
		&fileTool{t: t, name: "write", run: t.agentWrite,
			desc: "Write a text file in the sandbox's workspace, replacing it, creating parent directories.",
			props: map[string]any{
				"file_path": map[string]any{"type": "string", "description": "The file, relative to the workspace."},
				"content":   map[string]any{"type": "string", "description": "The whole content of the file."},
			}, required: []string{"file_path", "content"}},
		&fileTool{t: t, name: "edit", run: t.agentEdit,
			desc: "Replace old_string, which must occur exactly once unless replace_all is set, with new_string in a text file of the sandbox's workspace.",
			props: map[string]any{
				"file_path":   map[string]any{"type": "string", "description": "The file, relative to the workspace."},
				"old_string":  map[string]any{"type": "string", "description": "The exact text to replace."},
				"new_string":  map[string]any{"type": "string", "description": "The replacement."},
				"replace_all": map[string]any{"type": "boolean", "description": "Replace every occurrence."},
			}, required: []string{"file_path", "old_string", "new_string"}},
		&fileTool{t: t, name: "glob", run: t.agentGlob,
			desc: "List the files and directories under path (default: the workspace) matching a glob: \"*.go\" matches by name at any depth, \"src/**/*.go\" matches paths relative to the workspace. Directories end in /.",
			props: map[string]any{
				"pattern": map[string]any{"type": "string", "description": "The glob."},
				"path":    map[string]any{"type": "string", "description": "The directory to search, relative to the workspace."},
			}, required: []string{"pattern"}},
		&fileTool{t: t, name: "grep", run: t.agentGrep,
			desc: "Search the text files under path (default: the workspace) for a regular expression (RE2 syntax); one match per line as path:line:text. Binary and oversized files are passed over and named.",
			props: map[string]any{
				"pattern": map[string]any{"type": "string", "description": "The regular expression."},
				"path":    map[string]any{"type": "string", "description": "The directory or file to search, relative to the workspace."},
			}, required: []string{"pattern"}},
	}
}

// fileTool is one of the agent toolset's file tools.
type fileTool struct {
	t        *Tools
	name     string
	desc     string
	props    map[string]any
	required []string
	run      func(ctx context.Context, st *boundState, raw json.RawMessage) (string, error)
}

var _ sdk.BetaTool = (*fileTool)(nil)

func (f *fileTool) Name() string        { return f.name }
func (f *fileTool) Description() string { return f.desc }
func (f *fileTool) InputSchema() sdk.BetaToolInputSchemaParam {
	return sdk.BetaToolInputSchemaParam{Properties: f.props, Required: f.required}
}

func (f *fileTool) Execute(ctx context.Context, raw json.RawMessage) ([]sdk.BetaToolResultBlockParamContentUnion, error) {
	return f.t.run(ctx, f.name, func(ctx context.Context, st *boundState) (string, error) {
		return f.run(ctx, st, raw)
	})
}

// Close closes the tool set (see Tools.Close).
func (f *fileTool) Close() error { return f.t.Close() }

func decode(tool string, raw json.RawMessage, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return failf("%s: the input is not valid JSON for this tool: %v", tool, err)
	}
	return nil
}

func (t *Tools) agentRead(ctx context.Context, st *boundState, raw json.RawMessage) (string, error) {
	var in sdk.BetaManagedAgentsAgentToolset20260401ReadInput
	if err := decode("read", raw, &in); err != nil {
		return "", err
	}
	if in.FilePath == "" {
		return "", failf("read: file_path is required")
	}
	offset, limit, toEnd := 0, DefaultViewLines, true
	if in.ViewRange != nil {
		if len(in.ViewRange) != 2 || in.ViewRange[0] < 1 || (in.ViewRange[1] != -1 && in.ViewRange[1] < in.ViewRange[0]) {
			return "", failf("read: view_range %v must be [start_line, end_line] with 1 <= start_line <= end_line, or end_line -1", in.ViewRange)
		}
		offset = int(in.ViewRange[0] - 1)
		if in.ViewRange[1] != -1 {
			limit, toEnd = int(in.ViewRange[1]-in.ViewRange[0]+1), false
		}
	}
	p := st.rel(in.FilePath)
	r, err := st.fb.Read(ctx, &backend.ReadRequest{Path: p, Offset: offset, Limit: limit})
	if err != nil {
		return "", err
	}
	if r.Error != nil {
		if r.Error.Code == backend.CodeBinaryFile {
			return "", t.binary(ctx, st, in.FilePath, p)
		}
		return "", backendError(r.Error)
	}
	// Read numbers its lines ("%6d\t"); this tool returns the text.
	lines := strings.Split(r.Content, "\n")
	for i, l := range lines {
		if _, rest, ok := strings.Cut(l, "\t"); ok {
			lines[i] = rest
		}
	}
	text := strings.Join(lines, "\n")
	shown := offset + len(lines)
	if r.Content == "" {
		shown = offset
	}
	if r.Truncated {
		text += fmt.Sprintf("\n[Output truncated at the read size limit after line %d of %d: read on with view_range [%d, -1]]", shown, r.TotalLines, shown+1)
	} else if toEnd && shown < r.TotalLines {
		text += fmt.Sprintf("\n[Showing lines %d-%d of %d: read the rest with view_range [%d, -1]]", offset+1, shown, r.TotalLines, shown+1)
	}
	return text, nil
}

func (t *Tools) agentWrite(ctx context.Context, st *boundState, raw json.RawMessage) (string, error) {
	var in sdk.BetaManagedAgentsAgentToolset20260401WriteInput
	if err := decode("write", raw, &in); err != nil {
		return "", err
	}
	if in.FilePath == "" {
		return "", failf("write: file_path is required")
	}
	r, err := st.fb.Write(ctx, &backend.WriteRequest{Path: st.rel(in.FilePath), Content: in.Content})
	if err != nil {
		return "", err
	}
	if r.Error != nil {
		return "", backendError(r.Error)
	}
	return r.Text(), nil
}

func (t *Tools) agentEdit(ctx context.Context, st *boundState, raw json.RawMessage) (string, error) {
	var in sdk.BetaManagedAgentsAgentToolset20260401EditInput
	if err := decode("edit", raw, &in); err != nil {
		return "", err
	}
	if in.FilePath == "" {
		return "", failf("edit: file_path is required")
	}
	p := st.rel(in.FilePath)
	r, err := st.fb.Edit(ctx, &backend.EditRequest{Path: p, OldString: in.OldString, NewString: in.NewString, ReplaceAll: in.ReplaceAll})
	if err != nil {
		return "", err
	}
	if r.Error != nil {
		if r.Error.Code == backend.CodeBinaryFile {
			return "", t.binary(ctx, st, in.FilePath, p)
		}
		return "", backendError(r.Error)
	}
	return r.Text(), nil
}

func (t *Tools) agentGlob(ctx context.Context, st *boundState, raw json.RawMessage) (string, error) {
	var in sdk.BetaManagedAgentsAgentToolset20260401GlobInput
	if err := decode("glob", raw, &in); err != nil {
		return "", err
	}
	if in.Pattern == "" {
		return "", failf("glob: pattern is required")
	}
	r, err := st.fb.Glob(ctx, &backend.GlobRequest{Pattern: in.Pattern, Path: st.rel(in.Path)})
	if err != nil {
		return "", err
	}
	if r.Error != nil {
		return "", backendError(r.Error)
	}
	return r.Text(), nil
}

func (t *Tools) agentGrep(ctx context.Context, st *boundState, raw json.RawMessage) (string, error) {
	var in sdk.BetaManagedAgentsAgentToolset20260401GrepInput
	if err := decode("grep", raw, &in); err != nil {
		return "", err
	}
	if in.Pattern == "" {
		return "", failf("grep: pattern is required")
	}
	r, err := st.fb.Grep(ctx, &backend.GrepRequest{Pattern: in.Pattern, Regex: true, Path: st.rel(in.Path)})
	if err != nil {
		return "", err
	}
	if r.Error != nil {
		return "", backendError(r.Error)
	}
	return r.Text(), nil
}

// WorkerToolsFunc returns a ToolsFunc for the environment worker of
// Managed Agents (lib/environments.EnvironmentWorkerOptions.ToolsFunc):
// each session the worker claims gets the agent toolset over a sandbox of
// its own from m, acquired on its first tool call under a fresh session
// key, and destroyed when the worker closes the session's tools. The
// claude tools then run in the sandbox, not on the worker's host; the
// AgentToolContext's host Workdir (and the skills the worker downloads
// there) is not used. Invalid options make every tool call an error
// result naming them.
func WorkerToolsFunc(m *session.Manager, opts Options) func(env *agenttoolset.AgentToolContext) []sdk.BetaTool {
	return func(*agenttoolset.AgentToolContext) []sdk.BetaTool {
		if err := workerCheck(m, opts); err != nil {
			return brokenToolset(err)
		}
		return newTools(opts, nil, m, "anthropic-worker-"+newID(), true).AgentToolset()
	}
}

func workerCheck(m *session.Manager, opts Options) error {
	if m == nil {
		return failf("the environment worker's sandbox manager is nil")
	}
	if opts.BaseDir != "" {
		return failf("Options.BaseDir %q is set, but the workspace is the session's", opts.BaseDir)
	}
	if err := opts.validate(); err != nil {
		return &toolError{msg: err.Error()}
	}
	return nil
}

// brokenToolset answers every call of the agent toolset with err.
func brokenToolset(err error) []sdk.BetaTool {
	t := newTools(Options{}, nil, nil, "", false)
	var out []sdk.BetaTool
	for _, tool := range t.AgentToolset() {
		out = append(out, &brokenTool{BetaTool: tool, err: err})
	}
	return out
}

type brokenTool struct {
	sdk.BetaTool
	err error
}

func (b *brokenTool) Execute(context.Context, json.RawMessage) ([]sdk.BetaToolResultBlockParamContentUnion, error) {
	return nil, b.err
}
