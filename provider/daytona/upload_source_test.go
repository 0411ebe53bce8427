package daytona_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/holdtest"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// An upload whose source fails returns only once the daemon has answered
// it, so that its clean-up of the temporary file comes after the
// daemon's last write (a handler the daemon starts late, on a loaded
// host, would otherwise make the file again).
func TestUploadSourceFailureAwaitsTheDaemon(t *testing.T) {
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
	if err := sb.MkdirAll(ctx, "up"); err != nil {
		t.Fatal(err)
	}
	srcErr := errors.New("the source broke")
	// 16 KiB: the connection's buffers hold it before the daemon reads any.
	err = sb.Upload(ctx, "up/new.bin", &holdtest.FailingSource{N: 16 << 10, Err: srcErr})
	gate.Returned()
	if !errors.Is(err, srcErr) {
		t.Fatalf("Upload = %v, want the source's error", err)
	}
	if err := gate.Check(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if list, err := sb.ReadDir(ctx, "up"); err != nil || len(list) != 0 {
		t.Errorf("the directory holds %v (%v) after the failed upload, want nothing", list, err)
	}
}
