package e2b_test

import (
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/testpar"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/provider/local/localtest"
	"github.com/sandboxkit/sandbox/provider/memory"
	"go.uber.org/goleak"
)

// TestMain runs more tests at once than go test's default of one per CPU:
// they wait on the fake's answers, commands' sleeps and timeouts far more
// than they compute.
func TestMain(m *testing.M) {
	testpar.Widen(4)
	goleak.VerifyTestMain(m)
}

type env struct {
	fake    *e2bfake.Server
	backend driver.Runtime
	rt      *e2b.Runtime
	client  *sandbox.Client
}

// newMemoryEnv starts a fake over provider/memory and an adapter pointed
// at it. The memory sandboxes' file methods act as root, as envd's do.
func newMemoryEnv(t *testing.T, fakeOpts ...e2bfake.Option) *env {
	t.Helper()
	return newEnvOver(t, memory.New(memory.WithRootFileAccess()), fakeOpts...)
}

// newEnv starts a fake over provider/local (commands and files are real)
// and an adapter pointed at it.
func newEnv(t *testing.T, fakeOpts ...e2bfake.Option) *env {
	t.Helper()
	// No network unless the fake asks for a policy: these tests reach
	// nothing beyond the host (localtest.Offline spares a pasta each).
	loc, err := localtest.Offline(local.WithRoot(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loc.Close() })
	return newEnvOver(t, loc, fakeOpts...)
}

func newEnvOver(t *testing.T, backend driver.Runtime, fakeOpts ...e2bfake.Option) *env {
	t.Helper()
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

// testGrace is the grace of the Runtimes attachWithGrace makes: long
// enough for envd's deadline_exceeded to arrive on a loaded machine, short
// enough that a test of a stalled stream does not wait ExecGrace.
const testGrace = 2 * time.Second

// attachWithGrace attaches to sandbox id through a second Runtime on e's
// fake whose grace past a command's lifetime is grace instead of
// ExecGrace (e2b.WithExecGraceForTest).
func attachWithGrace(t *testing.T, e *env, id string, grace time.Duration) *sandbox.Sandbox {
	t.Helper()
	rt, err := e2b.New(e2b.WithAPIKey(e.fake.APIKey()), e2b.WithAPIURL(e.fake.APIURL()), e2b.WithSandboxURL(e.fake.SandboxURL()), e2b.WithExecGraceForTest(grace))
	if err != nil {
		t.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	t.Cleanup(func() { _ = c.Close() })
	sb, err := c.Attach(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}
