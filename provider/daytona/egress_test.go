package daytona_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/local/localtest"
)

// The loopback upstream the local backend's egress proxy reaches under
// test names (package localtest).
const (
	egressSecretHost = localtest.SecretHost
	egressOtherHost  = localtest.OtherHost
)

func newEgressUpstream(t *testing.T) *localtest.EgressUpstream { return localtest.NewEgressUpstream(t) }

// The allow-lists are in force on the backend: through the backend's
// proxy an allowed host answers and another does not, and
// network-settings (SetNetwork) changes that before it returns.
func TestFakeEnforcesAllowLists(t *testing.T) {
	t.Parallel()
	up := newEgressUpstream(t)
	up.Handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("hello\n")) }))
	e := newEnvOn(t, up.Backend(t), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := e.c.Create(ctx, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Allow: []string{egressOtherHost}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	fetch := func(host string) int {
		t.Helper()
		r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"curl", "-fsSk", "--max-time", "20", "https://" + host + "/"}})
		if err != nil {
			t.Fatal(err)
		}
		return r.ExitCode
	}
	if c := fetch(egressOtherHost); c != 0 {
		t.Fatalf("the allowed host: exit %d", c)
	}
	if c := fetch(egressSecretHost); c == 0 {
		t.Fatal("a host outside the allow-list answered")
	}
	if err := sb.SetNetwork(ctx, sandbox.NetworkPolicy{Allow: []string{egressSecretHost}}); err != nil {
		t.Fatal(err)
	}
	if c := fetch(egressSecretHost); c != 0 {
		t.Fatalf("the newly allowed host: exit %d", c)
	}
	if c := fetch(egressOtherHost); c == 0 {
		t.Fatal("the host no longer allowed answered")
	}
}
