// Package conntrack follows an httptest fake's server connections so a
// fault can reset the idle keep-alive ones with a TCP RST before any
// request on them is read: the client's next write on such a connection
// fails at once, which is how a fake simulates a transport that was dead
// before the request left. It serves the in-process fakes of
// provider/e2b and provider/daytona.
package conntrack

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// Tracker follows the connections of one or more servers, each tagged.
// The zero value is ready to use.
type Tracker struct {
	mu    sync.Mutex
	conns map[net.Conn]*info
}

type info struct {
	tag   string
	state http.ConnState
	busy  int // handlers running for it
}

type connKey struct{}

// Serve hooks s (before it starts) so its connections are followed under tag.
func (t *Tracker) Serve(s *http.Server, tag string) {
	s.ConnState = func(nc net.Conn, st http.ConnState) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.conns == nil {
			t.conns = map[net.Conn]*info{}
		}
		switch st {
		case http.StateClosed, http.StateHijacked:
			delete(t.conns, nc)
		default:
			ci := t.conns[nc]
			if ci == nil {
				ci = &info{tag: tag}
				t.conns[nc] = ci
			}
			ci.state = st
		}
	}
	s.ConnContext = func(ctx context.Context, nc net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, nc)
	}
}

// Handling marks r's connection busy until the returned func is called;
// a handler defers it.
func (t *Tracker) Handling(r *http.Request) (done func()) {
	nc, _ := r.Context().Value(connKey{}).(net.Conn)
	t.mu.Lock()
	defer t.mu.Unlock()
	ci := t.conns[nc]
	if ci == nil {
		return func() {}
	}
	ci.busy++
	return func() {
		t.mu.Lock()
		ci.busy--
		t.mu.Unlock()
	}
}

// ResetIdle resets every idle connection whose tag match accepts and
// returns how many. A connection whose handler has returned but which the
// server has not yet marked idle (its response is being finished) is
// waited for, at most a second.
func (t *Tracker) ResetIdle(match func(tag string) bool) int {
	for deadline := time.Now().Add(time.Second); ; time.Sleep(2 * time.Millisecond) {
		t.mu.Lock()
		finishing := false
		for _, ci := range t.conns {
			if match(ci.tag) && ci.state == http.StateActive && ci.busy == 0 {
				finishing = true
			}
		}
		if finishing && time.Now().Before(deadline) {
			t.mu.Unlock()
			continue
		}
		n := 0
		for nc, ci := range t.conns {
			if !match(ci.tag) || ci.state != http.StateIdle {
				continue
			}
			if tc, ok := nc.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = nc.Close()
			delete(t.conns, nc)
			n++
		}
		t.mu.Unlock()
		return n
	}
}
