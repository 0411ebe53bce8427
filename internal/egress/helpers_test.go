package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sandboxkit/sandbox/driver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testResolver maps names to addresses; a name it does not know fails
// as DNS would. Calls are counted per name.
type testResolver struct {
	mu    sync.Mutex
	names map[string][]netip.Addr
	seq   map[string][][]netip.Addr // successive answers, the last repeated
	calls map[string]int
}

func newResolver(pairs ...string) *testResolver {
	r := &testResolver{names: map[string][]netip.Addr{}, seq: map[string][][]netip.Addr{}, calls: map[string]int{}}
	for i := 0; i < len(pairs); i += 2 {
		r.names[pairs[i]] = append(r.names[pairs[i]], netip.MustParseAddr(pairs[i+1]))
	}
	return r
}

func (r *testResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.calls[host]
	r.calls[host]++
	if s := r.seq[host]; len(s) > 0 {
		return s[min(n, len(s)-1)], nil
	}
	if a, ok := r.names[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *testResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

// logBuf is a concurrency-safe buffer for a test logger.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startProxy serves p on a loopback listener until the test ends.
func startProxy(t testing.TB, cfg Config) (*Proxy, string, *logBuf) {
	t.Helper()
	logs := &logBuf{}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(l) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return p, l.Addr().String(), logs
}

func allowList(domains ...string) *driver.NetworkPolicy {
	p := &driver.NetworkPolicy{Mode: driver.NetworkAllowList}
	for _, d := range domains {
		if _, err := netip.ParsePrefix(d); err == nil {
			p.AllowCIDRs = append(p.AllowCIDRs, d)
		} else {
			p.AllowDomains = append(p.AllowDomains, d)
		}
	}
	return p
}

// echoServer answers with the request's headers as "Name: value" lines
// and records each request.
type echoServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
}

func newEcho(t testing.TB, tlsOn bool) *echoServer {
	e := &echoServer{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.reqs = append(e.reqs, r.Clone(context.Background()))
		e.mu.Unlock()
		if loc := r.URL.Query().Get("redirect"); loc != "" {
			http.Redirect(w, r, loc, http.StatusFound)
			return
		}
		w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
		fmt.Fprintf(w, "host=%s path=%s\n", r.Host, r.URL.Path)
		r.Header.Write(w)
	})
	if tlsOn {
		e.Server = httptest.NewTLSServer(h)
	} else {
		e.Server = httptest.NewServer(h)
	}
	t.Cleanup(e.Close)
	return e
}

func (e *echoServer) requests() []*http.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*http.Request(nil), e.reqs...)
}

func (e *echoServer) port() string {
	_, p, _ := net.SplitHostPort(e.Listener.Addr().String())
	return p
}

// client is an HTTP client whose HTTP_PROXY and HTTPS_PROXY is the proxy
// and which trusts the test servers' certificate and the proxy's CA.
func client(t testing.TB, proxyAddr string, p *Proxy, servers ...*echoServer) *http.Client {
	pool := x509.NewCertPool()
	if p != nil && !pool.AppendCertsFromPEM(p.CACertPEM()) {
		t.Fatal("CACertPEM is not PEM")
	}
	for _, s := range servers {
		pool.AddCert(s.Certificate())
	}
	u := &url.URL{Scheme: "http", Host: proxyAddr}
	tr := &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{RootCAs: pool}, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

func get(t testing.TB, c *http.Client, u string, h http.Header) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// rawConnect sends CONNECT target on a new connection and returns it with
// the status line and body of a refusal (body "" on 200).
func rawConnect(t testing.TB, proxyAddr, target string) (net.Conn, *http.Response, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxyAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode == 200 {
		if br.Buffered() > 0 {
			t.Fatal("bytes after the CONNECT answer")
		}
		c.SetDeadline(time.Time{})
		return c, resp, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return c, resp, string(b)
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func mustContain(t testing.TB, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s = %q, want it to contain %q", what, got, w)
		}
	}
}

func isClosed(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}
