package run

import (
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/daytona"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/provider/local/localtest"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// fakeBackends are the runtimes the fakes execute through: the test host
// runtime, and provider/local where it can serve a fake.
var fakeBackends = []struct {
	name string
	new  func(t *testing.T) driver.Runtime
}{
	{"host", func(t *testing.T) driver.Runtime { return newHostRuntime(t) }},
	{"local", localBackend},
}

// localBackend returns a provider/local Runtime for a fake to execute
// through, closed when the test ends. The fakes stat the sandbox's home
// when they create a sandbox; the test is skipped, saying why, when the
// local provider cannot.
func localBackend(t *testing.T) driver.Runtime {
	t.Helper()
	// No network unless asked for: no run here reaches beyond the host.
	rt, err := localtest.Offline(local.WithRoot(t.TempDir()))
	if err != nil {
		t.Fatalf("local.New: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	info, err := rt.Create(t.Context(), &driver.CreateRequest{Timeout: time.Minute})
	if err != nil {
		t.Fatalf("local create: %v", err)
	}
	defer rt.Destroy(t.Context(), info.ID)
	if _, err := rt.Stat(t.Context(), info.ID, info.Home); err != nil {
		t.Skipf("provider/local cannot back a fake yet: Stat of the home fails: %v", err)
	}
	return rt
}

// skipRepeat skips the fakes over provider/local unless fullRun (and
// always under -short): the adapters' scenarios run over the host
// runtime, and provider/local's own in TestLocal; the full run keeps the
// pairing.
func skipRepeat(t *testing.T, backend string) {
	t.Helper()
	if backend != "local" {
		return
	}
	if testing.Short() {
		t.Skip("-short: the fake over provider/local repeats the scenarios run over the host runtime and TestLocal")
	}
	if !fullRun() {
		t.Skipf("the fake over provider/local repeats the scenarios run over the host runtime and TestLocal (%s=1 runs it)", sandboxtest.FullEnv)
	}
}

// TestE2BFake runs the scenarios the adapter can change over the e2b
// adapter against e2bfake (all of them when fullRun).
// Every new runtime is a new adapter on the same fake, as a restarted
// client would make.
func TestE2BFake(t *testing.T) {
	t.Parallel()
	for _, b := range fakeBackends {
		t.Run(b.name, func(t *testing.T) {
			skipRepeat(t, b.name)
			fake := e2bfake.New(b.new(t))
			t.Cleanup(fake.Close)
			runScenarios(t, harness{newRuntime: func(t *testing.T) driver.Runtime {
				rt, err := e2b.New(e2b.WithAPIKey(fake.APIKey()), e2b.WithAPIURL(fake.APIURL()), e2b.WithSandboxURL(fake.SandboxURL()))
				if err != nil {
					t.Fatalf("e2b.New: %v", err)
				}
				return rt
			}}, viaAdapter)
		})
	}
}

// TestDaytonaFake runs the scenarios the adapter can change over the
// daytona adapter against daytonafake (all of them when fullRun).
func TestDaytonaFake(t *testing.T) {
	t.Parallel()
	for _, b := range fakeBackends {
		t.Run(b.name, func(t *testing.T) {
			skipRepeat(t, b.name)
			fake := daytonafake.New(b.new(t))
			t.Cleanup(fake.Close)
			runScenarios(t, harness{newRuntime: func(t *testing.T) driver.Runtime {
				rt, err := daytona.New(daytona.WithAPIKey(fake.APIKey()), daytona.WithAPIURL(fake.URL()))
				if err != nil {
					t.Fatalf("daytona.New: %v", err)
				}
				t.Cleanup(func() { _ = rt.ResetTransport() })
				return rt
			}}, viaAdapter)
		})
	}
}
