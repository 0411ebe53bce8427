package openai

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/sandboxkit/sandbox/backend"
)

// ApplyPatch applies an apply_patch call's operation in the workspace,
// through the file tools' jail, and returns the apply_patch_call_output
// that answers it: status "completed" with a line saying what changed, or
// "failed" with what went wrong and what to do (see the package
// documentation). The error is non-nil only when the model cannot act on
// it: ctx ended, or the sandbox or its transport failed.
func (t *Tools) ApplyPatch(ctx context.Context, call responses.ResponseApplyPatchToolCall) (responses.ResponseInputItemApplyPatchCallOutputParam, error) {
	out := responses.ResponseInputItemApplyPatchCallOutputParam{CallID: call.CallID}
	switch call.Caller.Type {
	case "direct":
		out.Caller.OfDirect = &responses.ResponseInputItemApplyPatchCallOutputCallerDirectParam{}
	case "program":
		out.Caller.OfProgram = &responses.ResponseInputItemApplyPatchCallOutputCallerProgramParam{CallerID: call.Caller.CallerID}
	}
	var msg string
	err := t.do(ctx, func(ctx context.Context) error {
		var err error
		msg, err = t.applyOperation(ctx, call.Operation)
		return err
	})
	var pe *patchError
	switch {
	case errors.As(err, &pe):
		out.Status = "failed"
		msg = pe.msg
	case err != nil:
		return out, fmt.Errorf("openai: apply_patch %s %q: %w", call.Operation.Type, shorten(call.Operation.Path), err)
	default:
		out.Status = "completed"
	}
	t.log.InfoContext(ctx, "openai: apply_patch", "call_id", call.CallID, "operation", call.Operation.Type, "status", out.Status)
	out.Output = param.NewOpt(t.scrub(msg))
	return out, nil
}

// applyOperation returns the message for the model, or a *patchError the
// model can act on, or another error it cannot.
func (t *Tools) applyOperation(ctx context.Context, op responses.ResponseApplyPatchToolCallOperationUnion) (string, error) {
	p := op.Path
	if strings.TrimSpace(p) == "" {
		return "", patchErrorf("%s: the operation has no path; give a path relative to the workspace root", opName(op.Type))
	}
	switch op.Type {
	case "create_file":
		return t.createFile(ctx, p, op.Diff)
	case "update_file":
		return t.updateFile(ctx, p, op.Diff)
	case "delete_file":
		return t.deleteFile(ctx, p)
	default:
		return "", patchErrorf("unknown apply_patch operation %q: use create_file, update_file or delete_file", shorten(op.Type))
	}
}

func opName(s string) string {
	if s == "" {
		return "apply_patch"
	}
	return shorten(s)
}

// refused turns a file tool's error into a failure the model reads.
func refused(verb, p string, e *backend.Error) error {
	return patchErrorf("%s %s: %s", verb, shorten(p), e.Text())
}

func (t *Tools) createFile(ctx context.Context, p, diff string) (string, error) {
	content, err := createContent(diff)
	if err != nil {
		return "", patchErrorf("create_file %s: %v; nothing was written", shorten(p), err)
	}
	entry, err := t.lookup(ctx, "create_file", p)
	if err != nil {
		return "", err
	}
	if entry != nil {
		kind := "file"
		if entry.IsDir {
			kind = "directory"
		}
		return "", patchErrorf("create_file %s: a %s of that name already exists; use update_file to change a file (or delete_file first)", shorten(p), kind)
	}
	w, err := t.fb.Write(ctx, &backend.WriteRequest{Path: p, Content: content})
	if err != nil {
		return "", err
	}
	if w.Error != nil {
		return "", refused("create_file", p, w.Error)
	}
	return fmt.Sprintf("Created %s (%d bytes)", w.Path, w.Bytes), nil
}

func (t *Tools) updateFile(ctx context.Context, p, diff string) (string, error) {
	r, err := t.fb.ReadBytes(ctx, &backend.ReadBytesRequest{Path: p})
	if err != nil {
		return "", err
	}
	if r.Error != nil {
		if r.Error.Code == backend.CodeFileNotFound {
			return "", patchErrorf("update_file %s: the file does not exist; use create_file to make it", shorten(p))
		}
		return "", refused("update_file", p, r.Error)
	}
	if r.Binary || !backend.IsText(r.Data) {
		return "", patchErrorf("update_file %s: the file is binary and cannot be patched; the file is unchanged", shorten(p))
	}
	old := string(r.Data)
	text, err := applyUpdate(old, diff)
	if err != nil {
		return "", patchErrorf("update_file %s: %v\nThe file is unchanged.", shorten(p), err)
	}
	if text == old {
		return fmt.Sprintf("Updated %s (no change)", shorten(p)), nil
	}
	w, err := t.fb.Write(ctx, &backend.WriteRequest{Path: p, Content: text})
	if err != nil {
		return "", err
	}
	if w.Error != nil {
		return "", refused("update_file", p, w.Error)
	}
	return fmt.Sprintf("Updated %s (%d bytes)", w.Path, w.Bytes), nil
}

func (t *Tools) deleteFile(ctx context.Context, p string) (string, error) {
	entry, err := t.lookup(ctx, "delete_file", p)
	if err != nil {
		return "", err
	}
	if entry == nil {
		return "", patchErrorf("delete_file %s: the file does not exist", shorten(p))
	}
	if entry.IsDir {
		return "", patchErrorf("delete_file %s: it is a directory; delete_file removes files only (use shell to remove a directory)", shorten(p))
	}
	// Removed through the jail again, not by path: the parent may have
	// been swapped for a symbolic link since lookup listed it. The
	// backend unlinks the name in the parent it pinned, a symbolic link
	// itself rather than its target.
	r, err := t.fb.Remove(ctx, &backend.RemoveRequest{Path: entry.Path})
	if err != nil {
		return "", err
	}
	if r.Error != nil {
		switch r.Error.Code {
		case backend.CodeFileNotFound:
			return "", patchErrorf("delete_file %s: the file does not exist", shorten(p))
		case backend.CodeIsDirectory:
			return "", patchErrorf("delete_file %s: it is a directory; delete_file removes files only (use shell to remove a directory)", shorten(p))
		}
		return "", refused("delete_file", p, r.Error)
	}
	return "Deleted " + r.Path, nil
}

// lookup finds p's entry by listing its parent through the file tools'
// jail, which refuses a parent outside the workspace (by "..", or by a
// symbolic link leading out). It returns nil when p does not exist.
func (t *Tools) lookup(ctx context.Context, verb, p string) (*backend.FileInfo, error) {
	rel := t.relative(p)
	if rel == "." || rel == "" {
		return nil, patchErrorf("%s %s: the path names the workspace root, not a file", verb, shorten(p))
	}
	parent := path.Dir(rel)
	ls, err := t.fb.Ls(ctx, &backend.LsRequest{Path: parent})
	if err != nil {
		return nil, err
	}
	if ls.Error != nil {
		if ls.Error.Code == backend.CodeFileNotFound {
			return nil, nil
		}
		if ls.Error.Code == backend.CodeNotDirectory {
			return nil, patchErrorf("%s %s: %s is a file, not a directory", verb, shorten(p), shorten(parent))
		}
		return nil, refused(verb, p, ls.Error)
	}
	for i := range ls.Files {
		f := &ls.Files[i]
		if path.Base(f.Path) == path.Base(rel) {
			return f, nil
		}
	}
	return nil, nil
}

// relative maps p as the file tools do for comparing names: a backslash
// is a slash, the workspace's own absolute prefix is dropped, an absolute
// path is re-rooted. The jail itself (and its refusals) stays fsbackend's.
func (t *Tools) relative(p string) string {
	q := strings.ReplaceAll(p, `\`, "/")
	if q == t.ws || strings.HasPrefix(q, t.ws+"/") {
		q = strings.TrimPrefix(q, t.ws)
	}
	return path.Clean(strings.TrimLeft(q, "/"))
}
