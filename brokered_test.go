package sandbox_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// noBrokerRuntime is memory without the brokered-secrets capability.
type noBrokerRuntime struct{ *memory.Runtime }

func (r noBrokerRuntime) Capabilities() driver.Capabilities {
	c := r.Runtime.Capabilities()
	c.NetworkPolicy.BrokeredSecrets = false
	return c
}

const brokeredValue = "sk-live-0123456789abcdef"

var placeholderRE = regexp.MustCompile(`^SBX_BROKERED_[A-Z0-9_]+_[0-9a-f]{24}$`)

// Every bad brokered secret is refused with InvalidArgument naming what
// is wrong, before any request, and no error shows the value.
func TestBrokeredSecretValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	allow := &sandbox.NetworkPolicy{Allow: []string{"api.example.com", "*.pythonhosted.org", "10.0.0.0/8"}}
	ok := sandbox.BrokeredSecret{Value: brokeredValue, Hosts: []string{"api.example.com"}}
	with := func(f func(*sandbox.BrokeredSecret)) []sandbox.BrokeredSecret {
		s := ok
		f(&s)
		return []sandbox.BrokeredSecret{s}
	}
	for _, tc := range []struct {
		name    string
		opts    sandbox.CreateOptions
		want    string
		wantErr error
	}{
		{"empty value", sandbox.CreateOptions{Network: allow, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Value = "" })}, "empty Value", sandbox.ErrInvalidArgument},
		{"value with newline", sandbox.CreateOptions{Network: allow, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Value = brokeredValue + "\r\nX-Evil: 1" })}, "control character", sandbox.ErrInvalidArgument},
		{"no hosts", sandbox.CreateOptions{Network: allow, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Hosts = nil })}, "no Hosts", sandbox.ErrInvalidArgument},
		{"bad host", sandbox.CreateOptions{Network: allow, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Hosts = []string{"api_x.example.com"} })}, "api_x.example.com", sandbox.ErrInvalidArgument},
		{"address host", sandbox.CreateOptions{Network: allow, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Hosts = []string{"10.0.0.1"} })}, "is an address", sandbox.ErrInvalidArgument},
		{"host not allowed", sandbox.CreateOptions{Network: allow, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Hosts = []string{"evil.example.net"} })}, "host evil.example.net is not let through", sandbox.ErrInvalidArgument},
		{"wildcard wider than allowed", sandbox.CreateOptions{Network: allow, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Hosts = []string{"*.example.com"} })}, "host *.example.com is not let through", sandbox.ErrInvalidArgument},
		{"denied host", sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Deny: []string{"*.example.com"}}, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) {})}, "host api.example.com is not let through", sandbox.ErrInvalidArgument},
		{"no network", sandbox.CreateOptions{NoNetwork: true, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) {})}, "deny-all", sandbox.ErrInvalidArgument},
		{"bad header", sandbox.CreateOptions{Network: allow, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Header = "X Api Key" })}, `Header "X Api Key" is not an HTTP header name`, sandbox.ErrInvalidArgument},
		{"host header", sandbox.CreateOptions{Network: allow, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Header = "host" })}, "Header Host is owned by the transport", sandbox.ErrInvalidArgument},
		{"hop-by-hop header", sandbox.CreateOptions{Network: allow, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Header = "proxy-authorization" })}, "Header Proxy-Authorization is owned", sandbox.ErrInvalidArgument},
		{"proxy header", sandbox.CreateOptions{Network: allow, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Header = "Proxy-Token" })}, "Header Proxy-Token is owned", sandbox.ErrInvalidArgument},
		{"content-length", sandbox.CreateOptions{Network: allow, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Header = "Content-Length" })}, "Header Content-Length", sandbox.ErrInvalidArgument},
		{"format without verb", sandbox.CreateOptions{Network: allow, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Format = "Bearer" })}, "0 %s verbs", sandbox.ErrInvalidArgument},
		{"format with two", sandbox.CreateOptions{Network: allow, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Format = "%s:%s" })}, "2 %s verbs", sandbox.ErrInvalidArgument},
		{"format with other verb", sandbox.CreateOptions{Network: allow, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Format = "Bearer %d %s" })}, "the verb %d", sandbox.ErrInvalidArgument},
		{"format with newline", sandbox.CreateOptions{Network: allow, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Format = "Bearer %s\r\nX: y" })}, "control character", sandbox.ErrInvalidArgument},
		{"bad env", sandbox.CreateOptions{Network: allow, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Env = "1KEY" })}, `Env "1KEY" must match`, sandbox.ErrInvalidArgument},
		{"env clash", sandbox.CreateOptions{Network: allow, Env: map[string]string{"KEY": "x"}, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Env = "KEY" })}, "Env KEY is also set in CreateOptions.Env", sandbox.ErrInvalidArgument},
		{"secret env clash", sandbox.CreateOptions{Network: allow, SecretEnv: map[string]string{"KEY": "x"}, BrokeredSecrets: with(func(s *sandbox.BrokeredSecret) { s.Env = "KEY" })}, "Env KEY is also set in CreateOptions.SecretEnv", sandbox.ErrInvalidArgument},
		{"env twice", sandbox.CreateOptions{Network: allow, BrokeredSecrets: []sandbox.BrokeredSecret{
			{Value: brokeredValue, Hosts: []string{"api.example.com"}, Env: "KEY"},
			{Value: "other-secret-value", Hosts: []string{"files.pythonhosted.org"}, Env: "KEY"},
		}}, "Env KEY is also the Env of brokered secret 0", sandbox.ErrInvalidArgument},
		{"same header overlapping hosts", sandbox.CreateOptions{Network: allow, BrokeredSecrets: []sandbox.BrokeredSecret{
			{Value: brokeredValue, Hosts: []string{"*.pythonhosted.org"}},
			{Value: "other-secret-value", Hosts: []string{"files.pythonhosted.org"}, Header: "authorization"},
		}}, "host files.pythonhosted.org overlaps host *.pythonhosted.org of brokered secret 0, which sets the same header Authorization", sandbox.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := memory.New()
			c := sandbox.NewClient(rt)
			defer c.Close()
			_, err := c.Create(ctx, tc.opts)
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %v containing %q", err, tc.wantErr, tc.want)
			}
			if strings.Contains(err.Error(), "sk-live") {
				t.Fatalf("the error shows the value: %v", err)
			}
			if n := len(rt.CallsOf(memory.OpCreate)); n != 0 {
				t.Fatalf("%d create requests reached the provider", n)
			}
		})
	}
}

// Different headers on overlapping hosts, and the same header on hosts
// that do not overlap, are fine.
func TestBrokeredSecretsThatCoexist(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sandbox.NewClient(memory.New())
	defer c.Close()
	_, err := c.Create(ctx, sandbox.CreateOptions{
		Network: &sandbox.NetworkPolicy{Allow: []string{"*.example.com", "example.org"}},
		BrokeredSecrets: []sandbox.BrokeredSecret{
			{Value: "a-secret-value-1", Hosts: []string{"api.example.com"}},
			{Value: "a-secret-value-2", Hosts: []string{"*.example.com"}, Header: "X-Api-Key"},
			{Value: "a-secret-value-3", Hosts: []string{"example.org"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A provider that does not declare BrokeredSecrets refuses them with
// FailedPrecondition naming BrokeredSecrets, before any request.
func TestBrokeredSecretsNeedTheCapability(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(noBrokerRuntime{rt})
	defer c.Close()
	_, err := c.Create(context.Background(), sandbox.CreateOptions{
		BrokeredSecrets: []sandbox.BrokeredSecret{{Value: brokeredValue, Hosts: []string{"api.example.com"}}},
	})
	if !errors.Is(err, sandbox.ErrFailedPrecondition) || !strings.Contains(err.Error(), "BrokeredSecrets") {
		t.Fatalf("got %v, want FailedPrecondition naming BrokeredSecrets", err)
	}
	if strings.Contains(err.Error(), brokeredValue) {
		t.Fatalf("the error shows the value: %v", err)
	}
	if n := len(rt.CallsOf(memory.OpCreate)); n != 0 {
		t.Fatalf("%d create requests reached the provider", n)
	}
}

// The sandbox sees the placeholder, never the value: env shows the
// placeholder; the placeholder is fresh per sandbox and not derived from
// the value; anything that prints the value is redacted; Info reports
// hosts, header, env name and placeholder; a handle from Attach learns no
// value; the driver is handed the defaults and the implied policy.
func TestBrokeredSecretPlaceholder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := memory.New()
	var seen []driver.BrokeredSecret
	rt.Handle("show-secrets", func(_ context.Context, call *memory.Call) int {
		seen = call.Secrets
		return 0
	})
	c := sandbox.NewClient(rt)
	defer c.Close()
	opts := sandbox.CreateOptions{BrokeredSecrets: []sandbox.BrokeredSecret{
		{Value: brokeredValue, Hosts: []string{"API.example.com", "api.example.com"}, Env: "OPENAI_API_KEY", Format: "Bearer %s"},
	}}
	sb, err := c.Create(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	info := sb.Info()
	if info.Network == nil || info.Network.Mode != sandbox.NetworkAllowAll {
		t.Fatalf("brokered secrets without a policy imply allow-all; Info.Network = %+v", info.Network)
	}
	if len(info.BrokeredSecrets) != 1 {
		t.Fatalf("Info.BrokeredSecrets = %+v", info.BrokeredSecrets)
	}
	bi := info.BrokeredSecrets[0]
	if bi.Header != "Authorization" || bi.Env != "OPENAI_API_KEY" || len(bi.Hosts) != 1 || bi.Hosts[0] != "api.example.com" || !placeholderRE.MatchString(bi.Placeholder) {
		t.Fatalf("Info.BrokeredSecrets[0] = %+v", bi)
	}
	if !strings.HasPrefix(bi.Placeholder, "SBX_BROKERED_OPENAI_API_KEY_") {
		t.Errorf("placeholder %q does not say which secret it stands for", bi.Placeholder)
	}
	r, err := sb.Exec(ctx, sandbox.Command{Shell: "env"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r.Stdout), "OPENAI_API_KEY="+bi.Placeholder+"\n") || strings.Contains(string(r.Stdout), "sk-live") {
		t.Fatalf("env shows %q, want the placeholder only", r.Stdout)
	}
	// The value, should the sandbox ever print it, is redacted.
	r, err = sb.Exec(ctx, sandbox.Command{Shell: "echo key=" + brokeredValue + " >&2; echo " + brokeredValue})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(r.Stdout)+string(r.Stderr), brokeredValue) {
		t.Fatalf("output shows the value: %q %q", r.Stdout, r.Stderr)
	}
	// Nothing the provider recorded holds the value.
	if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"show-secrets"}}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0].Value != "" || seen[0].Header != "Authorization" || seen[0].Placeholder != bi.Placeholder {
		t.Fatalf("a Handler sees %+v", seen)
	}
	// An attached handle learns hosts, header and placeholder, not the value.
	other, err := c.Attach(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	ai := other.Info().BrokeredSecrets
	if len(ai) != 1 || ai[0].Header != "Authorization" || ai[0].Hosts[0] != "api.example.com" {
		t.Fatalf("attached Info.BrokeredSecrets = %+v", ai)
	}
	// Refresh keeps what the creating handle knows.
	if _, err := sb.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sb.Info().BrokeredSecrets; len(got) != 1 || got[0].Env != "OPENAI_API_KEY" {
		t.Fatalf("after Refresh Info.BrokeredSecrets = %+v", got)
	}
	// A second sandbox gets another placeholder.
	sb2, err := c.Create(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if p2 := sb2.Info().BrokeredSecrets[0].Placeholder; p2 == bi.Placeholder {
		t.Fatalf("two sandboxes share the placeholder %q", p2)
	}
}

// SetNetwork may not strand a brokered secret: a policy that no longer
// lets its host through is refused naming the host.
func TestSetNetworkKeepsBrokeredHosts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sandbox.NewClient(memory.New())
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{
		Network:         &sandbox.NetworkPolicy{Allow: []string{"api.example.com", "pypi.org"}},
		BrokeredSecrets: []sandbox.BrokeredSecret{{Value: brokeredValue, Hosts: []string{"api.example.com"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = sb.SetNetwork(ctx, sandbox.NetworkPolicy{Allow: []string{"pypi.org"}})
	if !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "api.example.com") {
		t.Fatalf("got %v, want InvalidArgument naming api.example.com", err)
	}
	if err := sb.SetNetwork(ctx, sandbox.NetworkPolicy{Allow: []string{"*.example.com"}}); err != nil {
		t.Fatal(err)
	}
}

// GetOrCreate takes brokered secrets as Create does: the sandbox it makes
// has them, and every caller's handle redacts its own values.
func TestGetOrCreateBrokeredSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sandbox.NewClient(memory.New())
	defer c.Close()
	opts := sandbox.CreateOptions{Labels: map[string]string{"k": "v"},
		BrokeredSecrets: []sandbox.BrokeredSecret{{Value: brokeredValue, Hosts: []string{"api.example.com"}, Env: "KEY"}}}
	sb, created, err := c.GetOrCreate(ctx, opts)
	if err != nil || !created {
		t.Fatalf("GetOrCreate: %v %v", created, err)
	}
	if bs := sb.Info().BrokeredSecrets; len(bs) != 1 || bs[0].Env != "KEY" {
		t.Fatalf("Info.BrokeredSecrets = %+v", bs)
	}
	again, created, err := c.GetOrCreate(ctx, opts)
	if err != nil || created || again.ID() != sb.ID() {
		t.Fatalf("second GetOrCreate: %v %v", created, err)
	}
	for _, h := range []*sandbox.Sandbox{sb, again} {
		r, err := h.Exec(ctx, sandbox.Command{Shell: "echo " + brokeredValue})
		if err != nil || strings.Contains(string(r.Stdout), brokeredValue) {
			t.Fatalf("output %q, %v: want the value redacted", r.Stdout, err)
		}
	}
}

// A secret brokered to a whole public suffix, a wildcard over one, or a
// single label would go to anyone's site under it: refused with
// InvalidArgument naming the host. A wildcard over one owner's domain
// (even under a multi-label suffix) is kept.
func TestBrokeredSecretRefusesPublicSuffix(t *testing.T) {
	t.Parallel()
	c := sandbox.NewClient(memory.New())
	ctx := context.Background()
	for _, h := range []string{"*.com", "*.github.io", "*.co.uk", "co.uk", "github.io", "localhost", "com", "*.test", "*.localhost"} {
		sb, err := c.Create(ctx, sandbox.CreateOptions{
			BrokeredSecrets: []sandbox.BrokeredSecret{{Value: brokeredValue, Hosts: []string{h}}}})
		if err == nil {
			t.Errorf("brokered secret for %q accepted: %+v", h, sb.Info().BrokeredSecrets)
			_ = sb.Destroy(ctx)
			continue
		}
		if !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "host "+h+" ") {
			t.Errorf("%q: %v, want InvalidArgument naming the host", h, err)
		}
	}
	for _, h := range []string{"*.example.co.uk", "api.example.com", "*.example.github.io", "api.example.test"} {
		sb, err := c.Create(ctx, sandbox.CreateOptions{
			BrokeredSecrets: []sandbox.BrokeredSecret{{Value: brokeredValue, Hosts: []string{h}}}})
		if err != nil {
			t.Errorf("%q: %v", h, err)
			continue
		}
		_ = sb.Destroy(ctx)
	}
}

// A careless caller pastes the key into the wrong field (Hosts, Format,
// Header, Env, or swaps Value and Hosts): no validation error shows it,
// nor any Value of the request.
func TestBrokeredSecretErrorsHideMisplacedValues(t *testing.T) {
	t.Parallel()
	c := sandbox.NewClient(memory.New())
	ctx := context.Background()
	const key = brokeredValue
	allow := &sandbox.NetworkPolicy{Allow: []string{"api.example.com"}}
	for name, o := range map[string]sandbox.CreateOptions{
		"value and hosts swapped": {Network: allow,
			BrokeredSecrets: []sandbox.BrokeredSecret{{Value: "api.example.com", Hosts: []string{key}}}},
		"key in a dotted host": {Network: allow,
			BrokeredSecrets: []sandbox.BrokeredSecret{{Value: "x", Hosts: []string{key + ".example.com"}}}},
		"key in Format": {Network: allow,
			BrokeredSecrets: []sandbox.BrokeredSecret{{Value: "x", Hosts: []string{"api.example.com"}, Format: "Bearer " + key}}},
		"key in Format with a bad verb": {Network: allow,
			BrokeredSecrets: []sandbox.BrokeredSecret{{Value: "x", Hosts: []string{"api.example.com"}, Format: "%d " + key}}},
		"key in Header": {Network: allow,
			BrokeredSecrets: []sandbox.BrokeredSecret{{Value: "x", Hosts: []string{"api.example.com"}, Header: "Bearer " + key}}},
		"key in Env": {Network: allow,
			BrokeredSecrets: []sandbox.BrokeredSecret{{Value: "x", Hosts: []string{"api.example.com"}, Env: "K=" + key}}},
		"value of another secret in a host": {Network: allow,
			BrokeredSecrets: []sandbox.BrokeredSecret{
				{Value: "tok_ABCDEFGHIJ", Hosts: []string{"api.example.com"}},
				{Value: "y", Header: "X-Key", Hosts: []string{"tok_ABCDEFGHIJ"}}}},
		"short value swapped into Hosts": {Network: allow,
			BrokeredSecrets: []sandbox.BrokeredSecret{{Value: "q7z", Hosts: []string{"q7z"}}}},
		"SecretEnv value in a host": {Network: allow, SecretEnv: map[string]string{"DB": "hunter2hunter2"},
			BrokeredSecrets: []sandbox.BrokeredSecret{{Value: "y", Hosts: []string{"hunter2hunter2.example.com"}}}},
	} {
		_, err := c.Create(ctx, o)
		if !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
			continue
		}
		for _, s := range []string{key, key[8:], "tok_ABCDEFGHIJ", "hunter2hunter2", "q7z"} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: the error shows %q: %v", name, s, err)
			}
		}
	}
}
