package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/egress"
)

// loopResolver maps every name to 127.0.0.1.
type loopResolver struct{}

func (loopResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// BenchmarkEgressHTTPS64MiB measures a 64 MiB HTTPS download from a
// loopback TLS server directly, through the egress proxy's CONNECT
// passthrough, and through its interception of a host with a brokered
// secret, interleaved in one run. Reported: MB/s of each, the ratios
// passthrough-x-direct (goal ≥ 0.5) and intercept-x-direct, and the
// connection set-up (TCP connect, the CONNECT exchange through the
// proxy, TLS handshake and a first small request) in µs each way.
func BenchmarkEgressHTTPS64MiB(b *testing.B) {
	const size = 64 << 20
	data := make([]byte, size)
	_, _ = rand.Read(data)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(size))
		w.Write(data)
	}))
	defer srv.Close()
	port := fmt.Sprint(srv.Listener.Addr().(*net.TCPAddr).Port)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	p, err := egress.New(egress.Config{
		Policy:        &driver.NetworkPolicy{Mode: driver.NetworkAllowList, AllowDomains: []string{"*.example.com"}, AllowCIDRs: []string{"127.0.0.1/32"}},
		Resolver:      loopResolver{},
		UpstreamRoots: roots,
		Secrets:       []driver.BrokeredSecret{{Value: "sk-bench-0123456789", Hosts: []string{"api.example.com"}, Header: "Authorization", Format: "Bearer %s", Placeholder: "PLACEHOLDER"}},
	})
	if err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go p.Serve(l)
	defer p.Close()
	proxyURL := &url.URL{Scheme: "http", Host: l.Addr().String()}
	clientRoots := roots.Clone()
	clientRoots.AppendCertsFromPEM(p.CACertPEM())

	transport := func(viaProxy bool) *http.Transport {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: clientRoots}, DisableCompression: true, ForceAttemptHTTP2: false}
		if viaProxy {
			tr.Proxy = http.ProxyURL(proxyURL)
		} else {
			// The direct client reaches the same name on 127.0.0.1.
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
			}
		}
		return tr
	}
	direct, passthrough, intercept := transport(false), transport(true), transport(true)
	defer direct.CloseIdleConnections()
	defer passthrough.CloseIdleConnections()
	defer intercept.CloseIdleConnections()
	download := func(tr *http.Transport, host string) (time.Duration, error) {
		t0 := time.Now()
		resp, err := (&http.Client{Transport: tr}).Get("https://" + host + ":" + port + "/blob")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err == nil && n != size {
			err = fmt.Errorf("%s: got %d bytes, want %d", host, n, size)
		}
		return time.Since(t0), err
	}

	// One connection set-up: TCP connect, TLS handshake and a first small
	// request, directly or after a CONNECT through the proxy (an
	// intercepting proxy makes its own upstream TLS connection at the
	// first request).
	setup := func(viaProxy bool, host string) (time.Duration, error) {
		t0 := time.Now()
		var c net.Conn
		var err error
		if viaProxy {
			if c, err = net.Dial("tcp", l.Addr().String()); err != nil {
				return 0, err
			}
			fmt.Fprintf(c, "CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n\r\n", host, port, host, port)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
			if err != nil || resp.StatusCode != 200 {
				c.Close()
				return 0, fmt.Errorf("CONNECT: %v %v", resp, err)
			}
		} else if c, err = net.Dial("tcp", srv.Listener.Addr().String()); err != nil {
			return 0, err
		}
		tc := tls.Client(c, &tls.Config{ServerName: host, RootCAs: clientRoots, NextProtos: []string{"http/1.1"}})
		defer tc.Close()
		if err = tc.Handshake(); err != nil {
			return 0, err
		}
		fmt.Fprintf(tc, "GET /small HTTP/1.1\r\nHost: %s\r\n\r\n", host)
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			return 0, err
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != 200 {
			return 0, fmt.Errorf("first request: %v %v", resp.Status, err)
		}
		return time.Since(t0), nil
	}

	var td, tp, ti, sd, sp, si time.Duration
	const setups = 20
	for b.Loop() {
		d, err := download(direct, "www.example.com")
		if err != nil {
			b.Fatal(err)
		}
		td += d
		if d, err = download(passthrough, "www.example.com"); err != nil {
			b.Fatal(err)
		}
		tp += d
		if d, err = download(intercept, "api.example.com"); err != nil {
			b.Fatal(err)
		}
		ti += d
		for range setups {
			d, err := setup(false, "www.example.com")
			if err != nil {
				b.Fatal(err)
			}
			sd += d
			if d, err = setup(true, "www.example.com"); err != nil {
				b.Fatal(err)
			}
			sp += d
			if d, err = setup(true, "api.example.com"); err != nil {
				b.Fatal(err)
			}
			si += d
		}
	}
	mb := float64(size) / 1e6 * float64(b.N)
	b.ReportMetric(mb/td.Seconds(), "direct-MB/s")
	b.ReportMetric(mb/tp.Seconds(), "passthrough-MB/s")
	b.ReportMetric(mb/ti.Seconds(), "intercept-MB/s")
	b.ReportMetric(td.Seconds()/tp.Seconds(), "passthrough-x-direct")
	b.ReportMetric(td.Seconds()/ti.Seconds(), "intercept-x-direct")
	n := float64(b.N * setups)
	b.ReportMetric(float64(sd.Microseconds())/n, "setup-direct-µs")
	b.ReportMetric(float64(sp.Microseconds())/n, "setup-passthrough-µs")
	b.ReportMetric(float64(si.Microseconds())/n, "setup-intercept-µs")
}
