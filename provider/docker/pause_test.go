package docker_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// Pausing a sandbox right after Start, while the background process's
// output follower is starting, must neither hang the engine's Resume and
// Destroy nor lose the process. The race is narrow, so the test loops
// (SANDBOX_TEST_DOCKER_PAUSE_LOOPS times; by default 5 in a full run,
// sandboxtest.FullEnv=1 as in CI, 2 otherwise and 1 with -short); every
// step is bounded so a hang fails the test instead of stalling it.
func TestPauseWhileFollowerStarts(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	loops := 2
	switch {
	case os.Getenv(sandboxtest.FullEnv) == "1":
		loops = 5
	case testing.Short():
		loops = 1
	}
	if s := os.Getenv("SANDBOX_TEST_DOCKER_PAUSE_LOOPS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "SANDBOX_TEST_DOCKER_PAUSE_LOOPS")
		loops = n
	}
	for i := range loops {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		sb := create(ctx, t, c, sandbox.CreateOptions{})
		p, err := sb.Start(ctx, sandbox.Command{Shell: "sleep 1; echo done"})
		require.NoError(t, err, "loop %d: Start", i)
		step := func(name string, f func(context.Context) error) {
			sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
			defer scancel()
			start := time.Now()
			require.NoError(t, f(sctx), "loop %d: %s (after %s)", i, name, time.Since(start))
		}
		step("Pause", sb.Pause)
		step("Resume", sb.Resume)
		var r *sandbox.Result
		step("Wait", func(ctx context.Context) (err error) { r, err = p.Wait(ctx); return err })
		require.Equal(t, 0, r.ExitCode, "loop %d", i)
		require.Equal(t, "done\n", string(r.Stdout), "loop %d", i)
		step("Destroy", sb.Destroy)
		cancel()
	}
}
