package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sandboxtest"
	"github.com/sandboxkit/sandbox/sberrors"
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

// egressCallTimeouts widens the bound of calls made without a deadline
// that the portable layer gives lookups (10 s by default), which
// SetNetwork shares: a SetNetwork that starts a proxy starts a process
// (this -race test binary, re-executed), which on a host under heavy load
// (the egress tests run in parallel) took longer than that.
var egressCallTimeouts = sandbox.WithCallTimeouts(sandbox.CallTimeouts{Lookup: 2 * time.Minute})

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
	return &egressEnv{rt: rt, c: sandbox.NewClient(rt, egressCallTimeouts), api: api, port: port}
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
// The two levels run in parallel (each has a Runtime and a root of its
// own), like the egress tests themselves: their time is mostly spent
// waiting on sandboxes and their proxies, not on this process, and no
// egress test counts the process's descriptors or heap, so none sees
// another's. -parallel (GOMAXPROCS by default) bounds how many sandboxes
// with a network run at once.
func eachNSLevel(t *testing.T, f func(t *testing.T, l Level)) {
	for _, l := range []Level{L4, L3} {
		t.Run(l.String(), func(t *testing.T) {
			t.Parallel()
			f(t, l)
		})
	}
}

// TestEgressAllowList: one sandbox per level behind an allow-list of a
// name and loopback serves the subtests, none of which changes it.
func TestEgressAllowList(t *testing.T) {
	t.Parallel()
	eachNSLevel(t, func(t *testing.T, l Level) {
		ctx := context.Background()
		e := newEgressEnv(t, l)
		sb := mustCreate(ctx, t, e.c, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Allow: []string{"api.example.test", "127.0.0.1"}}})
		t.Run("AllowDeny", func(t *testing.T) { testEgressAllowDeny(ctx, t, e, sb) })
		t.Run("FailsClosed", func(t *testing.T) { testEgressFailsClosed(ctx, t, e, sb) })
	})
}

// An allowed name is reached through the proxy; another is not.
func testEgressAllowDeny(ctx context.Context, t *testing.T, e *egressEnv, sb *sandbox.Sandbox) {
	res := run(ctx, t, sb, "curl -sS -p --max-time 10 http://api.example.test:"+e.port+"/")
	if !strings.Contains(string(res.Stdout), "upstream api.example.test") {
		t.Errorf("allowed name: %q %q", res.Stdout, res.Stderr)
	}
	res = run(ctx, t, sb, "curl -sS -p --max-time 10 http://other.example.test:"+e.port+"/")
	if res.ExitCode == 0 {
		t.Errorf("denied name reached: %q", res.Stdout)
	}
	t.Logf("denied: %s", res.Stderr)
}

func statPath(p string) (os.FileInfo, error) { return os.Stat(p) }

// A program that ignores the proxy variables cannot connect anywhere:
// the sandbox's namespace has no route out, and the host's loopback (where
// the upstream listens) is not the sandbox's.
func testEgressFailsClosed(ctx context.Context, t *testing.T, e *egressEnv, sb *sandbox.Sandbox) {
	res := run(ctx, t, sb, "env | grep -i _proxy | sort")
	for _, want := range []string{"HTTP_PROXY=http://127.0.0.1:3128", "HTTPS_PROXY=http://127.0.0.1:3128", "http_proxy=http://127.0.0.1:3128",
		"https_proxy=http://127.0.0.1:3128", "ALL_PROXY=http://127.0.0.1:3128", "NO_PROXY=localhost,127.0.0.1,::1"} {
		if !strings.Contains(string(res.Stdout), want+"\n") {
			t.Errorf("env lacks %s: %q", want, res.Stdout)
		}
	}
	for _, cmd := range []string{
		"curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:" + e.port + "/",
		"env -u http_proxy -u HTTP_PROXY -u ALL_PROXY curl -sS --max-time 5 http://127.0.0.1:" + e.port + "/",
		"curl -sS --noproxy '*' --max-time 5 http://192.0.2.1/",
	} {
		res := run(ctx, t, sb, cmd)
		if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "upstream") {
			t.Errorf("%s: connected without the proxy: %q", cmd, res.Stdout)
		}
	}
	// The relay's port is the agent's: no command can take it over,
	// with or without SO_REUSEPORT.
	res = run(ctx, t, sb, `python3 -c '
import socket
for reuse in (False, True):
    s = socket.socket()
    if reuse:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        s.bind(("127.0.0.1", 3128)); s.listen(); print("BOUND", reuse)
    except OSError as e:
        print("refused", e.errno)
'`)
	if strings.Contains(string(res.Stdout), "BOUND") || strings.Count(string(res.Stdout), "refused") != 2 {
		t.Errorf("a command could bind the relay's port: %q %q", res.Stdout, res.Stderr)
	}
	if d := sb.Info().Detail["egress"]; d != "proxy" {
		t.Errorf(`Detail["egress"] = %q, want "proxy"`, d)
	}
}

// Destroy ends the proxy; so does the sandbox's end by any other way (the
// agent's death closes the proxy's connection).
func TestEgressDestroyEndsProxy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEgressEnv(t, L4)
	for _, how := range []string{"destroy", "agent-dies"} {
		sb, err := e.c.Create(ctx, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Allow: []string{"api.example.test"}}})
		if err != nil {
			t.Fatal(err)
		}
		m, err := e.rt.readMeta(sb.ID())
		if err != nil {
			t.Fatal(err)
		}
		if !procAlive(m.EgressPID, m.EgressAt) {
			t.Fatalf("%s: no proxy process recorded (pid %d)", how, m.EgressPID)
		}
		if how == "agent-dies" {
			_ = syscall.Kill(m.AgentPID, syscall.SIGKILL)
		} else if err := sb.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for procAlive(m.EgressPID, m.EgressAt) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if procAlive(m.EgressPID, m.EgressAt) {
			t.Errorf("%s: the proxy (pid %d) outlives its sandbox", how, m.EgressPID)
		}
		_ = sb.Destroy(ctx)
	}
}

// The policy is changed at run time, and a new Runtime on the same root
// (the first one closed) finds the proxy still enforcing it and changes
// it again.
func TestEgressSetNetworkAndRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEgressEnv(t, L4)
	root := e.rt.Root()
	sb := mustCreate(ctx, t, e.c, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Allow: []string{"api.example.test", "127.0.0.1"}}})
	get := func(sb *sandbox.Sandbox, host string) bool {
		res := run(ctx, t, sb, "curl -sS -p --max-time 10 http://"+host+":"+e.port+"/")
		return strings.Contains(string(res.Stdout), "upstream "+host)
	}
	if !get(sb, "api.example.test") || get(sb, "other.example.test") {
		t.Fatal("policy at create not enforced")
	}
	if err := sb.SetNetwork(ctx, sandbox.NetworkPolicy{Allow: []string{"other.example.test", "127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	if get(sb, "api.example.test") || !get(sb, "other.example.test") {
		t.Error("SetNetwork not in force at once")
	}
	if got := sb.Info().Network; got == nil || strings.Join(got.Allow, ",") != "other.example.test,127.0.0.1/32" {
		t.Errorf("Info.Network = %+v", got)
	}
	_ = e.rt.Close()
	rt2, err := New(WithRoot(root), WithIsolation(L4), WithEgressHosts(map[string][]netip.Addr{"api.example.test": loop}))
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	c2 := sandbox.NewClient(rt2, egressCallTimeouts)
	sb2, err := c2.Attach(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got := sb2.Info().Network; got == nil || strings.Join(got.Allow, ",") != "other.example.test,127.0.0.1/32" {
		t.Errorf("a new Runtime reads Info.Network = %+v", got)
	}
	if get(sb2, "api.example.test") || !get(sb2, "other.example.test") {
		t.Error("after a Runtime restart the proxy does not enforce the policy set")
	}
	if err := rt2.SetNetwork(ctx, sb.ID(), &driver.NetworkPolicy{Mode: driver.NetworkAllowList, AllowDomains: []string{"api.example.test"}, AllowCIDRs: []string{"127.0.0.1/32"}}); err != nil {
		t.Fatal(err)
	}
	if !get(sb2, "api.example.test") || get(sb2, "other.example.test") {
		t.Error("SetNetwork from a new Runtime not in force")
	}
	if err := rt2.Destroy(ctx, sb.ID()); err != nil {
		t.Fatal(err)
	}
}

// A sandbox created without network gets the proxy at run time; one with
// the isolated network of pasta cannot be narrowed (FailedPrecondition).
func TestEgressSetNetworkModes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEgressEnv(t, L4)
	off := mustCreate(ctx, t, e.c, sandbox.CreateOptions{NoNetwork: true})
	if err := off.SetNetwork(ctx, sandbox.NetworkPolicy{Allow: []string{"api.example.test", "127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	res := run(ctx, t, off, "curl -sS -p --max-time 10 http://api.example.test:"+e.port+"/")
	if !strings.Contains(string(res.Stdout), "upstream api.example.test") {
		t.Errorf("after SetNetwork on a sandbox without network: %q %q", res.Stdout, res.Stderr)
	}
	if err := off.SetNetwork(ctx, sandbox.NetworkPolicy{Mode: sandbox.NetworkDenyAll}); err != nil {
		t.Fatal(err)
	}
	res = run(ctx, t, off, "curl -sS -p --max-time 10 http://api.example.test:"+e.port+"/")
	if res.ExitCode == 0 {
		t.Errorf("deny-all set at run time: %q", res.Stdout)
	}
	if e.rt.pasta == "" {
		t.Skip("pasta (Debian package passt) is not installed: no isolated network to refuse a change of")
	}
	on := mustCreate(ctx, t, e.c, sandbox.CreateOptions{})
	err := on.SetNetwork(ctx, sandbox.NetworkPolicy{Allow: []string{"api.example.test"}})
	if !errors.Is(err, sandbox.ErrFailedPrecondition) || !strings.Contains(err.Error(), "pasta") {
		t.Errorf("narrowing the isolated network at run time: %v, want FailedPrecondition naming pasta", err)
	}
	if err := on.SetNetwork(ctx, sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowAll}); err != nil {
		t.Errorf("allow-all on a sandbox that has it: %v", err)
	}
}

// Below L3 there is no network namespace for the proxy: lists are
// refused, naming what it would take.
func TestEgressRefusedAtL2(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt, err := New(WithRoot(t.TempDir()), WithIsolation(L2))
	if err != nil {
		t.Skipf("no L2 on this host: %v", err)
	}
	defer rt.Close()
	if s := rt.Capabilities().NetworkPolicy; s.AllowDomains || s.BrokeredSecrets {
		t.Errorf("L2 declares lists: %+v", s)
	}
	_, err = rt.Create(ctx, &driver.CreateRequest{Timeout: time.Minute, Network: &driver.NetworkPolicy{Mode: driver.NetworkAllowList, AllowDomains: []string{"pypi.org"}}})
	if !errors.Is(err, sberrors.ErrFailedPrecondition) || !strings.Contains(err.Error(), "L3") {
		t.Errorf("driver-level Create with an allow-list at L2: %v, want FailedPrecondition naming L3", err)
	}
}

// A proxy that is gone leaves the sandbox with no way out, not an open
// one: the relay holds each connection a short while for a proxy, then
// closes it.
func TestEgressProxyGoneFailsClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEgressEnv(t, L4)
	sb := mustCreate(ctx, t, e.c, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Allow: []string{"api.example.test", "127.0.0.1"}}})
	m, err := e.rt.readMeta(sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(m.EgressPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := run(ctx, t, sb, "curl -sS --max-time 20 http://api.example.test:"+e.port+"/")
	if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "upstream") {
		t.Errorf("with the proxy gone: %q", res.Stdout)
	}
	if d := time.Since(start); d > egressWait+10*time.Second {
		t.Errorf("the relay held the connection %v", d)
	}
	// SetNetwork starts another proxy, with the new policy.
	if err := sb.SetNetwork(ctx, sandbox.NetworkPolicy{Allow: []string{"other.example.test", "127.0.0.1"}}); err != nil {
		t.Fatalf("SetNetwork with the proxy gone: %v", err)
	}
	res = run(ctx, t, sb, "curl -sS --max-time 20 http://other.example.test:"+e.port+"/")
	if !strings.Contains(string(res.Stdout), "upstream other.example.test") {
		t.Errorf("after SetNetwork started a new proxy: %q %q", res.Stdout, res.Stderr)
	}
	m2, err := e.rt.readMeta(sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if procAlive(m2.EgressPID, m2.EgressAt) {
		t.Errorf("the new proxy (pid %d) outlives Destroy", m2.EgressPID)
	}
}

// conformanceUpstream is the loopback HTTPS server behind the names the
// sandboxtest Brokered/Enforced subtests fetch: the names resolve (for the
// proxy) to addresses of 192.0.2.0/24, which its checks treat as public
// and the internet never routes, and the proxy's connections to them on
// port 443 reach this server instead (WithEgressDialOverride); the proxy
// trusts its certificate (WithEgressRootCAs).
type conformanceUpstream struct {
	addr netip.AddrPort
	ca   []byte
	mu   sync.Mutex
	h    http.Handler
}

const (
	confSecretHost = "secret.sandboxtest.test"
	confOtherHost  = "other.sandboxtest.test"
)

func newConformanceUpstream(t *testing.T) *conformanceUpstream {
	u := &conformanceUpstream{}
	tu := newTLSUpstream(t, confSecretHost, confOtherHost)
	tu.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		h := u.h
		u.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
	u.addr, u.ca = netip.MustParseAddrPort(tu.srv.Listener.Addr().String()), tu.rootCA
	return u
}

func (u *conformanceUpstream) options() []Option {
	secret, other := netip.MustParseAddr("192.0.2.80"), netip.MustParseAddr("192.0.2.81")
	return []Option{
		WithEgressHosts(map[string][]netip.Addr{confSecretHost: {secret}, confOtherHost: {other}}),
		WithEgressDialOverride(map[netip.AddrPort]netip.AddrPort{
			netip.AddrPortFrom(secret, 443): u.addr, netip.AddrPortFrom(other, 443): u.addr,
		}),
		WithEgressRootCAs(u.ca),
	}
}

func (u *conformanceUpstream) hooks() sandboxtest.EgressHooks {
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
			return confSecretHost, confOtherHost
		},
		// Over HTTPS: the egress proxy refuses plain HTTP to a host with a
		// brokered secret (the value would cross the network in clear).
		// -k because the other host's tunnel passes through to the test's
		// own certificate, which the sandbox does not trust; the proxy's
		// CA in the sandbox's trust store is checked by
		// TestEgressBrokeredSecret.
		Fetch: func(url, name, value string) []string {
			return []string{"curl", "-fsSk", "--max-time", "20", "-H", name + ": " + value, strings.Replace(url, "http://", "https://", 1)}
		},
	}
}
