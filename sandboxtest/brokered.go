package sandboxtest

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// The Brokered group: brokered secrets (CreateOptions.BrokeredSecrets) and
// the enforcement of allow-lists. On every provider: a provider that does
// not declare Capabilities.NetworkPolicy.BrokeredSecrets refuses them
// with FailedPrecondition naming BrokeredSecrets and creates nothing. Where
// it declares them: the sandbox's env holds the placeholder and nothing the
// sandbox can list (env, its process's environment) holds the value; the
// value, should a command print it, is redacted; Info reports hosts and
// header, also to an attached handle, never the value; a secret for a host
// the policy does not let through is InvalidArgument naming the host.
//
// The Enforced subtests check on the wire what only a real enforcement
// point does (a brokered header reaches its host and no other; a name
// outside the allow-list is refused): they run where the provider does not
// declare NotEnforced and its harness supplies Harness.Egress, pointing
// the enforcement point at the test's loopback upstreams.

// EgressHooks let the Brokered/Enforced subtests reach test servers
// through the provider's enforcement point, loopback only.
type EgressHooks struct {
	// Upstream serves h on loopback under two names the provider's
	// enforcement point resolves to it (for example through a resolver
	// the provider's test installs), and returns them: the subtests allow
	// and broker to secretHost, and use otherHost as a host that must not
	// get the secret. The hook stops the server when t ends.
	Upstream func(t *testing.T, h http.Handler) (secretHost, otherHost string)
	// Fetch returns the argv of a command that sends, from inside the
	// sandbox and through the enforcement point, a GET to url with the
	// header "name: value", and exits 0 only on a 2xx answer (for
	// example curl -fsS -H 'name: value' url).
	Fetch func(url, name, value string) []string
}

func init() {
	brokeredTests = append(brokeredTests,
		test{name: "Unsupported", fn: testBrokeredUnsupported},
		test{name: "PlaceholderOnly", needs: needsBrokered, fn: testBrokeredPlaceholder},
		test{name: "Redacted", needs: needsBrokered, fn: testBrokeredRedacted},
		test{name: "InfoReportsHosts", needs: needsBrokered, fn: testBrokeredInfo},
		test{name: "HostNotAllowed", needs: needsBrokered, fn: testBrokeredHostNotAllowed},
		test{name: "EnforcedHeader", needs: needsEnforcedBrokered, fn: testBrokeredEnforcedHeader},
		test{name: "EnforcedAllowList", needs: needsEnforcedAllowList, fn: testEnforcedAllowList},
	)
}

// brokeredTests is the Brokered group.
var brokeredTests []test

func needsBrokered(c sandbox.Capabilities) string {
	if !c.NetworkPolicy.BrokeredSecrets {
		return "provider cannot broker secrets (Capabilities.NetworkPolicy.BrokeredSecrets=false); Brokered/Unsupported checks the refusal"
	}
	return ""
}

func needsEnforcedBrokered(c sandbox.Capabilities) string {
	if r := needsBrokered(c); r != "" {
		return r
	}
	return needsEnforced(c)
}

func needsEnforcedAllowList(c sandbox.Capabilities) string {
	if !c.NetworkPolicy.AllowDomains {
		return "provider has no domain allow-lists (Capabilities.NetworkPolicy.AllowDomains=false)"
	}
	return needsEnforced(c)
}

func needsEnforced(c sandbox.Capabilities) string {
	if c.NetworkPolicy.NotEnforced {
		return "provider records network policies without enforcing them (NotEnforced)"
	}
	return ""
}

// brokeredValue is a fresh secret value for one subtest.
func brokeredValue() string { return "sbxtest-secret-" + randHex(12) }

// createBrokered creates a sandbox of the suite with policy p and secrets.
func (s *suite) createBrokered(ctx context.Context, t *testing.T, p *sandbox.NetworkPolicy, secrets []sandbox.BrokeredSecret) (*sandbox.Sandbox, error) {
	t.Helper()
	opts := s.h.Create
	opts.NoNetwork, opts.Network, opts.BrokeredSecrets = false, p, secrets
	opts.Labels = map[string]string{"sandboxtest": s.runID}
	for k, v := range s.h.Create.Labels {
		opts.Labels[k] = v
	}
	sb, err := s.c.Create(ctx, opts)
	if err == nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60e9)
			defer cancel()
			if err := sb.Destroy(ctx); err != nil {
				t.Errorf("cleanup Destroy(%s): %v", sb.ID(), err)
			}
		})
	}
	return sb, err
}

// brokeredPolicy is an allow-list that lets api.example.com through, or
// nil where the provider has no domain allow-lists (the secret then
// implies allow-all).
func (s *suite) brokeredPolicy() *sandbox.NetworkPolicy {
	if !s.caps.NetworkPolicy.AllowDomains {
		return nil
	}
	return &sandbox.NetworkPolicy{Allow: []string{"api.example.com", "pypi.org"}}
}

func testBrokeredUnsupported(ctx context.Context, t *testing.T, s *suite) {
	if s.caps.NetworkPolicy.BrokeredSecrets {
		t.Skip("provider brokers secrets; the other subtests check them")
	}
	value := brokeredValue()
	label := map[string]string{"sandboxtest-brokered": randHex(4)}
	opts := s.h.Create
	opts.Labels = map[string]string{"sandboxtest": s.runID}
	for k, v := range label {
		opts.Labels[k] = v
	}
	opts.BrokeredSecrets = []sandbox.BrokeredSecret{{Value: value, Hosts: []string{"api.example.com"}, Env: "SBXTEST_KEY"}}
	sb, err := s.c.Create(ctx, opts)
	if err == nil {
		_ = sb.Destroy(context.WithoutCancel(ctx))
		t.Fatal("Create with BrokeredSecrets succeeded on a provider that does not declare them")
	}
	if !errors.Is(err, sandbox.ErrFailedPrecondition) || !strings.Contains(err.Error(), "BrokeredSecrets") {
		t.Fatalf("Create: %v, want FailedPrecondition naming BrokeredSecrets", err)
	}
	if strings.Contains(err.Error(), value) {
		t.Fatalf("the error shows the value: %v", err)
	}
	for in, err := range s.c.List(ctx, sandbox.ListOptions{Labels: label}) {
		if err != nil {
			t.Fatal(err)
		}
		t.Fatalf("a refused create left sandbox %s", in.ID)
	}
}

var placeholderRE = regexp.MustCompile(`^SBX_BROKERED_[A-Z0-9_]+_[0-9a-f]{24}$`)

func testBrokeredPlaceholder(ctx context.Context, t *testing.T, s *suite) {
	value := brokeredValue()
	sb, err := s.createBrokered(ctx, t, s.brokeredPolicy(), []sandbox.BrokeredSecret{
		{Value: value, Hosts: []string{"api.example.com"}, Env: "SBXTEST_KEY", Format: "Bearer %s"},
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	bs := sb.Info().BrokeredSecrets
	if len(bs) != 1 || !placeholderRE.MatchString(bs[0].Placeholder) {
		t.Fatalf("Info.BrokeredSecrets = %+v, want one with a placeholder", bs)
	}
	r := must[*sandbox.Result](t, "printenv")(sb.Exec(ctx, sandbox.Command{Args: []string{"printenv", "SBXTEST_KEY"}}))
	if got := strings.TrimSpace(string(r.Stdout)); got != bs[0].Placeholder {
		t.Fatalf("SBXTEST_KEY in the sandbox is %q, want the placeholder %q", got, bs[0].Placeholder)
	}
	// Unredacted: what the sandbox can list must not hold the value at all,
	// not merely have it hidden on the way out.
	res, _, err := sb.ExecUnredacted(ctx, sandbox.Command{Shell: "env; cat /proc/self/environ /proc/1/environ 2>/dev/null; true"})
	if err != nil {
		t.Fatalf("ExecUnredacted: %v", err)
	}
	if strings.Contains(string(res.Stdout)+string(res.Stderr), value) {
		t.Fatal("the sandbox's environment holds the brokered value")
	}
	if !strings.Contains(string(res.Stdout), "SBXTEST_KEY="+bs[0].Placeholder) {
		t.Fatalf("env does not show SBXTEST_KEY=placeholder: %q", res.Stdout)
	}
}

func testBrokeredRedacted(ctx context.Context, t *testing.T, s *suite) {
	value := brokeredValue()
	sb, err := s.createBrokered(ctx, t, s.brokeredPolicy(), []sandbox.BrokeredSecret{{Value: value, Hosts: []string{"api.example.com"}}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	r := must[*sandbox.Result](t, "echo")(sb.Exec(ctx, sandbox.Command{Shell: "echo " + value + "; echo " + value + " >&2"}))
	if strings.Contains(string(r.Stdout)+string(r.Stderr), value) {
		t.Fatalf("output shows the brokered value: %q %q", r.Stdout, r.Stderr)
	}
	if !strings.Contains(string(r.Stdout), "[REDACTED]") {
		t.Fatalf("stdout %q: want the value replaced by [REDACTED]", r.Stdout)
	}
}

func testBrokeredInfo(ctx context.Context, t *testing.T, s *suite) {
	value := brokeredValue()
	sb, err := s.createBrokered(ctx, t, s.brokeredPolicy(), []sandbox.BrokeredSecret{
		{Value: value, Hosts: []string{"API.example.com"}, Header: "x-sbxtest-key", Env: "SBXTEST_KEY"},
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	check := func(who string, bs []sandbox.BrokeredSecretInfo) {
		t.Helper()
		if len(bs) != 1 || bs[0].Header != "X-Sbxtest-Key" || len(bs[0].Hosts) != 1 || bs[0].Hosts[0] != "api.example.com" {
			t.Fatalf("%s: Info.BrokeredSecrets = %+v, want X-Sbxtest-Key to api.example.com", who, bs)
		}
		if bs[0].Placeholder == value || bs[0].Env == value {
			t.Fatalf("%s: Info shows the value", who)
		}
	}
	check("creating handle", sb.Info().BrokeredSecrets)
	if sb.Info().BrokeredSecrets[0].Env != "SBXTEST_KEY" {
		t.Fatalf("creating handle: Env = %q, want SBXTEST_KEY", sb.Info().BrokeredSecrets[0].Env)
	}
	other, err := s.c.Attach(ctx, sb.ID())
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if bs := other.Info().BrokeredSecrets; bs != nil {
		// A provider may not report them to another handle; one that
		// does reports hosts and header, not the value.
		check("attached handle", bs)
	}
}

func testBrokeredHostNotAllowed(ctx context.Context, t *testing.T, s *suite) {
	if !s.caps.NetworkPolicy.AllowDomains {
		t.Skip("provider has no domain allow-lists to leave a host out of")
	}
	value := brokeredValue()
	_, err := s.createBrokered(ctx, t, &sandbox.NetworkPolicy{Allow: []string{"pypi.org"}},
		[]sandbox.BrokeredSecret{{Value: value, Hosts: []string{"api.example.com"}}})
	if !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "api.example.com") {
		t.Fatalf("Create: %v, want InvalidArgument naming api.example.com", err)
	}
	if strings.Contains(err.Error(), value) {
		t.Fatalf("the error shows the value: %v", err)
	}
}

// headerLog records the header each host received.
type headerLog struct {
	mu  sync.Mutex
	got map[string][]string
}

func (l *headerLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	host, _, _ := strings.Cut(r.Host, ":")
	l.got[host] = append(l.got[host], r.Header.Get("Authorization"))
	l.mu.Unlock()
	_, _ = w.Write([]byte("ok\n"))
}

func (l *headerLog) of(host string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.got[host]...)
}

func (s *suite) egress(t *testing.T) EgressHooks {
	t.Helper()
	e := s.h.Egress
	if e.Upstream == nil || e.Fetch == nil {
		t.Skip("Harness.Egress is not set: the provider's test offers no loopback upstream behind its enforcement point")
	}
	return e
}

func testBrokeredEnforcedHeader(ctx context.Context, t *testing.T, s *suite) {
	e := s.egress(t)
	log := &headerLog{got: map[string][]string{}}
	secretHost, otherHost := e.Upstream(t, log)
	value := brokeredValue()
	sb, err := s.createBrokered(ctx, t, &sandbox.NetworkPolicy{Allow: []string{secretHost, otherHost}},
		[]sandbox.BrokeredSecret{{Value: value, Hosts: []string{secretHost}, Env: "SBXTEST_KEY", Format: "Bearer %s"}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	ph := sb.Info().BrokeredSecrets[0].Placeholder
	for _, host := range []string{secretHost, otherHost} {
		r, err := sb.Exec(ctx, sandbox.Command{Args: e.Fetch("http://"+host+"/", "Authorization", "Bearer "+ph)})
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("fetch %s: %v %+v %q", host, err, r, r.Stderr)
		}
	}
	if got := log.of(secretHost); len(got) != 1 || got[0] != "Bearer "+value {
		t.Fatalf("%s received %d requests, Authorization %q, want one with the brokered value", secretHost, len(got), redactAll(got, value))
	}
	if got := log.of(otherHost); len(got) != 1 || got[0] != "Bearer "+ph {
		t.Fatalf("%s received %d requests, Authorization %q, want one with the placeholder as sent", otherHost, len(got), redactAll(got, value))
	}
}

func testEnforcedAllowList(ctx context.Context, t *testing.T, s *suite) {
	e := s.egress(t)
	log := &headerLog{got: map[string][]string{}}
	allowed, denied := e.Upstream(t, log)
	sb, err := s.createBrokered(ctx, t, &sandbox.NetworkPolicy{Allow: []string{allowed}}, nil)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	r, err := sb.Exec(ctx, sandbox.Command{Args: e.Fetch("http://"+allowed+"/", "Authorization", "none")})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("fetch of the allowed %s: %v %+v", allowed, err, r)
	}
	r, err = sb.Exec(ctx, sandbox.Command{Args: e.Fetch("http://"+denied+"/", "Authorization", "none")})
	if err != nil {
		t.Fatalf("fetch of %s: %v", denied, err)
	}
	if r.ExitCode == 0 || len(log.of(denied)) != 0 {
		t.Fatalf("%s is outside the allow-list but was reached (exit %d)", denied, r.ExitCode)
	}
}

// redactAll hides value in what a failure message shows.
func redactAll(l []string, value string) []string {
	out := make([]string, len(l))
	for i, v := range l {
		out[i] = strings.ReplaceAll(v, value, "[the brokered value]")
	}
	return out
}
