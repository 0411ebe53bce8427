package docker_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/docker"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// defaultTestImage is the image .ci/docker-image.sh builds.
const defaultTestImage = "sandboxkit/busybox:test"

// engine returns the address of the engine the tests use, and the test
// image, or skips the test naming what is missing.
func engine(t testing.TB) (host, image string) {
	t.Helper()
	host = os.Getenv("SANDBOX_TEST_DOCKER")
	if host == "" {
		host = os.Getenv("DOCKER_HOST")
	}
	if host == "" {
		t.Skip("no Docker engine: set SANDBOX_TEST_DOCKER (or DOCKER_HOST) to its socket, e.g. unix:///tmp/d/docker.sock; .ci/run starts one")
	}
	image = os.Getenv("SANDBOX_TEST_DOCKER_IMAGE")
	if image == "" {
		image = defaultTestImage
	}
	r, err := docker.New(docker.WithHost(host))
	if err != nil {
		t.Fatalf("docker.New(%q): %v", host, err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Ping(ctx); err != nil {
		t.Skipf("no Docker engine reachable at %s: %v", host, err)
	}
	if err := r.HasImage(ctx, image); err != nil {
		t.Skipf("test image missing: %v (build it with .ci/docker-image.sh %s)", err, image)
	}
	return host, image
}

// newRuntime returns a Runtime on the test engine, closed with the test.
func newRuntime(t *testing.T, opts ...docker.Option) *docker.Runtime {
	t.Helper()
	host, image := engine(t)
	r, err := docker.New(append([]docker.Option{docker.WithHost(host), docker.WithImage(image)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// skips are the subtests docker cannot pass, with the reason.
var skips = map[string]string{}

// TestConformance runs the whole suite over the engine with runc. It is
// not marked parallel, unlike the package's other tests: its groups
// already run a few at once, and its subtests that bound a wait (or run
// alone, see sandboxtest) would otherwise measure the other tests.
func TestConformance(t *testing.T) {
	engine(t)
	// Where the egress proxy runs, its sandboxes reach loopback
	// upstreams through it (Harness.Egress).
	eopts, hooks := conformanceEgress(t)
	sandboxtest.Run(t, sandboxtest.Harness{
		NewClient: func(t *testing.T) *sandbox.Client {
			return sandbox.NewClient(newRuntime(t, eopts...))
		},
		Egress:      hooks,
		Skip:        skips,
		StressExecs: 60, StressSandboxes: 4,
	})
}

// gvisorRuntime returns a Runtime using runsc, or skips the test with the
// probe's reason (no runsc on the engine, or runsc cannot run here).
func gvisorRuntime(t *testing.T) *docker.Runtime {
	t.Helper()
	_, image := engine(t)
	r := newRuntime(t, docker.WithRuntime("runsc"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := r.ProbeRuntime(ctx, image); err != nil {
		r.Close()
		t.Skipf("runsc probe: %v (.ci/run registers runsc with runtimeArgs --network=none when Debian's runsc package is installed)", err)
	}
	return r
}

// TestConformanceGVisor runs the suite again with gVisor's runsc when
// SANDBOX_TEST_RUNSC=1 (it doubles the suite's time, so CI does not by
// default; TestGVisorBasics runs there), after probing that runsc runs a
// container here.
func TestConformanceGVisor(t *testing.T) {
	engine(t)
	if os.Getenv("SANDBOX_TEST_RUNSC") != "1" {
		t.Skip("set SANDBOX_TEST_RUNSC=1 to run the suite under runsc (the engine needs runsc registered with runtimeArgs --network=none, as .ci/run does)")
	}
	gvisorRuntime(t).Close()
	sandboxtest.Run(t, sandboxtest.Harness{
		NewClient: func(t *testing.T) *sandbox.Client {
			return sandbox.NewClient(newRuntime(t, docker.WithRuntime("runsc")))
		},
		Skip:        gvisorSkips,
		StressExecs: 60, StressSandboxes: 4,
	})
}

// gvisorSkips are the subtests docker over runsc cannot pass, with the
// reason.
var gvisorSkips = map[string]string{
	"Files/FSView":         "gVisor's view of a file's modification time (ReadDir, through a command) differs by milliseconds from the host's (Stat, through the engine's archive endpoint)",
	"Exec/ContextDeadline": "its 2 s deadline is shorter than an exec's start under runsc on this loaded machine (the partial output arrived empty)",
}

// TestConformanceReadOnly runs the suite again over sandboxes with a
// read-only root file system when SANDBOX_TEST_DOCKER_READONLY=1 (it
// doubles the suite's time; TestReadOnlyRoot covers the option in CI).
func TestConformanceReadOnly(t *testing.T) {
	engine(t)
	if os.Getenv("SANDBOX_TEST_DOCKER_READONLY") != "1" {
		t.Skip("set SANDBOX_TEST_DOCKER_READONLY=1 to run the suite with a read-only root file system")
	}
	sandboxtest.Run(t, sandboxtest.Harness{
		NewClient: func(t *testing.T) *sandbox.Client {
			return sandbox.NewClient(newRuntime(t, docker.WithReadOnlyRoot(true)))
		},
		Skip:        skips,
		StressExecs: 60, StressSandboxes: 4,
	})
}
