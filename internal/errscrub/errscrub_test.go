package errscrub

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

const secret = "sk-live-0123456789"

func redact(s string) string { return strings.ReplaceAll(s, secret, "[REDACTED]") }

// links returns the text of every error in err's tree, walked with the
// errors package's own Unwrap and the Unwrap() []error method.
func links(err error) []string {
	if err == nil {
		return nil
	}
	out := []string{err.Error()}
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		for _, k := range u.Unwrap() {
			out = append(out, links(k)...)
		}
		return out
	}
	return append(out, links(errors.Unwrap(err))...)
}

type typed struct{ field string }

func (e *typed) Error() string { return "typed " + e.field }

func TestChainRedactsEveryLink(t *testing.T) {
	sentinel := errors.New("bad credentials")
	raw := fmt.Errorf("create: %w", errors.Join(
		&fs.PathError{Op: "open", Path: "/home/" + secret, Err: fmt.Errorf("server said: bad key %s: %w", secret, sentinel)},
		&typed{field: secret},
		fs.ErrNotExist,
	))
	got := Chain(raw, redact)
	texts := links(got)
	if len(texts) != len(links(raw)) {
		t.Fatalf("the copy has %d links, the original %d", len(texts), len(links(raw)))
	}
	for _, s := range texts {
		if strings.Contains(s, secret) {
			t.Fatalf("a link holds the secret: %q", s)
		}
	}
	if want := redact(raw.Error()); got.Error() != want {
		t.Errorf("text %q, want %q", got.Error(), want)
	}
	if !errors.Is(got, sentinel) || !errors.Is(got, fs.ErrNotExist) {
		t.Error("sentinels lost")
	}
	var pe *fs.PathError
	if !errors.As(got, &pe) || pe.Path != "/home/[REDACTED]" || pe.Op != "open" {
		t.Errorf("path error: %+v", pe)
	}
	var ty *typed
	if errors.As(got, &ty) {
		t.Error("an unknown type holding the secret is handed out by errors.As")
	}
	// Walk visits the same links.
	var walked []string
	Walk(got, func(err error) { walked = append(walked, err.Error()) })
	if strings.Join(walked, "|") != strings.Join(texts, "|") {
		t.Errorf("Walk visited %q, want %q", walked, texts)
	}
}

func TestChainKeepsCleanErrors(t *testing.T) {
	clean := fmt.Errorf("no secret here: %w", fs.ErrNotExist)
	if got := Chain(clean, redact); got != clean {
		t.Error("a clean error was copied")
	}
	if Chain(nil, redact) != nil {
		t.Error("nil became non-nil")
	}
	// A sentinel whose fixed text happens to contain the secret is still
	// matched by identity.
	odd := errors.New("code " + secret)
	got := Chain(fmt.Errorf("x: %w", odd), redact)
	if !errors.Is(got, odd) || strings.Contains(got.Error(), secret) {
		t.Errorf("dirty sentinel: %v", got)
	}
}

// registered is a type with a Cloner, registered once for the package's
// tests.
type registered struct{ field string }

func (e *registered) Error() string { return "registered " + e.field }

func init() {
	Register(func(err error, kids []error, redact func(string) string) (error, bool) {
		if e, ok := err.(*registered); ok {
			return &registered{field: redact(e.field)}, true
		}
		return nil, false
	})
}

func TestRegisteredCloner(t *testing.T) {
	got := Chain(fmt.Errorf("w: %w", &registered{field: secret}), redact)
	var ty *registered
	if !errors.As(got, &ty) || ty.field != "[REDACTED]" {
		t.Errorf("registered type: %+v", ty)
	}
}
