package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/sandboxkit/sandbox/backend"
)

// editorInput is the input of the text editor tool (text_editor_20250728).
// Insert's text is insert_text; new_str is accepted too, as earlier
// versions of the tool named it.
type editorInput struct {
	Command    string  `json:"command"`
	Path       string  `json:"path"`
	ViewRange  []int64 `json:"view_range"`
	FileText   *string `json:"file_text"`
	OldStr     *string `json:"old_str"`
	NewStr     *string `json:"new_str"`
	InsertLine *int64  `json:"insert_line"`
	InsertText *string `json:"insert_text"`
}

// Error texts of str_replace, in the words of Anthropic's text editor
// documentation, which Claude is trained to act on.
const (
	noMatchText        = "No match found for replacement. Please check your text and try again."
	multipleMatchesFmt = "Found %d matches for replacement text. Please provide more context to make a unique match."
)

// editorTool is the text editor client tool (str_replace_based_edit_tool).
type editorTool struct{ t *Tools }

var _ sdk.BetaTool = (*editorTool)(nil)

func (e *editorTool) Name() string { return TextEditorToolName }

func (e *editorTool) Description() string {
	return "View, create and edit text files in the sandbox's workspace. Paths are relative to the workspace " +
		"(an absolute path is taken inside it; nothing outside the workspace can be reached, symbolic links included). " +
		"view shows a file with line numbers (view_range [start, end], 1-based, end -1 for the end of the file) " +
		"or lists a directory two levels deep; create writes file_text to path (replacing a file); " +
		"str_replace replaces old_str, which must occur exactly once, with new_str; insert puts insert_text after line insert_line (0 for the top). " +
		"Binary files are described, not shown. Results over " + fmt.Sprint(e.t.opts.MaxOutput) + " characters are cut with a line saying so."
}

func (e *editorTool) InputSchema() sdk.BetaToolInputSchemaParam {
	str := func(d string) map[string]any { return map[string]any{"type": "string", "description": d} }
	return sdk.BetaToolInputSchemaParam{
		Properties: map[string]any{
			"command":     map[string]any{"type": "string", "enum": []string{"view", "create", "str_replace", "insert"}, "description": "The operation."},
			"path":        str("The file or directory, relative to the workspace."),
			"view_range":  map[string]any{"type": "array", "items": map[string]any{"type": "integer"}, "description": "view: [start_line, end_line], 1-based and inclusive; end_line -1 reads to the end."},
			"file_text":   str("create: the content of the file."),
			"old_str":     str("str_replace: the exact text to replace; it must occur exactly once."),
			"new_str":     str("str_replace: the replacement text."),
			"insert_line": map[string]any{"type": "integer", "description": "insert: the line after which to insert (0 for the beginning of the file)."},
			"insert_text": str("insert: the text to insert."),
		},
		Required: []string{"command", "path"},
	}
}

func (e *editorTool) Execute(ctx context.Context, raw json.RawMessage) ([]sdk.BetaToolResultBlockParamContentUnion, error) {
	var in editorInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, failf("the input is not valid JSON for this tool: %v", err)
	}
	if in.Path == "" {
		return nil, failf("path is required")
	}
	t := e.t
	switch in.Command {
	case "view":
		return t.run(ctx, TextEditorToolName, func(ctx context.Context, st *boundState) (string, error) {
			return t.view(ctx, st, in)
		})
	case "create":
		if in.FileText == nil {
			return nil, failf("Parameter `file_text` is required for command: create")
		}
		return t.run(ctx, TextEditorToolName, func(ctx context.Context, st *boundState) (string, error) {
			r, err := st.fb.Write(ctx, &backend.WriteRequest{Path: st.rel(in.Path), Content: *in.FileText})
			if err != nil {
				return "", err
			}
			if r.Error != nil {
				return "", backendError(r.Error)
			}
			return "File created successfully at: " + in.Path, nil
		})
	case "str_replace":
		if in.OldStr == nil || *in.OldStr == "" {
			return nil, failf("Parameter `old_str` is required for command: str_replace, and must not be empty")
		}
		newStr := ""
		if in.NewStr != nil {
			newStr = *in.NewStr
		}
		return t.run(ctx, TextEditorToolName, func(ctx context.Context, st *boundState) (string, error) {
			return t.strReplace(ctx, st, in.Path, *in.OldStr, newStr)
		})
	case "insert":
		text := in.InsertText
		if text == nil {
			text = in.NewStr
		}
		if in.InsertLine == nil || text == nil {
			return nil, failf("Parameters `insert_line` and `insert_text` are required for command: insert")
		}
		return t.run(ctx, TextEditorToolName, func(ctx context.Context, st *boundState) (string, error) {
			return t.insert(ctx, st, in.Path, *in.InsertLine, *text)
		})
	case "":
		return nil, failf("Parameter `command` is required: view, create, str_replace or insert")
	default:
		return nil, failf("Unrecognized command %q. The allowed commands for the %s tool are: view, create, str_replace, insert", in.Command, TextEditorToolName)
	}
}

// view shows a file's lines, numbered, or lists a directory.
func (t *Tools) view(ctx context.Context, st *boundState, in editorInput) (string, error) {
	p := st.rel(in.Path)
	offset, limit, toEnd := 0, DefaultViewLines, true
	if in.ViewRange != nil {
		if len(in.ViewRange) != 2 {
			return "", failf("Invalid `view_range`: it should be a list of two integers, [start_line, end_line]")
		}
		start, end := in.ViewRange[0], in.ViewRange[1]
		if start < 1 {
			return "", failf("Invalid `view_range` %v: its first element %d should be at least 1", in.ViewRange, start)
		}
		if end != -1 && end < start {
			return "", failf("Invalid `view_range` %v: its second element %d should be -1 or at least the first element %d", in.ViewRange, end, start)
		}
		offset = int(start - 1)
		if end != -1 {
			limit, toEnd = int(end-start+1), false
		}
	}
	r, err := st.fb.Read(ctx, &backend.ReadRequest{Path: p, Offset: offset, Limit: limit})
	if err != nil {
		return "", err
	}
	if r.Error != nil {
		switch r.Error.Code {
		case backend.CodeIsDirectory:
			if in.ViewRange != nil {
				return "", failf("The `view_range` parameter is not allowed when `path` points to a directory")
			}
			return t.listDir(ctx, st, in.Path, p)
		case backend.CodeBinaryFile:
			return "", t.binary(ctx, st, in.Path, p)
		}
		return "", backendError(r.Error)
	}
	if r.TotalLines == 0 {
		return "(the file " + in.Path + " is empty)", nil
	}
	if offset >= r.TotalLines {
		return "", failf("Invalid `view_range` %v: its first element %d is beyond the end of the file, which has %d lines", in.ViewRange, offset+1, r.TotalLines)
	}
	text := r.Content
	shown := offset + strings.Count(text, "\n") + 1
	if r.Truncated {
		text += fmt.Sprintf("\n[Output truncated at the read size limit after line %d of %d: view on with view_range [%d, -1]]", shown, r.TotalLines, shown+1)
	} else if toEnd && shown < r.TotalLines {
		text += fmt.Sprintf("\n[Showing lines %d-%d of %d: view the rest with view_range [%d, -1]]", offset+1, shown, r.TotalLines, shown+1)
	}
	return text, nil
}

// listDir lists a directory two levels deep, without hidden entries, as
// the text editor's view of a directory does.
func (t *Tools) listDir(ctx context.Context, st *boundState, shown, p string) (string, error) {
	r, err := st.fb.Glob(ctx, &backend.GlobRequest{Pattern: "*", Path: p})
	if err != nil {
		return "", err
	}
	if r.Error != nil {
		return "", backendError(r.Error)
	}
	dir := strings.Trim(path.Clean("/"+p), "/")
	var lines []string
	for _, f := range r.Files {
		rel := f.Path
		if dir != "" {
			rel = strings.TrimPrefix(rel, dir+"/")
		}
		parts := strings.Split(rel, "/")
		if len(parts) > 2 {
			continue
		}
		hidden := false
		for _, part := range parts {
			if strings.HasPrefix(part, ".") {
				hidden = true
			}
		}
		if hidden {
			continue
		}
		if f.IsDir {
			rel += "/"
		}
		lines = append(lines, rel)
	}
	sort.Strings(lines)
	head := "Here are the files and directories up to 2 levels deep in " + shown + ", excluding hidden items:\n"
	if len(lines) == 0 {
		return head + "(none)", nil
	}
	text := head + strings.Join(lines, "\n")
	if len(r.Unreadable) > 0 {
		text += "\n[could not be read: " + strings.Join(r.Unreadable, ", ") + "]"
	}
	return text, nil
}

// binary is the error result for a binary file: what it is, never its
// bytes.
func (t *Tools) binary(ctx context.Context, st *boundState, shown, p string) error {
	size := ""
	clean := strings.Trim(path.Clean("/"+p), "/")
	if r, err := st.fb.Ls(ctx, &backend.LsRequest{Path: path.Dir(clean)}); err == nil && r.Error == nil {
		for _, f := range r.Files {
			if f.Path == clean {
				size = fmt.Sprintf(" of %d bytes", f.Size)
			}
		}
	}
	return failf("%s is a binary file%s; its content is not shown. Inspect it with bash (for example `file %s` or `xxd %s | head`), or write a text file in its place", shown, size, clean, clean)
}

// readText reads a whole text file for an edit.
func (t *Tools) readText(ctx context.Context, st *boundState, shown, p string) (string, error) {
	r, err := st.fb.ReadBytes(ctx, &backend.ReadBytesRequest{Path: p})
	if err != nil {
		return "", err
	}
	if r.Error != nil {
		return "", backendError(r.Error)
	}
	if r.Binary || !backend.IsText(r.Data) {
		return "", t.binary(ctx, st, shown, p)
	}
	return string(r.Data), nil
}

// strReplace replaces the one occurrence of old in the file.
func (t *Tools) strReplace(ctx context.Context, st *boundState, shown, old, new string) (string, error) {
	p := st.rel(shown)
	content, err := t.readText(ctx, st, shown, p)
	if err != nil {
		return "", err
	}
	switch n := strings.Count(content, old); n {
	case 0:
		return "", failf("%s", noMatchText)
	case 1:
	default:
		var lines []string
		for i, rest := 0, content; ; {
			j := strings.Index(rest, old)
			if j < 0 {
				break
			}
			lines = append(lines, fmt.Sprint(strings.Count(content[:i+j], "\n")+1))
			i += j + len(old)
			rest = content[i:]
		}
		return "", failf(multipleMatchesFmt+" (in %s, at lines %s)", n, shown, strings.Join(lines, ", "))
	}
	at := strings.Index(content, old)
	updated := content[:at] + new + content[at+len(old):]
	w, err := st.fb.Write(ctx, &backend.WriteRequest{Path: p, Content: updated})
	if err != nil {
		return "", err
	}
	if w.Error != nil {
		return "", backendError(w.Error)
	}
	first := strings.Count(updated[:at], "\n") + 1
	last := first + strings.Count(new, "\n")
	return "The file " + shown + " has been edited. " + snippet(updated, first, last), nil
}

// insert puts text after line n (0: at the top).
func (t *Tools) insert(ctx context.Context, st *boundState, shown string, n int64, text string) (string, error) {
	p := st.rel(shown)
	content, err := t.readText(ctx, st, shown, p)
	if err != nil {
		return "", err
	}
	total := strings.Count(content, "\n")
	if content != "" && !strings.HasSuffix(content, "\n") {
		total++
	}
	if n < 0 || n > int64(total) {
		return "", failf("Invalid `insert_line` parameter: %d. It should be within the range of lines of the file: [0, %d]", n, total)
	}
	at := 0
	for i := int64(0); i < n; i++ {
		j := strings.IndexByte(content[at:], '\n')
		if j < 0 {
			at = len(content)
			break
		}
		at += j + 1
	}
	ins := text
	if at == len(content) && content != "" && !strings.HasSuffix(content, "\n") {
		ins = "\n" + ins
	}
	if at < len(content) && !strings.HasSuffix(ins, "\n") {
		ins += "\n"
	}
	updated := content[:at] + ins + content[at:]
	w, err := st.fb.Write(ctx, &backend.WriteRequest{Path: p, Content: updated})
	if err != nil {
		return "", err
	}
	if w.Error != nil {
		return "", backendError(w.Error)
	}
	first := int(n) + 1
	last := first + strings.Count(strings.TrimSuffix(text, "\n"), "\n")
	return "The file " + shown + " has been edited. " + snippet(updated, first, last), nil
}

// snippet renders the lines around [first, last] (1-based), numbered as
// view numbers them, so that the model sees the edit in place.
func snippet(content string, first, last int) string {
	const around = 4
	from := max(first-around, 1)
	lines := strings.SplitAfter(content, "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	to := min(last+around, len(lines))
	window, _ := backend.NumberLines(strings.Join(lines[from-1:max(to, from-1)], ""), 0, to-from+1)
	// NumberLines counts from 1: renumber from `from`.
	var b strings.Builder
	for i, l := range strings.Split(window, "\n") {
		if _, rest, ok := strings.Cut(l, "\t"); ok {
			fmt.Fprintf(&b, "%6d\t%s\n", from+i, rest)
		}
	}
	return "Here's the result of running `cat -n` on a snippet of the edited file:\n" + strings.TrimSuffix(b.String(), "\n")
}
