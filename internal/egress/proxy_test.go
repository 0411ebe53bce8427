package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/proxy"

	"github.com/sandboxkit/sandbox/driver"
)

// The test servers' certificate is for example.com and *.example.com;
// the test resolver maps names under it to 127.0.0.1, which the policies
// of the allowed cases let through with AllowCIDRs 127.0.0.1/32.

func TestConnectAllowed(t *testing.T) {
	srv := newEcho(t, true)
	res := newResolver("www.example.com", "127.0.0.1")
	p, addr, _ := startProxy(t, Config{Policy: allowList("www.example.com", "127.0.0.1/32"), Resolver: res})
	c := client(t, addr, p, srv)
	code, body, _ := get(t, c, "https://www.example.com:"+srv.port()+"/hello", nil)
	if code != 200 {
		t.Fatalf("GET through CONNECT: %d %s", code, body)
	}
	mustContain(t, "body", body, "host=www.example.com:"+srv.port(), "path=/hello")
	if n := res.count("www.example.com"); n != 1 {
		t.Errorf("resolved %d times, want 1 (by the proxy)", n)
	}
}

func TestLoopbackRefusedWithoutAllowCIDR(t *testing.T) {
	srv := newEcho(t, true)
	plain := newEcho(t, false)
	res := newResolver("www.example.com", "127.0.0.1")
	p, addr, logs := startProxy(t, Config{Policy: allowList("www.example.com"), Resolver: res})
	_, resp, body := rawConnect(t, addr, "www.example.com:"+srv.port())
	if resp.StatusCode != 403 {
		t.Fatalf("CONNECT to a name resolving to loopback: %d, want 403", resp.StatusCode)
	}
	mustContain(t, "body", body, "egress: www.example.com resolves to 127.0.0.1, a loopback address the policy does not allow")
	code, body, _ := get(t, client(t, addr, p), "http://www.example.com:"+plain.port()+"/", nil)
	if code != 403 || !strings.Contains(body, "loopback") {
		t.Errorf("plain HTTP: %d %q, want 403 loopback", code, body)
	}
	if len(srv.requests())+len(plain.requests()) != 0 {
		t.Error("a server was reached")
	}
	mustContain(t, "log", logs.String(), "level=INFO", "host=www.example.com", "loopback")
}

func TestPrivateAndMetadataRefused(t *testing.T) {
	res := newResolver("a.example.com", "10.0.0.5", "b.example.com", "169.254.169.254",
		"c.example.com", "93.184.216.34", "c.example.com", "fd00::1",
		"d.example.com", "::ffff:192.168.1.1", "e.example.com", "64:ff9b::7f00:1", "f.example.com", "100.64.1.1")
	_, addr, _ := startProxy(t, Config{Policy: &driver.NetworkPolicy{Mode: driver.NetworkAllowAll}, Resolver: res})
	for name, want := range map[string]string{
		"a.example.com": "egress: a.example.com resolves to 10.0.0.5, a private address the policy does not allow",
		"b.example.com": "169.254.169.254, a link-local address (the range of the cloud metadata service)",
		"c.example.com": "fd00::1, a private (unique local) address", // one bad address among good ones refuses
		"d.example.com": "192.168.1.1, a private address",
		"e.example.com": "64:ff9b::7f00:1, a NAT64 form of 127.0.0.1, a loopback address",
		"f.example.com": "100.64.1.1, a shared (CGNAT) address",
	} {
		_, resp, body := rawConnect(t, addr, name+":443")
		if resp.StatusCode != 403 || !strings.Contains(body, want) {
			t.Errorf("CONNECT %s: %d %q, want 403 %q", name, resp.StatusCode, body, want)
		}
	}
}

func TestAllowCIDRLetsPrivateThrough(t *testing.T) {
	var dialed atomic.Value
	res := newResolver("db.example.com", "10.1.2.3")
	_, addr, _ := startProxy(t, Config{
		Policy:   allowList("db.example.com", "10.0.0.0/8"),
		Resolver: res,
		Dial: func(ctx context.Context, network, a string) (net.Conn, error) {
			dialed.Store(a)
			return nil, fmt.Errorf("test dial refused")
		},
	})
	_, resp, body := rawConnect(t, addr, "db.example.com:5432")
	if resp.StatusCode != 502 {
		t.Fatalf("CONNECT: %d %q, want 502 from the dial", resp.StatusCode, body)
	}
	mustContain(t, "body", body, "egress: cannot connect to db.example.com:5432")
	if got := dialed.Load(); got != "10.1.2.3:5432" {
		t.Errorf("dialed %v, want the checked address 10.1.2.3:5432", got)
	}
}

func TestDNSRebinding(t *testing.T) {
	srv := newEcho(t, false)
	res := newResolver()
	res.seq["www.example.com"] = [][]netip.Addr{{netip.MustParseAddr("93.184.216.34")}, {netip.MustParseAddr("127.0.0.1")}}
	var mu sync.Mutex
	var dialed []string
	_, addr, _ := startProxy(t, Config{
		Policy:   allowList("www.example.com"),
		Resolver: res,
		Dial: func(ctx context.Context, network, a string) (net.Conn, error) {
			mu.Lock()
			dialed = append(dialed, a)
			mu.Unlock()
			// The public address stands for the test server.
			if strings.HasPrefix(a, "93.184.216.34:") {
				return net.Dial(network, srv.Listener.Addr().String())
			}
			return net.Dial(network, a)
		},
	})
	c1, resp, body := rawConnect(t, addr, "www.example.com:80")
	if resp.StatusCode != 200 {
		t.Fatalf("first CONNECT: %d %s", resp.StatusCode, body)
	}
	fmt.Fprintf(c1, "GET / HTTP/1.1\r\nHost: www.example.com\r\nConnection: close\r\n\r\n")
	if b, _ := io.ReadAll(c1); !strings.Contains(string(b), "200 OK") {
		t.Fatalf("first request: %q", b)
	}
	_, resp, body = rawConnect(t, addr, "www.example.com:80")
	if resp.StatusCode != 403 || !strings.Contains(body, "127.0.0.1, a loopback address") {
		t.Errorf("second CONNECT (name now resolves to loopback): %d %q, want 403", resp.StatusCode, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialed) != 1 || dialed[0] != "93.184.216.34:80" {
		t.Errorf("dialed %q, want only the checked public address", dialed)
	}
}

func TestDeniedNameNotResolved(t *testing.T) {
	res := newResolver("evil.example.com", "93.184.216.34")
	_, addr, logs := startProxy(t, Config{Policy: allowList("www.example.com", "127.0.0.1/32"), Resolver: res})
	_, resp, body := rawConnect(t, addr, "Evil.Example.com.:443")
	if resp.StatusCode != 403 || strings.TrimSpace(body) != "egress: evil.example.com is not in the allow-list" {
		t.Errorf("CONNECT: %d %q", resp.StatusCode, body)
	}
	if n := res.count("evil.example.com"); n != 0 {
		t.Errorf("a name outside the allow-list was resolved %d times (DNS is a way out)", n)
	}
	mustContain(t, "log", logs.String(), "evil.example.com is not in the allow-list")
}

func TestIPLiteral(t *testing.T) {
	srv := newEcho(t, false)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	t.Run("allow-list without CIDR", func(t *testing.T) {
		_, addr, _ := startProxy(t, Config{Policy: allowList("www.example.com"), Resolver: newResolver()})
		_, resp, body := rawConnect(t, addr, "127.0.0.1:"+port)
		if resp.StatusCode != 403 || !strings.Contains(body, "egress: 127.0.0.1 is an IP address no allowed CIDR covers") {
			t.Errorf("%d %q", resp.StatusCode, body)
		}
		_, resp, body = rawConnect(t, addr, "93.184.216.34:443")
		if resp.StatusCode != 403 {
			t.Errorf("public literal in allow-list mode: %d %q, want 403", resp.StatusCode, body)
		}
	})
	t.Run("allow-list with CIDR", func(t *testing.T) {
		_, addr, _ := startProxy(t, Config{Policy: allowList("127.0.0.0/8"), Resolver: newResolver()})
		c, resp, body := rawConnect(t, addr, "127.0.0.1:"+port)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if b, _ := io.ReadAll(c); !strings.Contains(string(b), "200 OK") {
			t.Errorf("through the tunnel: %q", b)
		}
	})
	t.Run("allow-all", func(t *testing.T) {
		_, addr, _ := startProxy(t, Config{Policy: &driver.NetworkPolicy{Mode: driver.NetworkAllowAll, DenyCIDRs: []string{"198.51.100.0/24"}}, Resolver: newResolver()})
		for target, want := range map[string]string{
			"127.0.0.1:" + port:          "127.0.0.1 is a loopback address",
			"[::1]:" + port:              "::1 is a loopback address",
			"[::ffff:127.0.0.1]:" + port: "127.0.0.1 is a loopback address",
			"169.254.169.254:80":         "169.254.169.254 is a link-local address",
			"[fe80::1]:80":               "a link-local address",
			"0.0.0.0:80":                 "unspecified",
			"255.255.255.255:80":         "broadcast",
			"224.0.0.1:80":               "multicast",
			"198.51.100.7:80":            "198.51.100.7 is in the deny-list (198.51.100.0/24)",
			"[64:ff9b::c633:6407]:80":    "in the deny-list (198.51.100.0/24)",
		} {
			_, resp, body := rawConnect(t, addr, target)
			if resp.StatusCode != 403 || !strings.Contains(body, want) {
				t.Errorf("CONNECT %s: %d %q, want 403 %q", target, resp.StatusCode, body, want)
			}
		}
	})
}

func TestWildcardAndDenyWins(t *testing.T) {
	srv := newEcho(t, false)
	res := newResolver("a.example.com", "127.0.0.1", "a.b.example.com", "127.0.0.1", "example.com", "127.0.0.1", "evil.example.com", "127.0.0.1")
	pol := &driver.NetworkPolicy{Mode: driver.NetworkAllowList, AllowDomains: []string{"*.example.com"}, AllowCIDRs: []string{"127.0.0.1/32"}, DenyDomains: []string{"*.bad.example.com", "evil.example.com"}}
	p, addr, _ := startProxy(t, Config{Policy: pol, Resolver: res})
	c := client(t, addr, p)
	for host, want := range map[string]int{"a.example.com": 200, "a.b.example.com": 200, "A.Example.COM.": 200, "example.com": 403, "evil.example.com": 403, "x.bad.example.com": 403} {
		code, body, _ := get(t, c, "http://"+host+":"+srv.port()+"/", nil)
		if code != want {
			t.Errorf("GET http://%s: %d %q, want %d", host, code, body, want)
		}
		if strings.Contains(host, "evil") || strings.Contains(host, "bad") {
			mustContain(t, "body", body, "egress: "+host+" is in the deny-list")
		}
	}
}

func TestPlainHTTPKeepAlive(t *testing.T) {
	srv := newEcho(t, false)
	res := newResolver("www.example.com", "127.0.0.1", "evil.example.com", "127.0.0.1")
	_, addr, _ := startProxy(t, Config{Policy: allowList("www.example.com", "127.0.0.1/32"), Resolver: res})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	do := func(host, extra string) (*http.Response, string) {
		t.Helper()
		fmt.Fprintf(c, "GET http://%s:%s/p?q=1 HTTP/1.1\r\nHost: wrong.example\r\n%s\r\n", host, srv.port(), extra)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", host, err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := do("www.example.com", "Proxy-Authorization: Basic x\r\nProxy-Foo: y\r\nConnection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 300\r\nX-End: 2\r\n")
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("first: %d close=%v %q", resp.StatusCode, resp.Close, body)
	}
	resp, body = do("evil.example.com", "")
	if resp.StatusCode != 403 || !strings.Contains(body, "evil.example.com is not in the allow-list") || resp.Close {
		t.Fatalf("second: %d close=%v %q", resp.StatusCode, resp.Close, body)
	}
	resp, body = do("www.example.com", "")
	if resp.StatusCode != 200 {
		t.Fatalf("third: %d %q", resp.StatusCode, body)
	}
	reqs := srv.requests()
	if len(reqs) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(reqs))
	}
	r := reqs[0]
	for _, h := range []string{"Proxy-Authorization", "Proxy-Foo", "X-Hop", "Keep-Alive", "User-Agent"} {
		if v, ok := r.Header[h]; ok {
			t.Errorf("upstream got %s: %q", h, v)
		}
	}
	if r.Header.Get("X-End") != "2" || r.Host != "www.example.com:"+srv.port() || r.URL.String() != "/p?q=1" {
		t.Errorf("upstream request: host %q url %q x-end %q", r.Host, r.URL, r.Header.Get("X-End"))
	}
}

func TestPlainHTTPRedirectNotFollowed(t *testing.T) {
	srv := newEcho(t, false)
	res := newResolver("www.example.com", "127.0.0.1")
	_, addr, _ := startProxy(t, Config{Policy: allowList("www.example.com", "127.0.0.1/32"), Resolver: res})
	c, _ := net.Dial("tcp", addr)
	defer c.Close()
	fmt.Fprintf(c, "GET http://www.example.com:%s/?redirect=http://www.example.com:%s/next HTTP/1.1\r\nHost: x\r\n\r\n", srv.port(), srv.port())
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 302 || len(srv.requests()) != 1 {
		t.Errorf("status %d after %d upstream requests, want the 302 itself after 1", resp.StatusCode, len(srv.requests()))
	}
}

func TestBadRequests(t *testing.T) {
	_, addr, _ := startProxy(t, Config{Policy: &driver.NetworkPolicy{Mode: driver.NetworkAllowAll}, Resolver: newResolver()})
	for _, tc := range []struct{ send, status, body string }{
		{"GET /index.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "400", "absolute form"},
		{"GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n", "400", "use CONNECT"},
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "400", ""},
		{"CONNECT example.com HTTP/1.1\r\nHost: example.com\r\n\r\n", "400", "host:port"},
		{"CONNECT example.com:0 HTTP/1.1\r\n\r\n", "400", "not a number from 1 to 65535"},
		{"CONNECT exa_mple..com:443 HTTP/1.1\r\n\r\n", "400", "not a valid host"},
		{"CONNECT 127.1:443 HTTP/1.1\r\n\r\n", "400", "read as an IPv4 address"},
		{"hello\r\n\r\n", "400", "malformed request"},
		{"GET http://x/ HTTP/1.1\r\nX: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", "431", "larger than"},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, tc.send)
		b, _ := io.ReadAll(c)
		c.Close()
		if !strings.HasPrefix(string(b), "HTTP/1.1 "+tc.status) || !strings.Contains(string(b), tc.body) {
			t.Errorf("%.40q: got %q, want %s %q", tc.send, b, tc.status, tc.body)
		}
	}
}

func TestUpstreamAndDNSFailure(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	_, closedPort, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	res := newResolver("down.example.com", "127.0.0.1")
	_, addr, _ := startProxy(t, Config{Policy: allowList("*.example.com", "127.0.0.1/32"), Resolver: res})
	_, resp, body := rawConnect(t, addr, "down.example.com:"+closedPort)
	if resp.StatusCode != 502 || !strings.Contains(body, "egress: cannot connect to down.example.com:"+closedPort) {
		t.Errorf("dial failure: %d %q", resp.StatusCode, body)
	}
	_, resp, body = rawConnect(t, addr, "nxdomain.example.com:443")
	if resp.StatusCode != 502 || !strings.Contains(body, "egress: cannot resolve nxdomain.example.com") {
		t.Errorf("DNS failure: %d %q", resp.StatusCode, body)
	}
}

func TestDenyAllAndNilPolicy(t *testing.T) {
	for _, pol := range []*driver.NetworkPolicy{nil, {Mode: driver.NetworkDenyAll}} {
		_, addr, _ := startProxy(t, Config{Policy: pol, Resolver: newResolver("www.example.com", "93.184.216.34")})
		_, resp, body := rawConnect(t, addr, "www.example.com:443")
		if resp.StatusCode != 403 || !strings.Contains(body, "denies all egress") {
			t.Errorf("policy %v: %d %q", pol, resp.StatusCode, body)
		}
		_, resp, _ = rawConnect(t, addr, "93.184.216.34:443")
		if resp.StatusCode != 403 {
			t.Errorf("policy %v, IP literal: %d", pol, resp.StatusCode)
		}
	}
}

// socksDial runs a raw SOCKS5 exchange: greeting, then a request.
func socksDial(t *testing.T, addr string, cmd, atyp byte, dst []byte, port uint16) (net.Conn, byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte{5, 1, 0})
	var g [2]byte
	if _, err := io.ReadFull(c, g[:]); err != nil || g != [2]byte{5, 0} {
		t.Fatalf("greeting: %v %v", g, err)
	}
	req := []byte{5, cmd, 0, atyp}
	if atyp == 3 {
		req = append(req, byte(len(dst)))
	}
	req = append(req, dst...)
	req = binary.BigEndian.AppendUint16(req, port)
	c.Write(req)
	var h [4]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		t.Fatalf("reply: %v", err)
	}
	n := 4
	if h[3] == 4 {
		n = 16
	}
	io.ReadFull(c, make([]byte, n+2))
	c.SetDeadline(time.Time{})
	return c, h[1]
}

func TestSOCKS5(t *testing.T) {
	srv := newEcho(t, false)
	port := uint16(srv.Listener.Addr().(*net.TCPAddr).Port)
	res := newResolver("www.example.com", "127.0.0.1", "evil.example.com", "127.0.0.1")
	_, addr, _ := startProxy(t, Config{Policy: allowList("www.example.com", "127.0.0.1/32", "::1/128"), Resolver: res})

	d, err := proxy.SOCKS5("tcp", addr, nil, proxy.Direct)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{Dial: d.Dial}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(fmt.Sprintf("http://www.example.com:%d/socks", port))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	mustContain(t, "body", string(b), "path=/socks")

	c, code := socksDial(t, addr, 1, 1, []byte{127, 0, 0, 1}, port)
	if code != 0 {
		t.Fatalf("IPv4 CONNECT: reply %d", code)
	}
	fmt.Fprintf(c, "GET /v4 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if b, _ := io.ReadAll(c); !strings.Contains(string(b), "path=/v4") {
		t.Errorf("IPv4 tunnel: %q", b)
	}
	if l6, err := net.Listen("tcp", "[::1]:0"); err == nil {
		go func() {
			if c, err := l6.Accept(); err == nil {
				c.Write([]byte("v6"))
				c.Close()
			}
		}()
		c, code := socksDial(t, addr, 1, 4, netip.IPv6Loopback().AsSlice(), uint16(l6.Addr().(*net.TCPAddr).Port))
		if code != 0 {
			t.Errorf("IPv6 CONNECT: reply %d", code)
		} else if b, _ := io.ReadAll(c); string(b) != "v6" {
			t.Errorf("IPv6 tunnel: %q", b)
		}
		l6.Close()
	}
	for _, tc := range []struct {
		name      string
		cmd, atyp byte
		dst       []byte
		want      byte
	}{
		{"denied name", 1, 3, []byte("evil.example.com"), 0x02},
		{"IP literal outside the allow-list", 1, 1, []byte{93, 184, 216, 34}, 0x02},
		{"BIND", 2, 3, []byte("www.example.com"), 0x07},
		{"UDP ASSOCIATE", 3, 1, []byte{127, 0, 0, 1}, 0x07},
		{"unknown address type", 1, 9, nil, 0x08},
		{"unresolvable", 1, 3, []byte("nx.example.com"), 0x02}, // not in the allow-list: never resolved
	} {
		_, code := socksDial(t, addr, tc.cmd, tc.atyp, tc.dst, port)
		if code != tc.want {
			t.Errorf("%s: reply %#x, want %#x", tc.name, code, tc.want)
		}
	}
	// No acceptable method.
	c2, _ := net.Dial("tcp", addr)
	defer c2.Close()
	c2.SetDeadline(time.Now().Add(5 * time.Second))
	c2.Write([]byte{5, 1, 2})
	var g [2]byte
	if _, err := io.ReadFull(c2, g[:]); err != nil || g != [2]byte{5, 0xff} {
		t.Errorf("username/password only: %v %v, want 05 ff", g, err)
	}
}

func TestSlowloris(t *testing.T) {
	t.Parallel()
	_, addr, _ := startProxy(t, Config{Policy: &driver.NetworkPolicy{Mode: driver.NetworkAllowAll}, Resolver: newResolver(), HeaderTimeout: 300 * time.Millisecond})
	for _, first := range []string{"C", "\x05"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		msg := "CONNECT www.example.com:443 HTTP/1.1\r\nX: " + strings.Repeat("a", 200)
		if first == "\x05" {
			msg = "\x05\x01"
		}
		var werr error
		for i := 0; i < len(msg) && werr == nil && time.Since(start) < 5*time.Second; i++ {
			_, werr = c.Write([]byte{msg[i]})
			time.Sleep(20 * time.Millisecond)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		c.Close()
		if took := time.Since(start); took > 3*time.Second || err != nil {
			t.Errorf("%q: cut off after %v (err %v), want about the 300ms header timeout", first, took, err)
		}
		if first == "C" && !strings.HasPrefix(string(b), "HTTP/1.1 408") {
			t.Errorf("HTTP slowloris got %q, want 408", b)
		}
	}
	// Slow headers on a kept-alive connection, after a first request.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET http://nx.example.com/ HTTP/1.1\r\n\r\n")
	br := bufio.NewReader(c)
	if r, err := http.ReadResponse(br, nil); err != nil || r.StatusCode != 502 || r.Close {
		t.Fatalf("first request: %v %v", r, err)
	} else {
		io.Copy(io.Discard, r.Body)
	}
	start := time.Now()
	for i := 0; i < 200 && time.Since(start) < 5*time.Second; i++ {
		if _, err := c.Write([]byte{"GET http://nx.example.com/ HTTP/1.1\r\nX: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"[i]}); err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, _ := io.ReadAll(br)
	c.Close()
	if took := time.Since(start); took > 3*time.Second || !strings.HasPrefix(string(b), "HTTP/1.1 408") {
		t.Errorf("slow second request: %q after %v, want 408 after about 300ms", b, took)
	}
	// A silent client too.
	c, _ = net.Dial("tcp", addr)
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Errorf("a silent client was not cut off: %v", err)
	}
}

func TestConnectionCap(t *testing.T) {
	srv := newEcho(t, false)
	res := newResolver("www.example.com", "127.0.0.1")
	_, addr, logs := startProxy(t, Config{Policy: allowList("www.example.com", "127.0.0.1/32"), Resolver: res, MaxConns: 2})
	for i := 0; i < 2; i++ {
		if _, resp, body := rawConnect(t, addr, "www.example.com:"+srv.port()); resp.StatusCode != 200 {
			t.Fatalf("tunnel %d: %d %s", i, resp.StatusCode, body)
		}
	}
	start := time.Now()
	_, resp, body := rawConnect(t, addr, "www.example.com:"+srv.port())
	if resp.StatusCode != 503 || !strings.Contains(body, "too many connections (at most 2 at once)") {
		t.Errorf("third: %d %q, want 503", resp.StatusCode, body)
	}
	port := uint16(srv.Listener.Addr().(*net.TCPAddr).Port)
	if _, code := socksDial(t, addr, 1, 3, []byte("www.example.com"), port); code != 0x01 {
		t.Errorf("SOCKS over the cap: reply %#x, want 0x01", code)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("refusals over the cap took %v, want at once", took)
	}
	mustContain(t, "log", logs.String(), "too many connections")
}

func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	const idle = time.Second
	srv := newEcho(t, false)
	res := newResolver("www.example.com", "127.0.0.1")
	_, addr, _ := startProxy(t, Config{Policy: allowList("www.example.com", "127.0.0.1/32"), Resolver: res, IdleTimeout: idle})
	// Active for twice the timeout, a request every 50 ms: not cut. A
	// starved host can stretch a gap past the timeout, and then a cut is
	// right: only a cut after a gap under half the timeout fails the
	// test; a stretched round is tried again on a new tunnel.
	var c net.Conn
	for attempt := 0; c == nil; attempt++ {
		if attempt == 5 {
			t.Skip("the host is too starved to keep a tunnel active: every try had a gap over half the idle timeout")
		}
		tc, resp, _ := rawConnect(t, addr, "www.example.com:"+srv.port())
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		opened, last := time.Now(), time.Now()
		ok := true
		for i := 0; time.Since(opened) < 2*idle; i++ {
			time.Sleep(50 * time.Millisecond)
			gap := time.Since(last)
			fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			r, err := http.ReadResponse(bufio.NewReader(io.LimitReader(tc, 1<<20)), nil)
			if err != nil {
				if gap < idle/2 {
					t.Fatalf("request %d on an active tunnel, %v after the last answer (idle timeout %v): %v", i, gap, idle, err)
				}
				t.Logf("request %d came %v after the last answer, over half the idle timeout: trying again", i, gap)
				ok = false
				break
			}
			// The echo body is small and fits in one read; drain it.
			io.Copy(io.Discard, r.Body)
			last = time.Now()
		}
		if ok {
			c = tc
		} else {
			tc.Close()
		}
	}
	start := time.Now()
	if !isClosed(c) {
		t.Fatal("idle tunnel not closed")
	}
	if took := time.Since(start); took > 5*idle {
		t.Errorf("idle tunnel closed after %v (idle timeout %v)", took, idle)
	}
}

func TestSetPolicy(t *testing.T) {
	srv := newEcho(t, false)
	res := newResolver("www.example.com", "127.0.0.1", "api.example.com", "127.0.0.1")
	p, addr, _ := startProxy(t, Config{Policy: allowList("www.example.com", "api.example.com", "127.0.0.1/32"), Resolver: res})
	tunWWW, resp, _ := rawConnect(t, addr, "www.example.com:"+srv.port())
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	tunAPI, resp, _ := rawConnect(t, addr, "api.example.com:"+srv.port())
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	// Keep-alive plain HTTP connection opened before the change.
	c, _ := net.Dial("tcp", addr)
	defer c.Close()
	br := bufio.NewReader(c)
	fmt.Fprintf(c, "GET http://www.example.com:%s/ HTTP/1.1\r\n\r\n", srv.port())
	if r, err := http.ReadResponse(br, nil); err != nil || r.StatusCode != 200 {
		t.Fatalf("before: %v %v", r, err)
	} else {
		io.Copy(io.Discard, r.Body)
	}

	if err := p.SetPolicy(&driver.NetworkPolicy{Mode: driver.NetworkAllowList, AllowDomains: []string{"api.example.com"}, AllowCIDRs: []string{"127.0.0.1/32"}}); err != nil {
		t.Fatal(err)
	}
	if _, resp, body := rawConnect(t, addr, "www.example.com:"+srv.port()); resp.StatusCode != 403 {
		t.Errorf("new CONNECT after the change: %d %q", resp.StatusCode, body)
	}
	fmt.Fprintf(c, "GET http://www.example.com:%s/ HTTP/1.1\r\n\r\n", srv.port())
	if r, err := http.ReadResponse(br, nil); err != nil || r.StatusCode != 403 {
		t.Errorf("next request on a kept connection: %v %v, want 403", r, err)
	}
	if !isClosed(tunWWW) {
		t.Error("tunnel to a host the new policy refuses is still open")
	}
	fmt.Fprintf(tunAPI, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if b, _ := io.ReadAll(tunAPI); !strings.Contains(string(b), "200 OK") {
		t.Errorf("tunnel to a host still allowed: %q", b)
	}
	if err := p.SetPolicy(&driver.NetworkPolicy{Mode: "open"}); err == nil {
		t.Error("SetPolicy took an unknown mode")
	}
	if _, resp, _ := rawConnect(t, addr, "api.example.com:"+srv.port()); resp.StatusCode != 200 {
		t.Errorf("a refused SetPolicy changed the policy: %d", resp.StatusCode)
	}
}

func TestCloseWithLiveTunnels(t *testing.T) {
	srv := newEcho(t, false)
	res := newResolver("www.example.com", "127.0.0.1")
	p, err := New(Config{Policy: allowList("www.example.com", "127.0.0.1/32"), Resolver: res})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	served := make(chan error, 1)
	go func() { served <- p.Serve(l) }()
	var tunnels []net.Conn
	for i := 0; i < 3; i++ {
		c, resp, _ := rawConnect(t, l.Addr().String(), "www.example.com:"+srv.port())
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		tunnels = append(tunnels, c)
	}
	// And one ServeConn the caller runs itself, with a silent client.
	a, b := net.Pipe()
	defer a.Close()
	sc := make(chan struct{})
	go func() { p.ServeConn(context.Background(), b); close(sc) }()

	start := time.Now()
	p.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %v", took)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve after Close: %v", err)
	}
	<-sc
	for i, c := range tunnels {
		if !isClosed(c) {
			t.Errorf("tunnel %d still open after Close", i)
		}
	}
	if _, err := net.DialTimeout("tcp", l.Addr().String(), time.Second); err == nil {
		t.Error("listener still accepting after Close")
	}
	// ServeConn after Close closes the connection at once.
	a2, b2 := net.Pipe()
	p.ServeConn(context.Background(), b2)
	a2.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := a2.Read(make([]byte, 1)); err != io.EOF && !strings.Contains(fmt.Sprint(err), "closed") {
		t.Errorf("ServeConn after Close: read %v, want the connection closed", err)
	}
}

func TestServeConnContext(t *testing.T) {
	srv := newEcho(t, false)
	res := newResolver("www.example.com", "127.0.0.1")
	p, err := New(Config{Policy: allowList("www.example.com", "127.0.0.1/32"), Resolver: res})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	a, b := net.Pipe()
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.ServeConn(ctx, b); close(done) }()
	a.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(a, "CONNECT www.example.com:%s HTTP/1.1\r\n\r\n", srv.port())
	br := bufio.NewReader(a)
	if r, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || r.StatusCode != 200 {
		t.Fatalf("%v %v", r, err)
	}
	// A tunnel whose client side is not TCP is copied by the proxy.
	fmt.Fprintf(a, "GET /pipe HTTP/1.1\r\nHost: x\r\n\r\n")
	r, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(r.Body); !strings.Contains(string(b), "path=/pipe") {
		t.Errorf("through a pipe tunnel: %q", b)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("ServeConn did not return when its context ended")
	}
}

// brokerSetup is a proxy with a secret for api.example.com and two TLS
// servers: api (brokered) and other.
type brokerSetup struct {
	p          *Proxy
	addr       string
	api, other *echoServer
	logs       *logBuf
	c          *http.Client
}

const (
	testValue       = "sk-live-9f8e7d6c5b4a"
	testPlaceholder = "SANDBOX_SECRET_PLACEHOLDER_1"
)

func newBroker(t *testing.T) *brokerSetup {
	api, other := newEcho(t, true), newEcho(t, true)
	roots := x509.NewCertPool()
	roots.AddCert(api.Certificate())
	res := newResolver("api.example.com", "127.0.0.1", "other.example.com", "127.0.0.1")
	p, addr, logs := startProxy(t, Config{
		Policy:        allowList("api.example.com", "other.example.com", "127.0.0.1/32"),
		Resolver:      res,
		UpstreamRoots: roots,
		Secrets: []driver.BrokeredSecret{{
			Value: testValue, Hosts: []string{"api.example.com"}, Header: "Authorization", Format: "Bearer %s", Placeholder: testPlaceholder,
		}},
	})
	return &brokerSetup{p: p, addr: addr, api: api, other: other, logs: logs, c: client(t, addr, p, other)}
}

func TestBrokeredSecret(t *testing.T) {
	b := newBroker(t)
	h := http.Header{"Authorization": {"Bearer " + testPlaceholder}, "X-Api-Key": {"k=" + testPlaceholder + ";"}}

	code, body, rh := get(t, b.c, "https://api.example.com:"+b.api.port()+"/v1", h)
	if code != 200 {
		t.Fatalf("brokered GET: %d %s", code, body)
	}
	reqs := b.api.requests()
	if len(reqs) != 1 {
		t.Fatalf("api saw %d requests", len(reqs))
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer "+testValue {
		t.Errorf("api got Authorization %q, want the brokered value", got)
	}
	if got := reqs[0].Header.Get("X-Api-Key"); got != "k="+testValue+";" {
		t.Errorf("api got X-Api-Key %q, want the placeholder replaced", got)
	}
	if got := reqs[0].Header.Get("Accept-Encoding"); got != "identity" {
		t.Errorf("api got Accept-Encoding %q, want identity (an encoded body could not be masked)", got)
	}
	// The api echoes its headers back: the client never sees the value.
	if strings.Contains(body, testValue) || strings.Contains(fmt.Sprint(rh), testValue) {
		t.Errorf("the value reached the client: %q %v", body, rh)
	}
	mustContain(t, "echoed body", body, "Bearer "+strings.Repeat("*", len(testValue)))

	// Another host gets the placeholder, not the value.
	code, body, _ = get(t, b.c, "https://other.example.com:"+b.other.port()+"/", h)
	if code != 200 {
		t.Fatalf("other GET: %d %s", code, body)
	}
	o := b.other.requests()
	if got := o[0].Header.Get("Authorization"); got != "Bearer "+testPlaceholder {
		t.Errorf("other host got Authorization %q, want the placeholder", got)
	}
	if got := o[0].Header.Get("X-Api-Key"); got != "k="+testPlaceholder+";" {
		t.Errorf("other host got X-Api-Key %q", got)
	}

	// A host without a secret is not intercepted: the client talks TLS
	// with the server itself.
	c, resp, _ := rawConnect(t, b.addr, "other.example.com:"+b.other.port())
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	pool := x509.NewCertPool()
	pool.AddCert(b.other.Certificate())
	tc := tls.Client(c, &tls.Config{ServerName: "other.example.com", RootCAs: pool})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS to a host without a secret: %v", err)
	}
	if !tc.ConnectionState().PeerCertificates[0].Equal(b.other.Certificate()) {
		t.Error("a host without a secret was intercepted")
	}
	tc.Close()

	// A header the client omitted is set anyway.
	get(t, b.c, "https://api.example.com:"+b.api.port()+"/bare", nil)
	reqs = b.api.requests()
	if got := reqs[len(reqs)-1].Header.Get("Authorization"); got != "Bearer "+testValue {
		t.Errorf("without a client header the api got %q", got)
	}
	if strings.Contains(b.logs.String(), testValue) {
		t.Error("the value is in the log")
	}
}

func TestBrokeredRedirectToOtherHost(t *testing.T) {
	b := newBroker(t)
	target := "https://other.example.com:" + b.other.port() + "/landed"
	h := http.Header{"X-Api-Key": {testPlaceholder}}
	code, body, _ := get(t, b.c, "https://api.example.com:"+b.api.port()+"/?redirect="+target, h)
	if code != 200 || !strings.Contains(body, "path=/landed") {
		t.Fatalf("redirect chain: %d %q", code, body)
	}
	for _, r := range b.other.requests() {
		for k, v := range r.Header {
			if strings.Contains(strings.Join(v, " "), testValue) {
				t.Errorf("the redirected request carried the value in %s", k)
			}
		}
		if r.Header.Get("X-Api-Key") != testPlaceholder {
			t.Errorf("redirected X-Api-Key = %q, want the placeholder", r.Header.Get("X-Api-Key"))
		}
	}
	if len(b.api.requests()) != 1 {
		t.Errorf("api saw %d requests, want 1 (the proxy follows no redirect)", len(b.api.requests()))
	}
}

// tlsThrough opens an intercepted tunnel to api.example.com by hand.
func tlsThrough(t *testing.T, b *brokerSetup, host string) (*tls.Conn, *bufio.Reader) {
	c, resp, body := rawConnect(t, b.addr, host)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d %s", resp.StatusCode, body)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.p.CACertPEM())
	tc := tls.Client(c, &tls.Config{ServerName: "api.example.com", RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS through the proxy: %v", err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Errorf("ALPN %q, want http/1.1", p)
	}
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	return tc, bufio.NewReader(tc)
}

func TestBrokeredHostMismatch(t *testing.T) {
	b := newBroker(t)
	tc, br := tlsThrough(t, b, "api.example.com:"+b.api.port())
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: other.example.com:%s\r\nAuthorization: Bearer %s\r\n\r\n", b.other.port(), testPlaceholder)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 421 || !strings.Contains(string(body), "inside a tunnel to api.example.com") {
		t.Errorf("inner Host other.example.com: %d %q, want 421", resp.StatusCode, body)
	}
	// Still usable for its own host; the value is set.
	fmt.Fprintf(tc, "GET /ok HTTP/1.1\r\nHost: API.example.com:%s\r\n\r\n", b.api.port())
	resp, err = http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("own host after the refusal: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	fmt.Fprintf(tc, "CONNECT other.example.com:443 HTTP/1.1\r\nHost: other.example.com:443\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 405 {
		t.Errorf("CONNECT inside the tunnel: %v %v, want 405", resp, err)
	}
	if n := len(b.other.requests()); n != 0 {
		t.Errorf("other host saw %d requests", n)
	}
	if n := len(b.api.requests()); n != 1 {
		t.Errorf("api saw %d requests, want 1", n)
	}
}

func TestBrokeredPlainHTTPRefused(t *testing.T) {
	b := newBroker(t)
	code, body, _ := get(t, b.c, "http://api.example.com:"+b.api.port()+"/", http.Header{"Authorization": {testPlaceholder}})
	if code != 403 || !strings.Contains(body, "only ever sent over TLS") {
		t.Errorf("plain HTTP to a brokered host: %d %q", code, body)
	}
	// And a tunnel that does not carry TLS.
	c, resp, _ := rawConnect(t, b.addr, "api.example.com:"+b.api.port())
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
	out, _ := io.ReadAll(c)
	if !strings.Contains(string(out), "403") || len(b.api.requests()) != 0 {
		t.Errorf("plain HTTP inside a brokered tunnel: %q, %d upstream requests", out, len(b.api.requests()))
	}
}

func TestBrokeredUpstreamVerified(t *testing.T) {
	// The upstream's certificate is not in UpstreamRoots: 502, no value sent.
	api := newEcho(t, true)
	res := newResolver("api.example.com", "127.0.0.1")
	p, addr, _ := startProxy(t, Config{
		Policy: allowList("api.example.com", "127.0.0.1/32"), Resolver: res, UpstreamRoots: x509.NewCertPool(),
		Secrets: []driver.BrokeredSecret{{Value: testValue, Hosts: []string{"*.example.com"}, Header: "X-Key", Placeholder: testPlaceholder}},
	})
	code, body, _ := get(t, client(t, addr, p), "https://api.example.com:"+api.port()+"/", nil)
	if code != 502 || !strings.Contains(body, "egress: TLS to api.example.com:"+api.port()+" failed") || strings.Contains(body, testValue) {
		t.Errorf("unverified upstream: %d %q", code, body)
	}
	if len(api.requests()) != 0 {
		t.Error("the request reached an unverified upstream")
	}
}

func TestBrokeredThroughSOCKS(t *testing.T) {
	b := newBroker(t)
	d, _ := proxy.SOCKS5("tcp", b.addr, nil, proxy.Direct)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.p.CACertPEM())
	tr := &http.Transport{Dial: d.Dial, TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("https://api.example.com:" + b.api.port() + "/s")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := b.api.requests()[0].Header.Get("Authorization"); got != "Bearer "+testValue {
		t.Errorf("through SOCKS the api got %q", got)
	}
}

// rawServer answers every connection with handle.
func rawServer(t *testing.T, handle func(net.Conn)) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				handle(c)
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

func TestPlainHTTPCloseDelimitedBody(t *testing.T) {
	port := rawServer(t, func(c net.Conn) {
		http.ReadRequest(bufio.NewReader(c))
		io.WriteString(c, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end")
	})
	res := newResolver("old.example.com", "127.0.0.1")
	_, addr, _ := startProxy(t, Config{Policy: allowList("old.example.com", "127.0.0.1/32"), Resolver: res})
	c, _ := net.Dial("tcp", addr)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET http://old.example.com:%s/ HTTP/1.1\r\n\r\n", port)
	b, err := io.ReadAll(c)
	if err != nil || !strings.HasSuffix(string(b), "\r\n\r\nuntil the end") || !strings.Contains(string(b), "Connection: close") {
		t.Errorf("close-delimited body: %q, %v (want the body, then the connection closed)", b, err)
	}
}

func TestPlainHTTPUpgrade(t *testing.T) {
	port := rawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil || req.Header.Get("Upgrade") != "echo" {
			io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		io.Copy(c, br)
	})
	res := newResolver("ws.example.com", "127.0.0.1")
	_, addr, _ := startProxy(t, Config{Policy: allowList("ws.example.com", "127.0.0.1/32"), Resolver: res})
	c, _ := net.Dial("tcp", addr)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	// The first echoed bytes travel in the same write as the request.
	fmt.Fprintf(c, "GET http://ws.example.com:%s/ HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nearly;", port)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 || resp.Header.Get("Upgrade") != "echo" {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	io.WriteString(c, "late")
	got := make([]byte, len("early;late"))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "early;late" {
		t.Errorf("echo through the upgraded connection: %q %v", got, err)
	}
}

func TestConnectEarlyData(t *testing.T) {
	srv := newEcho(t, false)
	res := newResolver("www.example.com", "127.0.0.1")
	_, addr, _ := startProxy(t, Config{Policy: allowList("www.example.com", "127.0.0.1/32"), Resolver: res})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// The tunnelled request travels in the same write as the CONNECT.
	fmt.Fprintf(c, "CONNECT www.example.com:%s HTTP/1.1\r\n\r\nGET /early HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", srv.port())
	b, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(b), "HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK") || !strings.Contains(string(b), "path=/early") {
		t.Errorf("got %q", b)
	}
}

func TestPlainHTTPStreaming(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		io.WriteString(w, "data: second\n\n")
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	res := newResolver("sse.example.com", "127.0.0.1")
	p, addr, _ := startProxy(t, Config{Policy: allowList("sse.example.com", "127.0.0.1/32"), Resolver: res})
	hc := client(t, addr, p)
	var br *bufio.Reader
	got := make(chan string, 1)
	go func() {
		resp, err := hc.Get("http://sse.example.com:" + port + "/")
		if err != nil {
			got <- err.Error()
			return
		}
		t.Cleanup(func() { resp.Body.Close() })
		br = bufio.NewReader(resp.Body)
		l, _ := br.ReadString('\n')
		got <- l
	}()
	select {
	case l := <-got:
		if l != "data: first\n" {
			t.Fatalf("first event %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first event of a streamed response did not arrive before the response ended")
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "data: second") {
		t.Errorf("rest %q", rest)
	}
}
