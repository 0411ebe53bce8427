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
	"os"
	"strconv"
	"strings"
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
// waited for, at most a second. It returns once the client's end of each
// has the reset (see awaitReset), at most deliverWait later.
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
		var ends []portPair
		for nc, ci := range t.conns {
			if !match(ci.tag) || ci.state != http.StateIdle {
				continue
			}
			if tc, ok := nc.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			if p, ok := clientEnd(nc); ok {
				ends = append(ends, p)
			}
			_ = nc.Close()
			delete(t.conns, nc)
			n++
		}
		t.mu.Unlock()
		if len(ends) > 0 {
			awaitReset(ends, deliverWait)
		}
		return n
	}
}

// deliverWait bounds how long ResetIdle waits for its resets to reach the
// clients' ends.
const deliverWait = 5 * time.Second

// portPair names the client's end of a loopback connection: its port and
// the server's.
type portPair struct{ local, remote int }

// clientEnd returns the client's end of the server connection nc, or
// false when nc is not TCP.
func clientEnd(nc net.Conn) (portPair, bool) {
	la, ok1 := nc.LocalAddr().(*net.TCPAddr)
	ra, ok2 := nc.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return portPair{}, false
	}
	return portPair{local: ra.Port, remote: la.Port}, true
}

// awaitReset waits, at most d, until none of ends is in the kernel's TCP
// tables (/proc/net/tcp and tcp6), and reports whether that happened. A
// client's socket leaves them when the reset reaches it. On loopback the
// RST is delivered by a softirq that a loaded host may run late (ksoftirqd
// is a thread like any other): a client that wrote on the connection before
// then has its request accepted by its kernel and then reset, as if the
// server had read it, where the fault promises that nothing it sends there
// is read. Where the tables cannot be read (not Linux), it returns at once.
func awaitReset(ends []portPair, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(time.Millisecond) {
		present, ok := tcpEnds()
		if !ok {
			return true
		}
		left := false
		for _, e := range ends {
			if present[e] {
				left = true
				break
			}
		}
		if !left {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// tcpEnds returns the (local port, remote port) of every socket in the
// kernel's TCP tables of this network namespace, or false when they cannot
// be read.
func tcpEnds() (map[portPair]bool, bool) {
	ends := map[portPair]bool{}
	read := false
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		read = true
		for i, line := range strings.Split(string(b), "\n") {
			fs := strings.Fields(line)
			if i == 0 || len(fs) < 3 {
				continue
			}
			l, ok1 := hexPort(fs[1])
			r, ok2 := hexPort(fs[2])
			if ok1 && ok2 {
				ends[portPair{local: l, remote: r}] = true
			}
		}
	}
	return ends, read
}

// hexPort returns the port of an address as /proc/net/tcp writes it
// ("0100007F:1F90").
func hexPort(addr string) (int, bool) {
	_, port, ok := strings.Cut(addr, ":")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(port, 16, 16)
	return int(n), err == nil
}
