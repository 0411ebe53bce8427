package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/errscrub"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// noSecretInChain fails when any error of err's tree (errors.Unwrap and
// Unwrap() []error, recursively) holds secret in its text.
func noSecretInChain(t *testing.T, what string, err error, secret string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	errscrub.Walk(err, func(e error) {
		if strings.Contains(e.Error(), secret) {
			t.Errorf("%s: a link of the chain (%T) holds the secret: %q", what, e, e.Error())
		}
	})
	if u := errors.Unwrap(err); u != nil && strings.Contains(u.Error(), secret) {
		t.Errorf("%s: errors.Unwrap(err) prints the secret: %q", what, u)
	}
}

// A driver error that quotes a secret, as a server echoing a bad key does,
// is redacted along the whole chain while its code and sentinels hold.
func TestRedactionSurvivesUnwrap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const secret = "sk-live-redact-5d1f0c9a7e"
	rt := memory.New()
	c := sandbox.NewClient(rt)
	defer c.Close()
	secrets := sandbox.CreateOptions{SecretEnv: map[string]string{"API_KEY": secret}}

	rt.FailNext(memory.OpCreate, 1, sandbox.Errorf(sandbox.DeadlineExceeded, "create: no answer from %s", secret))
	_, err := c.Create(ctx, secrets)
	noSecretInChain(t, "create", err, secret)
	if sandbox.CodeOf(err) != sandbox.DeadlineExceeded {
		t.Errorf("create: code %v (%v)", sandbox.CodeOf(err), err)
	}

	sb, err := c.Create(ctx, secrets)
	if err != nil {
		t.Fatal(err)
	}
	rt.FailNext(memory.OpExec, 1, fmt.Errorf("server said: bad key %s: %w", secret, sandbox.ErrPermission))
	_, err = sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	noSecretInChain(t, "exec", err, secret)
	if !errors.Is(err, sandbox.ErrPermission) || sandbox.CodeOf(err) != sandbox.PermissionDenied {
		t.Errorf("exec: sentinel or code lost: %v", err)
	}
	var se *sandbox.Error
	if !errors.As(err, &se) || se.Op != "exec" || se.Code != sandbox.PermissionDenied {
		t.Errorf("exec: *sandbox.Error %+v", se)
	}

	// Two stale transports: the retry gives up, the sentinel still matches.
	rt.FailNext(memory.OpUpload, 2, fmt.Errorf("conn to https://%s@host: %w", secret, sandbox.ErrStaleTransport))
	err = sb.WriteFile(ctx, "f", []byte("x"))
	noSecretInChain(t, "upload", err, secret)
	if !errors.Is(err, sandbox.ErrStaleTransport) {
		t.Errorf("upload: stale sentinel lost: %v", err)
	}

	// A joined error (Unwrap() []error) with a command's own secret.
	const cmdSecret = "tok-cmd-91c2e0b7"
	rt.FailNext(memory.OpExec, 1, errors.Join(fmt.Errorf("a %s", cmdSecret), sandbox.ErrNotFound))
	_, err = sb.Exec(ctx, sandbox.Command{Args: []string{"true"}, SecretEnv: map[string]string{"T": cmdSecret}})
	noSecretInChain(t, "exec with its own secret", err, cmdSecret)
	if !errors.Is(err, sandbox.ErrNotFound) || sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("joined: %v", err)
	}
}
