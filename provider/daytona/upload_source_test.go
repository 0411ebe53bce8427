package daytona_test

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// brokenSource yields n bytes and then fails with err.
type brokenSource struct {
	n   int
	err error
}

func (f *brokenSource) Read(p []byte) (int, error) {
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

// An upload whose source fails returns only once the daemon has answered
// it, so that its clean-up of the temporary file comes after the
// daemon's last write (a handler the daemon starts late, on a loaded
// host, would otherwise make the file again). The hook holds each
// upload's handler back; one released after Upload returned is late.
func TestUploadSourceFailureAwaitsTheDaemon(t *testing.T) {
	t.Parallel()
	var returned, late, held atomic.Int32
	released := make(chan struct{}, 1)
	hook := func(r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/files/upload") {
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
	e := newEnvOn(t, memory.New(), []daytonafake.Option{daytonafake.WithRequestHook(hook)})
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
	err = sb.Upload(ctx, "up/new.bin", &brokenSource{n: 16 << 10, err: srcErr})
	returned.Store(1)
	if !errors.Is(err, srcErr) {
		t.Fatalf("Upload = %v, want the source's error", err)
	}
	select {
	case <-released:
	case <-ctx.Done():
		t.Fatal("the daemon never got the upload")
	}
	if held.Load() != 1 {
		t.Fatalf("the daemon got %d uploads, want 1", held.Load())
	}
	if late.Load() != 0 {
		t.Fatal("Upload returned before the daemon's handler of its request started")
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
