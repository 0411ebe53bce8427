package sberrors

import (
	"errors"
	"fmt"
	"testing"
)

// TestErrorSaysEachFactOnce: the composition drops only facts stated
// twice, and keeps every fact said once.
func TestErrorSaysEachFactOnce(t *testing.T) {
	inner := &Error{Op: "exec", Provider: "p", SandboxID: "sb1", Code: NotFound, Err: errors.New("p: sandbox sb1: not found")}
	for _, tc := range []struct {
		name string
		err  *Error
		want string
	}{
		{"driver prefixes cut", inner, "sandbox: exec (p) sandbox sb1: not found"},
		{"nested leaves out the wrapper's facts", &Error{Op: "run", Provider: "p", SandboxID: "sb1", Path: "key", Code: NotFound, Err: inner},
			`sandbox: run (p) sandbox sb1 "key": exec: not found`},
		{"nested with the same op", &Error{Op: "exec", Provider: "p", SandboxID: "sb1", Code: NotFound, Err: inner},
			"sandbox: exec (p) sandbox sb1: not found"},
		{"id in the cause", &Error{Op: "get", Provider: "p", SandboxID: "sb1", Code: NotFound, Err: errors.New(`HTTP 404: Sandbox "sb1" not found`)},
			`sandbox: get (p): HTTP 404: Sandbox "sb1" not found`},
		{"id as part of a longer id is kept", &Error{Op: "get", Provider: "p", SandboxID: "sb1", Code: NotFound, Err: errors.New("sb12 not found")},
			"sandbox: get (p) sandbox sb1: sb12 not found"},
		{"path in the cause", &Error{Op: "stat", Provider: "p", SandboxID: "s", Path: "/a/b", Code: NotFound, Err: errors.New("stat /a/b: not found")},
			"sandbox: stat (p) sandbox s: stat /a/b: not found"},
		{"a longer path in the cause keeps the path", &Error{Op: "stat", Provider: "p", Path: "/a/b", Code: NotFound, Err: errors.New("stat /a/b/c: not found")},
			`sandbox: stat (p) "/a/b": stat /a/b/c: not found`},
		{"redundant code text", &Error{Op: "x", Code: InvalidArgument, Err: fmt.Errorf("invalid name %q: %w", "n", ErrInvalidArgument)},
			`sandbox: x: invalid name "n"`},
		{"code text that is the only statement", &Error{Op: "x", Code: InvalidArgument, Err: fmt.Errorf("name %q: %w", "n", ErrInvalidArgument)},
			`sandbox: x: name "n": invalid argument`},
		{"code text alone", &Error{Op: "x", Code: NotFound, Err: ErrNotFound}, "sandbox: x: not found"},
		{"repeated phrase", &Error{Op: "x", Code: InvalidArgument, Err: errors.New(`invalid path: "a: a": invalid path: empty`)},
			`sandbox: x: invalid path: "a: a": empty`},
		{"repeated names are kept", &Error{Op: "x", Code: Unknown, Err: errors.New("cp: a: a: no such file")},
			"sandbox: x: cp: a: a: no such file"},
		{"no cause", &Error{Op: "x", Provider: "p", Code: Internal}, "sandbox: x (p): Internal"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}
