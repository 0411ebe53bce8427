package sandboxgenkit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/core"
	"github.com/firebase/genkit/go/genkit"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/fsbackend"
	"github.com/sandboxkit/sandbox/session"
)

// ToolError is the failure of a tool call, in its output's "error" field.
type ToolError struct {
	// Code is a stable snake_case word: fsbackend's codes (file_not_found,
	// permission_denied, is_directory, invalid_path, not_directory,
	// binary_file, no_match, ambiguous_match, too_large,
	// invalid_argument) or a sandbox error code (unavailable,
	// deadline_exceeded, canceled, not_found, failed_precondition, ...).
	Code string `json:"code" jsonschema_description:"what kind of failure: file_not_found, invalid_path, binary_file, no_match, ambiguous_match, invalid_argument, unavailable, ..."`
	// Message says what went wrong and what to do differently.
	Message string `json:"message" jsonschema_description:"what went wrong and what to do differently"`
}

// Error returns the code and the message.
func (e *ToolError) Error() string { return e.Code + ": " + e.Message }

// failure is the output of a call refused before its tool ran.
type failure struct {
	Error *ToolError `json:"error"`
}

// Tool inputs and outputs. The json tags name the fields the model sends
// and reads; jsonschema_description describes them to it.
type (
	// LsInput is the input of ls.
	LsInput struct {
		Path string `json:"path,omitempty" jsonschema_description:"directory relative to the workspace root; empty for the root"`
	}
	// ListOutput is the output of ls and glob.
	ListOutput struct {
		Output    string     `json:"output,omitempty" jsonschema_description:"one path a line relative to the workspace root; directories end in /"`
		Truncated bool       `json:"truncated,omitempty" jsonschema_description:"the list was cut at the output limit: narrow the path or pattern"`
		Error     *ToolError `json:"error,omitempty"`
	}
	// ReadInput is the input of read_file.
	ReadInput struct {
		Path   string `json:"path" jsonschema_description:"text file relative to the workspace root"`
		Offset int    `json:"offset,omitempty" jsonschema_description:"0-based index of the first line to return (default 0)"`
		Limit  int    `json:"limit,omitempty" jsonschema_description:"most lines to return (default 2000)"`
	}
	// ReadOutput is the output of read_file.
	ReadOutput struct {
		Content    string     `json:"content,omitempty" jsonschema_description:"the lines, each as its 1-based number right-aligned in 6 columns, a tab and the text"`
		TotalLines int        `json:"total_lines,omitempty" jsonschema_description:"lines in the file"`
		NextOffset int        `json:"next_offset,omitempty" jsonschema_description:"set when lines follow the ones returned: the offset to read on from"`
		Truncated  bool       `json:"truncated,omitempty" jsonschema_description:"content was cut at the output limit"`
		Error      *ToolError `json:"error,omitempty"`
	}
	// WriteInput is the input of write_file.
	WriteInput struct {
		Path    string `json:"path" jsonschema_description:"file relative to the workspace root; missing parent directories are created"`
		Content string `json:"content" jsonschema_description:"the whole new text of the file"`
	}
	// WriteOutput is the output of write_file.
	WriteOutput struct {
		Path  string     `json:"path,omitempty"`
		Bytes int64      `json:"bytes,omitempty" jsonschema_description:"bytes written"`
		Error *ToolError `json:"error,omitempty"`
	}
	// EditInput is the input of edit_file.
	EditInput struct {
		Path       string `json:"path" jsonschema_description:"text file relative to the workspace root"`
		OldString  string `json:"old_string" jsonschema_description:"exact text to replace (whitespace included); it must occur once unless replace_all"`
		NewString  string `json:"new_string" jsonschema_description:"the replacement text"`
		ReplaceAll bool   `json:"replace_all,omitempty" jsonschema_description:"replace every occurrence"`
	}
	// EditOutput is the output of edit_file.
	EditOutput struct {
		Path        string     `json:"path,omitempty"`
		Occurrences int        `json:"occurrences,omitempty" jsonschema_description:"occurrences replaced"`
		Error       *ToolError `json:"error,omitempty"`
	}
	// GlobInput is the input of glob.
	GlobInput struct {
		Pattern string `json:"pattern" jsonschema_description:"glob: *.go matches base names at any depth; src/**/*.go matches paths; {a;b} braces list alternatives"`
		Path    string `json:"path,omitempty" jsonschema_description:"directory to search, relative to the workspace root; empty for the root"`
	}
	// GrepInput is the input of grep.
	GrepInput struct {
		Pattern    string `json:"pattern" jsonschema_description:"text to find: a literal string, or with regex an RE2 regular expression (no backreferences or lookaround)"`
		Regex      bool   `json:"regex,omitempty" jsonschema_description:"pattern is a regular expression"`
		IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema_description:"match letters regardless of case"`
		Before     int    `json:"before,omitempty" jsonschema_description:"lines of context before each match (grep -B)"`
		After      int    `json:"after,omitempty" jsonschema_description:"lines of context after each match (grep -A)"`
		Path       string `json:"path,omitempty" jsonschema_description:"directory or file to search, relative to the workspace root; empty for the root"`
		Glob       string `json:"glob,omitempty" jsonschema_description:"only search files matching this glob (such as *.py)"`
		MaxCount   int    `json:"max_count,omitempty" jsonschema_description:"return at most this many matches"`
	}
	// GrepOutput is the output of grep.
	GrepOutput struct {
		Output    string     `json:"output,omitempty" jsonschema_description:"one line a match: path:line:text (context lines path-line-text; -- between groups)"`
		Truncated bool       `json:"truncated,omitempty" jsonschema_description:"more matches exist than were returned: narrow the search"`
		Error     *ToolError `json:"error,omitempty"`
	}
	// ExecuteInput is the input of execute.
	ExecuteInput struct {
		Command        string  `json:"command" jsonschema_description:"shell command line (sh -c) run in the workspace root"`
		TimeoutSeconds float64 `json:"timeout_seconds,omitempty" jsonschema_description:"end the command after this many seconds (default and most: the limit in the tool's description)"`
	}
	// ExecuteOutput is the output of execute.
	ExecuteOutput struct {
		Output         string     `json:"output,omitempty" jsonschema_description:"stdout then stderr"`
		ExitCode       int        `json:"exit_code" jsonschema_description:"the exit code; -1 when a signal or the timeout ended the command"`
		Signal         string     `json:"signal,omitempty" jsonschema_description:"the signal that ended the command where the sandbox can tell"`
		TimedOut       bool       `json:"timed_out,omitempty" jsonschema_description:"the timeout ended the command; output is what it wrote until then"`
		Truncated      bool       `json:"truncated,omitempty" jsonschema_description:"output was cut at the output limit: redirect to a file and read it in parts"`
		TimeoutSeconds float64    `json:"timeout_seconds,omitempty" jsonschema_description:"the timeout applied"`
		TimeoutLowered bool       `json:"timeout_lowered,omitempty" jsonschema_description:"timeout_seconds was above the limit and was lowered to it"`
		Error          *ToolError `json:"error,omitempty"`
	}
)

// spec is one tool: its name and description, and how to build it for
// Genkit, registered (define) or not (newTool).
type spec struct {
	name    string
	define  func(g *genkit.Genkit) ai.ToolRef
	newTool func() ai.Tool
}

// makeSpec builds the spec of a tool whose handler h runs with the
// conversation's backend; fail makes h's output type from a failure.
func makeSpec[In, Out any](t *Toolset, name, desc string, h func(ctx context.Context, fsb *fsbackend.FilesystemBackend, in In) (Out, error), fail func(*ToolError) Out) spec {
	name = t.opts.Prefix + name
	fn := func(tc *ai.ToolContext, in In) (Out, error) {
		return run(t, tc, h, fail, in)
	}
	return spec{
		name:    name,
		define:  func(g *genkit.Genkit) ai.ToolRef { return genkit.DefineTool(g, name, desc, fn) },
		newTool: func() ai.Tool { return ai.NewTool(name, desc, fn) },
	}
}

// run is every tool's body: find the conversation's sandbox, run h on
// it within the session (lease extended, a gone sandbox told apart),
// turn any failure into the output's error and redact the output.
func run[In, Out any](t *Toolset, ctx context.Context, h func(ctx context.Context, fsb *fsbackend.FilesystemBackend, in In) (Out, error), fail func(*ToolError) Out, in In) (Out, error) {
	var out Out
	sess, fsb, err := t.backend(ctx)
	if errors.Is(err, ErrNoConversation) {
		return out, err
	}
	if err == nil {
		err = sess.Do(ctx, func(ctx context.Context, _ *sandbox.Sandbox) error {
			var herr error
			out, herr = h(ctx, fsb, in)
			return herr
		})
	}
	if err != nil {
		out = fail(t.toolError(err))
	}
	t.redact.value(reflect.ValueOf(&out))
	return out, nil
}

// toolError turns an error into the ToolError the model reads.
func (t *Toolset) toolError(err error) *ToolError {
	if be, ok := errors.AsType[*backend.Error](err); ok {
		return &ToolError{Code: string(be.Code), Message: be.Message}
	}
	code := sandbox.CodeOf(err)
	msg := err.Error()
	switch code {
	case sandbox.Canceled, sandbox.DeadlineExceeded:
		msg = "the call's context ended before the tool finished: " + msg
	case sandbox.Unavailable, sandbox.ResourceExhausted:
		msg += " (the sandbox's provider may answer a later call)"
	case sandbox.NotFound:
		if errors.Is(err, session.ErrGone) {
			msg += " (the conversation's sandbox is gone: the next call starts a fresh one, without the files of this one)"
		}
	}
	return &ToolError{Code: snake(code.String()), Message: msg}
}

// codeOfGenkit is the ToolError code of an error Genkit returned for a
// tool call: its status in snake_case (INVALID_ARGUMENT is
// invalid_argument), or internal.
func codeOfGenkit(err error) string {
	if ge, ok := errors.AsType[*core.GenkitError](err); ok && ge.Status != "" {
		return strings.ToLower(string(ge.Status))
	}
	return "internal"
}

// snake turns "DeadlineExceeded" into "deadline_exceeded".
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// resultErr returns a result's *backend.Error as a ToolError, or nil.
func resultErr(e *backend.Error) *ToolError {
	if e == nil {
		return nil
	}
	return &ToolError{Code: string(e.Code), Message: e.Message}
}

// pathNote is what every description says about paths.
const pathNote = "Paths are relative to the workspace root (the working directory of execute); an absolute path is taken as relative to the root, and no path, .. or symbolic link leads outside it."

// specs returns the tools' specs, execute last when allowed.
func (t *Toolset) specs() []spec {
	max := t.opts.MaxOutput
	s := []spec{
		makeSpec(t, "ls", "List the entries of a directory of the sandbox's workspace, not recursive: one path a line, directories ending in /. "+pathNote,
			func(ctx context.Context, fsb *fsbackend.FilesystemBackend, in LsInput) (ListOutput, error) {
				r, err := fsb.Ls(ctx, &backend.LsRequest{Path: in.Path})
				if err != nil {
					return ListOutput{}, err
				}
				if r.Error != nil {
					return ListOutput{Error: resultErr(r.Error)}, nil
				}
				text, cut := t.capText(r.Text(), "narrow the path to see the rest")
				return ListOutput{Output: text, Truncated: cut}, nil
			},
			func(e *ToolError) ListOutput { return ListOutput{Error: e} }),
		makeSpec(t, "read_file", fmt.Sprintf("Read a text file of the sandbox's workspace: at most limit lines (default %d) from the 0-based offset, numbered. "+
			"Output over %d bytes is cut at a whole line, and next_offset says where to read on. "+
			"A binary file (written as bytes, or not UTF-8 text) is refused with error code binary_file%s. ", backend.DefaultReadLimit, max,
			map[bool]string{true: ": look at it with execute (file, od -c | head)", false: ""}[t.opts.AllowExecute])+pathNote,
			t.read,
			func(e *ToolError) ReadOutput { return ReadOutput{Error: e} }),
		makeSpec(t, "write_file", "Create or replace a text file of the sandbox's workspace with content, creating missing parent directories. "+pathNote,
			func(ctx context.Context, fsb *fsbackend.FilesystemBackend, in WriteInput) (WriteOutput, error) {
				r, err := fsb.Write(ctx, &backend.WriteRequest{Path: in.Path, Content: in.Content})
				if err != nil {
					return WriteOutput{}, err
				}
				return WriteOutput{Path: r.Path, Bytes: r.Bytes, Error: resultErr(r.Error)}, nil
			},
			func(e *ToolError) WriteOutput { return WriteOutput{Error: e} }),
		makeSpec(t, "edit_file", "Replace old_string with new_string in a text file of the sandbox's workspace. old_string must occur exactly once (error ambiguous_match otherwise: give more context, or set replace_all); "+
			"no occurrence is error no_match. Binary files are refused (binary_file). "+pathNote,
			func(ctx context.Context, fsb *fsbackend.FilesystemBackend, in EditInput) (EditOutput, error) {
				r, err := fsb.Edit(ctx, &backend.EditRequest{Path: in.Path, OldString: in.OldString, NewString: in.NewString, ReplaceAll: in.ReplaceAll})
				if err != nil {
					return EditOutput{}, err
				}
				return EditOutput{Path: r.Path, Occurrences: r.Occurrences, Error: resultErr(r.Error)}, nil
			},
			func(e *ToolError) EditOutput { return EditOutput{Error: e} }),
		makeSpec(t, "glob", "Find the files and directories of the sandbox's workspace whose paths match a glob pattern, one path a line (directories end in /). "+pathNote,
			func(ctx context.Context, fsb *fsbackend.FilesystemBackend, in GlobInput) (ListOutput, error) {
				r, err := fsb.Glob(ctx, &backend.GlobRequest{Pattern: in.Pattern, Path: in.Path})
				if err != nil {
					return ListOutput{}, err
				}
				if r.Error != nil {
					return ListOutput{Error: resultErr(r.Error)}, nil
				}
				text, cut := t.capText(r.Text(), "narrow the pattern or path to see the rest")
				return ListOutput{Output: text, Truncated: cut}, nil
			},
			func(e *ToolError) ListOutput { return ListOutput{Error: e} }),
		makeSpec(t, "grep", fmt.Sprintf("Search the text files of the sandbox's workspace for a literal string, or an RE2 regular expression with regex, with optional context lines: "+
			"one line a match, path:line:text. Binary files are not searched. Output over %d bytes is cut. ", max)+pathNote,
			func(ctx context.Context, fsb *fsbackend.FilesystemBackend, in GrepInput) (GrepOutput, error) {
				r, err := fsb.Grep(ctx, &backend.GrepRequest{Pattern: in.Pattern, Regex: in.Regex, IgnoreCase: in.IgnoreCase,
					Before: in.Before, After: in.After, Path: in.Path, Glob: in.Glob, MaxCount: in.MaxCount})
				if err != nil {
					return GrepOutput{}, err
				}
				if r.Error != nil {
					return GrepOutput{Error: resultErr(r.Error)}, nil
				}
				text, cut := t.capText(r.Text(), "narrow the search (path, glob, max_count) to see the rest")
				return GrepOutput{Output: text, Truncated: r.Truncated || cut}, nil
			},
			func(e *ToolError) GrepOutput { return GrepOutput{Error: e} }),
	}
	if t.opts.AllowExecute {
		s = append(s, makeSpec(t, "execute", fmt.Sprintf("Run a shell command (sh -c) in the sandbox, in the workspace root, and return its output (stdout then stderr) and exit code. "+
			"The command ends after timeout_seconds, by default and at most %s seconds; output over %d bytes is cut (truncated). Secret values in the output read [REDACTED].",
			formatSeconds(t.opts.ExecuteTimeout), max),
			t.execute,
			func(e *ToolError) ExecuteOutput { return ExecuteOutput{ExitCode: -1, Error: e} }))
	}
	return s
}

// read runs read_file: the backend's numbered window, cut at a whole
// line when over MaxOutput, with the offset to read on from.
func (t *Toolset) read(ctx context.Context, fsb *fsbackend.FilesystemBackend, in ReadInput) (ReadOutput, error) {
	r, err := fsb.Read(ctx, &backend.ReadRequest{Path: in.Path, Offset: in.Offset, Limit: in.Limit})
	if err != nil {
		return ReadOutput{}, err
	}
	if r.Error != nil {
		return ReadOutput{Error: resultErr(r.Error)}, nil
	}
	content := t.redact.text(r.Content)
	lines := 0
	if content != "" {
		lines = strings.Count(content, "\n") + 1
	}
	out := ReadOutput{TotalLines: r.TotalLines, Truncated: r.Truncated}
	if max := t.opts.MaxOutput; len(content) > max {
		out.Truncated = true
		if i := strings.LastIndexByte(content[:max+1], '\n'); i > 0 {
			content = content[:i] // whole lines only
			lines = strings.Count(content, "\n") + 1
		} else {
			content = t.redact.cut(content, max) // one line longer than the cap
			lines = 1
		}
	}
	if in.Offset+lines < r.TotalLines {
		out.NextOffset = in.Offset + lines
	}
	if out.Truncated {
		content += fmt.Sprintf("\n[Output truncated at %d bytes: read on with offset %d]", t.opts.MaxOutput, in.Offset+lines)
	}
	out.Content = content
	return out, nil
}

// execute runs execute with the timeout asked for, within the limit.
func (t *Toolset) execute(ctx context.Context, fsb *fsbackend.FilesystemBackend, in ExecuteInput) (ExecuteOutput, error) {
	ceiling := t.opts.ExecuteTimeout
	sec := in.TimeoutSeconds
	if !(sec >= 0) || math.IsInf(sec, 0) {
		return ExecuteOutput{ExitCode: -1, Error: &ToolError{Code: string(backend.CodeInvalidArgument),
			Message: fmt.Sprintf("timeout_seconds %v is out of range: give 0 (the limit, %s s) or a positive number of seconds", sec, formatSeconds(ceiling))}}, nil
	}
	timeout, lowered := ceiling, false
	switch {
	case sec == 0:
	case sec > ceiling.Seconds():
		lowered = true
	default:
		timeout = max(time.Duration(sec*float64(time.Second)), time.Millisecond)
	}
	if strings.TrimSpace(in.Command) == "" {
		return ExecuteOutput{ExitCode: -1, Error: &ToolError{Code: string(backend.CodeInvalidArgument), Message: "command is empty: give a shell command line"}}, nil
	}
	r, err := fsb.Execute(ctx, &backend.ExecuteRequest{Command: in.Command, Timeout: timeout})
	if err != nil {
		return ExecuteOutput{}, err
	}
	if r.Error != nil {
		return ExecuteOutput{ExitCode: -1, Error: resultErr(r.Error)}, nil
	}
	output := t.redact.text(r.Output)
	truncated := r.Truncated
	if len(output) > t.opts.MaxOutput {
		output, truncated = t.redact.cut(output, t.opts.MaxOutput), true
	} else if truncated {
		output = t.redact.trimPartial(output)
	}
	if truncated {
		output += fmt.Sprintf("\n[Output truncated at %d bytes: redirect it to a file and read that in parts]", t.opts.MaxOutput)
	}
	return ExecuteOutput{Output: output, ExitCode: r.ExitCode, Signal: r.Signal, TimedOut: r.TimedOut, Truncated: truncated,
		TimeoutSeconds: timeout.Seconds(), TimeoutLowered: lowered}, nil
}

// capText redacts s and cuts it at MaxOutput bytes with a note saying
// how to see the rest; it reports whether it cut.
func (t *Toolset) capText(s, hint string) (string, bool) {
	s = t.redact.text(s)
	if len(s) <= t.opts.MaxOutput {
		return s, false
	}
	return t.redact.cut(s, t.opts.MaxOutput) + fmt.Sprintf("\n[Output truncated at %d bytes: %s]", t.opts.MaxOutput, hint), true
}

// formatSeconds shows d in seconds, without a fraction when whole.
func formatSeconds(d time.Duration) string {
	return fmt.Sprintf("%g", d.Seconds())
}
