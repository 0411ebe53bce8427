package sandbox_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// gateWriter blocks its first Write until release is closed, so a test
// can act while a copy is in the middle of a stream.
type gateWriter struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (w *gateWriter) Write(p []byte) (int, error) {
	w.once.Do(func() {
		close(w.started)
		<-w.release
	})
	return len(p), nil
}

// downloadSpans returns the ended download spans.
func downloadSpans(o *otelSDK) int {
	n := 0
	for _, s := range o.spans.GetSpans() {
		if s.Name == "sandbox.download" {
			n++
		}
	}
	return n
}

// Closing a Download from another goroutine while WriteTo is copying
// (the usual way to abort a stream) is safe, and the download's span ends
// once, after the copy returns, with every byte the copy delivered.
func TestDownloadCloseDuringWriteTo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOTelSDK(t)
	c := sandbox.NewClient(memory.New(), sandbox.WithTracerProvider(o.tp), sandbox.WithMeterProvider(o.mp))
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "f", make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	rc, err := sb.Download(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	w := &gateWriter{started: make(chan struct{}), release: make(chan struct{})}
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := io.Copy(w, rc)
		done <- result{n, err}
	}()
	select {
	case <-w.started:
	case <-time.After(10 * time.Second):
		t.Fatal("copy never wrote")
	}
	_ = rc.Close()
	if got := downloadSpans(o); got != 0 {
		t.Errorf("%d download spans ended while the copy was still running, want 0", got)
	}
	close(w.release)
	var res result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("copy did not return after Close")
	}
	_ = rc.Close()
	if got := downloadSpans(o); got != 1 {
		t.Fatalf("%d download spans, want exactly 1", got)
	}
	sp := o.span(t, "sandbox.download")
	v, ok := attrOf(sp.Attributes, sandbox.AttrTransferBytes)
	if !ok || v.AsInt64() != res.n {
		t.Errorf("span transfer bytes %v (set %v), want %d the copy delivered (copy err %v)", v.AsInt64(), ok, res.n, res.err)
	}
}

// Two Closes at once close the stream and end the download's span once.
func TestDownloadConcurrentClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOTelSDK(t)
	c := sandbox.NewClient(memory.New(), sandbox.WithTracerProvider(o.tp), sandbox.WithMeterProvider(o.mp))
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "f", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	const rounds = 20
	for i := 0; i < rounds; i++ {
		rc, err := sb.Download(ctx, "f")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for j := 0; j < 2; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_ = rc.Close()
			}()
		}
		close(start)
		wg.Wait()
	}
	if got := downloadSpans(o); got != rounds {
		t.Fatalf("%d download spans after %d downloads closed twice at once, want %d", got, rounds, rounds)
	}
}
