// Package optstest checks, in the module's tests, that a constructor
// reports a bad option the way package opts says.
package optstest

import (
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox/sberrors"
)

// Check fails t unless err is an InvalidArgument error whose text names
// option.
func Check(t testing.TB, option string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: no error", option)
	case sberrors.CodeOf(err) != sberrors.InvalidArgument:
		t.Errorf("%s: %v (code %v), want InvalidArgument", option, err, sberrors.CodeOf(err))
	case !strings.Contains(err.Error(), option):
		t.Errorf("%s: the error %q does not name the option", option, err)
	}
}

// Panicked runs f and returns the error it panicked with; nil when it did
// not panic or panicked with something other than an error.
func Panicked(f func()) (err error) {
	defer func() { err, _ = recover().(error) }()
	f()
	return nil
}
