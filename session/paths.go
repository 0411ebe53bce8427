package session

import (
	"cmp"
	"errors"
	"path"
	"strconv"
	"strings"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/fsbackend"
	"github.com/sandboxkit/sandbox/internal/pathsafe"
)

// confine maps p, a path a model may have chosen, to an absolute path
// inside ws with the rules fsbackend's file tools apply, so that the two
// APIs over one workspace accept and refuse the same paths. The error is a
// *backend.Error with CodeInvalidPath; an escape also matches
// sandbox.ErrPathEscape.
func confine(ws, p string) (string, error) {
	shown := quoted(p)
	q := strings.ReplaceAll(p, `\`, "/")
	if q == "" {
		return "", backend.InvalidPath(shown, "the path is empty")
	}
	if err := pathsafe.Check(q); err != nil {
		return "", backend.InvalidPath(shown, "it holds control characters or is not UTF-8")
	}
	if ws != "/" && (q == ws || strings.HasPrefix(q, ws+"/")) {
		q = cmp.Or(strings.TrimPrefix(q, ws), ".") // the workspace itself is "."
	}
	rel, err := pathsafe.Rel(q)
	if errors.Is(err, pathsafe.ErrEscape) {
		return "", &escapeError{backend.InvalidPath(shown, "it climbs above the workspace root")}
	}
	if err != nil {
		return "", backend.InvalidPath(shown, "it is not a valid path")
	}
	if rel == fsbackend.MetadataDir || strings.HasPrefix(rel, fsbackend.MetadataDir+"/") {
		return "", backend.InvalidPath(shown, "the name is reserved for the file tools' metadata")
	}
	if rel == "." {
		return ws, nil
	}
	return path.Join(ws, rel), nil
}

// escapeError is a *backend.Error that also matches sandbox.ErrPathEscape.
type escapeError struct{ be *backend.Error }

func (e *escapeError) Unwrap() []error { return []error{e.be, sandbox.ErrPathEscape} }
func (e *escapeError) Error() string   { return e.be.Error() }

// quoted bounds p and escapes what a terminal or a log would misread.
func quoted(p string) string {
	if len(p) > 200 {
		p = p[:200] + "..."
	}
	q := strconv.Quote(p)
	return q[1 : len(q)-1]
}
