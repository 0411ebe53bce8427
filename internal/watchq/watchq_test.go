package watchq

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ev(i int) driver.FileEvent {
	return driver.FileEvent{Path: fmt.Sprintf("/d/f%d", i), Kind: driver.FileCreated}
}

// A full queue holds at most max events: what does not fit replaces the
// held events with one overflow event, and later events follow it.
func TestOverflowBoundsMemory(t *testing.T) {
	q := New("/d", 4, nil)
	for i := range 10000 {
		q.Push(ev(i))
	}
	q.Push(ev(-1))
	q.Close()
	var got []driver.FileEvent
	for e, err := range q.Seq(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if len(got) > 4 {
		t.Fatalf("%d events held with a buffer of 4", len(got))
	}
	if got[0].Kind != driver.FileOverflow || got[0].Path != "/d" {
		t.Fatalf("first event %v, want an overflow of /d", got[0])
	}
	for _, e := range got[1:] {
		if e.Kind == driver.FileOverflow {
			t.Errorf("a second overflow: %v", got)
		}
	}
	if q.Overflows() < 1 {
		t.Errorf("Overflows %d", q.Overflows())
	}
}

// Events that fit come in order, and a failure comes after them.
func TestOrderThenError(t *testing.T) {
	q := New("/d", 10, nil)
	for i := range 5 {
		q.Push(ev(i))
	}
	boom := errors.New("boom")
	q.Fail(boom)
	i := 0
	var last error
	for e, err := range q.Seq(context.Background()) {
		if err != nil {
			last = err
			break
		}
		if e.Path != ev(i).Path {
			t.Errorf("event %d: %v", i, e)
		}
		i++
	}
	if i != 5 || !errors.Is(last, boom) {
		t.Errorf("%d events, error %v", i, last)
	}
}

// The sequence waits for events, ends with ctx without an error, and
// stops the producer once.
func TestEndsWithContext(t *testing.T) {
	stops := 0
	q := New("/d", 10, func() { stops++ })
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(20 * time.Millisecond)
		q.Push(ev(1))
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	n := 0
	for _, err := range q.Seq(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 || stops != 1 {
		t.Errorf("%d events, %d stops", n, stops)
	}
	q.Push(ev(2)) // after the end: dropped, not held
	if len(q.buf) != 0 {
		t.Errorf("queue holds %d events after its end", len(q.buf))
	}
}

// Breaking out of the loop stops the producer.
func TestBreakStops(t *testing.T) {
	stopped := make(chan struct{})
	q := New("/d", 10, func() { close(stopped) })
	q.Push(ev(1))
	for range q.Seq(context.Background()) {
		break
	}
	select {
	case <-stopped:
	default:
		t.Fatal("producer not stopped")
	}
}

// When the consumer breaks out, its loop returns only once a producer
// started with Go has returned (here 100 ms after it was stopped, as one
// finishing a listing would), and the stop is what ends it. A producer
// that ignores its stop holds the loop at most producerWait.
func TestBreakWaitsForProducer(t *testing.T) {
	stopped := make(chan struct{})
	q := New("/d", 8, func() { close(stopped) })
	var returned atomic.Bool
	q.Go(func() {
		q.Push(ev(1))
		<-stopped
		time.Sleep(100 * time.Millisecond)
		returned.Store(true)
	})
	for range q.Seq(context.Background()) {
		break
	}
	if !returned.Load() {
		t.Fatal("the consumer's loop returned before the producer did")
	}

	old := producerWait
	producerWait = 200 * time.Millisecond
	t.Cleanup(func() { producerWait = old })
	release := make(chan struct{})
	defer close(release)
	q = New("/d", 8, nil)
	q.Go(func() { q.Push(ev(1)); <-release })
	start := time.Now()
	for range q.Seq(context.Background()) {
		break
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a producer that ignores its stop held the loop %v (bound %v)", took, producerWait)
	}
}
