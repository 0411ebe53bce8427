package e2b_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/holdtest"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
)

// A create whose caller gave up, acted on by a loaded server only after
// the adapter's search for it was over, is destroyed once made: the
// search goes on in the background (it was seen leaving the children of
// a cancelled Fork behind).
func TestLateCreateIsDestroyed(t *testing.T) {
	t.Parallel()
	gate := holdtest.New(func(r *http.Request) bool {
		return r.Method == http.MethodPost && (r.URL.Path == "/v2/sandboxes" || r.URL.Path == "/sandboxes")
	}, 6*time.Second)
	e := newMemoryEnv(t, e2bfake.WithRequestHook(gate.Hook))
	holdtest.LateCreate(ctxT(t), t, gate, func(ctx context.Context) (func(), error) {
		sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
		if err != nil {
			return nil, err
		}
		return func() { _ = sb.Destroy(ctxT(t)) }, nil
	}, e.backend)
}
