// Package lostcreate finds a sandbox whose create answer never reached
// the caller (the connection was cut, or the caller's context ended while
// the server acted), so that the portable layer can adopt or destroy it
// instead of leaving it orphaned.
//
// A cloud create carries a random token label; after a lost answer the
// provider lists by that token. A request the caller abandoned may still
// be in flight on the server when the first look-up runs, so while the
// caller's context is over Find looks again for a bounded time.
package lostcreate

import (
	"context"
	"sync"
	"time"
)

// Polls, Wait and Budget bound the search: at most Polls more look-ups
// Wait apart after the first, all within Budget.
const Polls = 8

// Wait and Budget are variables so that a test binary can shorten them
// (before any search starts) where what it checks is that a caller waits
// for the search, or that a search goes on, not how long it looks.
var (
	Wait   = 500 * time.Millisecond
	Budget = 15 * time.Second
)

// Find calls find (which lists by the create token and returns the id
// found, "" for none) until it returns an id, fails, or the search is
// over. It polls again only when caller has ended: a live caller's
// request has completed on the server, so one look-up answers. Find never
// uses caller for the look-ups themselves (it may be over); they share a
// context bounded by Budget.
func Find(caller context.Context, find func(context.Context) (string, error)) string {
	ctx, cancel := context.WithTimeout(context.Background(), Budget)
	defer cancel()
	id, err := find(ctx)
	for i := 0; id == "" && err == nil && caller.Err() != nil && i < Polls; i++ {
		t := time.NewTimer(Wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ""
		}
		id, err = find(ctx)
	}
	return id
}

// Sweeper goes on looking, in the background, for the sandboxes of the
// creates Find found nothing for, and destroys those it finds: a loaded
// server can act on an abandoned request after Find's polls are over
// (Find bounds how long a caller that gave up waits, not how late a server
// acts). Each search polls every Wait for Budget. The zero value is
// ready; Close ends the searches in progress and waits for them.
type Sweeper struct {
	mu     sync.Mutex
	closed bool
	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Go starts a search: find as for Find; destroy is called with the id
// found, once. It does nothing after Close.
func (s *Sweeper) Go(find func(context.Context) (string, error), destroy func(ctx context.Context, id string) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if s.ctx == nil {
		s.ctx, s.cancel = context.WithCancel(context.Background())
	}
	ctx, cancel := context.WithTimeout(s.ctx, Budget)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		t := time.NewTicker(Wait)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
			if id, err := find(ctx); err == nil && id != "" {
				_ = destroy(ctx, id)
				return
			}
		}
	}()
}

// Close ends the searches in progress and waits for them; later calls of
// Go do nothing.
func (s *Sweeper) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		if s.cancel != nil {
			s.cancel()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
}
