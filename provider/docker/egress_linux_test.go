package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/docker"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// egressImageTag is the test image with sbxfetch (testdata/sbxfetch) in
// /usr/bin: busybox's wget cannot tunnel HTTPS through a proxy.
const egressImageTag = "sandboxkit/busybox:egress-test"

var (
	egressImageOnce sync.Once
	egressImageErr  error
)

// egressImage returns the test image with sbxfetch, building it once per
// test binary: the tool compiled statically, copied into a container of
// the test image, committed.
func egressImage(t *testing.T) string {
	t.Helper()
	host, image := engine(t)
	egressImageOnce.Do(func() { egressImageErr = buildEgressImage(host, image) })
	if egressImageErr != nil {
		t.Fatalf("building %s: %v", egressImageTag, egressImageErr)
	}
	return egressImageTag
}

func buildEgressImage(host, base string) error {
	dir, err := os.MkdirTemp("", "sbxfetch")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "sbxfetch")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/sbxfetch")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v: %s", err, out)
	}
	body, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	cli, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: base, Entrypoint: []string{"/bin/true"}},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		return err
	}
	defer cli.ContainerRemove(context.Background(), res.ID, client.ContainerRemoveOptions{Force: true})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "sbxfetch", Mode: 0o755, Size: int64(len(body)), ModTime: time.Now()})
	_, _ = tw.Write(body)
	_ = tw.Close()
	if _, err := cli.CopyToContainer(ctx, res.ID, client.CopyToContainerOptions{DestinationPath: "/usr/bin", Content: &buf}); err != nil {
		return err
	}
	// The base image's configuration (user, working directory) is kept.
	_, err = cli.ContainerCommit(ctx, res.ID, client.ContainerCommitOptions{Reference: egressImageTag,
		Changes: []string{`ENTRYPOINT []`, `CMD ["/bin/sh"]`}})
	return err
}

// proxyRuntime skips the test unless the egress proxy runs here.
func proxyRuntime(t *testing.T, opts ...docker.Option) *docker.Runtime {
	t.Helper()
	r := newRuntime(t, opts...)
	if !r.Capabilities().NetworkPolicy.AllowDomains {
		r.Close()
		t.Skipf("the egress proxy cannot run here: %s", r.Capabilities().NetworkPolicy.Note)
	}
	return r
}

// upstream is the loopback HTTPS server behind the names the proxy of
// the conformance runs resolves (WithEgressHosts) to documentation
// addresses it treats as public, and connects to on 127.0.0.1
// (WithEgressDialOverride).
type upstream struct {
	addr netip.AddrPort
	ca   []byte
	mu   sync.Mutex
	h    http.Handler
}

const (
	confSecretHost = "secret.sandboxtest.test"
	confOtherHost  = "other.sandboxtest.test"
)

var (
	confSecretAddr = netip.MustParseAddr("192.0.2.80")
	confOtherAddr  = netip.MustParseAddr("192.0.2.81")
)

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test upstream"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{confSecretHost, confOtherHost},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	u := &upstream{ca: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		h := u.h
		u.mu.Unlock()
		if h == nil {
			fmt.Fprintf(w, "upstream %s auth=%q\n", r.Host, r.Header.Get("Authorization"))
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

func (u *upstream) options() []docker.Option {
	return []docker.Option{
		docker.WithEgressHosts(map[string][]netip.Addr{confSecretHost: {confSecretAddr}, confOtherHost: {confOtherAddr}}),
		docker.WithEgressDialOverride(map[netip.AddrPort]netip.AddrPort{
			netip.AddrPortFrom(confSecretAddr, 443): u.addr, netip.AddrPortFrom(confOtherAddr, 443): u.addr,
		}),
		docker.WithEgressRootCAs(u.ca),
	}
}

func (u *upstream) hooks() sandboxtest.EgressHooks {
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
		// Over HTTPS: the proxy refuses plain HTTP to a host with a
		// brokered secret. -k because the other host's tunnel passes
		// through to the test's own certificate, which the sandbox does
		// not trust; TestEgressBrokered checks the proxy's CA in the
		// sandbox's trust bundle.
		Fetch: func(url, name, value string) []string {
			return []string{"sbxfetch", "-k", "-H", name + ": " + value, strings.Replace(url, "http://", "https://", 1)}
		},
	}
}

// conformanceEgress is what the conformance run adds where the egress
// proxy runs: the image with sbxfetch, the upstream's options, the hooks.
func conformanceEgress(t *testing.T) ([]docker.Option, sandboxtest.EgressHooks) {
	r := newRuntime(t)
	defer r.Close()
	if !r.Capabilities().NetworkPolicy.AllowDomains {
		return nil, sandboxtest.EgressHooks{}
	}
	u := newUpstream(t)
	return append([]docker.Option{docker.WithImage(egressImage(t))}, u.options()...), u.hooks()
}

// egressSandbox creates a sandbox behind the proxy of a Runtime with the
// test upstream, destroyed with the test.
func egressSandbox(ctx context.Context, t *testing.T, opts sandbox.CreateOptions) (*sandbox.Sandbox, *upstream, *docker.Runtime) {
	t.Helper()
	u := newUpstream(t)
	r := proxyRuntime(t, append([]docker.Option{docker.WithImage(egressImage(t))}, u.options()...)...)
	c := sandbox.NewClient(r)
	t.Cleanup(func() { c.Close() })
	sb, err := c.Create(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return sb, u, r
}

// A program that ignores the proxy reaches nothing: the container has no
// route out, only its loopback, where the proxy listens; through the
// proxy the allowed host answers and another is refused.
func TestEgressBypassCannotConnect(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, u, _ := egressSandbox(ctx, t, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Allow: []string{confSecretHost}}})
	require.Equal(t, sandbox.NetworkAllowList, sb.Info().Network.Mode)

	r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"sbxfetch", "-k", "https://" + confSecretHost + "/"}})
	require.NoError(t, err)
	require.Equal(t, 0, r.ExitCode, "through the proxy: %s %s", r.Stdout, r.Stderr)
	require.Contains(t, string(r.Stdout), "upstream "+confSecretHost)

	r, err = sb.Exec(ctx, sandbox.Command{Args: []string{"sbxfetch", "-k", "https://" + confOtherHost + "/"}})
	require.NoError(t, err)
	require.NotEqual(t, 0, r.ExitCode, "a host the policy does not allow answered: %s", r.Stdout)

	// Directly: to the upstream's real address and port (the host's
	// loopback is not the sandbox's), to a public address, and to the
	// proxy's own checks' address. None connects.
	for _, target := range []string{
		"https://" + u.addr.String() + "/",
		"https://" + confSecretAddr.String() + "/",
		"http://1.1.1.1/",
	} {
		r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"sbxfetch", "-direct", "-k", "-max-time", "5s", target}})
		require.NoError(t, err)
		require.NotEqual(t, 0, r.ExitCode, "%s answered a program that ignores the proxy: %s", target, r.Stdout)
	}
	// And the network: loopback only.
	r, err = sb.Exec(ctx, sandbox.Command{Shell: "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"})
	require.NoError(t, err)
	require.Equal(t, "lo", strings.TrimSpace(string(r.Stdout)), "interfaces other than loopback")
	r, err = sb.Exec(ctx, sandbox.Command{Shell: "printenv HTTPS_PROXY"})
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:3128\n", string(r.Stdout))
}

// helpers returns the pids of the egress helpers of container id.
func helpers(t *testing.T, id string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.HasPrefix(b, []byte("sandboxkit-docker-egress\x00"+id+"\x00")) {
			out = append(out, pid)
		}
	}
	return out
}

// The helper outlives the Runtime (and the Client) that started it, as
// the container does, and Destroy, from another Runtime, ends it.
func TestEgressHelperLifetime(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	u := newUpstream(t)
	opts := append([]docker.Option{docker.WithImage(egressImage(t))}, u.options()...)
	r := proxyRuntime(t, opts...)
	c := sandbox.NewClient(r)
	sb, err := c.Create(ctx, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Deny: []string{"evil.example"}}})
	require.NoError(t, err)
	id := sb.ID()
	defer func() {
		r2 := newRuntime(t)
		defer r2.Close()
		_ = r2.Destroy(context.Background(), id)
	}()
	require.Len(t, helpers(t, id), 1)
	require.NoError(t, c.Close())
	require.Len(t, helpers(t, id), 1, "the helper ended with the Runtime")

	r2 := newRuntime(t, opts...)
	c2 := sandbox.NewClient(r2)
	defer c2.Close()
	sb2, err := c2.Attach(ctx, id)
	require.NoError(t, err)
	res, err := sb2.Exec(ctx, sandbox.Command{Args: []string{"sbxfetch", "-k", "https://" + confOtherHost + "/"}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "through the proxy after the first Runtime closed: %s", res.Stderr)
	require.NoError(t, c2.Destroy(ctx, id))
	require.Empty(t, helpers(t, id), "Destroy left the egress helper running")
}

// A policy that needs the proxy is refused, naming why, where it cannot
// run: here a Runtime over gVisor's runsc, whose network stack is its
// own (the probe refuses it before the engine is asked anything).
func TestEgressRefusedWhereUnavailable(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, docker.WithRuntime("runsc"))
	defer r.Close()
	ns := r.Capabilities().NetworkPolicy
	require.False(t, ns.AllowDomains)
	require.False(t, ns.BrokeredSecrets)
	require.Contains(t, ns.Note, "runsc")
	c := sandbox.NewClient(r)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Create(ctx, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Allow: []string{"pypi.org"}}})
	require.Error(t, err)
	require.True(t, errors.Is(err, sandbox.ErrFailedPrecondition), "%v", err)
	require.Contains(t, err.Error(), "network policy")
	// At the driver level, brokered secrets without a policy: refused,
	// saying what needs the proxy, not a crash.
	_, err = r.Create(ctx, &driver.CreateRequest{Timeout: time.Minute,
		Secrets: []driver.BrokeredSecret{{Value: "v-0123456789", Hosts: []string{"api.example.com"}, Header: "Authorization", Format: "%s", Placeholder: "PH_0123456789"}}})
	require.ErrorIs(t, err, sandbox.ErrFailedPrecondition)
	require.Contains(t, err.Error(), "brokered secrets")
	require.NotContains(t, err.Error(), "v-0123456789")
}

// With a brokered secret the sandbox trusts the proxy's CA through the
// bundle its variables name (no -k), the upstream gets the value, the
// sandbox only the placeholder, and the bundle is root's, read-only.
func TestEgressBrokered(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const value = "sk-live-0f3c2b1a9e8d7c6b5a4f3e2d1c0b9a8f"
	sb, _, _ := egressSandbox(ctx, t, sandbox.CreateOptions{
		Network:         &sandbox.NetworkPolicy{Allow: []string{confSecretHost, confOtherHost}},
		BrokeredSecrets: []sandbox.BrokeredSecret{{Value: value, Hosts: []string{confSecretHost}, Env: "API_KEY", Format: "Bearer %s"}},
	})
	r, err := sb.Exec(ctx, sandbox.Command{Shell: `sbxfetch -H "Authorization: Bearer $API_KEY" https://` + confSecretHost + `/`})
	require.NoError(t, err)
	require.Equal(t, 0, r.ExitCode, "through the proxy, trusting its CA: %s", r.Stderr)
	// The upstream echoes what it got; the proxy masks the value in the
	// answer, so the sandbox sees stars where the value was.
	require.Contains(t, string(r.Stdout), `auth="Bearer `+strings.Repeat("*", len(value))+`"`)
	require.NotContains(t, string(r.Stdout), value)

	r, err = sb.Exec(ctx, sandbox.Command{Shell: `printenv API_KEY SSL_CERT_FILE; ls -ln /.sandboxkit/ca-certificates.crt /.sandboxkit/egress-ca.pem; echo x >> /.sandboxkit/ca-certificates.crt && echo WROTE`})
	require.NoError(t, err)
	out := string(r.Stdout)
	require.NotContains(t, out, value)
	require.Contains(t, out, "SBX_BROKERED_API_KEY_")
	require.Contains(t, out, "/.sandboxkit/ca-certificates.crt\n")
	require.NotContains(t, out, "WROTE", "the sandbox's user changed the trust bundle")
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[2:4] {
		f := strings.Fields(l)
		require.Equal(t, "-r--r--r--", f[0], l)
		require.Equal(t, "0", f[2], l)
	}
}

// The helper ends with the container's process when the engine stops
// the container behind the provider's back, and Resume, which starts
// the container again, puts a new helper with the recorded policy in
// front of it.
func TestEgressHelperFollowsContainer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, _, _ := egressSandbox(ctx, t, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Allow: []string{confOtherHost}}})
	id := sb.ID()
	require.Len(t, helpers(t, id), 1)
	raw := rawClient(t)
	_, err := raw.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"})
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for len(helpers(t, id)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.Empty(t, helpers(t, id), "the helper outlived the container's process")

	require.NoError(t, sb.Resume(ctx))
	require.Len(t, helpers(t, id), 1, "Resume started no helper")
	r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"sbxfetch", "-k", "https://" + confOtherHost + "/"}})
	require.NoError(t, err)
	require.Equal(t, 0, r.ExitCode, "through the new helper: %s", r.Stderr)
	r, err = sb.Exec(ctx, sandbox.Command{Args: []string{"sbxfetch", "-k", "https://" + confSecretHost + "/"}})
	require.NoError(t, err)
	require.NotEqual(t, 0, r.ExitCode, "the new helper lost the policy: %s", r.Stdout)
}
