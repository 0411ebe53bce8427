package docker_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
)

// A sandbox created with default Resources is bounded as a local L4 one
// is: 2 GiB of memory, a pids limit and a CPU limit, set on the container
// (not only documented) and reported in Info.Detail; explicit Resources
// replace the defaults.
func TestDefaultResourceLimits(t *testing.T) {
	t.Parallel()
	raw := rawClient(t)
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sysInfo, err := raw.Info(ctx, client.InfoOptions{})
	require.NoError(t, err)
	ncpu := sysInfo.Info.NCPU
	require.Positive(t, ncpu)

	sb := create(ctx, t, c, sandbox.CreateOptions{})
	ins, err := raw.ContainerInspect(ctx, sb.ID(), client.ContainerInspectOptions{})
	require.NoError(t, err)
	hc := ins.Container.HostConfig
	require.NotNil(t, hc)
	assert.Equal(t, int64(2048)<<20, hc.Memory, "HostConfig.Memory: the default must equal local's 2 GiB")
	assert.Equal(t, hc.Memory, hc.MemorySwap, "HostConfig.MemorySwap: swap would lift the memory limit")
	require.NotNil(t, hc.PidsLimit, "HostConfig.PidsLimit")
	assert.Equal(t, int64(1024), *hc.PidsLimit)
	wantCPUs := min(2, ncpu)
	assert.Equal(t, int64(wantCPUs)*1e9, hc.NanoCPUs, "HostConfig.NanoCpus: the default CPU limit (2, at most the engine's %d)", ncpu)

	for _, info := range []sandbox.Info{sb.Info(), mustGet(ctx, t, c, sb.ID())} {
		assert.Equal(t, "2048", info.Detail["memory_mib"], "Detail: %v", info.Detail)
		assert.Equal(t, "1024", info.Detail["pids_limit"], "Detail: %v", info.Detail)
		assert.Equal(t, strconv.Itoa(wantCPUs), info.Detail["cpus"], "Detail: %v", info.Detail)
	}

	// The limit holds inside: the container's cgroup says 2 GiB.
	r, err := sb.Exec(ctx, sandbox.Command{Shell: `cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes`})
	require.NoError(t, err)
	assert.Equal(t, "2147483648\n", string(r.Stdout), "the cgroup's memory limit, stderr %q", r.Stderr)

	// Explicit Resources replace the defaults.
	sb2 := create(ctx, t, c, sandbox.CreateOptions{Resources: sandbox.Resources{MemoryMiB: 300, CPUs: 1}})
	ins, err = raw.ContainerInspect(ctx, sb2.ID(), client.ContainerInspectOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(300)<<20, ins.Container.HostConfig.Memory)
	assert.Equal(t, int64(1e9), ins.Container.HostConfig.NanoCPUs)
	assert.Equal(t, "300", sb2.Info().Detail["memory_mib"])
	assert.Equal(t, "1", sb2.Info().Detail["cpus"])
}

func mustGet(ctx context.Context, t *testing.T, c *sandbox.Client, id string) sandbox.Info {
	t.Helper()
	sb, err := c.Attach(ctx, id)
	require.NoError(t, err)
	return sb.Info()
}

// TestMemoryBelowEngineMinimum: a memory limit the engine would refuse is
// InvalidArgument naming Resources.MemoryMiB, before any container is
// made (the engine's own answer named neither the field nor the unit).
func TestMemoryBelowEngineMinimum(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	label := map[string]string{"test": "memory-minimum-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	sb, err := c.Create(ctx, sandbox.CreateOptions{Labels: label, Resources: sandbox.Resources{MemoryMiB: 1}})
	if err == nil {
		_ = sb.Destroy(ctx)
		t.Fatal("Create with Resources.MemoryMiB 1 succeeded")
	}
	assert.Equal(t, sandbox.InvalidArgument, sandbox.CodeOf(err), "%v", err)
	assert.Contains(t, err.Error(), "Resources.MemoryMiB")
	for info, err := range c.List(ctx, sandbox.ListOptions{Labels: label}) {
		require.NoError(t, err)
		t.Errorf("a refused create left %s", info.ID)
	}
}
