// Package localtest helps the tests of other packages run their sandboxes
// on provider/local: off the network where the isolation level allows it
// (Offline), for tests that never reach out, or behind its egress proxy,
// reaching a loopback HTTPS upstream under test names, so the conformance
// suite's enforced network and brokered-secret checks run over the cloud
// providers' fakes.
package localtest

import (
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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/local"
)

// EgressUpstream is the loopback HTTPS server behind the names a local
// backend's egress proxy resolves (local.WithEgressHosts) to documentation
// addresses it treats as public, and connects to on 127.0.0.1
// (local.WithEgressDialOverride).
type EgressUpstream struct {
	addr netip.AddrPort
	ca   []byte
	mu   sync.Mutex
	h    http.Handler
}

// The names the upstream serves under: a brokered secret's host and another.
const (
	SecretHost = "secret.sandboxtest.test"
	OtherHost  = "other.sandboxtest.test"
)

// NewEgressUpstream starts the upstream, closed when t ends.
func NewEgressUpstream(t testing.TB) *EgressUpstream {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test upstream"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{SecretHost, OtherHost},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	u := &EgressUpstream{ca: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
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

// HalfClose is the half-close timeout (local.WithHalfCloseTimeout) of the
// Runtimes Backend returns.
const HalfClose = 2 * time.Second

// Backend is a local Runtime whose egress proxy reaches u, closed when t
// ends. Its sandboxes get no network unless their create asks for a
// policy (local.NetworkNone). A relayed connection to an exposed port
// that a side half-closed ends after HalfClose of silence the other way,
// so that a suite's check that such connections are freed need not wait
// the default.
func (u *EgressUpstream) Backend(t testing.TB) driver.Runtime {
	t.Helper()
	secret, other := netip.MustParseAddr("192.0.2.80"), netip.MustParseAddr("192.0.2.81")
	// Not t.TempDir: its path holds the test's name, and under a long one
	// (a conformance subtest's) the root would be too long for the unix
	// sockets under it.
	parent, err := os.MkdirTemp("", "sbt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	root := filepath.Join(parent, "r")
	if err := os.Mkdir(root, 0o777); err != nil { // as t.TempDir makes it
		t.Fatal(err)
	}
	// A sandbox created without a policy needs no way out here (the
	// upstream is reached through the egress proxy only): none, and no
	// pasta started for it.
	rt, err := local.New(local.WithRoot(root), local.WithNetwork(local.NetworkNone),
		local.WithEgressHosts(map[string][]netip.Addr{SecretHost: {secret}, OtherHost: {other}}),
		local.WithEgressDialOverride(map[netip.AddrPort]netip.AddrPort{
			netip.AddrPortFrom(secret, 443): u.addr, netip.AddrPortFrom(other, 443): u.addr,
		}),
		local.WithEgressRootCAs(u.ca), local.WithHalfCloseTimeout(HalfClose))
	if err != nil {
		t.Fatalf("local.New: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// Handle makes h answer the upstream's requests (nil: 404 for all).
func (u *EgressUpstream) Handle(h http.Handler) {
	u.mu.Lock()
	u.h = h
	u.mu.Unlock()
}

// Upstream serves h under SecretHost and OtherHost until t ends, and
// returns the two names (the conformance suite's EgressHooks.Upstream).
func (u *EgressUpstream) Upstream(t *testing.T, h http.Handler) (secretHost, otherHost string) {
	u.Handle(h)
	t.Cleanup(func() { u.Handle(nil) })
	return SecretHost, OtherHost
}

// Fetch is the argv of an HTTPS GET of url with the header "name: value",
// sent through the proxy in the backend sandbox's environment (the
// conformance suite's EgressHooks.Fetch); -k: the sandbox does not trust
// the test's own certificate.
func (u *EgressUpstream) Fetch(url, name, value string) []string {
	return []string{"curl", "-fsSk", "--max-time", "20", "-H", name + ": " + value, strings.Replace(url, "http://", "https://", 1)}
}
