package local

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
)

// Metrics reads what the sandbox's cgroup offers, probing each file: CPU
// time wherever a CPU accounting file exists (v2 cpu.stat, or the v1
// cpuacct controller the runtime now creates), the peak exactly where
// the kernel keeps one, and never 0 for what it could not read.
func TestMetricsFromCgroup(t *testing.T) {
	t.Parallel()
	r := newRuntime(t)
	ctx := context.Background()
	in, err := r.Create(ctx, &driver.CreateRequest{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Destroy(ctx, in.ID)
	m, err := r.readMeta(in.ID)
	if err != nil {
		t.Fatal(err)
	}
	sc := m.Cgroups
	if sc.V2 == "" && len(sc.V1) == 0 {
		t.Skip("no cgroups delegated here: Metrics falls back to /proc")
	}
	exists := func(names ...string) bool {
		dirs := sc.v1Dirs()
		if sc.V2 != "" {
			dirs = append(dirs, sc.V2)
		}
		for _, d := range dirs {
			for _, n := range names {
				if _, err := os.Stat(d + "/" + n); err == nil {
					return true
				}
			}
		}
		return false
	}
	got, err := r.Metrics(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cgroups %+v: %+v", sc, got)
	hostHasCPUAcct := exists("cpu.stat") && sc.V2 != "" || cpuacctMounted()
	if hostHasCPUAcct && got.CPUTime < 0 {
		t.Errorf("CPU time unknown though the host has CPU accounting (cgroups %+v)", sc)
	}
	if got.CPUTime == 0 {
		t.Errorf("CPU time 0: the agent has run, so 0 is not a measurement")
	}
	if peak := exists("memory.peak", "memory.max_usage_in_bytes"); peak != (got.MemoryPeakBytes >= 0) {
		t.Errorf("peak file present %v, but MemoryPeakBytes = %d", peak, got.MemoryPeakBytes)
	}
	if got.MemoryBytes <= 0 || got.Processes < 1 {
		t.Errorf("memory %d, processes %d: the agent runs in the cgroup", got.MemoryBytes, got.Processes)
	}
	if got.MemoryLimitBytes != int64(m.Limits.MemMiB)<<20 && m.Cgroups.MemMiB > 0 {
		t.Errorf("memory limit %d, want the %d MiB set at create", got.MemoryLimitBytes, m.Limits.MemMiB)
	}
}

// cpuacctMounted reports whether this process sees a v1 cpuacct
// hierarchy.
func cpuacctMounted() bool {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "cpuacct") {
			return true
		}
	}
	return false
}

// With a disk quota (DiskGiB), Metrics reports the home file system's
// use and size: the limit is the quota, and a file written moves the use.
func TestMetricsDiskQuota(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := nsClient(t)
	rt := c.Runtime().(*Runtime)
	if why := rt.diskUnsupported(L4); why != "" {
		t.Skip(why)
	}
	sb, err := c.Create(ctx, sandbox.CreateOptions{Resources: sandbox.Resources{DiskGiB: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sb.Destroy(ctx) }()
	before, err := sb.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before.DiskLimitBytes < 900<<20 || before.DiskLimitBytes > 1<<30 || before.DiskBytes < 0 || before.DiskBytes > before.DiskLimitBytes {
		t.Fatalf("with a 1 GiB quota: disk %d of %d", before.DiskBytes, before.DiskLimitBytes)
	}
	if _, err := sb.Exec(ctx, sandbox.Command{Shell: "dd if=/dev/zero of=big bs=1M count=50 && sync"}); err != nil {
		t.Fatal(err)
	}
	after, err := sb.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.DiskBytes < before.DiskBytes+40<<20 {
		t.Errorf("disk use %d → %d after writing 50 MiB", before.DiskBytes, after.DiskBytes)
	}
}
