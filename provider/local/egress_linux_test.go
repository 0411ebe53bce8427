package local

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// egressEnv is a Runtime at one level whose egress proxy resolves the
// test's names to loopback, with upstream servers there.
type egressEnv struct {
	rt   *Runtime
	c    *sandbox.Client
	api  *httptest.Server // api.example.test, other.example.test
	port string
}

var loop = []netip.Addr{netip.MustParseAddr("127.0.0.1")}

func newEgressEnv(t *testing.T, l Level, opts ...Option) *egressEnv {
	t.Helper()
	if _, err := lookPathCurl(); err != nil {
		t.Skip(err)
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream %s auth=%q\n", r.Host, r.Header.Get("Authorization"))
	}))
	t.Cleanup(api.Close)
	hosts := map[string][]netip.Addr{
		"api.example.test": loop, "other.example.test": loop, "x.wild.test": loop,
		"deep.x.wild.test": loop, "secret.wild.test": loop, "pypi.test": loop,
	}
	rt, err := New(append([]Option{WithRoot(t.TempDir()), WithIsolation(l), WithEgressHosts(hosts)}, opts...)...)
	if err != nil {
		t.Skipf("no %s on this host: %v", l.Describe(), err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	_, port, _ := net.SplitHostPort(api.Listener.Addr().String())
	return &egressEnv{rt: rt, c: sandbox.NewClient(rt), api: api, port: port}
}

func lookPathCurl() (string, error) {
	for _, p := range []string{"/usr/bin/curl", "/bin/curl"} {
		if fi, err := statPath(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("curl is not installed in /usr/bin (the sandbox sees the host's /usr)")
}

// eachNSLevel runs f at L4 and at L3, skipping a level the host lacks.
func eachNSLevel(t *testing.T, f func(t *testing.T, l Level)) {
	for _, l := range []Level{L4, L3} {
		t.Run(l.String(), func(t *testing.T) { f(t, l) })
	}
}

func TestEgressAllowDeny(t *testing.T) {
	eachNSLevel(t, func(t *testing.T, l Level) {
		ctx := context.Background()
		e := newEgressEnv(t, l)
		sb := mustCreate(ctx, t, e.c, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Allow: []string{"api.example.test"}}})
		res := run(ctx, t, sb, "curl -sS -p --max-time 10 http://api.example.test:"+e.port+"/")
		if !strings.Contains(string(res.Stdout), "upstream api.example.test") {
			t.Errorf("allowed name: %q %q", res.Stdout, res.Stderr)
		}
		res = run(ctx, t, sb, "curl -sS -p --max-time 10 http://other.example.test:"+e.port+"/")
		if res.ExitCode == 0 {
			t.Errorf("denied name reached: %q", res.Stdout)
		}
		t.Logf("denied: %s", res.Stderr)
	})
}

func statPath(p string) (os.FileInfo, error) { return os.Stat(p) }
