package e2b_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// Brokered secrets become network.rules header transforms on the create
// request, one rule per host; Info and Get report hosts and headers, never
// the value; SetNetwork sends the rules again (E2B's PUT clears what it is
// not sent).
func TestBrokeredSecretsBecomeRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemoryEnv(t)
	if !e.client.Capabilities().NetworkPolicy.BrokeredSecrets {
		t.Fatal("e2b must declare BrokeredSecrets: network.rules carries them")
	}
	const value = "sk-e2b-brokered-0123456789"
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{
		Network: &sandbox.NetworkPolicy{Allow: []string{"api.example.com", "*.example.org", "pypi.org"}},
		BrokeredSecrets: []sandbox.BrokeredSecret{
			{Value: value, Hosts: []string{"api.example.com"}, Format: "Bearer %s", Env: "API_KEY"},
			{Value: "second-value-abc", Hosts: []string{"*.example.org"}, Header: "x-api-key"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rules := e.fake.Rules(sb.ID())
	if len(rules) != 2 || len(rules["api.example.com"]) != 1 || rules["api.example.com"][0]["Authorization"] != "Bearer "+value ||
		rules["*.example.org"][0]["X-Api-Key"] != "second-value-abc" {
		t.Fatalf("rules sent: %v", rules)
	}
	r, err := sb.Exec(ctx, sandbox.Command{Shell: "echo $API_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	if ph := sb.Info().BrokeredSecrets[0].Placeholder; strings.TrimSpace(string(r.Stdout)) != ph || ph == "" {
		t.Fatalf("API_KEY is %q, want the placeholder %q", r.Stdout, ph)
	}
	other, err := e.client.Attach(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	got := other.Info().BrokeredSecrets
	if len(got) != 2 || got[0].Header != "Authorization" || got[0].Hosts[0] != "api.example.com" || got[1].Header != "X-Api-Key" || got[1].Hosts[0] != "*.example.org" {
		t.Fatalf("attached Info.BrokeredSecrets = %+v", got)
	}
	if err := sb.SetNetwork(ctx, sandbox.NetworkPolicy{Allow: []string{"api.example.com", "*.example.org"}}); err != nil {
		t.Fatal(err)
	}
	if rules := e.fake.Rules(sb.ID()); len(rules) != 2 || rules["api.example.com"][0]["Authorization"] != "Bearer "+value {
		t.Fatalf("rules after SetNetwork: %v", rules)
	}
}
