package daytona_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// egressUpstream is the loopback HTTPS server behind the names the local
// backend's egress proxy resolves (local.WithEgressHosts) to documentation
// addresses it treats as public, and connects to on 127.0.0.1
// (local.WithEgressDialOverride): the Brokered group's enforced subtests
// reach it through daytonafake's allow-lists, put in force by the proxy.
type egressUpstream struct {
	addr netip.AddrPort
	ca   []byte
	mu   sync.Mutex
	h    http.Handler
}

const (
	egressSecretHost = "secret.sandboxtest.test"
	egressOtherHost  = "other.sandboxtest.test"
)

func newEgressUpstream(t *testing.T) *egressUpstream {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test upstream"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{egressSecretHost, egressOtherHost},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	u := &egressUpstream{ca: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		h := u.h
		u.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	u.addr = netip.MustParseAddrPort(srv.Listener.Addr().String())
	return u
}

// backend is a local backend whose egress proxy reaches u.
func (u *egressUpstream) backend(t testing.TB) driver.Runtime {
	t.Helper()
	secret, other := netip.MustParseAddr("192.0.2.80"), netip.MustParseAddr("192.0.2.81")
	rt, err := local.New(local.WithRoot(t.TempDir()),
		local.WithEgressHosts(map[string][]netip.Addr{egressSecretHost: {secret}, egressOtherHost: {other}}),
		local.WithEgressDialOverride(map[netip.AddrPort]netip.AddrPort{
			netip.AddrPortFrom(secret, 443): u.addr, netip.AddrPortFrom(other, 443): u.addr,
		}),
		local.WithEgressRootCAs(u.ca))
	if err != nil {
		t.Fatalf("local.New: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

func (u *egressUpstream) hooks() sandboxtest.EgressHooks {
	return sandboxtest.EgressHooks{
		Upstream: func(t *testing.T, h http.Handler) (string, string) {
			u.mu.Lock()
			u.h = h
			u.mu.Unlock()
			t.Cleanup(func() {
				u.mu.Lock()
				u.h = nil
				u.mu.Unlock()
			})
			return egressSecretHost, egressOtherHost
		},
		// HTTPS through the proxy of the backend sandbox's variables; -k:
		// the sandbox does not trust the test's own certificate.
		Fetch: func(url, name, value string) []string {
			return []string{"curl", "-fsSk", "--max-time", "20", "-H", name + ": " + value, strings.Replace(url, "http://", "https://", 1)}
		},
	}
}

// The allow-lists are in force on the backend: through the backend's
// proxy an allowed host answers and another does not, and
// network-settings (SetNetwork) changes that before it returns.
func TestFakeEnforcesAllowLists(t *testing.T) {
	up := newEgressUpstream(t)
	up.mu.Lock()
	up.h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("hello\n")) })
	up.mu.Unlock()
	e := newEnvOn(t, up.backend(t), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := e.c.Create(ctx, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Allow: []string{egressOtherHost}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	fetch := func(host string) int {
		t.Helper()
		r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"curl", "-fsSk", "--max-time", "20", "https://" + host + "/"}})
		if err != nil {
			t.Fatal(err)
		}
		return r.ExitCode
	}
	if c := fetch(egressOtherHost); c != 0 {
		t.Fatalf("the allowed host: exit %d", c)
	}
	if c := fetch(egressSecretHost); c == 0 {
		t.Fatal("a host outside the allow-list answered")
	}
	if err := sb.SetNetwork(ctx, sandbox.NetworkPolicy{Allow: []string{egressSecretHost}}); err != nil {
		t.Fatal(err)
	}
	if c := fetch(egressSecretHost); c != 0 {
		t.Fatalf("the newly allowed host: exit %d", c)
	}
	if c := fetch(egressOtherHost); c == 0 {
		t.Fatal("the host no longer allowed answered")
	}
}
