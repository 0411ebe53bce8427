package e2b_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	fake    *e2bfake.Server
	backend sandbox.Runtime
	rt      *e2b.Runtime
	client  *sandbox.Client
}

// newEnv starts a fake over a fresh backend and an adapter pointed at it.
func newEnv(t *testing.T, fakeOpts ...e2bfake.Option) *env {
	t.Helper()
	backend := newBackend(t)
	fake := e2bfake.New(backend, fakeOpts...)
	t.Cleanup(fake.Close)
	rt, err := e2b.New(e2b.WithAPIKey(fake.APIKey()), e2b.WithAPIURL(fake.APIURL()), e2b.WithSandboxURL(fake.SandboxURL()))
	if err != nil {
		t.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	t.Cleanup(func() { _ = c.Close() })
	return &env{fake: fake, backend: backend, rt: rt, client: c}
}

func newBackend(t *testing.T) sandbox.Runtime {
	return memory.New()
}
