package local

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Port exposure: Expose listens on an ephemeral port of 127.0.0.1 in this
// process. For each connection it accepts, the sandbox's agent (a "dial"
// request, see agent_ports_linux.go) connects to the port inside the
// sandbox's network namespace and hands the connected socket over; this
// process relays between the two. So it works with the network off and
// with the isolated network, and the sandbox is never reachable beyond
// the host's loopback. Listeners belong to the Runtime: Destroy closes a
// sandbox's, Close all of them.

// portForwards holds a Runtime's listeners, by sandbox and port.
type portForwards struct {
	mu     sync.Mutex
	closed bool
	m      map[string]map[int]*forwarder
}

// forwarder is one listener and the connections it relays.
type forwarder struct {
	r    *Runtime
	id   string
	port int
	ln   net.Listener
	// ctx ends when the forwarder closes, cancelling relays being set up.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	conns  map[io.Closer]struct{}
	wg     sync.WaitGroup
}

// Expose returns http://127.0.0.1:<ephemeral> relaying to port in the
// sandbox. It checks that something accepts connections on port now
// (FailedPrecondition otherwise, so a wrong port is a clear error at once);
// a second Expose of the same port returns the same listener.
func (r *Runtime) Expose(ctx context.Context, id string, port int, _ driver.ExposeOptions) (driver.Endpoint, error) {
	m, err := r.running(ctx, id)
	if err != nil {
		return driver.Endpoint{}, err
	}
	c, _, _, err := r.dialPort(ctx, m, port)
	if err != nil {
		return driver.Endpoint{}, fmt.Errorf("local: expose port %d of %s: %w", port, id, err)
	}
	_ = c.Close()
	f, err := r.ports.get(r, id, port)
	if err != nil {
		return driver.Endpoint{}, err
	}
	return driver.Endpoint{Port: port, URL: "http://" + f.ln.Addr().String()}, nil
}

// dialPort opens a connection to port in the sandbox through the agent.
// It asks the agent to hand over the connected socket itself: c is then
// that TCP connection (passed, raw true), the agent being out of the
// stream's path. An agent that does not, relays: c is the agent
// connection, carrying the TCP bytes as they are when raw is true, frames
// (read them from br, positioned after the agent's frameOK) otherwise.
func (r *Runtime) dialPort(ctx context.Context, m *meta, port int) (c net.Conn, br *bufio.Reader, raw bool, err error) {
	c, _, err = r.connect(ctx, m)
	if err != nil {
		return nil, nil, false, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	fw := &frameWriter{w: c}
	if err := fw.writeJSON(frameRequest, &request{Op: "dial", Port: port, Raw: true, Pass: true}); err != nil {
		c.Close()
		return nil, nil, false, err
	}
	// Read the answer unbuffered (raw bytes may follow it at once), with
	// room for the descriptor it may carry.
	uc, isUnix := c.(*net.UnixConn)
	var typ byte
	var b []byte
	var fds []int
	if isUnix {
		typ, b, fds, err = readFrameFDs(uc)
	} else {
		typ, b, err = readFrame(c, nil)
	}
	if err != nil {
		c.Close()
		if ctx.Err() != nil {
			return nil, nil, false, ctx.Err()
		}
		return nil, nil, false, sberrors.Errorf(sberrors.Unavailable, "local: agent: %w", err)
	}
	switch typ {
	case frameOK:
		var ok dialOK
		_ = json.Unmarshal(b, &ok)
		if ok.Passed {
			c.Close()
			tc, err := tcpFromFDs(fds)
			if err != nil {
				return nil, nil, false, sberrors.Errorf(sberrors.Internal, "local: agent: %w", err)
			}
			return tc, nil, true, nil
		}
		closeFDs(fds...)
		if ok.Raw && !isUnix {
			c.Close()
			return nil, nil, false, sberrors.Errorf(sberrors.Internal, "local: agent connection is not a unix socket")
		}
		return c, bufio.NewReaderSize(c, 64<<10), ok.Raw, nil
	case frameFail:
		closeFDs(fds...)
		c.Close()
		var f failMsg
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, nil, false, sberrors.Errorf(sberrors.Internal, "local: agent: bad failure frame")
		}
		return nil, nil, false, f.err()
	}
	closeFDs(fds...)
	c.Close()
	return nil, nil, false, sberrors.Errorf(sberrors.Internal, "local: agent: unexpected frame %q", typ)
}

// readFrameFDs reads one frame from c, unbuffered, and the descriptors
// sent with it: SCM_RIGHTS arrive with the read that takes the frame's
// first byte, so that read is a recvmsg; readFrame reads the rest.
func readFrameFDs(c *net.UnixConn) (typ byte, payload []byte, fds []int, err error) {
	var first [5]byte
	oob := make([]byte, syscall.CmsgSpace(4*4))
	n, oobn, _, _, err := c.ReadMsgUnix(first[:], oob)
	if msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for i := range msgs {
			if got, err := syscall.ParseUnixRights(&msgs[i]); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	if err == nil {
		typ, payload, err = readFrame(io.MultiReader(bytes.NewReader(first[:n]), c), nil)
	}
	if err != nil {
		closeFDs(fds...)
		return 0, nil, nil, err
	}
	return typ, payload, fds, nil
}

// tcpFromFDs makes the one descriptor a passed-socket answer carries a
// TCP connection; anything else (no descriptor, several, not a TCP
// socket) is refused, and every descriptor closed.
func tcpFromFDs(fds []int) (*net.TCPConn, error) {
	if len(fds) != 1 {
		closeFDs(fds...)
		return nil, fmt.Errorf("a passed socket came with %d descriptors, want 1", len(fds))
	}
	f := os.NewFile(uintptr(fds[0]), "sandbox-port")
	defer f.Close() // FileConn holds a duplicate
	nc, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("passed descriptor: %w", err)
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		nc.Close()
		return nil, fmt.Errorf("passed descriptor is a %T, not a TCP connection", nc)
	}
	return tc, nil
}

// get returns the listener for (id, port), starting it when needed.
func (p *portForwards) get(r *Runtime, id string, port int) (*forwarder, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, sberrors.ErrClosed
	}
	if f := p.m[id][port]; f != nil {
		return f, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, sberrors.Errorf(sberrors.Unavailable, "local: expose port %d of %s: %w", port, id, err)
	}
	f := &forwarder{r: r, id: id, port: port, ln: ln, conns: map[io.Closer]struct{}{}}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	if p.m == nil {
		p.m = map[string]map[int]*forwarder{}
	}
	if p.m[id] == nil {
		p.m[id] = map[int]*forwarder{}
	}
	p.m[id][port] = f
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

// drop closes the listeners of id ("" for all; closing them for good
// when all is set) and waits for their connections to end.
func (p *portForwards) drop(id string, all bool) {
	p.mu.Lock()
	var fs []*forwarder
	for sid, ports := range p.m {
		if all || sid == id {
			for _, f := range ports {
				fs = append(fs, f)
			}
			delete(p.m, sid)
		}
	}
	if all {
		p.closed = true
	}
	p.mu.Unlock()
	for _, f := range fs {
		f.close()
	}
}

// track registers c to be closed with f; false when f is closed.
func (f *forwarder) track(c io.Closer) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(c io.Closer) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	_ = c.Close()
}

// close stops the listener, ends every relayed connection and waits for
// the goroutines.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	conns := f.conns
	f.conns = map[io.Closer]struct{}{}
	f.mu.Unlock()
	f.cancel()
	_ = f.ln.Close()
	for c := range conns {
		_ = c.Close()
	}
	f.wg.Wait()
}

func (f *forwarder) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			f.mu.Lock()
			closed := f.closed
			f.mu.Unlock()
			if closed {
				return
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			// A listener that failed for another reason (descriptors
			// exhausted) is retried after a pause, as net/http does.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if !f.track(c) {
			_ = c.Close()
			return
		}
		f.wg.Add(1)
		go f.relay(c)
	}
}

// relay carries one accepted connection through the agent.
func (f *forwarder) relay(tc net.Conn) {
	defer f.wg.Done()
	defer f.untrack(tc)
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	m, err := f.r.running(ctx, f.id)
	var ac net.Conn
	var br *bufio.Reader
	raw := false
	if err == nil {
		ac, br, raw, err = f.r.dialPort(ctx, m, f.port)
	}
	cancel()
	if err != nil {
		// Nothing to relay to (gone, paused, no server): a reset tells
		// the client at once.
		if t, ok := tc.(*net.TCPConn); ok {
			_ = t.SetLinger(0)
		}
		return
	}
	if !f.track(ac) {
		_ = ac.Close()
		return
	}
	defer f.untrack(ac)
	if t, ok := tc.(*net.TCPConn); ok && raw {
		// A raw stream (or the sandbox's own socket, passed): bytes as
		// they are, both ways, half closes passed on.
		relayRaw(ac.(halfCloser), t)
		_ = tc.Close()
		_ = ac.Close()
		return
	}
	done := make(chan struct{})
	go func() { // client → sandbox
		defer close(done)
		fw := &frameWriter{w: ac}
		buf := make([]byte, 5+forwardChunk)
		for {
			n, err := tc.Read(buf[5:])
			if n > 0 && writeDataFrame(fw, buf, frameStdin, n) != nil {
				return
			}
			if err == io.EOF {
				_ = fw.write(frameEOF, nil)
				return
			}
			if err != nil {
				_ = ac.Close() // the client broke: end the stream
				return
			}
		}
	}()
	// sandbox → client, until the agent ends the stream.
	var buf []byte
	for {
		var typ byte
		var err error
		typ, buf, err = readFrame(br, buf)
		if err != nil {
			break
		}
		if typ == frameEOF {
			_ = tc.(*net.TCPConn).CloseWrite()
			continue
		}
		if typ != frameStdout {
			break
		}
		if _, err := tc.Write(buf); err != nil {
			break
		}
	}
	_ = tc.Close()
	_ = ac.Close()
	<-done
}
