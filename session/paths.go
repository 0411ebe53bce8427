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
// APIs over one workspace accept and refuse the same paths. The error
// wraps a *backend.Error with CodeInvalidPath (the message a model would
// get from the file tools); an escape also matches sandbox.ErrPathEscape.
// Its own text says why without repeating p, which the *sandbox.Error
// around it shows.
func confine(ws, p string) (string, error) {
	shown := quoted(p)
	refuse := func(why string) error { return &pathError{why: why, be: backend.InvalidPath(shown, why)} }
	q := strings.ReplaceAll(p, `\`, "/")
	if q == "" {
		return "", refuse("the path is empty")
	}
	if err := pathsafe.Check(q); err != nil {
		return "", refuse("it holds control characters or is not UTF-8")
	}
	if ws != "/" && (q == ws || strings.HasPrefix(q, ws+"/")) {
		q = cmp.Or(strings.TrimPrefix(q, ws), ".") // the workspace itself is "."
	}
	rel, err := pathsafe.Rel(q)
	if errors.Is(err, pathsafe.ErrEscape) {
		why := "it climbs above the workspace root"
		return "", &pathError{why: why, be: backend.InvalidPath(shown, why), escape: true}
	}
	if err != nil {
		return "", refuse("it is not a valid path")
	}
	if rel == fsbackend.MetadataDir || strings.HasPrefix(rel, fsbackend.MetadataDir+"/") {
		return "", refuse("the name is reserved for the file tools' metadata")
	}
	if rel == "." {
		return ws, nil
	}
	return path.Join(ws, rel), nil
}

// pathError is a refused path: "invalid path: why". It unwraps to the
// *backend.Error the file tools would return (when there is one) and, for
// an escape, to sandbox.ErrPathEscape too.
type pathError struct {
	why    string
	be     *backend.Error
	escape bool
}

func (e *pathError) Error() string { return "invalid path: " + e.why }

func (e *pathError) Unwrap() []error {
	var errs []error
	if e.be != nil {
		errs = append(errs, e.be)
	}
	if e.escape {
		errs = append(errs, sandbox.ErrPathEscape)
	}
	return errs
}

// quoted bounds p and escapes what a terminal or a log would misread.
func quoted(p string) string {
	if len(p) > 200 {
		p = p[:200] + "..."
	}
	q := strconv.Quote(p)
	return q[1 : len(q)-1]
}
