package daytona_test

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
	"github.com/sandboxkit/sandbox/provider/daytona"
)

// A server that echoes the API key in its error bodies: no error in the
// chain a caller can walk holds it, and the codes and sentinels hold.
func TestNoKeyInErrorChain(t *testing.T) {
	t.Parallel()
	const key = "dtn_chain-do-not-leak-0123456789abcdef"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"statusCode":401,"message":"bad token `+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")+`","error":"Unauthorized"}`)
	}))
	defer echo.Close()
	rt, err := daytona.New(daytona.WithAPIKey(key), daytona.WithAPIURL(echo.URL+"/api"))
	if err != nil {
		t.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	defer c.Close()
	ctx := ctxT(t)
	var errs []error
	_, err = c.Create(ctx, sandbox.CreateOptions{Timeout: time.Minute})
	errs = append(errs, err)
	_, err = c.Attach(ctx, "x")
	errs = append(errs, err)
	for _, err := range c.List(ctx, sandbox.ListOptions{}) {
		errs = append(errs, err)
		break
	}
	_, err = rt.Exec(ctx, "x", &driver.Command{Args: []string{"true"}, Timeout: time.Second, Stdout: io.Discard, Stderr: io.Discard})
	errs = append(errs, err)
	errs = append(errs, rt.Destroy(ctx, "x"), rt.Upload(ctx, "x", "/f", strings.NewReader("x")))
	for i, err := range errs {
		if err == nil {
			t.Errorf("call %d succeeded", i)
			continue
		}
		errscrub.Walk(err, func(e error) {
			if strings.Contains(e.Error(), key) {
				t.Errorf("call %d: a link of the chain (%T) holds the key: %q", i, e, e.Error())
			}
		})
		if sandbox.CodeOf(err) != sandbox.PermissionDenied || !errors.Is(err, sandbox.ErrPermission) {
			t.Errorf("call %d: %v (code %v), want PermissionDenied", i, err, sandbox.CodeOf(err))
		}
		var he *daytona.HTTPError
		if !errors.As(err, &he) || he.Status != http.StatusUnauthorized || strings.Contains(he.Message, key) {
			t.Errorf("call %d: *daytona.HTTPError %+v", i, he)
		}
	}
}
