// Package holdtest helps adapters' tests check that a call returns only
// once the server has handled its request: a fake's request hook holds
// each matching request back for a while, and the gate records whether
// one was let go only after the call had returned (a handler the server
// started late, which a loaded host can do).
package holdtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// Gate holds the requests Match accepts for up to Hold each, or until
// Returned is called.
type Gate struct {
	match    func(*http.Request) bool
	hold     time.Duration
	returned atomic.Bool
	held     atomic.Int32
	late     atomic.Int32
	released chan struct{}
}

// New returns a Gate for the requests match accepts, holding each for up
// to hold.
func New(match func(*http.Request) bool, hold time.Duration) *Gate {
	return &Gate{match: match, hold: hold, released: make(chan struct{}, 64)}
}

// Hook is the fake's request hook.
func (g *Gate) Hook(r *http.Request) {
	if !g.match(r) {
		return
	}
	defer func() { g.released <- struct{}{} }()
	g.held.Add(1)
	deadline := time.Now().Add(g.hold)
	for time.Now().Before(deadline) && !g.returned.Load() {
		time.Sleep(5 * time.Millisecond)
	}
	if g.returned.Load() {
		g.late.Add(1)
	}
}

// Returned records that the call under test returned.
func (g *Gate) Returned() { g.returned.Store(true) }

// Check waits (bounded by ctx) until want requests were let go, and
// reports an error unless exactly want were held, none after the call
// returned.
func (g *Gate) Check(ctx context.Context, want int) error {
	for range want {
		select {
		case <-g.released:
		case <-ctx.Done():
			return fmt.Errorf("the server got %d of the %d requests", g.held.Load(), want)
		}
	}
	if n := g.held.Load(); int(n) != want {
		return fmt.Errorf("the server got %d requests, want %d", n, want)
	}
	if g.late.Load() != 0 {
		return errors.New("the call returned before the server's handler of its request started")
	}
	return nil
}

// FailingSource yields N bytes of 'x' and then fails with Err.
type FailingSource struct {
	N   int
	Err error
}

// Read implements io.Reader.
func (f *FailingSource) Read(p []byte) (int, error) {
	if f.N == 0 {
		return 0, f.Err
	}
	p = p[:min(len(p), f.N)]
	for i := range p {
		p[i] = 'x'
	}
	f.N -= len(p)
	return len(p), nil
}
