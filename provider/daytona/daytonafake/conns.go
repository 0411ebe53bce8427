package daytonafake

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// ResetIdleConnections resets (TCP RST) every idle keep-alive connection
// to the fake, before any request on it is read, and returns how many it
// reset. A client's next write on such a connection fails at once instead
// of being accepted by its kernel, so the client can tell that nothing was
// sent. This is what FaultResetBeforeAdmission does.
func (s *Server) ResetIdleConnections() int { return s.conns.resetIdle() }

// connTracker follows the server's connections, to reset the idle ones.
type connTracker struct {
	mu    sync.Mutex
	conns map[net.Conn]*connInfo
}

type connInfo struct {
	state http.ConnState
	busy  int // handlers running for it
}

type connKey struct{}

// hook is the server's ConnState hook.
func (c *connTracker) hook(nc net.Conn, st http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conns == nil {
		c.conns = map[net.Conn]*connInfo{}
	}
	switch st {
	case http.StateClosed, http.StateHijacked:
		delete(c.conns, nc)
	default:
		ci := c.conns[nc]
		if ci == nil {
			ci = &connInfo{}
			c.conns[nc] = ci
		}
		ci.state = st
	}
}

// connContext records the connection in its requests' contexts.
func connContext(ctx context.Context, nc net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, nc)
}

// handling marks r's connection busy until the returned func is called.
func (c *connTracker) handling(r *http.Request) func() {
	nc, _ := r.Context().Value(connKey{}).(net.Conn)
	c.mu.Lock()
	defer c.mu.Unlock()
	ci := c.conns[nc]
	if ci == nil {
		return func() {}
	}
	ci.busy++
	return func() {
		c.mu.Lock()
		ci.busy--
		c.mu.Unlock()
	}
}

// resetIdle resets every idle connection and returns how many. A
// connection whose handler has returned but which the server has not yet
// marked idle (its response is being finished) is waited for, at most a
// second.
func (c *connTracker) resetIdle() int {
	for deadline := time.Now().Add(time.Second); ; time.Sleep(2 * time.Millisecond) {
		c.mu.Lock()
		finishing := false
		for _, ci := range c.conns {
			if ci.state == http.StateActive && ci.busy == 0 {
				finishing = true
			}
		}
		if finishing && time.Now().Before(deadline) {
			c.mu.Unlock()
			continue
		}
		n := 0
		for nc, ci := range c.conns {
			if ci.state != http.StateIdle {
				continue
			}
			if tc, ok := nc.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = nc.Close()
			delete(c.conns, nc)
			n++
		}
		c.mu.Unlock()
		return n
	}
}
