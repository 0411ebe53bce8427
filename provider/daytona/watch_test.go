package daytona_test

import (
	"context"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/daytona"
)

// TestWatchInterval: a Runtime with the shipped settings polls every
// WatchInterval and says so (Capabilities.WatchLatency, which callers
// size their waits by), and a change made in the sandbox is reported
// within about one interval. (The conformance suite polls faster: see
// fastWatch.)
func TestWatchInterval(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	if got := e.c.Capabilities().WatchLatency; got != daytona.WatchInterval {
		t.Fatalf("WatchLatency %v, want the shipped interval %v", got, daytona.WatchInterval)
	}
	sb := e.create(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := sb.Home() + "/watched"
	if err := sb.MkdirAll(ctx, dir); err != nil {
		t.Fatal(err)
	}
	seq, err := sb.Watch(ctx, dir, sandbox.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Past the first poll, so that the change falls between two.
	time.Sleep(daytona.WatchInterval + 100*time.Millisecond)
	start := time.Now()
	if err := sb.WriteFile(ctx, dir+"/f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for ev, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Path == dir+"/f" {
			break
		}
	}
	took := time.Since(start)
	// 5x the interval (the goal is one interval plus a listing).
	if took > 5*daytona.WatchInterval {
		t.Errorf("the change was reported %v after it was made, want within about %v", took, daytona.WatchInterval)
	}
	t.Logf("reported %v after the change (interval %v)", took.Round(time.Millisecond), daytona.WatchInterval)
}
