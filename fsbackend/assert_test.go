package fsbackend

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// require is a small set of fatal assertions, named like testify's.
var require assertions

type assertions struct{}

func msg(args []any) string {
	if len(args) == 0 {
		return ""
	}
	if f, ok := args[0].(string); ok {
		return ": " + fmt.Sprintf(f, args[1:]...)
	}
	return ": " + fmt.Sprint(args...)
}

func (assertions) NoError(t testing.TB, err error, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v%s", err, msg(args))
	}
}

func (assertions) Error(t testing.TB, err error, args ...any) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected an error%s", msg(args))
	}
}

func (assertions) Equal(t testing.TB, want, got any, args ...any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("got %#v\nwant %#v%s", got, want, msg(args))
	}
}

func (assertions) Nil(t testing.TB, v any, args ...any) {
	t.Helper()
	if v != nil && !reflect.ValueOf(v).IsNil() {
		t.Fatalf("expected nil, got %#v%s", v, msg(args))
	}
}

func (assertions) True(t testing.TB, ok bool, args ...any) {
	t.Helper()
	if !ok {
		t.Fatalf("expected true%s", msg(args))
	}
}

func (assertions) Contains(t testing.TB, s, sub string, args ...any) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%q does not contain %q%s", s, sub, msg(args))
	}
}

func (assertions) NotContains(t testing.TB, s, sub string, args ...any) {
	t.Helper()
	if strings.Contains(s, sub) {
		t.Fatalf("%q contains %q%s", s, sub, msg(args))
	}
}

func (assertions) Empty(t testing.TB, v any, args ...any) {
	t.Helper()
	if rv := reflect.ValueOf(v); rv.Len() != 0 {
		t.Fatalf("expected empty, got %#v%s", v, msg(args))
	}
}

func (assertions) Len(t testing.TB, v any, n int, args ...any) {
	t.Helper()
	if rv := reflect.ValueOf(v); rv.Len() != n {
		t.Fatalf("expected length %d, got %d: %#v%s", n, rv.Len(), v, msg(args))
	}
}
