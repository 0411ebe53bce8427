package e2b_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/holdtest"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
)

// An upload whose source fails returns only once envd has answered it:
// envd starts an upload's handler when it gets to the request, which on
// a loaded host can be after the client has sent the first bytes and
// given up; a handler started after Upload removed its temporary file
// would make the file again, and envd keeps the file of a failed upload.
func TestUploadSourceFailureAwaitsEnvd(t *testing.T) {
	t.Parallel()
	gate := holdtest.New(func(r *http.Request) bool { return r.Method == http.MethodPost && r.URL.Path == "/files" }, 300*time.Millisecond)
	e := newMemoryEnv(t, e2bfake.WithRequestHook(gate.Hook))
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	if err := sb.MkdirAll(ctx, "up"); err != nil {
		t.Fatal(err)
	}
	srcErr := errors.New("the source broke")
	// 16 KiB: the connection's buffers hold it before envd reads any.
	err := sb.Upload(ctx, "up/new.bin", &holdtest.FailingSource{N: 16 << 10, Err: srcErr})
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
