package e2b_test

import (
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// TestConformance runs the portable suite against e2b over e2bfake over
// provider/local, so commands and files are real. It runs beside the
// package's other parallel tests (TestConformanceMemory among them): its
// subtests' bounded waits allow for a loaded machine, as they must when
// packages are tested at once, and a subtest that loads the host on
// purpose runs alone among the suite's subtests (see sandboxtest).
func TestConformance(t *testing.T) {
	t.Parallel()
	// The local backend's egress proxy enforces the egress rules and the
	// header transforms, and reaches the Brokered group's loopback
	// upstream (Harness.Egress).
	up := newEgressUpstream(t)
	h := harness(func(t *testing.T, opts ...e2bfake.Option) *env {
		return newEnvOver(t, up.Backend(t), opts...)
	})
	h.Egress = sandboxtest.EgressHooks{Upstream: up.Upstream, Fetch: up.Fetch}
	h.Skip = map[string]string{"Snapshots/FullKeepsProcesses": fakeFullSkip}
	sandboxtest.Run(t, h)
}

// TestConformanceMemory runs the suite over provider/memory too: fast, and
// independent of the host's isolation features.
func TestConformanceMemory(t *testing.T) {
	t.Parallel()
	h := harness(func(t *testing.T, _ ...e2bfake.Option) *env { return newMemoryEnv(t) })
	h.Skip = map[string]string{
		"Exec/KilledBySignal":          "provider/memory's shell has no kill; Process/SignalNamed covers the signal through the fake",
		"Process/SignalTrapped":        "provider/memory's shell runs no trap handler: a signal always ends its process",
		"Terminal/IsATTY":              "provider/memory's terminal is an emulation with no tty (test -t is false); the fake passes the pty through, and TestConformance/Terminal/IsATTY checks it over provider/local",
		"Snapshots/FullKeepsProcesses": fakeFullSkip,
		"Metrics/MemoryMoves":          "provider/memory holds no memory of its own to measure: the fake answers an idle sandbox's constant; TestConformance/Metrics/MemoryMoves checks it over provider/local",
	}
	h.Groups, h.ShortGroups = memoryGroups, memoryShortGroups
	sandboxtest.Run(t, h)
}

// memoryGroups are the groups TestConformanceMemory runs (all of them with
// sandboxtest.FullEnv=1): those where the fake meets its backend's
// commands, files, processes, terminals and snapshots. TestConformance
// runs every group.
var memoryGroups = []string{"Lifecycle", "Exec", "Process", "Processes", "Files", "Watch", "Terminal", "Snapshots"}

// memoryShortGroups are those it runs under go test -short: the ones
// where provider/memory answers the fake differently from provider/local
// (its shell's processes and signals, its emulated terminal, its
// watcher), leaving out Exec, whose stall and timeout subtests wait out
// real bounds that TestConformance already waits out.
var memoryShortGroups = []string{"Lifecycle", "Process", "Files", "Watch", "Terminal"}

// fakeFullSkip is why the fake cannot show that a full snapshot keeps
// processes, which the real E2B does (memory:true resumes them): its
// backends take filesystem snapshots only, so the fake's memory snapshot
// keeps the files alone.
const fakeFullSkip = "e2bfake's backends (provider/local, provider/memory) take no full snapshots: its memory snapshots keep the files only, not the processes E2B resumes"

// harness is the suite's harness over the envs newEnv makes, with the
// fake's faults behind the fault hooks.
func harness(newEnv func(t *testing.T, opts ...e2bfake.Option) *env) sandboxtest.Harness {
	var mu sync.Mutex
	fakes := map[*sandbox.Client]*e2bfake.Server{}
	fakeOf := func(t *testing.T, c *sandbox.Client) *e2bfake.Server {
		mu.Lock()
		defer mu.Unlock()
		f := fakes[c]
		if f == nil {
			t.Fatal("fault hook: not a Client of this harness")
		}
		return f
	}
	return sandboxtest.Harness{
		NewClient: func(t *testing.T) *sandbox.Client {
			e := newEnv(t)
			rt := e.rt
			if g := conformanceGrace(); g != e2b.ExecGrace {
				var err error
				if rt, err = e2b.New(e2b.WithAPIKey(e.fake.APIKey()), e2b.WithAPIURL(e.fake.APIURL()), e2b.WithSandboxURL(e.fake.SandboxURL()), e2b.WithExecGraceForTest(g)); err != nil {
					t.Fatal(err)
				}
			}
			c := sandbox.NewClient(rt)
			mu.Lock()
			fakes[c] = e.fake
			mu.Unlock()
			return c
		},
		// SameProvider is a second adapter (a new Runtime, as another OS
		// process would make) on the same fake, so that re-attaching
		// (Process, Terminal) is checked across clients.
		SameProvider: func(t *testing.T, c *sandbox.Client) *sandbox.Client {
			f := fakeOf(t, c)
			rt, err := e2b.New(e2b.WithAPIKey(f.APIKey()), e2b.WithAPIURL(f.APIURL()), e2b.WithSandboxURL(f.SandboxURL()))
			if err != nil {
				t.Fatal(err)
			}
			nc := sandbox.NewClient(rt)
			t.Cleanup(func() { _ = nc.Close() })
			mu.Lock()
			fakes[nc] = f
			mu.Unlock()
			return nc
		},
		Faults: sandboxtest.FaultHooks{
			Stall: func(t *testing.T, c *sandbox.Client) {
				fakeOf(t, c).Inject(&e2bfake.Fault{Kind: e2bfake.StallStream, Path: "POST /process.Process/Start"})
			},
			ResetIdle: func(t *testing.T, c *sandbox.Client) int {
				// "" resets the idle connections to both the control
				// plane and envd.
				return fakeOf(t, c).Inject(&e2bfake.Fault{Kind: e2bfake.ResetBeforeAdmission}).Hits()
			},
			Grace: conformanceGrace(),
		},
	}
}

// conformanceGrace is the ExecGrace of the suite's adapters: under -short
// a few seconds, so that Exec/StallIsAnError waits a command's timeout
// and that, not the ten seconds of the real grace, which a plain run
// keeps.
func conformanceGrace() time.Duration {
	if testing.Short() {
		return 4 * time.Second
	}
	return e2b.ExecGrace
}
