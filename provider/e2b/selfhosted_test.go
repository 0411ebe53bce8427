package e2b_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// TestSelfHostedEngineByURL: an engine that speaks E2B's protocol on its
// own domain (openkruise/agents' native protocol, AgentENV) is reached by
// naming the domain, and its API key, in the e2b:// URL: the control
// plane at https://api.<domain>, envd at https://49983-<id>.<domain>,
// routed by that host name. The fake plays such an engine on example.com
// over TLS; the process's default transport (which the adapter clones)
// resolves example.com's names to the fake and trusts its certificate, as
// DNS and a CA would. The engine's key is not of E2B's e2b_<hex> form.
func TestSelfHostedEngineByURL(t *testing.T) {
	const domain = "example.com"
	var mu sync.Mutex
	hosts := map[string]bool{}
	fake := e2bfake.New(memory.New(memory.WithRootFileAccess()), e2bfake.WithDomain(domain), e2bfake.WithTLS(),
		e2bfake.WithAPIKey("agbx_selfhosted_key"),
		e2bfake.WithRequestHook(func(r *http.Request) {
			mu.Lock()
			hosts[r.Host] = true
			mu.Unlock()
		}))
	t.Cleanup(fake.Close)
	addr := func(u string) string {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		return pu.Host
	}
	apiAddr, envdAddr := addr(fake.APIURL()), addr(fake.SandboxURL())
	pool := x509.NewCertPool()
	pool.AddCert(fake.Certificate())
	var d net.Dialer
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			switch host, _, _ := net.SplitHostPort(a); {
			case host == "api."+domain:
				a = apiAddr
			case strings.HasSuffix(host, "."+domain):
				a = envdAddr
			default:
				t.Errorf("dial of %s: want only names under %s", a, domain)
			}
			return d.DialContext(ctx, network, a)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	old := http.DefaultTransport
	http.DefaultTransport = tr
	t.Cleanup(func() { http.DefaultTransport = old })
	for _, k := range []string{"E2B_API_URL", "E2B_SANDBOX_URL", "E2B_DOMAIN", "E2B_API_KEY"} {
		t.Setenv(k, "")
	}
	t.Setenv("SELFHOSTED_ENGINE_KEY", fake.APIKey())

	ctx := ctxT(t)
	c, err := sandbox.Open(ctx, "e2b://?domain="+domain+"&api_key_env=SELFHOSTED_ENGINE_KEY")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatalf("create on the self-hosted engine: %v", err)
	}
	defer sb.Destroy(context.Background())
	if err := sb.WriteFile(ctx, "hello.txt", []byte("hi")); err != nil {
		t.Fatalf("write: %v", err)
	}
	if b, err := sb.ReadFile(ctx, "hello.txt"); err != nil || string(b) != "hi" {
		t.Fatalf("read: %q %v", b, err)
	}
	if _, err := sb.Exec(ctx, sandbox.Command{Shell: "true"}); err != nil {
		t.Fatalf("exec: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if envd := "49983-" + sb.ID() + "." + domain; !hosts[envd] || !hosts["api."+domain] {
		t.Fatalf("hosts the engine was asked by: %v, want api.%s and %s", hosts, domain, envd)
	}
}
