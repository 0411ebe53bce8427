package session_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

const sessionBrokered = "sk-session-brokered-31415926"

// The manager's sandboxes get Create's network policy and brokered
// secrets; a caller changing its Options afterwards changes nothing; a
// handle reattached after a restart redacts the brokered value as the
// creating one does.
func TestSessionPassesNetworkAndBrokeredSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	defer c.Close()
	opts := session.Options{ReapInterval: -1, Create: sandbox.CreateOptions{
		Network:         &sandbox.NetworkPolicy{Allow: []string{"pypi.org", "api.example.com"}},
		BrokeredSecrets: []sandbox.BrokeredSecret{{Value: sessionBrokered, Hosts: []string{"api.example.com"}, Env: "API_KEY"}},
	}}
	m1 := session.NewManager(c, opts)
	opts.Create.Network.Allow[0] = "evil.example"
	opts.Create.BrokeredSecrets[0].Hosts[0] = "evil.example"
	s1 := mustAcquire(t, m1, "conv")
	info := s1.Sandbox().Info()
	if info.Network == nil || strings.Join(info.Network.Allow, ",") != "api.example.com,pypi.org" {
		t.Fatalf("policy: %+v", info.Network)
	}
	if len(info.BrokeredSecrets) != 1 || info.BrokeredSecrets[0].Hosts[0] != "api.example.com" || info.BrokeredSecrets[0].Env != "API_KEY" {
		t.Fatalf("brokered secrets: %+v", info.BrokeredSecrets)
	}
	for i, s := range []*session.Session{s1, nil} {
		if s == nil {
			// A second manager, as after a restart, reattaches.
			m2 := session.NewManager(c, session.Options{Create: sandbox.CreateOptions{
				Network:         &sandbox.NetworkPolicy{Allow: []string{"pypi.org", "api.example.com"}},
				BrokeredSecrets: []sandbox.BrokeredSecret{{Value: sessionBrokered, Hosts: []string{"api.example.com"}, Env: "API_KEY"}},
			}})
			defer m2.Close(ctx)
			s = mustAcquire(t, m2, "conv")
			if s.ID() != s1.ID() || !s.Adopted() {
				t.Fatalf("did not reattach: %s vs %s", s.ID(), s1.ID())
			}
		}
		r, err := s.Exec(ctx, sandbox.Command{Shell: "echo $API_KEY; echo " + sessionBrokered})
		if err != nil {
			t.Fatal(err)
		}
		out := string(r.Stdout)
		if !strings.HasPrefix(out, "SBX_BROKERED_API_KEY_") || strings.Contains(out, sessionBrokered) {
			t.Fatalf("handle %d: %q, want the placeholder and the value redacted", i, out)
		}
	}
}
