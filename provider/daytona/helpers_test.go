package daytona_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/daytona"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/hostrt"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a Runtime over a fresh fake.
type env struct {
	fake *daytonafake.Server
	rt   *daytona.Runtime
	c    *sandbox.Client
}

// newEnv starts a fake over a host backend and a Runtime and Client on it.
func newEnv(t *testing.T, fakeOpts []daytonafake.Option, opts ...daytona.Option) *env {
	t.Helper()
	fake := daytonafake.New(hostrt.New(t.TempDir()), fakeOpts...)
	t.Cleanup(fake.Close)
	opts = append([]daytona.Option{daytona.WithAPIKey(fake.APIKey()), daytona.WithAPIURL(fake.URL())}, opts...)
	rt, err := daytona.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	t.Cleanup(func() { _ = c.Close(); _ = rt.ResetTransport() })
	return &env{fake: fake, rt: rt, c: c}
}
