package wire

import (
	"context"
	"sync"
	"time"

	"github.com/sandboxkit/sandbox/internal/iox"
)

// UploadGrace bounds how long an upload whose caller gave up waits for the
// server's answer to its body, ended early, before the request is aborted.
const UploadGrace = 5 * time.Second

// CutOnCancel returns the context to send an upload request with, made
// under ctx, whose body reads through cut. When ctx ends, the body is
// ended where it is (cut.Stop), so that the server writes what came and
// answers, and the returned context is cancelled only grace later, should
// no answer come (a source whose Read blocks, a server that stalls). The
// uploader's clean-up then comes after the server's last write: a request
// aborted at once leaves a server that had not yet got to it free to write
// after the clean-up. stop must be called once the response was read; it
// cancels the returned context.
func CutOnCancel(ctx context.Context, cut *iox.CutReader, grace time.Duration) (rctx context.Context, stop func()) {
	rctx, abort := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		cut.Stop()
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			abort()
		case <-done:
		}
	}()
	var once sync.Once
	return rctx, func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			abort()
		})
	}
}
