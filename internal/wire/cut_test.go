package wire

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/internal/iox"
)

// When the caller's context ends, the body ends where it is (the next
// Read is io.EOF) and the request's context lasts the grace more, so the
// server can answer; then it is cancelled.
func TestCutOnCancelEndsTheBodyThenAborts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cut := &iox.CutReader{R: strings.NewReader(strings.Repeat("x", 1<<20))}
	const grace = 200 * time.Millisecond
	rctx, stop := CutOnCancel(ctx, cut, grace)
	defer stop()
	buf := make([]byte, 10)
	if n, err := cut.Read(buf); n != 10 || err != nil {
		t.Fatalf("Read before the end = %d, %v", n, err)
	}
	start := time.Now()
	cancel()
	for {
		n, err := cut.Read(buf)
		if err == io.EOF && n == 0 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the body did not end within 10 s of the context's end")
		}
		time.Sleep(time.Millisecond)
	}
	if rctx.Err() != nil && time.Since(start) < grace {
		t.Fatalf("the request's context ended %v after the caller's, before the grace %v", time.Since(start), grace)
	}
	select {
	case <-rctx.Done():
		if d := time.Since(start); d < grace {
			t.Errorf("the request's context ended %v after the caller's, want at least %v", d, grace)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the request's context still runs 30 s after the caller's ended")
	}
	if cut.Failure() != nil {
		t.Errorf("Failure = %v after a stop, want nil (the source did not fail)", cut.Failure())
	}
}

// stop before the caller's context ends leaves the body alone and ends
// the request's context; the watcher is gone when it returns.
func TestCutOnCancelStop(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cut := &iox.CutReader{R: strings.NewReader("abc")}
	rctx, stop := CutOnCancel(ctx, cut, time.Hour)
	stop()
	stop() // twice is harmless
	if rctx.Err() == nil {
		t.Error("the request's context runs after stop")
	}
	cancel()
	if b, err := io.ReadAll(cut); string(b) != "abc" || err != nil {
		t.Errorf("the body after stop = %q, %v; want all of it", b, err)
	}
}
