package local

import (
	"bufio"
	"bytes"
	"container/list"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
	"golang.org/x/sys/unix"
)

// Port exposure: Expose listens on an ephemeral port of 127.0.0.1 in this
// process, and on a unix socket in a directory only this process's user
// may enter. For each connection it accepts, the sandbox's agent (a
// "dial" request, see agent_ports_linux.go) connects to the port inside
// the sandbox's network namespace and hands the connected socket over;
// this process relays between the two. So it works with the network off
// and with the isolated network, and the sandbox is never reachable beyond
// the host's loopback. Listeners belong to the Runtime: Destroy closes a
// sandbox's, Close all of them.
//
// The loopback port is open to every local user, so it is private by a
// token: the first HTTP/1.x request of each connection must carry the
// endpoint's token in TokenHeader (compared in constant time) before the
// sandbox is dialled; anything else is refused (401, or 400 for what is
// not an HTTP request) and closed. Once admitted, a connection is relayed
// as it is, the first request included, so keep-alive, streaming and
// WebSocket upgrades work. The unix socket (Endpoint.Socket, mode 0600 in
// a 0700 directory) needs no token: the file's permissions keep other
// users out, and it carries any protocol.
//
// Each endpoint relays at most MaxConns admitted connections (both
// listeners together: a TCP connection once its token was checked, a unix
// socket connection at once); one beyond is closed at once. TCP
// connections still sending their first request's headers are not
// admitted yet and do not count: they are held apart, at most maxPending
// of them, and a new one beyond closes the oldest waiting one that has
// no byte queued unread (the oldest, if all have). So any local user can
// open connections and send nothing, but never take the endpoint from its
// owner: a client that sends its request at once is read before a flood
// pushes it out, the unix socket is never held up by TCP connections, and
// the descriptors a flood costs stay bounded. A connection through which
// no byte moved for IdleTimeout is closed, and so is one of whose two
// directions one has ended (a side closed or half-closed) and the other
// moved nothing for the Runtime's half-close timeout
// (WithHalfCloseTimeout): a client that left is not kept waiting for a
// server that never closes its side, while a client's half close after
// its request (HTTP/1.0 style) still gets the answer.

// TokenHeader is the header that carries a local endpoint's access token
// (Endpoint.Header holds it; Endpoint.NewRequest sends it).
const TokenHeader = "X-Sandbox-Endpoint-Token"

const (
	// DefaultMaxConns is a local endpoint's connection cap when
	// ExposeOptions.MaxConns is 0.
	DefaultMaxConns = 256
	// DefaultIdleTimeout closes a local endpoint's connection idle this
	// long, when ExposeOptions.IdleTimeout is 0.
	DefaultIdleTimeout = 5 * time.Minute
	// headerTimeout bounds the wait for a connection's first request
	// headers (or IdleTimeout, if shorter).
	headerTimeout = 10 * time.Second
	// maxHeaderBytes bounds a first request's headers (431 beyond).
	maxHeaderBytes = 64 << 10
	// maxPending bounds an endpoint's TCP connections waiting for their
	// first request's headers, apart from MaxConns.
	maxPending = 64
)

// portForwards holds a Runtime's listeners, by sandbox and port.
type portForwards struct {
	mu      sync.Mutex
	closed  bool
	m       map[string]map[int]*forwarder
	sockDir string // the sockets' directory, once one was made
}

// forwarder is one endpoint: its listeners and the connections it relays.
type forwarder struct {
	r     *Runtime
	id    string
	port  int
	ln    net.Listener // TCP on 127.0.0.1, token required
	sock  net.Listener // unix socket, owner only; nil where none could be made
	path  string       // sock's path
	token string
	// ctx ends when the forwarder closes, cancelling relays being set up.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	maxConns int
	idle     time.Duration
	active   int // connections admitted and not yet ended
	conns    map[io.Closer]struct{}
	// pending holds the TCP connections waiting for their first
	// request's headers (each a *waiting), oldest first (at most
	// maxPending); pendingAt finds their elements.
	pending   *list.List
	pendingAt map[net.Conn]*list.Element
	wg        sync.WaitGroup
}

// Expose returns http://127.0.0.1:<ephemeral> relaying to port in the
// sandbox, with the token every request must carry in Header, and a unix
// socket reaching it too (Socket). It checks that something accepts
// connections on port now (FailedPrecondition otherwise, so a wrong port
// is a clear error at once); a second Expose of the same port returns the
// same endpoint (same token), with the limits of the later call for new
// connections.
func (r *Runtime) Expose(ctx context.Context, id string, port int, opts driver.ExposeOptions) (driver.Endpoint, error) {
	m, err := r.running(ctx, id)
	if err != nil {
		return driver.Endpoint{}, err
	}
	// gone reports a Destroy that ran meanwhile: it hides the sandbox
	// before it ends the agent and drops the endpoints.
	gone := func() error {
		if _, err := os.Lstat(r.dir(id)); errors.Is(err, fs.ErrNotExist) {
			return sberrors.Errorf(sberrors.NotFound, "local: expose port %d of %s: the sandbox was destroyed meanwhile", port, id)
		}
		return nil
	}
	c, _, _, err := r.dialPort(ctx, m, port)
	if err != nil {
		if gerr := gone(); gerr != nil {
			return driver.Endpoint{}, gerr
		}
		return driver.Endpoint{}, fmt.Errorf("local: expose port %d of %s: %w", port, id, err)
	}
	_ = c.Close()
	maxConns, idle := opts.MaxConns, opts.IdleTimeout
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	f, err := r.ports.get(r, id, port, maxConns, idle)
	if err != nil {
		return driver.Endpoint{}, err
	}
	// An endpoint made after a racing Destroy dropped the sandbox's is
	// dropped here.
	if gerr := gone(); gerr != nil {
		r.ports.drop(id, false)
		return driver.Endpoint{}, gerr
	}
	return driver.Endpoint{
		Port: port, URL: "http://" + f.ln.Addr().String(),
		Header: http.Header{TokenHeader: {f.token}}, Socket: f.path,
		MaxConns: maxConns, IdleTimeout: idle,
	}, nil
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
	if err := fw.writeRequest(&request{Op: "dial", Port: port, Raw: true, Pass: true}); err != nil {
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

// get returns the endpoint for (id, port), starting it when needed, with
// the limits given for the connections it admits from now on.
func (p *portForwards) get(r *Runtime, id string, port, maxConns int, idle time.Duration) (*forwarder, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, sberrors.ErrClosed
	}
	if f := p.m[id][port]; f != nil {
		f.mu.Lock()
		f.maxConns, f.idle = maxConns, idle
		f.mu.Unlock()
		return f, nil
	}
	var tok [32]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, sberrors.Errorf(sberrors.Internal, "local: expose port %d of %s: token: %w", port, id, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, sberrors.Errorf(sberrors.Unavailable, "local: expose port %d of %s: %w", port, id, err)
	}
	sock, path, err := r.portSocket()
	if err == nil {
		p.sockDir = filepath.Dir(path)
	}
	if err != nil {
		_ = ln.Close()
		return nil, sberrors.Errorf(sberrors.Unavailable, "local: expose port %d of %s: unix socket: %w", port, id, err)
	}
	f := &forwarder{r: r, id: id, port: port, ln: ln, sock: sock, path: path, token: hex.EncodeToString(tok[:]),
		maxConns: maxConns, idle: idle, conns: map[io.Closer]struct{}{},
		pending: list.New(), pendingAt: map[net.Conn]*list.Element{}}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	if p.m == nil {
		p.m = map[string]map[int]*forwarder{}
	}
	if p.m[id] == nil {
		p.m[id] = map[int]*forwarder{}
	}
	p.m[id][port] = f
	f.wg.Add(2)
	go f.accept(ln, true)
	go f.accept(sock, false)
	return f, nil
}

// portSocket listens on a new unix socket in <root>/.p, a directory only
// this process's user may enter (0700), the socket itself 0600.
func (r *Runtime) portSocket() (net.Listener, string, error) {
	ln, path, err := r.portSocketOnce()
	if errors.Is(err, fs.ErrNotExist) {
		// The directory was removed with another process's last
		// endpoint between the two steps: once more.
		ln, path, err = r.portSocketOnce()
	}
	return ln, path, err
}

func (r *Runtime) portSocketOnce() (net.Listener, string, error) {
	dir := filepath.Join(r.root, ".p")
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
		return nil, "", fmt.Errorf("%s is not a directory of this process's user", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, "", err
		}
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	path := filepath.Join(dir, hex.EncodeToString(b[:]))
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, "", err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, "", err
	}
	return ln, path, nil
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
	// The sockets' directory goes with the last endpoint (an endpoint
	// being made meanwhile, here or in another process sharing the root,
	// makes it again).
	p.mu.Lock()
	if len(p.m) == 0 && p.sockDir != "" {
		_ = os.Remove(p.sockDir)
	}
	p.mu.Unlock()
}

// admit counts c in as one of the endpoint's connections and registers
// it to be closed with f; false (c closed) when f is closed or at its
// cap.
func (f *forwarder) admit(c net.Conn) bool {
	f.mu.Lock()
	ok := !f.closed && f.active < f.maxConns
	if ok {
		f.active++
		f.conns[c] = struct{}{}
	}
	f.mu.Unlock()
	if !ok {
		closeNow(c)
	}
	return ok
}

// waiting is a TCP connection waiting for its first request's headers.
type waiting struct {
	c     net.Conn
	since time.Time    // when it was accepted
	heard atomic.Int64 // when a byte of it was last read (Unix ns), 0 before
	whole atomic.Bool  // its header block was read whole
}

// idle returns how long w has been accepted without sending, or since the
// last bytes read from it.
func (w *waiting) idle(now time.Time) time.Duration {
	if n := w.heard.Load(); n != 0 {
		return now.Sub(time.Unix(0, n))
	}
	return now.Sub(w.since)
}

// newConnGrace is how long a connection just accepted may send nothing
// before it can be closed to make room: a client sends its request after
// its connect returns, which a starved host can delay.
const newConnGrace = time.Second

// minHold is the least time a waiting connection is kept when it has to be
// closed to make room although it is still within newConnGrace: until the
// oldest such one has waited that long, the next connection is not
// accepted (it waits in the listener's backlog, costing no descriptor).
// A flood that reconnects as fast as its connections are closed so
// churns at most maxPending per minHold, not thousands a second, and an
// owner's client accepted just before it sends has that long to send. It
// is the whole grace: at 100 ms, a client thread descheduled between its
// connect and its write on a loaded host (CI, load 30 on 2 cores) lost
// its connection to a flood.
const minHold = newConnGrace

// hold adds c to the connections waiting for their first request's
// headers; at maxPending one is closed to make room (see victim), and when
// that one has waited less than minHold, hold first waits until it has.
// Nil (c closed) when f is closed.
func (f *forwarder) hold(c net.Conn) *waiting {
	for {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			closeNow(c)
			return nil
		}
		var out net.Conn
		if f.pending.Len() >= maxPending {
			now := time.Now()
			e, fresh := f.victim(now)
			if w := e.Value.(*waiting); fresh && now.Sub(w.since) < minHold {
				wait := minHold - now.Sub(w.since)
				f.mu.Unlock()
				if sleepCtx(f.ctx, wait) != nil { // f closed
					closeNow(c)
					return nil
				}
				continue
			}
			out = f.pending.Remove(e).(*waiting).c
			delete(f.pendingAt, out)
		}
		w := &waiting{c: c, since: connectedAt(c, time.Now())}
		f.pendingAt[c] = f.pending.PushBack(w)
		f.mu.Unlock()
		if out != nil {
			closeNow(out) // its reader fails and returns
		}
		return w
	}
}

// connectedAt returns when c's connection was made, as the kernel knows it
// (TCP_INFO: the time since it last received data, which for one that
// sent nothing is the time since the handshake ended), or now when it
// cannot tell. A flood that fills the listener's backlog makes each of its
// connections wait there before it is accepted: counted from the accept,
// every one would look just made and be spared for newConnGrace, and the
// accept loop, waiting out that grace, would leave the owner's connection
// (its request long queued) in the backlog behind thousands of them.
func connectedAt(c net.Conn, now time.Time) time.Time {
	rc, ok := rawConn(c)
	if !ok {
		return now
	}
	var ms uint32
	var got bool
	_ = rc.Control(func(fd uintptr) {
		if ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			ms, got = ti.Last_data_recv, true
		}
	})
	// The kernel counts in clock ticks (4 ms at 250 Hz): a connection
	// accepted at once keeps its accept time, so that those accepted one
	// after another keep their order.
	if !got || ms < 100 {
		return now
	}
	return now.Add(-time.Duration(ms) * time.Millisecond)
}

// victim picks the waiting connection to close to make room (f.mu held):
// the one idle longest (the longest since it was accepted or since the
// last bytes read from it) among those with no bytes queued unread,
// leaving out one accepted within newConnGrace that sent nothing yet;
// failing that, the oldest whose queued bytes are not a whole header
// block, or else the oldest (fresh reports one of these two). Never one
// whose header block was read whole. A flood of connections that send
// nothing, or part of a request and then nothing, so loses its own
// connections first, not one whose request is arriving or queued for a
// starved relay to read, nor one just accepted.
func (f *forwarder) victim(now time.Time) (e *list.Element, fresh bool) {
	e, most := f.pending.Front(), time.Duration(-1)
	for x := f.pending.Front(); x != nil; x = x.Next() {
		w := x.Value.(*waiting)
		if w.whole.Load() {
			continue // being let through
		}
		if w.heard.Load() == 0 && now.Sub(w.since) < newConnGrace {
			continue // its client may not have had the time to send
		}
		if idle := w.idle(now); idle > most && queued(w.c) == 0 {
			e, most = x, idle
		}
	}
	if most >= 0 {
		return e, false
	}
	// All are new or have bytes queued, as when a flood churns faster
	// than the starved relay reads: the oldest whose queued bytes are not
	// a whole header block goes.
	for x := f.pending.Front(); x != nil; x = x.Next() {
		if w := x.Value.(*waiting); !w.whole.Load() && !queuedHeaders(w.c) {
			return x, true
		}
	}
	return f.pending.Front(), true
}

// unhold removes c from the waiting connections: false when it was no
// longer there (closed to make room, or f closed).
func (f *forwarder) unhold(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.pendingAt[c]
	if ok {
		f.pending.Remove(e)
		delete(f.pendingAt, c)
	}
	return ok
}

// queued returns the number of bytes received on c and not read yet (0
// when it cannot tell).
func queued(c net.Conn) int {
	rc, ok := rawConn(c)
	if !ok {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	})
	return n
}

// queuedHeaders reports whether the bytes received on c and not read yet
// hold the end of a request's header block (within their first 4 KiB).
func queuedHeaders(c net.Conn) bool {
	rc, ok := rawConn(c)
	if !ok {
		return false
	}
	var buf [4096]byte
	n := 0
	_ = rc.Control(func(fd uintptr) {
		n, _, _ = unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	})
	return n > 0 && headerEnd(buf[:n]) >= 0
}

// release ends the admission of c.
func (f *forwarder) release(c net.Conn) {
	f.mu.Lock()
	f.active--
	delete(f.conns, c)
	f.mu.Unlock()
	_ = c.Close()
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

// idleTimeout returns the idle timeout for connections admitted now.
func (f *forwarder) idleTimeout() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.idle
}

// close stops the listeners, ends every relayed connection and waits for
// the goroutines.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	conns := f.conns
	f.conns = map[io.Closer]struct{}{}
	pending := f.pendingAt
	f.pending.Init()
	f.pendingAt = map[net.Conn]*list.Element{}
	f.mu.Unlock()
	f.cancel()
	_ = f.ln.Close()
	_ = f.sock.Close()
	for c := range conns {
		_ = c.Close()
	}
	for c := range pending {
		_ = c.Close()
	}
	f.wg.Wait()
}

// closeNow closes c at once, with a reset for TCP (no lingering data).
func closeNow(c net.Conn) {
	if t, ok := c.(*net.TCPConn); ok {
		_ = t.SetLinger(0)
	}
	_ = c.Close()
}

func (f *forwarder) accept(ln net.Listener, auth bool) {
	defer f.wg.Done()
	for {
		c, err := ln.Accept()
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
		// A TCP connection waits apart until its token is checked; a
		// unix socket connection (owner only) is admitted at once.
		var w *waiting
		if auth {
			if w = f.hold(c); w == nil {
				continue
			}
		} else if !f.admit(c) {
			continue
		}
		f.wg.Add(1)
		go f.relay(c, w)
	}
}

// relay carries one accepted connection through the agent, once its first
// request showed the token and it was admitted (w, the connection held
// until then; a connection that needs no token comes admitted, w nil).
func (f *forwarder) relay(tc net.Conn, held *waiting) {
	defer f.wg.Done()
	idle := f.idleTimeout()
	var first []byte
	if held != nil {
		var ok bool
		first, ok = f.authenticate(tc, min(headerTimeout, idle), held)
		if !f.unhold(tc) || !ok {
			_ = tc.Close()
			return
		}
		if !f.admit(tc) {
			return
		}
	}
	defer f.release(tc)
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
		closeNow(tc)
		return
	}
	if !f.track(ac) {
		_ = ac.Close()
		return
	}
	defer f.untrack(ac)
	w := newWatch(idle, f.r.halfClose, tc, ac)
	defer w.stop()
	hc, isHC := tc.(halfCloser)
	if raw && isHC {
		// A raw stream (or the sandbox's own socket, passed): the first
		// request as read, then bytes as they are, both ways, half
		// closes passed on.
		if len(first) > 0 {
			if _, err := ac.Write(first); err != nil {
				return
			}
		}
		w.relay(ac.(halfCloser), hc)
		return
	}
	done := make(chan struct{})
	go func() { // client → sandbox
		defer close(done)
		fw := &frameWriter{w: ac}
		buf := make([]byte, 5+forwardChunk)
		if len(first) > 0 {
			n := copy(buf[5:], first)
			if writeDataFrame(fw, buf, frameStdin, n) != nil {
				return
			}
		}
		for {
			n, err := tc.Read(buf[5:])
			w.touch()
			if n > 0 && writeDataFrame(fw, buf, frameStdin, n) != nil {
				return
			}
			if err == io.EOF {
				_ = fw.write(frameEOF, nil)
				w.halfClosed()
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
		w.touch()
		if err != nil {
			break
		}
		if typ == frameEOF {
			if isHC {
				_ = hc.CloseWrite()
			}
			w.halfClosed()
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

// authenticate reads c's first request headers (for up to wait) and
// checks that they carry the endpoint's token, answering a refusal
// itself; w, c's place among the waiting connections, records when bytes
// came and when the header block is whole. It returns every byte read,
// to be sent on.
func (f *forwarder) authenticate(c net.Conn, wait time.Duration, w *waiting) ([]byte, bool) {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 0, 4096)
	end := -1
	for end < 0 {
		if len(buf) >= maxHeaderBytes {
			refuse(c, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("the request headers exceed %d bytes", maxHeaderBytes))
			return nil, false
		}
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, len(buf))...)[:len(buf)]
		}
		// The marks are set from the bytes while they are still queued
		// on the socket: with them set after the read, a connection
		// whose request had just been read looked silent to victim (no
		// byte queued, none heard) until they were, and a starved relay
		// so lost its owner's connection to a flood.
		n, err := readNoting(c, buf[len(buf):min(cap(buf), maxHeaderBytes)], func(b []byte) {
			w.heard.Store(time.Now().UnixNano())
			w.whole.Store(headerEnd(buf[:len(buf)+len(b)]) >= 0)
		})
		buf = buf[:len(buf)+n]
		end = headerEnd(buf)
		if end < 0 && err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				refuse(c, http.StatusRequestTimeout, fmt.Sprintf("no request headers within %v", wait))
			}
			return nil, false
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(buf[:end])))
	line, err := tp.ReadLine()
	method, rest, ok1 := strings.Cut(line, " ")
	_, proto, ok2 := strings.Cut(rest, " ")
	if err != nil || !ok1 || !ok2 || method == "" || !strings.HasPrefix(proto, "HTTP/1.") {
		refuse(c, http.StatusBadRequest, "this endpoint takes HTTP/1.x requests; other protocols reach the port through Endpoint.Socket")
		return nil, false
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		refuse(c, http.StatusBadRequest, "malformed request headers")
		return nil, false
	}
	vals := h.Values(TokenHeader)
	if len(vals) != 1 || subtle.ConstantTimeCompare([]byte(vals[0]), []byte(f.token)) != 1 {
		refuse(c, http.StatusUnauthorized, "this endpoint needs its access token in the "+TokenHeader+" header (sandbox.Endpoint.Header)")
		return nil, false
	}
	return buf, true
}

// readNoting reads into p from c as c.Read does, and calls note with the
// bytes it is about to read while they are still queued on c's socket
// (peeked), so that at no moment have they left the queue unnoted: what
// victim reads of a waiting connection (its queue, its marks) always
// shows bytes that came. Where c has no socket, note follows the read.
func readNoting(c net.Conn, p []byte, note func([]byte)) (int, error) {
	rc, ok := rawConn(c)
	if !ok || len(p) == 0 {
		n, err := c.Read(p)
		if n > 0 {
			note(p[:n])
		}
		return n, err
	}
	n := 0
	var rerr error
	err := rc.Read(func(fd uintptr) bool {
		n, rerr = ignoringEINTR(func() (int, error) {
			m, _, err := unix.Recvfrom(int(fd), p, unix.MSG_PEEK|unix.MSG_DONTWAIT)
			return m, err
		})
		if rerr == unix.EAGAIN {
			return false // wait until readable (or the deadline)
		}
		if rerr != nil || n <= 0 {
			return true
		}
		note(p[:n])
		// The n bytes peeked are queued: this read takes exactly them.
		n, rerr = ignoringEINTR(func() (int, error) { return unix.Read(int(fd), p[:n]) })
		return true
	})
	switch {
	case err != nil:
		return 0, err // the deadline passed, or c was closed
	case rerr != nil:
		return 0, &net.OpError{Op: "read", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("read", rerr)}
	case n <= 0:
		return 0, io.EOF
	}
	return n, nil
}

// ignoringEINTR calls fn again while it fails with EINTR.
func ignoringEINTR(fn func() (int, error)) (int, error) {
	for {
		n, err := fn()
		if err != unix.EINTR {
			return n, err
		}
	}
}

// headerEnd returns the length of the header block at the start of b
// (through its blank line), or -1 while it is incomplete.
func headerEnd(b []byte) int {
	for i := 0; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		if i+1 < len(b) && b[i+1] == '\n' {
			return i + 2
		}
		if i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n' {
			return i + 3
		}
	}
	return -1
}

// refuse answers status with msg and closes c, reading (briefly) what
// the client still sends so that the close does not reset the answer
// away.
func refuse(c net.Conn, status int, msg string) {
	body := msg + "\n"
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	if hc, ok := c.(halfCloser); ok {
		_ = hc.CloseWrite()
		_, _ = io.Copy(io.Discard, io.LimitReader(c, maxHeaderBytes))
	}
	_ = c.Close()
}

// watch closes a relayed connection's two sides when it has been idle
// too long: no byte either way for idle, or, once one direction ended,
// none the other way for halfIdle (or idle, if shorter).
type watch struct {
	idle     time.Duration
	halfIdle time.Duration // the limit once one direction ended
	a, b     net.Conn
	last     atomic.Int64 // UnixNano of the last byte moved
	half     atomic.Bool
	done     atomic.Bool // stopped: the check does nothing
	timer    *time.Timer
}

func newWatch(idle, halfIdle time.Duration, a, b net.Conn) *watch {
	w := &watch{idle: idle, halfIdle: halfIdle, a: a, b: b}
	w.touch()
	w.timer = time.AfterFunc(idle, w.check)
	return w
}

func (w *watch) touch() { w.last.Store(time.Now().UnixNano()) }

func (w *watch) limit() time.Duration {
	if w.half.Load() {
		return min(w.idle, w.halfIdle)
	}
	return w.idle
}

// halfClosed notes that one direction ended: the other gets the shorter
// limit from now.
func (w *watch) halfClosed() {
	w.touch()
	if !w.half.Swap(true) {
		w.timer.Reset(w.limit())
	}
}

func (w *watch) check() {
	if w.done.Load() {
		return
	}
	left := w.limit() - time.Since(time.Unix(0, w.last.Load()))
	if left > 0 {
		w.timer.Reset(left)
		return
	}
	_ = w.a.Close()
	_ = w.b.Close()
}

func (w *watch) stop() {
	w.done.Store(true)
	w.timer.Stop()
}

// relay copies between a and b in both directions until both ended or
// either failed, noting activity; the end of one direction (EOF) is passed
// on as a half close, a failure ends both. It returns with both closed.
func (w *watch) relay(a, b halfCloser) {
	done := make(chan struct{})
	go func() { // b → a
		defer close(done)
		if err := w.copy(a, b); err != nil {
			_ = a.Close()
			_ = b.Close()
			return
		}
		_ = a.CloseWrite()
		w.halfClosed()
	}()
	if err := w.copy(b, a); err != nil {
		_ = a.Close()
		_ = b.Close()
	} else {
		_ = b.CloseWrite()
		w.halfClosed()
	}
	<-done
	_ = a.Close()
	_ = b.Close()
}

// copy copies src to dst until EOF (nil) or a failure through a pooled
// buffer (read and write, not splice: see relayRaw), noting each move.
func (w *watch) copy(dst io.Writer, src io.Reader) error {
	buf := relayBufs.Get().(*[relayBufSize]byte)
	defer relayBufs.Put(buf)
	for {
		n, err := src.Read(buf[:])
		if n > 0 {
			// Noted once the bytes are passed on: a write that stays
			// blocked (a reader that stopped) is idleness too.
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
			w.touch()
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
