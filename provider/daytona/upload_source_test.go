package daytona_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/holdtest"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// An upload whose source fails, or whose context ends, returns only once
// the daemon has answered it, so that its clean-up of the temporary file
// comes after the daemon's last write (a handler the daemon starts late,
// on a loaded host, would otherwise make the file again).
func TestUploadFailureAwaitsTheDaemon(t *testing.T) {
	t.Parallel()
	gate := holdtest.New(func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/files/upload")
	}, 300*time.Millisecond)
	e := newEnvOn(t, memory.New(), []daytonafake.Option{daytonafake.WithRequestHook(gate.Hook)})
	ctx := ctxT(t)
	sb, err := e.c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Destroy(ctxT(t)) })
	holdtest.Uploads(ctx, t, sb, gate, "up", func(ctx context.Context, dir string) (int, error) {
		list, err := sb.ReadDir(ctx, dir)
		return len(list), err
	})
}
