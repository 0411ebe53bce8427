package sandboxtest

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// Subtests for issue 16 item 6: redaction holds along the whole error
// chain, not only in the outermost text.
func init() {
	fileTests = append(fileTests, test{name: "RedactedErrorChain", fn: testRedactedErrorChain})
}

// chainTexts returns the text of every error in err's tree, walked as a
// logger or errors.Is would: errors.Unwrap and Unwrap() []error, recursively.
func chainTexts(err error) []string {
	if err == nil {
		return nil
	}
	out := []string{err.Error()}
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		for _, k := range u.Unwrap() {
			out = append(out, chainTexts(k)...)
		}
		return out
	}
	return append(out, chainTexts(errors.Unwrap(err))...)
}

// The secret values testRedactedErrorChain provokes errors with (the
// Telemetry group scans the spans of a run of it for them).
const chainHandleSecret, chainCmdSecret = "sk-sandboxtest-7f3a9c2e41d0", "tok-sandboxtest-5b8e0d7a93"

// testRedactedErrorChain provokes errors whose inputs hold a secret (the
// handle's SecretEnv value, and a command's own) and checks that no error
// in the chain holds it, while the code and the sentinels are those of the
// same call made without a secret.
func testRedactedErrorChain(ctx context.Context, t *testing.T, s *suite) {
	const handleSecret, cmdSecret = chainHandleSecret, chainCmdSecret
	opts := s.h.Create
	opts.Labels = map[string]string{"sandboxtest": s.runID}
	opts.SecretEnv = map[string]string{"SBX_TEST_SECRET": handleSecret}
	sb := must[*sandbox.Sandbox](t, "Create")(s.c.Create(ctx, opts))
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	check(t, sb.WriteFile(ctx, "file-ctl", []byte("x")))
	check(t, sb.WriteFile(ctx, "file-"+handleSecret, []byte("x")))

	calls := []struct {
		name   string
		secret string
		call   func(x string) error
	}{
		{"ReadFile missing", handleSecret, func(x string) error { _, err := sb.ReadFile(ctx, "missing-"+x+"/f"); return err }},
		{"Stat missing", handleSecret, func(x string) error { _, err := sb.Stat(ctx, "missing-"+x); return err }},
		{"ReadDir missing", handleSecret, func(x string) error { _, err := sb.ReadDir(ctx, "missing-"+x); return err }},
		{"Download missing", handleSecret, func(x string) error {
			rc, err := sb.Download(ctx, "missing-"+x)
			if err == nil {
				rc.Close()
			}
			return err
		}},
		{"WriteFile under a file", handleSecret, func(x string) error { return sb.WriteFile(ctx, "file-"+x+"/child", []byte("y")) }},
		{"Exec in a missing Dir", handleSecret, func(x string) error {
			_, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}, Dir: "nodir-" + x})
			return err
		}},
		{"Exec with its own secret", cmdSecret, func(x string) error {
			_, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}, Dir: "nodir-" + x,
				SecretEnv: map[string]string{"SBX_CMD_SECRET": cmdSecret}})
			return err
		}},
	}
	sentinels := []error{sandbox.ErrNotFound, fs.ErrNotExist, sandbox.ErrNotDirectory, sandbox.ErrIsDirectory,
		sandbox.ErrPermission, sandbox.ErrInvalidArgument, sandbox.ErrFailedPrecondition}
	for _, c := range calls {
		plain, secret := c.call("ctl"), c.call(c.secret)
		if secret == nil {
			if plain != nil {
				t.Errorf("%s: fails without a secret (%v) but not with one", c.name, plain)
			}
			continue
		}
		for i, text := range chainTexts(secret) {
			if strings.Contains(text, c.secret) {
				t.Errorf("%s: link %d of the chain holds the secret: %q", c.name, i, text)
			}
		}
		if plain == nil {
			t.Errorf("%s: fails only with a secret: %v", c.name, secret)
			continue
		}
		if sandbox.CodeOf(secret) != sandbox.CodeOf(plain) {
			t.Errorf("%s: code %v with a secret, %v without (%v)", c.name, sandbox.CodeOf(secret), sandbox.CodeOf(plain), secret)
		}
		for _, sen := range sentinels {
			if errors.Is(secret, sen) != errors.Is(plain, sen) {
				t.Errorf("%s: errors.Is(%v) is %v with a secret, %v without", c.name, sen, errors.Is(secret, sen), errors.Is(plain, sen))
			}
		}
		var se *sandbox.Error
		if !errors.As(secret, &se) || strings.Contains(se.Path, c.secret) || se.Op == "" {
			t.Errorf("%s: errors.As(*sandbox.Error) gives %+v", c.name, se)
		}
	}
}
