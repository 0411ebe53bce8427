// Package errscrub copies an error tree with secrets removed from the text
// of every error in it, not only from the outermost one, so that a caller
// (or a logger) walking the chain with errors.Unwrap finds no secret,
// while errors.Is still matches the sentinels and errors.As the typed
// errors that the module's packages define.
//
// A subtree whose texts hold no secret is kept as it is, so sentinels and
// errors without secrets keep their identity. An error whose text (or a
// descendant's) holds a secret is rebuilt: by a Cloner registered for its
// type (the module's packages register theirs: sandbox.Error, the drivers'
// HTTP errors), by a built-in cloner for *fs.PathError, *os.LinkError,
// *os.SyscallError and *url.Error, or else as an opaque error with the
// redacted text whose Unwrap returns the redacted children and whose Is
// reports the original's identity and its Is method (errors.As does not see
// through it: the original may hold the secret in its fields).
package errscrub

import (
	"io/fs"
	"net/url"
	"os"
	"reflect"
	"sync"
)

// Cloner rebuilds err, an error of a type its package owns, with every
// text field passed through redact and kids (the redacted copies of what
// err's Unwrap returns, in order) as its causes. It returns false for a
// type it does not know.
type Cloner func(err error, kids []error, redact func(string) string) (error, bool)

var (
	mu      sync.RWMutex
	cloners []Cloner
)

// Register adds a Cloner; packages call it from init.
func Register(c Cloner) {
	mu.Lock()
	defer mu.Unlock()
	cloners = append(cloners, c)
}

// maxDepth bounds the tree walked; deeper links are replaced by their
// redacted text alone.
const maxDepth = 64

// Chain returns err with redact applied to the text of every error in its
// tree. It returns err itself when no text changes.
func Chain(err error, redact func(string) string) error {
	if err == nil {
		return nil
	}
	out, _ := copyTree(err, redact, 0)
	return out
}

// children returns what err's Unwrap returns.
func children(err error) []error {
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if k := u.Unwrap(); k != nil {
			return []error{k}
		}
	case interface{ Unwrap() []error }:
		return u.Unwrap()
	}
	return nil
}

func copyTree(err error, redact func(string) string, depth int) (error, bool) {
	msg := err.Error()
	red := redact(msg)
	if depth >= maxDepth {
		if red == msg && len(children(err)) == 0 {
			return err, false
		}
		return &opaque{msg: red, orig: err}, true
	}
	kids := children(err)
	changed := red != msg
	out := make([]error, len(kids))
	for i, k := range kids {
		if k == nil {
			continue
		}
		var ch bool
		out[i], ch = copyTree(k, redact, depth+1)
		changed = changed || ch
	}
	if !changed {
		return err, false
	}
	mu.RLock()
	cs := cloners
	mu.RUnlock()
	for _, c := range cs {
		if e, ok := c(err, out, redact); ok {
			return e, true
		}
	}
	if e, ok := std(err, out, redact); ok {
		return e, true
	}
	return &opaque{msg: red, orig: err, kids: out}, true
}

// first returns kids[0], or nil.
func first(kids []error) error {
	if len(kids) > 0 {
		return kids[0]
	}
	return nil
}

// std rebuilds the standard library's path and URL errors.
func std(err error, kids []error, redact func(string) string) (error, bool) {
	switch e := err.(type) {
	case *fs.PathError:
		return &fs.PathError{Op: e.Op, Path: redact(e.Path), Err: first(kids)}, true
	case *os.LinkError:
		return &os.LinkError{Op: e.Op, Old: redact(e.Old), New: redact(e.New), Err: first(kids)}, true
	case *os.SyscallError:
		return &os.SyscallError{Syscall: e.Syscall, Err: first(kids)}, true
	case *url.Error:
		return &url.Error{Op: e.Op, URL: redact(e.URL), Err: first(kids)}, true
	}
	return nil, false
}

// opaque stands for an error whose type has no Cloner.
type opaque struct {
	msg  string
	orig error
	kids []error
}

func (e *opaque) Error() string   { return e.msg }
func (e *opaque) Unwrap() []error { return e.kids }

// Is reports the original's identity, and what its own Is method says.
func (e *opaque) Is(target error) bool {
	if target != nil && reflect.TypeOf(target).Comparable() && reflect.TypeOf(e.orig) == reflect.TypeOf(target) && e.orig == target {
		return true
	}
	if is, ok := e.orig.(interface{ Is(error) bool }); ok {
		return is.Is(target)
	}
	return false
}

// Walk calls f for every error in err's tree (depth first, err first), as
// errors.Is visits them; tests use it to check every link.
func Walk(err error, f func(error)) {
	if err == nil {
		return
	}
	f(err)
	for _, k := range children(err) {
		Walk(k, f)
	}
}
