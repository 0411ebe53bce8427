package inflight

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWaitEndsWithTheLastWrite(t *testing.T) {
	var w Writes
	if err := w.Wait(context.Background(), "a"); err != nil {
		t.Fatalf("Wait with nothing in flight: %v", err)
	}
	end1, end2 := w.Begin("a"), w.Begin("a")
	waited := make(chan error, 1)
	go func() { waited <- w.Wait(context.Background(), "a") }()
	end1()
	end1() // a second call is a no-op
	select {
	case err := <-waited:
		t.Fatalf("Wait returned (%v) while a write was in flight", err)
	default:
	}
	end2()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not return after the last write ended")
	}
	if err := w.Wait(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
}

func TestWaitEndsWithCtx(t *testing.T) {
	var w Writes
	end := w.Begin("a")
	defer end()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Wait(ctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on an ended ctx: %v", err)
	}
}
