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

// An upload whose source fails, or whose context ends, returns only once
// envd has answered it: envd starts an upload's handler when it gets to
// the request, which on a loaded host can be after the client has sent
// the first bytes and given up; a handler started after Upload removed
// its temporary file would make the file again, and envd keeps the file
// of a failed upload.
func TestUploadFailureAwaitsEnvd(t *testing.T) {
	t.Parallel()
	gate := holdtest.New(func(r *http.Request) bool { return r.Method == http.MethodPost && r.URL.Path == "/files" }, 300*time.Millisecond)
	e := newMemoryEnv(t, e2bfake.WithRequestHook(gate.Hook))
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	holdtest.Uploads(ctxT(t), t, sb, gate, "up", func(ctx context.Context, dir string) (int, error) {
		list, err := sb.ReadDir(ctx, dir)
		return len(list), err
	})
}
