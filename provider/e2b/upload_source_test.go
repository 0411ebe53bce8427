package e2b_test

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
)

// failingSource yields n bytes and then fails with err.
type failingSource struct {
	n   int
	err error
}

func (f *failingSource) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, f.err
	}
	p = p[:min(len(p), f.n)]
	for i := range p {
		p[i] = 'x'
	}
	f.n -= len(p)
	return len(p), nil
}

// An upload whose source fails returns only once envd has answered it:
// envd starts an upload's handler when it gets to the request, which on
// a loaded host can be after the client has sent the first bytes and
// given up; a handler started after Upload removed its temporary file
// would make the file again, and envd keeps the file of a failed upload.
// The hook holds each upload's handler back; one released after Upload
// returned is such a late handler.
func TestUploadSourceFailureAwaitsEnvd(t *testing.T) {
	t.Parallel()
	var returned, late, held atomic.Int32
	released := make(chan struct{}, 1)
	hook := func(r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/files" {
			return
		}
		defer func() { released <- struct{}{} }()
		held.Add(1)
		deadline := time.Now().Add(300 * time.Millisecond)
		for time.Now().Before(deadline) && returned.Load() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		if returned.Load() != 0 {
			late.Add(1)
		}
	}
	e := newMemoryEnv(t, e2bfake.WithRequestHook(hook))
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	if err := sb.MkdirAll(ctx, "up"); err != nil {
		t.Fatal(err)
	}
	srcErr := errors.New("the source broke")
	// 16 KiB: the connection's buffers hold it before envd reads any.
	err := sb.Upload(ctx, "up/new.bin", &failingSource{n: 16 << 10, err: srcErr})
	returned.Store(1)
	if !errors.Is(err, srcErr) {
		t.Fatalf("Upload = %v, want the source's error", err)
	}
	select {
	case <-released:
	case <-ctx.Done():
		t.Fatal("envd never got the upload")
	}
	if held.Load() != 1 {
		t.Fatalf("envd got %d uploads, want 1", held.Load())
	}
	if late.Load() != 0 {
		t.Fatal("Upload returned before envd's handler of its request started")
	}
	list, err := sb.ReadDir(ctx, "up")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range list {
		names = append(names, fi.Name())
	}
	if len(names) != 0 {
		t.Errorf("the directory holds %s after the failed upload, want nothing", strings.Join(names, ", "))
	}
}
