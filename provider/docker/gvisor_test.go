package docker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
)

// Under gVisor (when the engine has a runsc that runs here) a sandbox
// reports its isolation, runs commands in gVisor's kernel, moves files
// and survives a pause with its background process. CI runs this rather
// than the whole suite over runsc (TestConformanceGVisor), to stay fast.
func TestGVisorBasics(t *testing.T) {
	t.Parallel()
	c := sandbox.NewClient(gvisorRuntime(t))
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb := create(ctx, t, c, sandbox.CreateOptions{Env: map[string]string{"K": "v"}})
	assert.Equal(t, "gvisor", sb.Info().Isolation)

	r, err := sb.Exec(ctx, sandbox.Command{Shell: `dmesg | head -1; echo $K; id -u`})
	require.NoError(t, err)
	require.Equal(t, 0, r.ExitCode, "stderr %q", r.Stderr)
	assert.True(t, strings.Contains(string(r.Stdout), "gVisor"), "not gVisor's kernel: %q", r.Stdout)
	assert.True(t, strings.HasSuffix(string(r.Stdout), "v\n1000\n"), "stdout %q", r.Stdout)

	require.NoError(t, sb.WriteFile(ctx, "f.txt", []byte("data")))
	got, err := sb.ReadFile(ctx, "f.txt")
	require.NoError(t, err)
	assert.Equal(t, "data", string(got))

	p, err := sb.Start(ctx, sandbox.Command{Shell: "sleep 1; echo done"})
	require.NoError(t, err)
	require.NoError(t, sb.Pause(ctx))
	require.NoError(t, sb.Resume(ctx))
	res, err := p.Wait(ctx)
	require.NoError(t, err)
	assert.Equal(t, "done\n", string(res.Stdout))
}
