package daytona_test

import (
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/hostrt"
	"github.com/sandboxkit/sandbox/internal/testpar"
	"github.com/sandboxkit/sandbox/provider/daytona"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/provider/local/localtest"
	"go.uber.org/goleak"
)

// TestMain runs more tests at once than go test's default of one per CPU:
// they wait on the fake's answers, commands' sleeps and timeouts far more
// than they compute (16 at once on 2 CPUs: the package in 13 s; 8 at
// once: 15.5-16 s, the conformance test waiting 6 s for its turn).
func TestMain(m *testing.M) {
	testpar.Widen(8)
	goleak.VerifyTestMain(m)
}

// env is a Runtime over a fresh fake.
type env struct {
	fake *daytonafake.Server
	rt   *daytona.Runtime
	c    *sandbox.Client
	opts []daytona.Option // what rt was made with
}

// newEnv starts a fake over provider/local and a Runtime and Client on
// it. The local provider serves files under the home only, so the
// Runtime's scratch directory is moved there.
func newEnv(t testing.TB, fakeOpts []daytonafake.Option, opts ...daytona.Option) *env {
	t.Helper()
	opts = append([]daytona.Option{daytona.WithScratchDir("~/.sandboxkit")}, opts...)
	return newEnvOn(t, backend(t), fakeOpts, opts...)
}

// newHostEnv is newEnv over the host test runtime, which serves every
// path, so the default scratch directory (/tmp/.sandboxkit) is used as on
// the real service.
func newHostEnv(t testing.TB, fakeOpts []daytonafake.Option, opts ...daytona.Option) *env {
	t.Helper()
	return newEnvOn(t, hostrt.New(t.TempDir()), fakeOpts, opts...)
}

func newEnvOn(t testing.TB, be driver.Runtime, fakeOpts []daytonafake.Option, opts ...daytona.Option) *env {
	t.Helper()
	fake := daytonafake.New(be, fakeOpts...)
	t.Cleanup(fake.Close)
	opts = append([]daytona.Option{daytona.WithAPIKey(fake.APIKey()), daytona.WithAPIURL(fake.URL()), daytona.WithPreviewBaseURL(fake.PreviewURL())}, opts...)
	rt, err := daytona.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	t.Cleanup(func() { _ = c.Close(); _ = rt.ResetTransport() })
	return &env{fake: fake, rt: rt, c: c, opts: opts}
}

// backend is what the fake executes on: the local provider, as the real
// service's sandboxes are real machines. Its sandboxes get no network
// unless the fake asks for a policy (localtest.Offline): these tests reach
// nothing beyond the host, and a pasta per sandbox would cost a tenth of
// a CPU second each.
func backend(t testing.TB) driver.Runtime {
	t.Helper()
	rt, err := localtest.Offline(local.WithRoot(t.TempDir()))
	if err != nil {
		t.Fatalf("local.New: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}
