package e2b_test

import (
	"context"
	"iter"
	"path"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// overflowingBackend is a memory backend whose first watch overflows
// after its first event, as inotify's queue does under a flood.
type overflowingBackend struct {
	*memory.Runtime
	watches atomic.Int32
}

func (b *overflowingBackend) Watch(ctx context.Context, id, dir string, req *driver.WatchRequest) (iter.Seq2[driver.FileEvent, error], error) {
	seq, err := b.Runtime.Watch(ctx, id, dir, req)
	if err != nil || b.watches.Add(1) > 1 {
		return seq, err
	}
	return func(yield func(driver.FileEvent, error) bool) {
		for ev, err := range seq {
			if !yield(ev, err) || err != nil {
				return
			}
			yield(driver.FileEvent{Path: dir, Kind: driver.FileOverflow, IsDir: true}, nil)
			return
		}
	}, nil
}

// envd ends a watch whose queue overflowed with an error; the adapter
// reports the overflow and watches again, so later changes still come.
func TestWatchOverflowReopens(t *testing.T) {
	t.Parallel()
	be := &overflowingBackend{Runtime: memory.New(memory.WithRootFileAccess())}
	e := newEnvOver(t, be)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := path.Join(sb.Home(), "w")
	if err := sb.MkdirAll(ctx, dir); err != nil {
		t.Fatal(err)
	}
	seq, err := sb.Watch(ctx, dir, sandbox.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, path.Join(dir, "first"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	next, stop := iter.Pull2(seq)
	defer stop()
	read := func(want string) sandbox.FileEvent {
		t.Helper()
		ev, err, ok := next()
		if !ok || err != nil {
			t.Fatalf("the watch ended waiting for %s: %v", want, err)
		}
		return ev
	}
	for {
		ev := read("the overflow")
		if ev.Kind == sandbox.FileOverflow {
			if ev.Path != dir {
				t.Errorf("overflow names %q, want %q", ev.Path, dir)
			}
			break
		}
	}
	// The adapter watches again: a later change is reported.
	for deadline := time.Now().Add(10 * time.Second); be.watches.Load() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the adapter did not watch again after the overflow")
		}
	}
	if err := sb.WriteFile(ctx, path.Join(dir, "second"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	for {
		if ev := read("second"); ev.Kind == sandbox.FileCreated && ev.Path == path.Join(dir, "second") {
			return
		}
	}
}
