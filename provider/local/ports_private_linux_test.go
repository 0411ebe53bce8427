package local

import (
	"bufio"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/testpar"
	"github.com/sandboxkit/sandbox/internal/testport"
	"github.com/sandboxkit/sandbox/sandboxtest"
	"github.com/sandboxkit/sandbox/sberrors"
)

// privateEndpoint starts a file server in a new sandbox and exposes it.
func privateEndpoint(t *testing.T) (context.Context, sandbox.Endpoint) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed (the test's server is python3 -m http.server)")
	}
	rt := newRuntime(t)
	c := sandbox.NewClient(rt)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ep, _, _ := serveFile(ctx, t, sb, "page", []byte("private"))
	return ctx, ep
}

// rawRequest sends req on a new connection to ep, half-closes when
// shut is set, and returns everything read until the endpoint closes
// (or 30 s).
func rawRequest(t *testing.T, ep sandbox.Endpoint, req string, shut bool) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(ep.URL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	if shut {
		_ = c.(*net.TCPConn).CloseWrite()
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

// TestExposeTokenChecks: the first request's headers are checked however
// they arrive, and every way of getting them wrong is refused before the
// sandbox's server sees a byte; a client that half-closes after its
// request still gets the answer.
func TestExposeTokenChecks(t *testing.T) {
	_, ep := privateEndpoint(t)
	tok := ep.Header.Get(TokenHeader)
	if len(tok) < 32 {
		t.Fatalf("endpoint token %q: want 32+ characters", tok)
	}
	if strings.Contains(ep.String(), tok) || strings.Contains(ep.GoString(), tok) {
		t.Fatalf("Endpoint.String shows the token: %s", ep)
	}
	good := "GET /page HTTP/1.0\r\nHost: x\r\n" + TokenHeader + ": " + tok + "\r\n\r\n"
	// HTTP/1.0 with a half close after the request: the answer comes.
	if got := rawRequest(t, ep, good, true); !strings.HasPrefix(got, "HTTP/1.0 200") || !strings.HasSuffix(got, "\r\n\r\nprivate") {
		t.Fatalf("GET with the token, half-closed: %q", got)
	}
	// The headers a byte at a time.
	c, err := net.Dial("tcp", strings.TrimPrefix(ep.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	for i := range len(good) {
		if _, err := io.WriteString(c, good[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := io.ReadAll(c); !strings.HasSuffix(string(b), "private") {
		t.Fatalf("GET written a byte at a time: %q", b)
	}
	c.Close()

	for _, tc := range []struct{ name, req, status string }{
		{"no token", "GET /page HTTP/1.1\r\nHost: x\r\n\r\n", "401"},
		{"wrong token", "GET /page HTTP/1.1\r\nHost: x\r\n" + TokenHeader + ": " + strings.Repeat("0", len(tok)) + "\r\n\r\n", "401"},
		{"token twice", "GET /page HTTP/1.1\r\nHost: x\r\n" + TokenHeader + ": " + tok + "\r\n" + TokenHeader + ": x\r\n\r\n", "401"},
		{"token prefix", "GET /page HTTP/1.1\r\nHost: x\r\n" + TokenHeader + ": " + tok[:len(tok)-1] + "\r\n\r\n", "401"},
		{"token in the body", "POST /page HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + TokenHeader + ": " + tok + "\r\n\r\n", "401"},
		{"not HTTP", "hello " + tok + "\n\n", "400"},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "400"},
		{"headers too large", "GET /page HTTP/1.1\r\nX-Big: " + strings.Repeat("a", maxHeaderBytes) + "\r\n\r\n", "431"},
	} {
		got := rawRequest(t, ep, tc.req, false)
		if !strings.HasPrefix(got, "HTTP/1.1 "+tc.status) || strings.Contains(got, "private") {
			t.Errorf("%s: answer %.200q, want a %s refusal", tc.name, got, tc.status)
		}
	}
}

// TestExposeOtherUser: another local user reaches neither the TCP
// listener (no token) nor the unix socket (its directory is 0700). It
// runs a python3 client as uid 65534, so it needs root.
func TestExposeOtherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another user (uid 65534)")
	}
	_, ep := privateEndpoint(t)
	if ep.Socket == "" {
		t.Fatal("local endpoint has no Socket")
	}
	script := `import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=20)
s.sendall(b"GET /page HTTP/1.1\r\nHost: x\r\n\r\n")
print(s.recv(200).decode(errors="replace").split("\r\n")[0])
u = socket.socket(socket.AF_UNIX)
try:
    u.connect(sys.argv[2]); print("socket connected")
except OSError as e:
    print("socket refused", e.errno)
`
	py := "/usr/bin/python3" // a path every user may run (not a per-user shim)
	if _, err := os.Stat(py); err != nil {
		t.Skipf("needs %s: %v", py, err)
	}
	cmd := exec.Command(py, "-c", script, strings.TrimPrefix(ep.URL, "http://"), ep.Socket)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client as uid 65534: %v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "HTTP/1.1 401") || !strings.HasPrefix(lines[1], "socket refused") {
		t.Fatalf("uid 65534 got %q; want a 401 and a refused socket", out)
	}
	// Its owner reaches the port through the socket without a token.
	u, err := net.Dial("unix", ep.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	_ = u.SetDeadline(time.Now().Add(30 * time.Second))
	_, _ = io.WriteString(u, "GET /page HTTP/1.0\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(u), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "private" {
		t.Fatalf("GET through the socket: %d %q", resp.StatusCode, body)
	}
}

// TestExposeDefaultCapClosesBeyond: connections that never send a
// request are held apart from DefaultMaxConns, at most maxPending of
// them: beyond that the endpoint closes them at once (not held until the
// descriptors run out), and those it keeps are closed after the header
// timeout.
func TestExposeDefaultCapClosesBeyond(t *testing.T) {
	t.Parallel()
	_, ep := privateEndpoint(t)
	if ep.MaxConns != DefaultMaxConns || ep.IdleTimeout != DefaultIdleTimeout {
		t.Fatalf("endpoint limits %d, %v; want the defaults %d, %v", ep.MaxConns, ep.IdleTimeout, DefaultMaxConns, DefaultIdleTimeout)
	}
	const extra = 64
	addr := strings.TrimPrefix(ep.URL, "http://")
	conns := make([]net.Conn, 0, DefaultMaxConns+extra)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	refused := 0 // reset by the endpoint before the dial returned
	for range DefaultMaxConns + extra {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if errors.Is(err, syscall.ECONNRESET) {
			refused++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// At least extra of them are closed by the endpoint, maxPending every
	// minHold at the slowest (those beyond wait in the listener's backlog
	// meanwhile): within 5 times that.
	start := time.Now()
	closed := make([]bool, len(conns))
	nclosed := refused
	bound := 5 * time.Duration((DefaultMaxConns+extra)/maxPending+1) * minHold
	for {
		time.Sleep(500 * time.Millisecond)
		for i, c := range conns {
			if closed[i] {
				continue
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); err != nil && !os.IsTimeout(err) {
				closed[i] = true
				nclosed++
			}
		}
		open := DefaultMaxConns + extra - nclosed
		if open <= maxPending {
			t.Logf("%d of %d silent connections closed after %v", nclosed, DefaultMaxConns+extra, time.Since(start).Round(time.Millisecond))
			break
		}
		if time.Since(start) > bound {
			t.Fatalf("%d of %d silent connections still open after %v: want at most %d (maxPending)", open, DefaultMaxConns+extra, bound, maxPending)
		}
	}
	// The silent ones are closed after the header timeout (5x bound).
	for i, c := range conns {
		if closed[i] {
			continue
		}
		_ = c.SetReadDeadline(start.Add(5 * headerTimeout))
		if _, err := c.Read(make([]byte, 512)); os.IsTimeout(err) {
			t.Fatalf("a connection that sent nothing is still open %v after it was made (header timeout %v)", time.Since(start), headerTimeout)
		}
	}
}

// floodScript holds its first argument's number of connections to the
// endpoint at its second argument open, sending its third argument (the
// start of a request that never ends, or nothing) and then nothing more,
// each redialled as soon as the endpoint closes it; it prints "ready"
// once every one connected once.
const floodScript = `import socket, sys, threading, time
host, port = sys.argv[2].rsplit(":", 1)
n = int(sys.argv[1])
prefix = sys.argv[3].encode()
up = threading.Semaphore(0)
def hold():
    first = True
    while True:
        try:
            s = socket.create_connection((host, int(port)), timeout=30)
            if first:
                up.release(); first = False
            s.settimeout(None)
            if prefix:
                s.sendall(prefix)
            while s.recv(4096):
                pass
        except OSError:
            time.sleep(0.01)
        finally:
            try: s.close()
            except Exception: pass
for _ in range(n):
    threading.Thread(target=hold, daemon=True).start()
for _ in range(n):
    up.acquire()
print("ready", flush=True)
sys.stdin.read()
`

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// TestExposeIdleFloodDoesNotDenyOwner: connections that never complete a
// request (another local user's, run as uid 65534 when the test is root)
// do not take the endpoint from its owner. 300 of them, more than
// DefaultMaxConns, are held open and redialled when closed while the
// owner makes requests with the token over TCP and through the unix
// socket (20 of each in a full run): every one is answered, and the relay's descriptors stay
// within the pending bound. The flood sends nothing, or the start of a
// request whose headers never end.
func TestExposeIdleFloodDoesNotDenyOwner(t *testing.T) {
	py := "/usr/bin/python3" // a path every user may run (not a per-user shim)
	if _, err := os.Stat(py); err != nil {
		t.Skipf("needs %s: %v", py, err)
	}
	if !testpar.OwnProcess(t, &floodMu) {
		return // counts this process's descriptors: alone in a child
	}
	for _, tc := range []struct{ name, prefix string }{
		{"silent", ""},
		{"unfinished headers", "GET /page HTTP/1.1\r\nHost: x\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) { testIdleFlood(t, py, tc.prefix) })
	}
}

func testIdleFlood(t *testing.T, py, prefix string) {
	_, ep := privateEndpoint(t)
	addr := strings.TrimPrefix(ep.URL, "http://")
	base := openFDs(t)
	const flood = DefaultMaxConns + 44
	cmd := exec.Command(py, "-c", floodScript, fmt.Sprint(flood), addr, prefix)
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("flood said %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("flood: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the flood's connections were not all made within 60 s")
	}
	tok := ep.Header.Get(TokenHeader)
	get := func(network, address, req string) error {
		c, err := net.DialTimeout(network, address, 10*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.WriteString(c, req); err != nil {
			return err
		}
		b, err := io.ReadAll(c)
		if err != nil {
			return fmt.Errorf("read: %w (after %q)", err, b)
		}
		if !strings.HasPrefix(string(b), "HTTP/1.0 200") || !strings.HasSuffix(string(b), "\r\n\r\nprivate") {
			return fmt.Errorf("answer %.200q", b)
		}
		return nil
	}
	// Under the flood each request waits its turn in the listener's
	// backlog (two to four seconds here, under -race). Each request is a
	// chance for the relay to close the owner's connection to make room
	// for the flood's (the bug needed a loaded host to show): a full run
	// (sandboxtest.FullEnv, as CI's) makes twenty, a plain run five and a
	// short one two.
	requests := 5
	switch {
	case os.Getenv(sandboxtest.FullEnv) == "1":
		requests = 20
	case testing.Short():
		requests = 2
	}
	maxFDs := 0
	for i := range requests {
		if err := get("tcp", addr, "GET /page HTTP/1.0\r\nHost: x\r\n"+TokenHeader+": "+tok+"\r\n\r\n"); err != nil {
			t.Errorf("TCP request %d with the token, during the flood: %v", i+1, err)
		}
		if err := get("unix", ep.Socket, "GET /page HTTP/1.0\r\n\r\n"); err != nil {
			t.Errorf("socket request %d, during the flood: %v", i+1, err)
		}
		maxFDs = max(maxFDs, openFDs(t))
	}
	// The relay holds at most maxPending waiting connections (plus a few
	// being closed, the owner's and the runtime's own).
	if grown := maxFDs - base; grown > maxPending+32 {
		t.Errorf("host descriptors grew by %d under a flood of %d idle connections: want at most the pending bound %d (+32)", grown, flood, maxPending)
	}
	t.Logf("descriptors: %d before the flood, at most %d during it", base, maxFDs)
}

// When the waiting connections are at their bound, the one closed to
// make room is the one idle longest (since it was accepted, or since its
// last bytes were read): a flood's connections, silent or stalled midway
// through their headers, go before the owner's, whether its request is
// being read (under load the owner's request, read but not yet checked,
// was closed to make room for a flood whose bytes were still queued),
// still queued in the kernel, or not sent yet because its connect only
// just returned, for newConnGrace (a flood of partial headers had the
// oldest closed, and the oldest was the owner's; then, with the one idle
// longest closed, a churning flood's connections had been read more
// recently than the owner's just accepted, whose client had not sent).
func TestHoldKeepsAConnectionBeingRead(t *testing.T) {
	t.Parallel()
	var ends []net.Conn
	defer func() {
		for _, c := range ends {
			_ = c.Close()
		}
	}()
	conn := func() net.Conn {
		a, b := net.Pipe()
		ends = append(ends, b)
		return a
	}
	now := time.Now()
	old, never := now.Add(-time.Minute), time.Time{}
	hold := func(f *forwarder, c net.Conn, heard, since time.Time, whole bool) {
		t.Helper()
		w := f.hold(c)
		if w == nil {
			t.Fatal("hold refused a connection under the bound")
		}
		if !heard.IsZero() {
			w.heard.Store(heard.UnixNano())
		}
		w.since = since
		w.whole.Store(whole)
	}
	newForwarder := func() *forwarder {
		return &forwarder{pending: list.New(), pendingAt: map[net.Conn]*list.Element{}, ctx: context.Background()}
	}
	for _, tc := range []struct {
		name         string
		floodHeard   time.Time // when the flood's bytes were last read
		floodSince   time.Time
		ownerHeard   time.Time
		ownerSince   time.Time
		ownerIsFirst bool
		ownerWhole   bool // its header block was read whole
	}{
		{"silent flood, owner being read and oldest", never, old, now, old.Add(-time.Minute), true, false},
		{"stalled headers, owner being read and oldest", old, old, now, old.Add(-time.Minute), true, false},
		{"stalled headers, owner just accepted", old, old, never, now, false, false},
		{"flood being read, owner just accepted", now.Add(-100 * time.Millisecond), old, never, now, false, false},
		// A churning flood: its newest connections' partial headers
		// were read after the owner's connect, and the owner's client,
		// starved, has not sent yet.
		{"flood read since, owner accepted first and not sent yet", now.Add(-10 * time.Millisecond),
			now.Add(-20 * time.Millisecond), never, now.Add(-50 * time.Millisecond), true, false},
		// A silent flood churning: all its connections just accepted,
		// and the owner's headers read whole, being let through.
		{"silent churning flood, owner's headers read", never, now, now.Add(-time.Millisecond), now.Add(-2 * time.Millisecond), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newForwarder()
			flood := make([]net.Conn, maxPending-1)
			owner := conn()
			if tc.ownerIsFirst {
				hold(f, owner, tc.ownerHeard, tc.ownerSince, tc.ownerWhole)
			}
			for i := range flood {
				flood[i] = conn()
				hold(f, flood[i], tc.floodHeard, tc.floodSince, false)
			}
			if !tc.ownerIsFirst {
				hold(f, owner, tc.ownerHeard, tc.ownerSince, tc.ownerWhole)
			}
			if f.hold(conn()) == nil {
				t.Fatal("hold refused the connection past the bound")
			}
			if !f.unhold(owner) {
				t.Fatal("the owner's connection was closed to make room; want the flood's oldest closed")
			}
			if f.unhold(flood[0]) {
				t.Error("the flood's oldest connection is still waiting")
			}
			if got := f.pending.Len(); got != maxPending-1 {
				t.Errorf("%d connections wait, want %d", got, maxPending-1)
			}
		})
	}
}

// When every waiting connection is new or has bytes queued (a flood that
// reconnects faster than a starved relay reads), the one closed is the
// oldest whose queued bytes are not a whole header block: the owner's
// request, queued whole, stays although it is the oldest (a churning
// flood of partial headers closed it).
func TestHoldKeepsAQueuedRequest(t *testing.T) {
	t.Parallel()
	newPair := loopbackPairs(t)
	// pair returns the accepted end of a connection whose client sent b,
	// once b is queued on it.
	pair := func(b string) net.Conn {
		t.Helper()
		cl, sv := newPair()
		if _, err := io.WriteString(cl, b); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); queued(sv) < len(b); {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d bytes queued after 10 s", queued(sv), len(b))
			}
			time.Sleep(time.Millisecond)
		}
		return sv
	}
	const partial = "GET /page HTTP/1.1\r\nHost: x\r\n"
	whole := partial + TokenHeader + ": t\r\n\r\n"
	if queuedHeaders(pair(partial)) {
		t.Error("queuedHeaders: true for a partial header block")
	}
	if !queuedHeaders(pair(whole)) {
		t.Error("queuedHeaders: false for a whole header block")
	}
	f := &forwarder{pending: list.New(), pendingAt: map[net.Conn]*list.Element{}, ctx: context.Background()}
	owner := pair(whole)
	f.hold(owner)
	flood := make([]net.Conn, maxPending-1)
	for i := range flood {
		flood[i] = pair(partial)
		f.hold(flood[i])
	}
	f.hold(pair(""))
	if !f.unhold(owner) {
		t.Fatal("the owner's queued request was closed to make room; want the flood's oldest closed")
	}
	oneOfFloodClosed(t, f, flood)
}

// oneOfFloodClosed checks that exactly one of flood's connections, held
// by f, was closed to make room (the others still wait). Which one is the flood's oldest as the
// kernel dates them (connectedAt), in clock ticks: on a host starved
// while the test made them, two can swap places, so the test does not
// insist on the first.
func oneOfFloodClosed(t *testing.T, f *forwarder, flood []net.Conn) {
	t.Helper()
	closed := 0
	f.mu.Lock()
	for _, c := range flood {
		if _, ok := f.pendingAt[c]; !ok {
			closed++
		}
	}
	f.mu.Unlock()
	if closed != 1 {
		t.Errorf("%d of the flood's %d connections were closed to make room, want one", closed, len(flood))
	}
}

// When the connection to close to make room is one just accepted (every
// waiting one is new, as when a flood reconnects as fast as its
// connections are closed), hold waits until it has waited minHold, and the
// owner's client, accepted before it sent, has that long: its request,
// queued meanwhile, keeps it (with the oldest simply closed, a silent
// flood churning thousands of times a second closed the owner's
// connection before its starved client wrote).
func TestHoldGivesANewConnectionTime(t *testing.T) {
	t.Parallel()
	pair := loopbackPairs(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &forwarder{pending: list.New(), pendingAt: map[net.Conn]*list.Element{}, ctx: ctx}
	ownerClient, owner := pair()
	w := f.hold(owner)
	// The owner's place is taken as if accepted a little later than it
	// was, so that the wait below outlasts this test's own steps however
	// slowly they run; the rule read is the same.
	f.mu.Lock()
	w.since = time.Now().Add(time.Second)
	f.mu.Unlock()
	flood := make([]net.Conn, maxPending-1)
	for i := range flood {
		_, flood[i] = pair()
		f.hold(flood[i])
	}
	_, extra := pair()
	held := make(chan *waiting, 1)
	go func() { held <- f.hold(extra) }()
	select {
	case <-held:
		t.Fatal("hold closed a connection accepted less than minHold ago without waiting")
	case <-time.After(20 * time.Millisecond):
	}
	if _, err := io.WriteString(ownerClient, "GET /page HTTP/1.1\r\nHost: x\r\n"+TokenHeader+": t\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-held:
		if w == nil {
			t.Fatal("hold refused the connection past the bound")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("hold still waits after 30 s")
	}
	if !f.unhold(owner) {
		t.Fatal("the owner's connection, whose request came while hold waited, was closed to make room")
	}
	oneOfFloodClosed(t, f, flood)
	// A forwarder closed while hold waits ends the wait: the connection
	// is refused, not held.
	f.hold(owner)
	_, late := pair()
	f.mu.Lock()
	for x := f.pending.Front(); x != nil; x = x.Next() {
		x.Value.(*waiting).since = time.Now().Add(time.Hour)
	}
	f.mu.Unlock()
	go func() { held <- f.hold(late) }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case w := <-held:
		if w != nil {
			t.Error("hold held a connection after its forwarder closed")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("hold still waits 30 s after its forwarder closed")
	}
}

// loopbackPairs returns a function that makes a loopback TCP connection
// and returns both its ends (client, then the accepted one); every end is
// closed when t ends.
func loopbackPairs(t *testing.T) func() (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return func() (net.Conn, net.Conn) {
		t.Helper()
		cl, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		sv, err := ln.Accept()
		if err != nil {
			_ = cl.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cl.Close(); _ = sv.Close() })
		return cl, sv
	}
}

// A waiting connection's marks (bytes heard, header block whole) are set
// while the bytes are still queued on its socket, so that victim, which
// reads the queue and the marks, never sees a connection whose request
// has just been read as one that sent nothing (under a flood, a starved
// relay lost its owner's connection in that moment). readNoting also
// keeps c.Read's answers: EOF, and the read deadline.
func TestReadNotingNotesBeforeTheBytesLeave(t *testing.T) {
	t.Parallel()
	pair := loopbackPairs(t)
	client, server := pair()
	req := "GET /page HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := io.WriteString(client, req); err != nil {
		t.Fatal(err)
	}
	_ = server.SetReadDeadline(time.Now().Add(30 * time.Second))
	p := make([]byte, 4096)
	noted := 0
	n, err := readNoting(server, p, func(b []byte) {
		noted += len(b)
		if q := queued(server); q < len(b) {
			t.Errorf("note saw %d bytes while %d were queued: they were read before the note", len(b), q)
		}
		if !queuedHeaders(server) {
			t.Error("note ran after the header block left the socket's queue")
		}
	})
	if err != nil || string(p[:n]) != req || noted != n {
		t.Fatalf("readNoting = %d, %v (%q), noted %d bytes; want the request whole", n, err, p[:n], noted)
	}
	if q := queued(server); q != 0 {
		t.Errorf("%d bytes left queued after the read", q)
	}
	_ = server.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := readNoting(server, p, func([]byte) { t.Error("note called with nothing sent") }); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read past its deadline = %v, want os.ErrDeadlineExceeded", err)
	}
	_ = server.SetReadDeadline(time.Now().Add(30 * time.Second))
	_ = client.Close()
	if n, err := readNoting(server, p, func([]byte) {}); n != 0 || err != io.EOF {
		t.Errorf("read after the client closed = %d, %v; want 0, io.EOF", n, err)
	}
}

// TestHalfCloseTimeoutEndsTheRelay: once the client closed its side, a
// relayed connection to a server that never closes its own ends after
// the Runtime's half-close timeout (WithHalfCloseTimeout), not after the
// default 15 s or the endpoint's idle limit.
func TestHalfCloseTimeoutEndsTheRelay(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed (the test's server is a python3 script)")
	}
	const half = 300 * time.Millisecond
	rt := newRuntime(t, WithHalfCloseTimeout(half))
	c := sandbox.NewClient(rt)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The server answers each request and keeps the connection open.
	const hold = `import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16)
held = []
while True:
    c, _ = s.accept(); held.append(c)
    data = b""
    while b"\r\n\r\n" not in data:
        d = c.recv(4096)
        if not d: break
        data += d
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nheld")
`
	if err := sb.WriteFile(ctx, sb.Home()+"/hold.py", []byte(hold)); err != nil {
		t.Fatal(err)
	}
	var port int
	for try := 1; ; try++ {
		port = testport.Pick()
		p, err := sb.Start(ctx, sandbox.Command{Args: []string{"python3", sb.Home() + "/hold.py", fmt.Sprint(port)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Kill(context.Background()); _ = p.Close() })
		if err = p.WaitForPort(ctx, port); err == nil {
			break
		} else if try == 5 || !testport.TakenIn(err.Error()) {
			t.Fatal(err)
		}
	}
	ep, err := sb.Expose(ctx, port, sandbox.ExposeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	relayed := func() int {
		rt.ports.mu.Lock()
		defer rt.ports.mu.Unlock()
		f := rt.ports.m[sb.ID()][port]
		if f == nil {
			return -1
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.conns)
	}
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(ep.URL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	req := "GET / HTTP/1.1\r\nHost: x\r\n" + TokenHeader + ": " + ep.Header.Get(TokenHeader) + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := relayed(); n <= 0 {
		t.Fatalf("the forwarder tracks %d descriptors while its client is connected, want some", n)
	}
	conn.Close()
	left := time.Now()
	for relayed() != 0 {
		if time.Since(left) > 5*time.Second {
			t.Fatalf("the relay still holds the connection %v after its client left (half-close timeout %v)", time.Since(left), half)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("relay ended %v after the client left (half-close timeout %v)", time.Since(left).Round(time.Millisecond), half)
}

// TestExposeRacingDestroyLeavesNoEndpoint: an Expose that runs while the
// sandbox is destroyed either made its endpoint before (Destroy closes it)
// or fails; either way no listener of the sandbox's is left once both
// returned.
func TestExposeRacingDestroyLeavesNoEndpoint(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed (the test's server is python3 -m http.server)")
	}
	rt := newRuntime(t)
	c := sandbox.NewClient(rt)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for try := range 12 {
		sb, err := c.Create(ctx, sandbox.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := serveFile(ctx, t, sb, "x", []byte("x"))
		id := sb.ID()
		rt.ports.drop(id, false) // serveFile exposed it: start from none
		done := make(chan error, 1)
		go func() {
			_, err := rt.Expose(ctx, id, port, driver.ExposeOptions{})
			done <- err
		}()
		time.Sleep(time.Duration(try%6) * 300 * time.Microsecond)
		if err := rt.Destroy(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil && !errors.Is(err, sberrors.ErrNotFound) {
			t.Fatalf("try %d: Expose racing Destroy: %v, want success or NotFound", try, err)
		}
		rt.ports.mu.Lock()
		left := len(rt.ports.m[id])
		rt.ports.mu.Unlock()
		if left != 0 {
			t.Fatalf("try %d: %d endpoints of sandbox %s left after Destroy returned", try, left, id)
		}
	}
}

// TestExposeBacklogFloodDoesNotDelayOwner: a flood of silent connections
// that keeps the listener's backlog full (2000 clients redialling as soon
// as they are closed) does not keep the owner's request waiting behind it:
// connections that waited in the backlog are not spared as just made, so
// the relay accepts and closes them at full speed, and the owner's
// (its request queued) is read. With each counted as new from its accept,
// the owner waited about one second per 64 flood connections: no answer
// within 20 s here.
func TestExposeBacklogFloodDoesNotDelayOwner(t *testing.T) {
	if !testpar.OwnProcess(t, &floodMu) {
		return // its 2000 clients' descriptors would count against the others'
	}
	_, ep := privateEndpoint(t)
	addr := strings.TrimPrefix(ep.URL, "http://")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	const flood = 2000
	for range flood {
		wg.Go(func() {
			buf := make([]byte, 64)
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
					}
					continue
				}
				closed := make(chan struct{})
				go func() {
					select {
					case <-stop:
					case <-closed:
					}
					c.Close()
				}()
				for { // silent until the relay closes it
					if _, err := c.Read(buf); err != nil {
						break
					}
				}
				close(closed)
			}
		})
	}
	time.Sleep(3 * time.Second) // the backlog fills
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, 20*time.Second)
	if err != nil {
		t.Fatalf("the owner's connect during a flood of %d: %v", flood, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, "GET /page HTTP/1.0\r\nHost: x\r\n"+TokenHeader+": "+ep.Header.Get(TokenHeader)+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	took := time.Since(start)
	if err != nil || !strings.HasSuffix(string(b), "private") {
		t.Fatalf("the owner's request during a flood of %d silent connections: after %v: %v (%.80q)", flood, took.Round(time.Millisecond), err, b)
	}
	// 5× a goal of 2 s (measured: about 0.2 s).
	if took > 10*time.Second {
		t.Errorf("the owner's request was answered %v after its connect, under a flood of %d silent connections", took.Round(time.Millisecond), flood)
	}
	t.Logf("the owner's request answered in %v under a flood of %d", took.Round(time.Millisecond), flood)
}

// connectedAt dates a connection from its handshake, however long it then
// waited in the listener's backlog, and one accepted at once from its
// accept.
func TestConnectedAtCountsTheBacklog(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cl, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	dialed := time.Now()
	time.Sleep(400 * time.Millisecond)
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	now := time.Now()
	if at := connectedAt(c, now); at.After(dialed.Add(100*time.Millisecond)) || at.Before(dialed.Add(-time.Second)) {
		t.Errorf("a connection accepted %v after its handshake is dated %v before its accept, want about %v", now.Sub(dialed), now.Sub(at), now.Sub(dialed))
	}
	// Accepted at once: unless the host was starved between the dial
	// and the reading (a gap near connectedAt's 100 ms threshold, when
	// the case is tried again).
	for attempt := 0; ; attempt++ {
		if attempt == 5 {
			t.Skip("the host is too starved to accept a connection at once: every try took over 50 ms")
		}
		start := time.Now()
		cl2, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c2, err := ln.Accept()
		if err != nil {
			cl2.Close()
			t.Fatal(err)
		}
		now := time.Now()
		at := connectedAt(c2, now)
		cl2.Close()
		c2.Close()
		if gap := now.Sub(start); gap > 50*time.Millisecond {
			t.Logf("dial to accept took %v: trying again", gap)
			continue
		}
		if !at.Equal(now) {
			t.Errorf("a connection accepted at once is dated %v before its accept, want its accept time", now.Sub(at))
		}
		break
	}
}
