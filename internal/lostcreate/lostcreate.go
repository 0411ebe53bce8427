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
	"time"
)

// Polls, Wait and Budget bound the search: at most Polls more look-ups
// Wait apart after the first, all within Budget.
const (
	Polls  = 8
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
