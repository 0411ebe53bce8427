// Package inflight tracks the writes a fake daemon is doing, by path, so
// that a later request on the same path waits until an abandoned write has
// stopped. The in-process fakes of provider/e2b and provider/daytona use it
// to keep the promise the adapters make: once a failed Upload returns (its
// clean-up request answered), nothing writes to the sandbox on its behalf.
package inflight

import (
	"context"
	"sync"
)

// Writes is the set of writes in progress. The zero value is ready to use.
type Writes struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	n    int
	done chan struct{}
}

// Begin records a write to key and returns the function that ends it.
func (w *Writes) Begin(key string) (end func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]*entry{}
	}
	e := w.m[key]
	if e == nil {
		e = &entry{done: make(chan struct{})}
		w.m[key] = e
	}
	e.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if e.n--; e.n == 0 {
				close(e.done)
				delete(w.m, key)
			}
		})
	}
}

// Wait returns once no write to key is in progress, or with ctx's error
// when ctx ends first.
func (w *Writes) Wait(ctx context.Context, key string) error {
	w.mu.Lock()
	e := w.m[key]
	w.mu.Unlock()
	if e == nil {
		return nil
	}
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
