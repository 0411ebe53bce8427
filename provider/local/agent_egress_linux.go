package local

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// egressRelay is the agent's side of the egress proxy: a listener on the
// sandbox's loopback whose connections go, as sockets (SCM_RIGHTS), to the
// proxy attached through the agent's socket. The agent listens before any
// command runs and only it may accept there; a connection accepted while
// no proxy is attached waits for one a short while, then is closed: never
// forwarded anywhere else.
type egressRelay struct {
	mu    sync.Mutex
	port  int
	ln    net.Listener
	sink  *net.UnixConn
	ready chan struct{} // closed and replaced when a sink attaches
}

// egressWait bounds how long an accepted connection waits for a proxy.
const egressWait = 5 * time.Second

// listen opens the relay's listener on 127.0.0.1:port (once; a second
// call must name the same port).
func (e *egressRelay) listen(port int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ln != nil {
		if port != e.port {
			return fmt.Errorf("egress relay already listens on port %d, not %d", e.port, port)
		}
		return nil
	}
	if port <= 0 || port > 65535 {
		return fmt.Errorf("egress relay port %d", port)
	}
	ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	e.ln, e.port = ln, port
	if e.ready == nil {
		e.ready = make(chan struct{})
	}
	go e.accept(ln)
	return nil
}

func (e *egressRelay) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go e.pass(c.(*net.TCPConn))
	}
}

// pass hands tc to the attached proxy, waiting for one up to egressWait.
func (e *egressRelay) pass(tc *net.TCPConn) {
	defer tc.Close() // the proxy holds its own descriptor
	deadline := time.NewTimer(egressWait)
	defer deadline.Stop()
	for {
		e.mu.Lock()
		sink, ready := e.sink, e.ready
		e.mu.Unlock()
		if sink != nil {
			e.mu.Lock() // one frame at a time on the sink
			sent, err := passConn(sink, tc)
			e.mu.Unlock()
			if err == nil {
				return
			}
			e.detach(sink)
			if sent {
				return
			}
			continue
		}
		select {
		case <-ready:
		case <-deadline.C:
			return
		}
	}
}

// attach makes uc the proxy that gets the connections, replacing any
// other, until the connection ends.
func (e *egressRelay) attach(uc *net.UnixConn) {
	e.mu.Lock()
	old := e.sink
	e.sink = uc
	close(e.ready)
	e.ready = make(chan struct{})
	e.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
}

func (e *egressRelay) detach(uc *net.UnixConn) {
	e.mu.Lock()
	if e.sink == uc {
		e.sink = nil
	}
	e.mu.Unlock()
	_ = uc.Close()
}

// serveEgress answers op "egress": the relay listens on req.Port and the
// connection c becomes its proxy until c ends.
func (a *agent) serveEgress(c net.Conn, in <-chan frameMsg, fw *frameWriter, req *request) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		_ = fw.writeJSON(frameFail, failMsg{"Internal", "egress over a non-unix connection"})
		return
	}
	if err := a.egress.listen(req.Port); err != nil {
		_ = fw.writeJSON(frameFail, failMsg{"Internal", err.Error()})
		return
	}
	if err := fw.writeJSON(frameOK, struct{}{}); err != nil {
		return
	}
	a.egress.attach(uc)
	for range in { // the proxy sends nothing; EOF when it goes
	}
	a.egress.detach(uc)
}
