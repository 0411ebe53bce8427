package sandboxtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// Ports/RequiresCredentials, Ports/ServerNeverClosesFreesDescriptors and
// Ports/ConnectionCapAndIdle: an endpoint is private (a request without
// its credentials does not reach the port) and bounded (a capped number
// of connections, idle ones closed, both sides of a relayed connection
// freed once the client left even when the server in the sandbox never
// closes its side).

func init() {
	portTests = append(portTests,
		test{name: "RequiresCredentials", needs: needsPorts, fn: testPortRequiresCredentials},
		test{name: "ServerNeverClosesFreesDescriptors", needs: needsPorts, fn: testPortServerNeverCloses, own: true, countsFDs: true},
		test{name: "ConnectionCapAndIdle", needs: needsPorts, fn: testPortConnectionCap},
	)
}

// holdServer answers each connection's first request with a 200 whose
// body is its second argument and "Connection: close", then neither
// reads nor closes the connection again: a server that leaves closing to
// the client.
const holdServer = `import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1024)
body = sys.argv[2].encode()
held = []
while True:
    c, _ = s.accept()
    held.append(c)
    c.settimeout(10)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            d = c.recv(65536)
            if not d: break
            data += d
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
    except Exception:
        pass
`

// fetchOnce sends one GET for path on a connection of its own (closed
// after), with the endpoint's headers changed by edit, and returns the
// status and up to 64 KiB of body (status 0 and the error when the
// request failed).
func fetchOnce(ctx context.Context, hc *http.Client, ep sandbox.Endpoint, path string, edit func(http.Header)) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := ep.NewRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return 0, "", err
	}
	if edit != nil {
		edit(req.Header)
	}
	req.Close = true
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b), err
}

func testPortRequiresCredentials(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	dir := sb.Home() + "/www"
	secret := "private page " + randHex(16)
	check(t, sb.WriteFile(ctx, dir+"/page.txt", []byte(secret)))
	ep, _ := startServer(ctx, t, s, sb, "exec python3 -m http.server PORT --bind 0.0.0.0 --directory "+dir)
	hc := s.portClient(t)
	status, body, err := fetchOnce(ctx, hc, ep, "/page.txt", nil)
	if err != nil || status != http.StatusOK || body != secret {
		t.Fatalf("GET with the endpoint's headers: status %d, body %q, %v", status, body, err)
	}
	if ep.Public {
		t.Skipf("the provider reports %v public (Endpoint.Public): it serves requests without credentials", ep)
	}
	// Every way of sending less than the endpoint asks for: no header at
	// all, each header left out, each header's value altered (same
	// length, last character changed; and empty).
	type variant struct {
		name string
		edit func(http.Header)
	}
	variants := []variant{{"no headers", func(h http.Header) {
		for k := range ep.Header {
			h.Del(k)
		}
	}}}
	for k := range ep.Header {
		variants = append(variants,
			variant{"without " + k, func(h http.Header) { h.Del(k) }},
			variant{k + " altered", func(h http.Header) {
				v := h.Get(k)
				if v == "" {
					v = "x"
				}
				last := v[len(v)-1]
				alt := byte('a')
				if last == 'a' {
					alt = 'b'
				}
				h.Set(k, v[:len(v)-1]+string(alt))
			}},
			variant{k + " empty", func(h http.Header) { h.Set(k, "") }},
		)
	}
	// Through the endpoint's client: an edge that refuses by redirecting
	// to a login page (Daytona's preview proxy) is an error there, where
	// a client following the redirect would get the login page's 200.
	ehc := ep.Client(hc)
	for _, v := range variants {
		status, body, err := fetchOnce(ctx, ehc, ep, "/page.txt", v.edit)
		if strings.Contains(body, secret) || (err == nil && status < 400) {
			t.Errorf("GET %v %s: status %d, body %q (err %v): the endpoint served a request without its credentials", ep, v.name, status, body, err)
		}
		var se *sandbox.Error
		if errors.As(err, &se) && se.Code != sandbox.PermissionDenied {
			t.Errorf("GET %v %s: %v (code %v), want PermissionDenied", ep, v.name, err, se.Code)
		}
	}
	if ep.Socket != "" {
		checkOwnerOnly(t, ep.Socket, 0o600)
		checkOwnerOnly(t, dirOf(ep.Socket), 0o700)
		// The socket reaches the port, bytes as they are.
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", ep.Socket)
		}}
		defer tr.CloseIdleConnections()
		st, b, err := fetchOnce(ctx, &http.Client{Transport: tr}, sandbox.Endpoint{URL: "http://sandbox"}, "/page.txt", nil)
		if err != nil || st != http.StatusOK || b != secret {
			t.Errorf("GET through the endpoint's socket %s: status %d, body %q, %v", ep.Socket, st, b, err)
		}
	}
}

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "/"
}

// checkOwnerOnly fails unless p is this process's user's and has no
// permission bits beyond want for anyone else.
func checkOwnerOnly(t *testing.T, p string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Errorf("Endpoint.Socket: %v", err)
		return
	}
	if perm := fi.Mode().Perm(); perm&^want != 0 || perm&0o077 != 0 {
		t.Errorf("%s has mode %v: others than its owner may use it", p, perm)
	}
	if uid, ok := fileOwner(fi); ok && uid != os.Getuid() {
		t.Errorf("%s belongs to uid %d, not this process's %d", p, uid, os.Getuid())
	}
}

const (
	// neverCloseRequests requests go through one endpoint to a server that
	// never closes a connection, neverCloseParallel at a time.
	neverCloseRequests = 100
	neverCloseParallel = 8
	// neverCloseWait bounds the wait for the relay to free both sides of
	// each connection once its client left: five times the 15 s a relay
	// may give a half-closed connection to finish.
	neverCloseWait = 75 * time.Second
)

func testPortServerNeverCloses(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	home := sb.Home()
	check(t, sb.WriteFile(ctx, home+"/hold.py", []byte(holdServer)))
	body := "held-" + randHex(8)
	ep, _ := startServer(ctx, t, s, sb, "exec python3 "+home+"/hold.py PORT "+body)
	hc := s.portClient(t)
	// One request first, so that what the provider sets up once is
	// counted before.
	if st, b, err := fetchOnce(ctx, hc, ep, "/", nil); err != nil || st != http.StatusOK || b != body {
		t.Fatalf("first GET: status %d, body %q, %v", st, b, err)
	}
	hc.CloseIdleConnections()
	start := time.Now()
	settled := fdsSettle(ctx, t, neverCloseWait, func(ctx context.Context) {
		errs := make(chan error, neverCloseRequests)
		sem := make(chan struct{}, neverCloseParallel)
		var wg sync.WaitGroup
		for range neverCloseRequests {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				st, b, err := fetchOnce(ctx, hc, ep, "/", nil)
				if err == nil && (st != http.StatusOK || b != body) {
					err = fmt.Errorf("status %d, body %q", st, b)
				}
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("GET through %v: %v", ep, err)
		}
		hc.CloseIdleConnections()
	})
	switch {
	case t.Failed():
	case !settled.checked():
		t.Skipf("descriptor check needs /proc/self/fd, not readable on %s", runtime.GOOS)
	case !settled.ok:
		t.Fatalf("descriptors still open %v after %d clients closed their connections to a server that never closes its side, in two rounds (slack %d): the relay holds connections whose client left (%s)",
			neverCloseWait, neverCloseRequests, concFDSlack, settled)
	}
	t.Logf("descriptors: %s, in %v", settled, time.Since(start).Round(time.Millisecond))
}

const (
	capConns = 3
	capIdle  = 2 * time.Second
)

func testPortConnectionCap(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	home := sb.Home()
	check(t, sb.WriteFile(ctx, home+"/srv.py", []byte(portServer)))
	ep, _ := startServerOpts(ctx, t, s, sb, "exec python3 "+home+"/srv.py PORT "+home+"/go",
		sandbox.ExposeOptions{MaxConns: capConns, IdleTimeout: capIdle})
	if ep.MaxConns == 0 {
		t.Skipf("%v: the provider's edge applies its own connection limits (Endpoint.MaxConns 0)", ep)
	}
	if ep.MaxConns != capConns || ep.IdleTimeout != capIdle {
		t.Fatalf("Expose with MaxConns %d, IdleTimeout %v: endpoint reports %d, %v", capConns, capIdle, ep.MaxConns, ep.IdleTimeout)
	}
	u, err := url.Parse(ep.URL)
	if err != nil || u.Scheme != "http" {
		t.Skipf("%v: the test opens plain TCP connections to http:// endpoints", ep)
	}
	// keep opens a connection and sends a request on it (the server keeps
	// HTTP/1.1 connections open); ok reports whether its answer came.
	keep := func() (net.Conn, *bufio.Reader, bool) {
		c, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
		if err != nil {
			return nil, nil, false
		}
		br := bufio.NewReader(c)
		return c, br, roundTrip(c, br, ep) == nil
	}
	// keepBy is keep, tried again every 50 ms until deadline (a
	// connection within the cap is refused until the relay has seen one
	// go); ok is false when none was served by then.
	keepBy := func(deadline time.Time) (net.Conn, *bufio.Reader, bool) {
		for {
			c, br, ok := keep()
			if ok {
				return c, br, true
			}
			if c != nil {
				c.Close()
			}
			if time.Now().After(deadline) {
				return nil, nil, false
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	// The relay closes a connection idle for IdleTimeout, so on a loaded
	// host one of the three held may be gone by the time the fourth comes,
	// and an answer to the fourth is then the cap at work. An answer fails
	// the check only when each held connection still answers after it;
	// otherwise the round runs again with fresh connections (a connection
	// within the cap is retried until the relay has seen the last round's
	// go).
	const capRounds = 3
	for round := 1; ; round++ {
		var readers []*bufio.Reader
		for i := range capConns {
			deadline := time.Now() // the first round: one try
			if round > 1 {
				deadline = deadline.Add(5 * capIdle)
			}
			c, br, ok := keepBy(deadline)
			if !ok {
				t.Fatalf("connection %d of %d (within the cap) got no answer", i+1, capConns)
			}
			held, readers = append(held, c), append(readers, br)
		}
		c, _, ok := keep()
		if c != nil {
			c.Close()
		}
		if !ok {
			break
		}
		alive := 0
		for i, h := range held {
			if roundTrip(h, readers[i], ep) == nil {
				alive++
			}
		}
		if alive == capConns {
			t.Fatalf("connection %d got an answer with %d held: the endpoint does not cap connections (MaxConns %d)", capConns+1, capConns, capConns)
		}
		if round == capRounds {
			t.Fatalf("connection %d got an answer in each of %d rounds, each time with a held connection closed as idle (IdleTimeout %v) before it: this host is too slow for the check", capConns+1, capRounds, capIdle)
		}
		t.Logf("round %d: connection %d got an answer, %d of the %d held having been closed as idle; again", round, capConns+1, capConns-alive, capConns)
		for _, h := range held {
			h.Close()
		}
		held = nil
	}
	// One leaves: a new one is served (once the relay saw it go).
	held[0].Close()
	held = held[1:]
	c, _, ok := keepBy(time.Now().Add(5 * capIdle))
	if !ok {
		t.Fatalf("no connection served within %v after one of %d left", 5*capIdle, capConns)
	}
	held = append(held, c)
	// The last one is idle from now on: the relay closes it after
	// IdleTimeout, not long before.
	idle := held[len(held)-1]
	start := time.Now()
	_ = idle.SetReadDeadline(start.Add(5 * capIdle))
	n, err := idle.Read(make([]byte, 1))
	took := time.Since(start)
	if n > 0 || (err != nil && errors.Is(err, os.ErrDeadlineExceeded)) {
		t.Fatalf("an idle connection still open %v after the endpoint's IdleTimeout %v (read %d bytes, %v)", took, capIdle, n, err)
	}
	if took < capIdle/2 {
		t.Fatalf("an idle connection closed after %v, before the endpoint's IdleTimeout %v", took, capIdle)
	}
}

// roundTrip sends a GET of a missing path with the endpoint's headers on
// c and reads the answer's status line and headers (the server answers
// 404 with no body).
func roundTrip(c net.Conn, br *bufio.Reader, ep sandbox.Endpoint) error {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	var b strings.Builder
	fmt.Fprintf(&b, "GET /missing HTTP/1.1\r\nHost: %s\r\n", strings.TrimPrefix(ep.URL, "http://"))
	for k, vs := range ep.Header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		return err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}
