package local

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
)

// Names, wildcards, deny-over-allow, IP literals and names resolving to
// loopback, checked by the proxy with the sandbox's own curl, over plain
// HTTP (absolute form), CONNECT and SOCKS5.
func TestEgressPolicyChecks(t *testing.T) {
	t.Parallel()
	eachNSLevel(t, func(t *testing.T, l Level) {
		ctx := context.Background()
		e := newEgressEnv(t, l)
		sb := mustCreate(ctx, t, e.c, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{
			Allow: []string{"api.example.test", "*.wild.test", "127.0.0.1"}, Deny: []string{"secret.wild.test"}}})
		get := func(flags, host string) *sandbox.Result {
			return run(ctx, t, sb, fmt.Sprintf("curl -sS %s --max-time 10 http://%s:%s/", flags, host, e.port))
		}
		for _, h := range []string{"api.example.test", "x.wild.test", "deep.x.wild.test"} {
			for _, flags := range []string{"", "-p", "--socks5-hostname 127.0.0.1:3128"} {
				if res := get(flags, h); !strings.Contains(string(res.Stdout), "upstream "+h) {
					t.Errorf("allowed %s (curl %s): %q %q", h, flags, res.Stdout, res.Stderr)
				}
			}
		}
		for host, why := range map[string]string{
			"other.example.test": "other.example.test", // not in the allow-list
			"secret.wild.test":   "secret.wild.test",   // denied, though *.wild.test allows it
			"192.0.2.1":          "192.0.2.1",          // an IP literal the list does not name
		} {
			res := get("", host)
			if strings.Contains(string(res.Stdout), "upstream") || !strings.Contains(string(res.Stdout), "egress:") || !strings.Contains(string(res.Stdout), why) {
				t.Errorf("%s: want the proxy's refusal naming it, got %q %q", host, res.Stdout, res.Stderr)
			}
			if res := get("-p", host); res.ExitCode == 0 {
				t.Errorf("%s over CONNECT: connected: %q", host, res.Stdout)
			}
		}
		// Without 127.0.0.1 in the list, a name resolving there is refused.
		sb2 := mustCreate(ctx, t, e.c, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Allow: []string{"api.example.test"}}})
		res := run(ctx, t, sb2, "curl -sS --max-time 10 http://api.example.test:"+e.port+"/")
		if strings.Contains(string(res.Stdout), "upstream") || !strings.Contains(string(res.Stdout), "127.0.0.1") {
			t.Errorf("a name resolving to loopback the policy does not name: %q %q", res.Stdout, res.Stderr)
		}
	})
}

// tlsUpstream is an HTTPS server for the test's names with a CA of its
// own, recording the Authorization header of each request by host.
type tlsUpstream struct {
	srv    *httptest.Server
	rootCA []byte
	port   string
	mu     sync.Mutex
	seen   map[string][]string
}

func newTLSUpstream(t *testing.T, names ...string) *tlsUpstream {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test upstream"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: names,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	u := &tlsUpstream{seen: map[string][]string{}, rootCA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.Host)
		u.mu.Lock()
		u.seen[host] = append(u.seen[host], r.Header.Get("Authorization"))
		u.mu.Unlock()
		fmt.Fprintf(w, "upstream %s\n", host)
	}))
	u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	_, u.port, _ = net.SplitHostPort(u.srv.Listener.Addr().String())
	return u
}

func (u *tlsUpstream) auth(host string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.seen[host]...)
}

const (
	testSecret      = "sk-live-" + "d41d8cd98f00b204e9800998ecf8427e"
	testPlaceholder = "SANDBOX_BROKERED_SECRET_0123456789abcdef"
)

// brokered creates, at the driver level, a sandbox whose policy allows
// api.example.test and other.example.test (and loopback, where the test's
// servers are) with a secret for api.example.test only, its placeholder
// in API_KEY.
func brokered(ctx context.Context, t *testing.T, e *egressEnv) *sandbox.Sandbox {
	t.Helper()
	in, err := e.rt.Create(ctx, &driver.CreateRequest{Timeout: 5 * time.Minute,
		Env: map[string]string{"API_KEY": testPlaceholder},
		Network: &driver.NetworkPolicy{Mode: driver.NetworkAllowList,
			AllowDomains: []string{"api.example.test", "other.example.test"}, AllowCIDRs: []string{"127.0.0.1/32"}},
		Secrets: []driver.BrokeredSecret{{Value: testSecret, Hosts: []string{"api.example.test"},
			Header: "Authorization", Format: "Bearer %s", Placeholder: testPlaceholder}},
	})
	if err != nil {
		t.Fatalf("Create with a brokered secret: %v", err)
	}
	t.Cleanup(func() { _ = e.rt.Destroy(context.Background(), in.ID) })
	sb, err := e.c.Attach(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// TestEgressBrokeredSecret: one sandbox per level with a brokered secret
// serves the subtests: the secret on the wire, then the scan for its
// value inside (after the secret was used, so that nothing the use left
// behind escapes the scan).
func TestEgressBrokeredSecret(t *testing.T) {
	t.Parallel()
	eachNSLevel(t, func(t *testing.T, l Level) {
		ctx := context.Background()
		up := newTLSUpstream(t, "api.example.test", "other.example.test")
		e := newEgressEnv(t, l, WithEgressRootCAs(up.rootCA))
		sb := brokered(ctx, t, e)
		t.Run("OnTheWire", func(t *testing.T) { testEgressBrokeredOnTheWire(ctx, t, e, up, sb) })
		t.Run("NotInSandbox", func(t *testing.T) { testEgressSecretNotInSandbox(ctx, t, e, sb) })
	})
}

// The brokered header reaches its host (over HTTPS the proxy intercepts,
// with a CA the sandbox trusts through its own trust store) and never
// another host, which gets the placeholder the sandbox sent.
func testEgressBrokeredOnTheWire(ctx context.Context, t *testing.T, e *egressEnv, up *tlsUpstream, sb *sandbox.Sandbox) {
	// No CA option: curl finds the proxy's CA in the bundle it reads
	// by default (/etc/ssl/certs/ca-certificates.crt in the sandbox).
	res := run(ctx, t, sb, `curl -sS --max-time 10 -H "Authorization: Bearer $API_KEY" https://api.example.test:`+up.port+`/`)
	if !strings.Contains(string(res.Stdout), "upstream api.example.test") {
		t.Fatalf("HTTPS to the brokered host: %q %q", res.Stdout, res.Stderr)
	}
	if got := up.auth("api.example.test"); len(got) != 1 || got[0] != "Bearer "+testSecret {
		t.Errorf("the brokered host got Authorization %q, want the secret", redact(got))
	}
	// Plain HTTP to another host: the placeholder, unchanged.
	res = run(ctx, t, sb, `curl -sS --max-time 10 -H "Authorization: Bearer $API_KEY" http://other.example.test:`+e.port+`/`)
	if !strings.Contains(string(res.Stdout), fmt.Sprintf("auth=%q", "Bearer "+testPlaceholder)) {
		t.Errorf("another host over HTTP: %q %q", res.Stdout, res.Stderr)
	}
	// HTTPS to another host passes through (not intercepted: the
	// sandbox sees the upstream's own certificate, which it does not
	// trust, hence -k) and carries the placeholder.
	res = run(ctx, t, sb, `curl -sSk --max-time 10 -H "Authorization: Bearer $API_KEY" https://other.example.test:`+up.port+`/`)
	if !strings.Contains(string(res.Stdout), "upstream other.example.test") {
		t.Fatalf("HTTPS to another host: %q %q", res.Stdout, res.Stderr)
	}
	if got := up.auth("other.example.test"); len(got) != 1 || got[0] != "Bearer "+testPlaceholder {
		t.Errorf("another host got Authorization %q, want the placeholder", redact(got))
	}
	res = run(ctx, t, sb, "env | grep -E '^(SSL_CERT_FILE|CURL_CA_BUNDLE|REQUESTS_CA_BUNDLE|PIP_CERT|GIT_SSL_CAINFO|NODE_EXTRA_CA_CERTS)=' | sort; grep -c 'BEGIN CERTIFICATE' "+egressCAOnly)
	for _, want := range []string{"SSL_CERT_FILE=" + egressBundle, "CURL_CA_BUNDLE=" + egressBundle, "REQUESTS_CA_BUNDLE=" + egressBundle,
		"PIP_CERT=" + egressBundle, "GIT_SSL_CAINFO=" + egressBundle, "NODE_EXTRA_CA_CERTS=" + egressCAOnly} {
		if !strings.Contains(string(res.Stdout), want+"\n") {
			t.Errorf("env lacks %s: %q", want, res.Stdout)
		}
	}
}

func redact(l []string) []string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = strings.ReplaceAll(s, testSecret, "<SECRET>")
	}
	return out
}

// The placeholder is all the sandbox can find: not the value in its
// environment, in any file it can read (its home, /tmp, /run, /etc), nor
// in /proc (environ and cmdline of every process it sees). The search
// builds the value in memory from two halves so that its own command
// line does not hold it. Nor is the value in the sandbox's metadata.
func testEgressSecretNotInSandbox(ctx context.Context, t *testing.T, e *egressEnv, sb *sandbox.Sandbox) {
	half := len(testSecret) / 2
	script := fmt.Sprintf(`
import os, sys
needle = (%q + %q).encode()
hits = []
if needle in b"\0".join(k.encode() + b"=" + v.encode() for k, v in os.environ.items()):
    hits.append("env")
for top in ("/home", "/tmp", "/run", "/etc", "/opt"):
    for d, _, files in os.walk(top):
        for f in files:
            p = os.path.join(d, f)
            try:
                with open(p, "rb") as fh:
                    if needle in fh.read(16 << 20):
                        hits.append(p)
            except OSError:
                pass
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for f in ("environ", "cmdline"):
            try:
                with open("/proc/%%s/%%s" %% (pid, f), "rb") as fh:
                    if needle in fh.read():
                        hits.append("/proc/%%s/%%s" %% (pid, f))
            except OSError:
                pass
print("placeholder" if os.environ.get("API_KEY") == %q else "no placeholder")
print("HITS", hits)
`, testSecret[:half], testSecret[half:], testPlaceholder)
	if err := sb.WriteFile(ctx, "scan.py", []byte(script)); err != nil {
		t.Fatal(err)
	}
	// Something running while the scan looks, holding the placeholder.
	res, err := sb.Exec(ctx, sandbox.Command{Shell: `sleep 30 & S=$!; python3 scan.py; kill $S`, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if out := string(res.Stdout); !strings.Contains(out, "placeholder\n") || !strings.Contains(out, "HITS []") {
		t.Errorf("scan: %q %q", strings.ReplaceAll(out, testSecret, "<SECRET>"), res.Stderr)
	}
	dir := e.rt.dir(sb.ID())
	for _, f := range []string{metaFile, stateFile, "agent.log"} {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); bytes.Contains(b, []byte(testSecret)) {
			t.Errorf("%s holds the secret's value", f)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, egressFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v %v, want 0600", egressFile, fi.Mode(), err)
	}
	if in := sb.Info(); strings.Contains(fmt.Sprint(in), testSecret) {
		t.Error("Info holds the secret's value")
	}
}

// pipTimeout bounds each pip command of TestEgressPipInstall: pip is
// several seconds of CPU, and at a load average over 100 (with the egress
// tests in parallel) an install took more than 2 minutes.
const pipTimeout = 5 * time.Minute

// pip installs a package through the proxy from a package index (PEP 503
// simple API) on the host's loopback, under a name the policy allows.
func TestEgressPipInstall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 is not installed in /usr/bin (the sandbox sees the host's /usr)")
	}
	if err := exec.Command("/usr/bin/python3", "-m", "pip", "--version").Run(); err != nil {
		t.Skipf("pip is not installed for /usr/bin/python3: %v", err)
	}
	wheel, whlName := buildWheel(t, "tinypkg", "0.1")
	sum := sha256.Sum256(wheel)
	idx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/simple/tinypkg/":
			fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/files/%s#sha256=%s">%s</a></body></html>`, whlName, hex.EncodeToString(sum[:]), whlName)
		case "/files/" + whlName:
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(wheel)
		default:
			http.NotFound(w, r)
		}
	}))
	defer idx.Close()
	_, port, _ := net.SplitHostPort(idx.Listener.Addr().String())
	e := newEgressEnv(t, L4)
	sb := mustCreate(ctx, t, e.c, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Allow: []string{"pypi.test", "127.0.0.1"}}})
	res, err := sb.Exec(ctx, sandbox.Command{Shell: fmt.Sprintf(`python3 -m pip install --disable-pip-version-check --no-cache-dir --break-system-packages --target "$HOME/lib" --index-url http://pypi.test:%s/simple/ --trusted-host pypi.test tinypkg && PYTHONPATH="$HOME/lib" python3 -c 'import tinypkg; print(tinypkg.MAGIC)'`, port), Timeout: pipTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Stdout), "tinypkg-works") {
		t.Errorf("pip install through the proxy: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	// The same index by a name the policy does not allow: refused.
	res, err = sb.Exec(ctx, sandbox.Command{Shell: fmt.Sprintf(`python3 -m pip download --disable-pip-version-check --no-cache-dir --retries 0 --timeout 5 -d "$HOME/dl" --index-url http://other.example.test:%s/simple/ --trusted-host other.example.test tinypkg`, port), Timeout: pipTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 {
		t.Errorf("pip through a name the policy does not allow succeeded: %q", res.Stdout)
	}
}

// buildWheel returns a pure-python wheel of one module whose MAGIC is
// "<name>-works", and its file name.
func buildWheel(t *testing.T, name, version string) ([]byte, string) {
	t.Helper()
	di := fmt.Sprintf("%s-%s.dist-info", name, version)
	files := []struct{ path, body string }{
		{name + "/__init__.py", fmt.Sprintf("MAGIC = %q\n", name+"-works")},
		{di + "/METADATA", fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version)},
		{di + "/WHEEL", "Wheel-Version: 1.0\nGenerator: sandboxkit-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(f.body))
		h := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.path, base64.RawURLEncoding.EncodeToString(h[:]), len(f.body))
	}
	record.WriteString(di + "/RECORD,,\n")
	w, err := zw.Create(di + "/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), fmt.Sprintf("%s-%s-py3-none-any.whl", name, version)
}
