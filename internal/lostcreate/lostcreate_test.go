package lostcreate

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain shortens the polls tenfold: the tests check how a search goes
// on and ends, in units of Wait, not the production pace.
func TestMain(m *testing.M) {
	Wait, Budget = Wait/10, Budget/10
	goleak.VerifyTestMain(m)
}

// A sweep finds the sandbox made late and destroys it, once.
func TestSweeperDestroysWhatTurnsUp(t *testing.T) {
	t.Parallel()
	var s Sweeper
	defer s.Close()
	var looks, destroyed atomic.Int32
	got := make(chan string, 2)
	s.Go(func(context.Context) (string, error) {
		if looks.Add(1) < 3 {
			return "", nil // not made yet
		}
		return "sbx-1", nil
	}, func(_ context.Context, id string) error {
		destroyed.Add(1)
		got <- id
		return nil
	})
	select {
	case id := <-got:
		if id != "sbx-1" {
			t.Errorf("destroyed %q, want sbx-1", id)
		}
	case <-time.After(Budget + 5*time.Second):
		t.Fatal("the sandbox that turned up was not destroyed within the budget")
	}
	time.Sleep(3 * Wait)
	if n := destroyed.Load(); n != 1 {
		t.Errorf("destroyed %d times, want once", n)
	}
}

// Close ends a search in progress at once, and a search started after
// Close does not run.
func TestSweeperClose(t *testing.T) {
	t.Parallel()
	var s Sweeper
	var looks atomic.Int32
	find := func(context.Context) (string, error) { looks.Add(1); return "", nil }
	s.Go(find, func(context.Context, string) error { return nil })
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > Budget/2 {
		t.Errorf("Close took %v with a search in progress", d)
	}
	n := looks.Load()
	s.Go(find, func(context.Context, string) error { return nil })
	time.Sleep(2 * Wait)
	if looks.Load() != n {
		t.Error("a search started after Close ran")
	}
	s.Close() // twice is harmless
}
