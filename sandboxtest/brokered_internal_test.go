package sandboxtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// toyEnforcer is memory with a toy enforcement point: its "toyfetch"
// command requests a URL as an egress proxy would, refusing hosts outside
// the allow-list and setting a brokered header for the secret's hosts. It
// exists to show that the Brokered group's Enforced subtests pass on a
// provider that enforces; leak (broker to every host) and open (ignore
// the allow-list) make it misbehave, which those subtests catch.
type toyEnforcer struct {
	*memory.Runtime
	leak, open bool // misbehave: broker to every host; ignore the allow-list

	mu      sync.Mutex
	secrets map[string][]driver.BrokeredSecret
	addr    string
}

func (r *toyEnforcer) Capabilities() driver.Capabilities {
	c := r.Runtime.Capabilities()
	c.NetworkPolicy.NotEnforced = false
	return c
}

func (r *toyEnforcer) Create(ctx context.Context, req *driver.CreateRequest) (driver.Info, error) {
	in, err := r.Runtime.Create(ctx, req)
	if err == nil {
		r.mu.Lock()
		r.secrets[in.ID] = req.Secrets
		r.mu.Unlock()
	}
	return in, err
}

func (r *toyEnforcer) fetch(ctx context.Context, c *memory.Call) int {
	u, err := url.Parse(c.Args[1])
	if err != nil {
		return 2
	}
	host := u.Hostname()
	if n := c.Network; !r.open && n != nil && n.Mode == driver.NetworkAllowList && !slices.Contains(n.AllowDomains, host) {
		fmt.Fprintln(c.Stderr, "toyfetch: refused by the policy:", host)
		return 7
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Args[1], nil)
	req.Header.Set(c.Args[2], c.Args[3])
	r.mu.Lock()
	secrets, addr := r.secrets[c.SandboxID], r.addr
	r.mu.Unlock()
	for _, s := range secrets {
		if r.leak || slices.Contains(s.Hosts, host) {
			req.Header.Set(s.Header, fmt.Sprintf(s.Format, s.Value))
		}
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		fmt.Fprintln(c.Stderr, err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return 22
	}
	return 0
}

func runToy(t *testing.T, leak, open bool) (failed map[string]bool) {
	rt := &toyEnforcer{Runtime: memory.New(), leak: leak, open: open, secrets: map[string][]driver.BrokeredSecret{}}
	rt.Handle("toyfetch", rt.fetch)
	c := sandbox.NewClient(rt)
	defer c.Close()
	h := Harness{Egress: EgressHooks{
		Upstream: func(t *testing.T, h http.Handler) (string, string) {
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			rt.mu.Lock()
			rt.addr = strings.TrimPrefix(srv.URL, "http://")
			rt.mu.Unlock()
			return "secret.test", "other.test"
		},
		Fetch: func(u, name, value string) []string { return []string{"toyfetch", u, name, value} },
	}}
	s := &suite{h: h, c: c, caps: c.Capabilities(), runID: randHex(6)}
	failed = map[string]bool{}
	for _, tc := range brokeredTests {
		if !strings.HasPrefix(tc.name, "Enforced") {
			continue
		}
		ok := t.Run(tc.name, func(t *testing.T) {
			if r := tc.needs(s.caps); r != "" {
				t.Fatalf("skipped on an enforcing provider: %s", r)
			}
			tc.fn(context.Background(), t, s)
		})
		if !ok {
			failed[tc.name] = true
		}
	}
	return failed
}

// The Enforced subtests pass on a provider that enforces the policy and
// brokers the header to its host only.
func TestEnforcedSubtestsOnAnEnforcingProvider(t *testing.T) {
	if f := runToy(t, false, false); len(f) > 0 {
		t.Fatalf("failed: %v", f)
	}
}
