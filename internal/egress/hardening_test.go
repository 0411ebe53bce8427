package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

// brokerWith starts a brokered TLS upstream whose handler the test
// chooses (nil: set srv.Config.Handler later) and a proxy that brokers
// testValue to it as api.example.com.
func brokerWith(t *testing.T, h http.Handler) (addr, port string, p *Proxy, srv *httptest.Server, logs *logBuf) {
	srv = httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	p, addr, logs = startProxy(t, Config{
		Policy:        allowList("api.example.com", "127.0.0.1/32"),
		Resolver:      newResolver("api.example.com", "127.0.0.1"),
		UpstreamRoots: roots,
		Secrets: []driver.BrokeredSecret{{
			Value: testValue, Hosts: []string{"api.example.com"}, Header: "Authorization", Format: "Bearer %s", Placeholder: testPlaceholder,
		}},
	})
	_, port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return
}

// hijacked is a handler that writes raw bytes made from the request.
func hijacked(write func(w io.Writer, r *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		write(bw, r)
		bw.Flush()
	}
}

// brokeredTLS opens CONNECT api.example.com:port and TLS inside it,
// trusting the proxy's CA, for hand-written HTTP.
func brokeredTLS(t *testing.T, addr, port string, p *Proxy) *tls.Conn {
	t.Helper()
	c, resp, body := rawConnect(t, addr, "api.example.com:"+port)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s %s", resp.Status, body)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CACertPEM())
	tc := tls.Client(c, &tls.Config{ServerName: "api.example.com", RootCAs: pool, NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	tc.SetDeadline(time.Now().Add(15 * time.Second))
	return tc
}

// brokeredExchange sends one hand-written request through a brokered
// tunnel and returns all the client reads.
func brokeredExchange(t *testing.T, addr, port string, p *Proxy, extra string) string {
	t.Helper()
	tc := brokeredTLS(t, addr, port, p)
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: api.example.com:%s\r\n%s\r\n", port, extra)
	raw, _ := io.ReadAll(tc)
	return string(raw)
}

// An upstream that answers with the Authorization it got as its status
// line: the proxy's 502 and its log must not quote it.
func TestUpstreamGarbageDoesNotEchoSecret(t *testing.T) {
	addr, port, p, _, logs := brokerWith(t, hijacked(func(w io.Writer, r *http.Request) {
		fmt.Fprintf(w, "%s\r\n\r\n", r.Header.Get("Authorization"))
	}))
	raw := brokeredExchange(t, addr, port, p, "Connection: close\r\n")
	if strings.Contains(raw, testValue) {
		t.Errorf("the secret value reached the client in the proxy's own answer:\n%s", raw)
	}
	mustContain(t, "answer", raw, "502", "malformed response")
	if strings.Contains(logs.String(), testValue) {
		t.Errorf("the secret value is in the log: %s", logs.String())
	}
}

// Whatever text the proxy writes to a client or a log passes through the
// masking of every secret's value, also one of another host.
func TestMessagesMaskEverySecret(t *testing.T) {
	other := "tok-other-0123456789"
	logs := &logBuf{}
	p, err := New(Config{Secrets: []driver.BrokeredSecret{
		{Value: testValue, Hosts: []string{"api.example.com"}, Header: "Authorization", Placeholder: testPlaceholder},
		{Value: other, Hosts: []string{"b.example.com"}, Header: "X-Key", Placeholder: "PH2"},
	}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := p.mask("egress: x " + testValue + " y " + other)
	if strings.Contains(got, testValue) || strings.Contains(got, other) {
		t.Errorf("mask left a value: %q", got)
	}
	p.log.Info("egress: "+other, "reason", "bad "+testValue, "err", fmt.Errorf("wrapped %s", other))
	p.log.With("k", testValue).WithGroup("g").Info("m", "v", other)
	if s := logs.String(); strings.Contains(s, testValue) || strings.Contains(s, other) {
		t.Errorf("the log holds a value: %s", s)
	}
}

// An upstream whose response header never ends is cut off at the cap
// with a 502, not buffered without bound.
func TestUpstreamResponseHeaderCapped(t *testing.T) {
	wrote := make(chan int64, 1)
	port := rawServer(t, func(c net.Conn) {
		http.ReadRequest(bufio.NewReader(c))
		io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: ")
		chunk := []byte(strings.Repeat("a", 64<<10))
		var n int64
		for n < 16<<20 {
			m, err := c.Write(chunk)
			n += int64(m)
			if err != nil {
				break
			}
		}
		wrote <- n
	})
	_, addr, _ := startProxy(t, Config{Policy: allowList("big.example.com", "127.0.0.1/32"), Resolver: newResolver("big.example.com", "127.0.0.1")})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Fprintf(c, "GET http://big.example.com:%s/ HTTP/1.1\r\n\r\n", port)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 502 || !strings.Contains(string(b), "response header too large") {
		t.Errorf("answer %s %q, want 502 response header too large", resp.Status, b)
	}
	if n := <-wrote; n >= 16<<20 {
		t.Errorf("the proxy read all %d MiB of the header", n>>20)
	}
}

// A flood of connections that each send most of a large request head
// and stop: the proxy's heap stays under a bound whatever their number
// (MaxConns caps the served ones; the rest must not buffer heads either;
// a budget caps the header bytes held at once).
//
// It runs beside the package's other parallel tests, which only wait on
// timeouts with a connection or two: their allocations are kilobytes
// against a bound of 32 MiB.
func TestPartialHeaderFloodMemoryBounded(t *testing.T) {
	t.Parallel()
	_, addr, _ := startProxy(t, Config{Policy: allowList("api.example.com"), HeaderTimeout: time.Minute})
	const conns = 1000
	head := []byte("CONNECT api.example.com:1 HTTP/1.1\r\nX: " + strings.Repeat("a", 60000))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var cs []net.Conn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
		c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(head); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second) // let the proxy read what it will
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d connections with a 60 kB partial head: heap grew %d MiB", conns, grew>>20)
	if limit := int64(32 << 20); grew > limit {
		t.Errorf("heap grew %d MiB, over the %d MiB bound", grew>>20, limit>>20)
	}
}

// The host's own interface addresses are refused like loopback, even
// under allow-all, unless an AllowCIDR names the address.
func TestHostOwnAddressRefused(t *testing.T) {
	own := netip.MustParseAddr("192.0.2.2")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Read(make([]byte, 1))
			io.WriteString(c, "SSH-2.0-host-sshd\r\n")
			c.Close()
		}
	}()
	var mu sync.Mutex
	var dialled []string
	cfg := func(pol *driver.NetworkPolicy) Config {
		return Config{
			Policy:    pol,
			Resolver:  newResolver("host.example.com", own.String()),
			HostAddrs: func() ([]netip.Addr, error) { return []netip.Addr{own, netip.MustParseAddr("2001:db8::2")}, nil },
			Dial: func(ctx context.Context, network, a string) (net.Conn, error) {
				mu.Lock()
				dialled = append(dialled, a)
				mu.Unlock()
				return (&net.Dialer{}).DialContext(ctx, network, ln.Addr().String())
			},
		}
	}
	allowAll := &driver.NetworkPolicy{Mode: driver.NetworkAllowAll}
	_, addr, _ := startProxy(t, cfg(allowAll))
	for _, target := range []string{"192.0.2.2:22", "host.example.com:22", "[2001:db8::2]:22", "[::ffff:192.0.2.2]:22"} {
		_, resp, body := rawConnect(t, addr, target)
		if resp.StatusCode != 403 {
			t.Errorf("CONNECT %s to the host's own address: %s %s", target, resp.Status, body)
		} else {
			mustContain(t, "refusal", body, "the proxy's host")
		}
	}
	// SOCKS too.
	if _, code := socksDial(t, addr, 1, 1, own.AsSlice(), 22); code != socksNotAllowed {
		t.Errorf("SOCKS to the host's own address: reply %#x", code)
	}
	// A wide AllowCIDR does not name it; the address itself does.
	_, addr2, _ := startProxy(t, cfg(allowList("192.0.2.0/24", "0.0.0.0/0")))
	if _, resp, body := rawConnect(t, addr2, "192.0.2.2:22"); resp.StatusCode != 403 {
		t.Errorf("allow-list 192.0.2.0/24 reached the host's own address: %s %s", resp.Status, body)
	}
	_, addr3, _ := startProxy(t, cfg(allowList("192.0.2.2/32")))
	if _, resp, body := rawConnect(t, addr3, "192.0.2.2:22"); resp.StatusCode != 200 {
		t.Errorf("allow-list 192.0.2.2/32 refused the host's address it names: %s %s", resp.Status, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialled) != 1 {
		t.Errorf("dialled %v, want only the one allowed by 192.0.2.2/32", dialled)
	}
}

// The SOCKS success reply does not tell the sandbox the address the
// proxy connected from (the host's address).
func TestSOCKSReplyHidesBoundAddress(t *testing.T) {
	srv := newEcho(t, false)
	_, addr, _ := startProxy(t, Config{Policy: allowList("127.0.0.1/32")})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	ap := netip.MustParseAddrPort(srv.Listener.Addr().String())
	req := []byte{5, 1, 0, 5, 1, 0, 1}
	req = append(req, ap.Addr().AsSlice()...)
	req = append(req, byte(ap.Port()>>8), byte(ap.Port()))
	c.Write(req)
	got := make([]byte, 2+10)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if want := []byte{5, 0, 5, 0, 0, 1, 0, 0, 0, 0, 0, 0}; string(got) != string(want) {
		t.Errorf("SOCKS exchange % x, want % x (BND 0.0.0.0:0)", got, want)
	}
}

// A plain-HTTP request upgraded (101) is a tunnel like a CONNECT one: a
// SetPolicy that refuses its destination closes it at once.
func TestUpgradedPlainTunnelClosedBySetPolicy(t *testing.T) {
	port := rawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		io.Copy(c, br)
	})
	p, addr, _ := startProxy(t, Config{Policy: allowList("ws.example.com", "127.0.0.1/32"), Resolver: newResolver("ws.example.com", "127.0.0.1")})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET http://ws.example.com:%s/ HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", port)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	io.WriteString(c, "ping")
	got := make([]byte, 4)
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "ping" {
		t.Fatalf("echo before SetPolicy: %q %v", got, err)
	}
	if err := p.SetPolicy(allowList("other.example.com")); err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "after")
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if n, err := io.ReadFull(br, make([]byte, 5)); err == nil {
		t.Errorf("the upgraded tunnel still carries data after SetPolicy refused it (%d bytes)", n)
	}
}

// An AllowCIDR lets a special-purpose address through only when it lies
// inside that special range: 0.0.0.0/0 or ::/0 is not a way to name
// loopback or the metadata service.
func TestWideAllowCIDRDoesNotOpenSpecialRanges(t *testing.T) {
	echo := newEcho(t, false)
	for _, tc := range []struct {
		cidrs []string
		ok    bool
	}{
		{[]string{"0.0.0.0/0"}, false},
		{[]string{"0.0.0.0/1"}, false},
		{[]string{"::/0", "0.0.0.0/0"}, false},
		{[]string{"127.0.0.0/8"}, true},
		{[]string{"127.0.0.1/32"}, true},
	} {
		_, addr, _ := startProxy(t, Config{Policy: allowList(tc.cidrs...), Resolver: newResolver()})
		_, resp, body := rawConnect(t, addr, echo.Listener.Addr().String())
		if (resp.StatusCode == 200) != tc.ok {
			t.Errorf("allow-list %v: CONNECT %s -> %s %s", tc.cidrs, echo.Listener.Addr(), resp.Status, body)
		}
	}
	c, err := compilePolicy(allowList("0.0.0.0/0", "::/0"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"169.254.169.254", "10.1.2.3", "::1", "fe80::1", "64:ff9b::a9fe:a9fe", "::ffff:127.0.0.1"} {
		if r := c.checkLiteral(netip.MustParseAddr(a)); r == nil {
			t.Errorf("allow-list 0.0.0.0/0 ::/0 lets %s through", a)
		}
	}
	if r := c.checkLiteral(netip.MustParseAddr("203.0.113.9")); r != nil {
		t.Errorf("allow-list 0.0.0.0/0 refuses a public address: %v", r)
	}
	c, _ = compilePolicy(allowList("169.254.169.254/32"))
	if r := c.checkLiteral(netip.MustParseAddr("64:ff9b::a9fe:a9fe")); r != nil {
		t.Errorf("169.254.169.254/32 refuses its NAT64 form: %v", r)
	}
}

// Response trailers of a brokered host are masked like its headers.
func TestBrokeredTrailerMasked(t *testing.T) {
	addr, port, p, _, _ := brokerWith(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Echo")
		w.WriteHeader(200)
		io.WriteString(w, "hello\n")
		w.(http.Flusher).Flush()
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
	}))
	raw := brokeredExchange(t, addr, port, p, "Connection: close\r\n")
	if strings.Contains(raw, testValue) {
		t.Errorf("the secret value reached the client in a trailer:\n%s", raw)
	}
	mustContain(t, "response", raw, "hello", "X-Echo: Bearer "+strings.Repeat("*", len(testValue)))
}

// The reason phrase of a brokered host's status line is masked.
func TestBrokeredReasonPhraseMasked(t *testing.T) {
	addr, port, p, _, _ := brokerWith(t, hijacked(func(w io.Writer, r *http.Request) {
		fmt.Fprintf(w, "HTTP/1.1 400 Bad token %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", r.Header.Get("Authorization"))
	}))
	raw := brokeredExchange(t, addr, port, p, "Connection: close\r\n")
	if strings.Contains(raw, testValue) {
		t.Errorf("the secret value reached the client in the reason phrase:\n%s", raw)
	}
	mustContain(t, "response", raw, "HTTP/1.1 400 ")
}

// A protocol upgrade on a brokered host is refused before the request
// leaves: after a 101 the stream is raw and the value could not be
// masked in it.
func TestBrokeredUpgradeRefused(t *testing.T) {
	var mu sync.Mutex
	reached := 0
	addr, port, p, _, _ := brokerWith(t, hijacked(func(w io.Writer, r *http.Request) {
		mu.Lock()
		reached++
		mu.Unlock()
		fmt.Fprintf(w, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nyou sent: %s\n", r.Header.Get("Authorization"))
	}))
	raw := brokeredExchange(t, addr, port, p, "Connection: Upgrade\r\nUpgrade: echo\r\n")
	if strings.Contains(raw, testValue) {
		t.Errorf("the secret value reached the client after an upgrade:\n%s", raw)
	}
	mustContain(t, "answer", raw, "HTTP/1.1 403 ", "upgrade", "brokered")
	mu.Lock()
	defer mu.Unlock()
	if reached != 0 {
		t.Errorf("the upgrade request reached the upstream %d times", reached)
	}
}

// Without Config.HostAddrs the proxy reads the host's interfaces: an
// interface address that is in no special range is refused too.
func TestHostOwnAddressFromInterfaces(t *testing.T) {
	addrs, err := interfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(addrs, netip.MustParseAddr("127.0.0.1")) {
		t.Errorf("interface addresses %v lack 127.0.0.1", addrs)
	}
	var own netip.Addr
	for _, a := range addrs {
		if specialKind(a) == "" {
			own = a
			break
		}
	}
	if !own.IsValid() {
		t.Skipf("no interface address outside the special ranges in %v", addrs)
	}
	var dialled atomic.Bool
	_, addr, _ := startProxy(t, Config{
		Policy: &driver.NetworkPolicy{Mode: driver.NetworkAllowAll},
		Dial: func(ctx context.Context, network, a string) (net.Conn, error) {
			dialled.Store(true)
			return nil, fmt.Errorf("no dial expected, got %s", a)
		},
	})
	_, resp, body := rawConnect(t, addr, net.JoinHostPort(own.String(), "22"))
	if resp.StatusCode != 403 || dialled.Load() {
		t.Errorf("CONNECT to the host's interface address %s: %s %s (dialled %v)", own, resp.Status, body, dialled.Load())
	}
}
