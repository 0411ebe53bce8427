package e2b

import (
	"context"
	"maps"

	"github.com/sandboxkit/sandbox/driver"
)

// CreateKeyed implements driver.KeyedCreator, so that Client.GetOrCreate
// makes at most one sandbox per key across processes, as far as E2B
// allows: E2B has no unique names, so CreateKeyed creates, then lists the
// sandboxes carrying the key's labels and keeps the oldest (by the
// server's start time, ties by id). A loser destroys its own sandbox and
// returns the winner (created false). Every caller applies the same rule
// to the same list, so one sandbox survives; a list that does not yet
// show a sandbox just created (E2B's list is eventually consistent) can
// leave two, each carrying the labels, until one's lease ends.
func (r *Runtime) CreateKeyed(ctx context.Context, key string, req *driver.CreateRequest) (driver.Info, bool, error) {
	mine, err := r.Create(ctx, req)
	if err != nil {
		return mine, true, err
	}
	winner, err := r.oldest(ctx, req.Labels, mine.ID)
	if err != nil || winner.ID == "" || winner.ID == mine.ID {
		// Without a verdict the sandbox stays: it carries the labels, so
		// later callers find it.
		return mine, true, nil
	}
	got, err := r.Get(ctx, winner.ID)
	if err != nil {
		return mine, true, nil // the winner went away: keep this one
	}
	if err := r.Destroy(ctx, mine.ID); err != nil {
		// The caller destroys it.
		return mine, true, err
	}
	return got, false, nil
}

// oldest lists the running and paused sandboxes carrying labels and
// returns the oldest, ties broken by id; "" when mine is not listed yet.
func (r *Runtime) oldest(ctx context.Context, labels map[string]string, mine string) (driver.Info, error) {
	req := &driver.ListRequest{Labels: maps.Clone(labels), States: []driver.State{driver.StateRunning, driver.StatePaused}, PageSize: 100}
	var best driver.Info
	seen := false
	for {
		page, next, err := r.List(ctx, req)
		if err != nil {
			return driver.Info{}, err
		}
		for _, in := range page {
			if in.ID == mine {
				seen = true
			}
			if best.ID == "" || in.CreatedAt.Before(best.CreatedAt) || (in.CreatedAt.Equal(best.CreatedAt) && in.ID < best.ID) {
				best = in
			}
		}
		if next == "" || next == req.PageToken {
			break
		}
		req.PageToken = next
	}
	if !seen {
		return driver.Info{}, nil
	}
	return best, nil
}
