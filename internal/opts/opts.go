// Package opts is how every constructor in the module reports a bad
// functional option. Each package declares
//
//	type Option func(*options)
//
// over an unexported options struct that embeds an opts.Errors. An option
// given an invalid value records it with Invalid, naming itself (such as
// "WithRoot"); the constructor then reports Err, an InvalidArgument error
// (sberrors) that names every bad option, the same way everywhere:
// returned by a constructor that returns an error (sandbox.Open, local.New,
// e2b.New, daytona.New, docker.New); returned by every call for one that
// cannot fail (sandbox.NewClient, memory.New, as sql.OpenDB reports at first
// use); a panic for the in-process test servers (e2bfake.New,
// daytonafake.New), which panic as httptest.NewServer does.
package opts

import (
	"errors"
	"fmt"

	"github.com/sandboxkit/sandbox/sberrors"
)

// Errors collects the invalid values given to options. The zero value is
// empty and ready to use.
type Errors struct{ errs []error }

// Invalid records that option (its function's name, such as "WithRoot")
// got an invalid value; format and args say why. The text must not hold
// the value when it may be a secret.
func (e *Errors) Invalid(option, format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf("option %s: %s", option, fmt.Sprintf(format, args...)))
}

// Err returns nil when no option was invalid, else an InvalidArgument
// error prefixed with pkg (such as "local") that names each bad option.
func (e *Errors) Err(pkg string) error {
	if len(e.errs) == 0 {
		return nil
	}
	return sberrors.Errorf(sberrors.InvalidArgument, "%s: %w", pkg, errors.Join(e.errs...))
}
