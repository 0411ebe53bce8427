package sandbox

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

func TestStdinGatePassesEverything(t *testing.T) {
	t.Parallel()
	want := bytes.Repeat([]byte("0123456789abcdef\x00\xff"), 10_000)
	g := newStdinGate(iotest.HalfReader(bytes.NewReader(want)))
	got, err := io.ReadAll(iotest.OneByteReader(io.LimitReader(g, 7)))
	if err != nil || !bytes.Equal(got, want[:7]) {
		t.Fatalf("first 7 bytes: %q, %v", got, err)
	}
	rest, err := io.ReadAll(g)
	if err != nil || !bytes.Equal(append(got, rest...), want) {
		t.Fatalf("read %d bytes (err %v), want %d exact", len(got)+len(rest), err, len(want))
	}
	if g.consumed() != int64(len(want)) {
		t.Errorf("consumed %d, want %d", g.consumed(), len(want))
	}
	g.close()
	if _, err := g.Read(make([]byte, 1)); !errors.Is(err, errStdinClosed) {
		t.Errorf("Read after close: %v", err)
	}
}

// blockingReader counts Reads and blocks each until fed or closed.
type blockingReader struct {
	reads atomic.Int64
	feed  chan []byte
}

func (r *blockingReader) Read(p []byte) (int, error) {
	r.reads.Add(1)
	b, ok := <-r.feed
	if !ok {
		return 0, io.EOF
	}
	return copy(p, b), nil
}

func TestStdinGateAbandonsABlockedRead(t *testing.T) {
	t.Parallel()
	r := &blockingReader{feed: make(chan []byte)}
	g := newStdinGate(r)
	errc := make(chan error, 1)
	go func() {
		_, err := g.Read(make([]byte, 8))
		errc <- err
	}()
	for r.reads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	g.close()
	select {
	case err := <-errc:
		if !errors.Is(err, errStdinClosed) {
			t.Fatalf("blocked Read after close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("close did not release a Read blocked in the caller's reader")
	}
	r.feed <- []byte("late") // the abandoned Read takes it; it is discarded
	if _, err := g.Read(make([]byte, 8)); !errors.Is(err, errStdinClosed) {
		t.Fatalf("Read after close: %v", err)
	}
	close(r.feed)
	if n := r.reads.Load(); n != 1 {
		t.Errorf("the caller's reader was read %d times, want 1", n)
	}
}

func TestStdinGateOneReadAtATime(t *testing.T) {
	t.Parallel()
	r := &blockingReader{feed: make(chan []byte)}
	g := newStdinGate(r)
	var wg sync.WaitGroup
	got := make(chan string, 2)
	for range 2 {
		wg.Go(func() {
			b := make([]byte, 8)
			n, err := g.Read(b)
			if err != nil {
				t.Errorf("Read: %v", err)
			}
			got <- string(b[:n])
		})
	}
	for r.reads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	r.feed <- []byte("abcd")
	for r.reads.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	r.feed <- []byte("efgh")
	wg.Wait()
	a, b := <-got, <-got
	if a+b != "abcdefgh" && b+a != "abcdefgh" {
		t.Errorf("concurrent Reads got %q and %q", a, b)
	}
	g.close()
	close(r.feed)
}
