package stdinread

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// blockingReader blocks every Read until release is closed and counts
// the Reads that started.
type blockingReader struct {
	started chan struct{}
	release chan struct{}
}

func (b *blockingReader) Read(p []byte) (int, error) {
	b.started <- struct{}{}
	<-b.release
	return copy(p, "late"), nil
}

func TestReadsThrough(t *testing.T) {
	r := New(strings.NewReader("hello"))
	defer r.Stop()
	b, err := io.ReadAll(r)
	if err != nil || string(b) != "hello" {
		t.Fatalf("ReadAll = %q, %v", b, err)
	}
}

func TestStopAbandonsABlockedRead(t *testing.T) {
	src := &blockingReader{started: make(chan struct{}, 4), release: make(chan struct{})}
	r := New(src)
	res := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 8))
		res <- err
	}()
	<-src.started
	r.Stop()
	select {
	case err := <-res:
		if !errors.Is(err, ErrStopped) {
			t.Fatalf("blocked Read after Stop = %v, want ErrStopped", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not release a Read blocked in the caller's reader")
	}
	if _, err := r.Read(make([]byte, 8)); !errors.Is(err, ErrStopped) {
		t.Fatalf("Read after Stop = %v, want ErrStopped", err)
	}
	close(src.release) // the abandoned Read returns; its goroutine ends
	select {
	case <-src.started:
		t.Fatal("a new Read of the caller's reader started after Stop")
	case <-time.After(100 * time.Millisecond):
	}
}
