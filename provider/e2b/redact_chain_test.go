package e2b_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/errscrub"
	"github.com/sandboxkit/sandbox/provider/e2b"
)

// A server that echoes the API key in its error bodies: no error in the
// chain a caller can walk holds it, and the codes and sentinels hold.
func TestNoKeyInErrorChain(t *testing.T) {
	t.Parallel()
	const key = "e2b_5ec7e7000000000000000000000000000000beef"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"code":401,"message":"bad key `+r.Header.Get("X-API-Key")+`"}`)
	}))
	defer echo.Close()
	rt, err := e2b.New(e2b.WithAPIKey(key), e2b.WithAPIURL(echo.URL), e2b.WithSandboxURL(echo.URL))
	if err != nil {
		t.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	defer c.Close()
	ctx := ctxT(t)
	var errs []error
	_, err = c.Create(ctx, sandbox.CreateOptions{Timeout: time.Minute})
	errs = append(errs, err)
	_, err = c.Attach(ctx, "sbx-1")
	errs = append(errs, err)
	for _, err := range c.List(ctx, sandbox.ListOptions{}) {
		errs = append(errs, err)
		break
	}
	errs = append(errs, rt.Destroy(ctx, "sbx-1"), rt.SetTimeout(ctx, "sbx-1", time.Minute))
	_, err = rt.Exec(ctx, "sbx-1", &driver.Command{Args: []string{"true"}, Timeout: time.Second, Stdout: io.Discard, Stderr: io.Discard})
	errs = append(errs, err)
	for i, err := range errs {
		if err == nil {
			t.Errorf("call %d succeeded", i)
			continue
		}
		leaked := false
		errscrub.Walk(err, func(e error) { leaked = leaked || strings.Contains(e.Error(), key) })
		if leaked || (errors.Unwrap(err) != nil && strings.Contains(errors.Unwrap(err).Error(), key)) {
			t.Errorf("call %d: the key is in the chain of %v", i, err)
		}
		if sandbox.CodeOf(err) != sandbox.PermissionDenied || !errors.Is(err, sandbox.ErrPermission) {
			t.Errorf("call %d: %v (code %v), want PermissionDenied", i, err, sandbox.CodeOf(err))
		}
	}
}
