package sandboxtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

func init() {
	networkTests = append(networkTests, test{name: "Enforced", fn: testNetworkEnforced})
}

// The names the Enforced subtests serve under (Harness.EgressClient maps
// them to 127.0.0.1, where the test's server listens).
const (
	egAllowed    = "allowed.sandboxtest.test"
	egOther      = "other.sandboxtest.test"
	egWild       = "a.wild.sandboxtest.test"
	egWildDenied = "no.wild.sandboxtest.test"
	egBody       = "sandboxtest-egress-ok"
)

// testNetworkEnforced checks, from inside a sandbox, that an allow-list is
// enforced and not only reported: an allowed name (exact and by wildcard)
// is reached, a name outside the list, one a deny entry covers and an IP
// address the list does not name are not, and, where the provider can
// change the policy at run time, the change is in force at once. The
// sandbox's HTTP client is curl, else python3; a sandbox with neither is
// skipped, naming them.
func testNetworkEnforced(ctx context.Context, t *testing.T, s *suite) {
	ns := s.caps.NetworkPolicy
	switch {
	case s.h.EgressClient == nil:
		t.Skip("the harness gives no EgressClient to resolve test names to loopback")
	case ns.NotEnforced:
		t.Skip("the provider records policies without enforcing them (NetworkPolicy.NotEnforced)")
	case !ns.AllowDomains || !ns.AllowWildcards || !ns.AllowCIDRs || !ns.DenyOverAllow:
		t.Skip("the provider lacks domain and wildcard allow-lists, CIDRs or deny-over-allow")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, egBody, r.Host)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	lo := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	c := s.h.EgressClient(t, map[string][]netip.Addr{egAllowed: lo, egOther: lo, egWild: lo, egWildDenied: lo})
	t.Cleanup(func() { _ = c.Close() })
	opts := s.h.Create
	opts.NoNetwork = false
	opts.Network = &sandbox.NetworkPolicy{Allow: []string{egAllowed, "*.wild.sandboxtest.test", "127.0.0.1"}, Deny: []string{egWildDenied}}
	opts.Labels = map[string]string{"sandboxtest": s.runID}
	sb, err := c.Create(ctx, opts)
	check(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = sb.Destroy(ctx)
	})
	res, err := sb.Exec(ctx, sandbox.Command{Shell: "command -v curl || command -v python3", Timeout: 30 * time.Second})
	check(t, err)
	client := strings.TrimSpace(string(res.Stdout))
	var get func(host string) string
	switch {
	case strings.HasSuffix(client, "curl"):
		get = func(host string) string {
			return fmt.Sprintf("curl -sS --max-time 15 http://%s:%s/", host, port)
		}
	case strings.HasSuffix(client, "python3"):
		get = func(host string) string {
			return fmt.Sprintf(`python3 -c 'import urllib.request,sys; sys.stdout.write(urllib.request.urlopen("http://%s:%s/", timeout=15).read().decode())'`, host, port)
		}
	default:
		t.Skip("the sandbox has neither curl nor python3 to make a request with")
	}
	reach := func(host string) (bool, string) {
		res, err := sb.Exec(ctx, sandbox.Command{Shell: get(host), Timeout: time.Minute})
		check(t, err)
		return res.ExitCode == 0 && strings.Contains(string(res.Stdout), egBody+" "+host), string(res.Stdout) + string(res.Stderr)
	}
	for _, h := range []string{egAllowed, egWild} {
		if ok, out := reach(h); !ok {
			t.Errorf("%s, which the policy allows, was not reached: %s", h, out)
		}
	}
	for _, h := range []string{egOther, egWildDenied, "192.0.2.1"} {
		if ok, out := reach(h); ok {
			t.Errorf("%s, which the policy does not allow, was reached: %s", h, out)
		}
	}
	if !s.caps.NetworkUpdate {
		return
	}
	check(t, sb.SetNetwork(ctx, sandbox.NetworkPolicy{Allow: []string{egOther, "127.0.0.1"}}))
	if ok, out := reach(egOther); !ok {
		t.Errorf("after SetNetwork allowing %s it was not reached: %s", egOther, out)
	}
	if ok, out := reach(egAllowed); ok {
		t.Errorf("after SetNetwork no longer allowing %s it was reached: %s", egAllowed, out)
	}
}
