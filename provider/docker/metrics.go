package docker

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

var _ driver.MetricsReader = (*Runtime)(nil)

// Metrics reads the engine's one-shot stats of the container (GET
// /containers/{id}/stats?stream=false&one-shot=true): CPU time
// (cpu_stats.cpu_usage.total_usage), memory now (usage less the inactive
// page cache, as `docker stats` shows it), the memory peak where the
// engine reports one (max_usage, cgroup v1 only), processes
// (pids_stats.current, which counts threads) and the memory limit; the
// CPU limit is the one set at Create (the container's label). Disk use
// is not in the engine's stats: DiskBytes and DiskLimitBytes are
// MetricUnknown.
func (r *Runtime) Metrics(ctx context.Context, id string) (driver.Metrics, error) {
	info, err := r.Get(ctx, id)
	if err != nil {
		return driver.Metrics{}, err
	}
	res, err := r.cli.ContainerStats(ctx, id, client.ContainerStatsOptions{})
	if err != nil {
		return driver.Metrics{}, r.wrap(ctx, "metrics", err)
	}
	defer res.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&st); err != nil {
		return driver.Metrics{}, sberrors.Errorf(sberrors.Internal, "docker: metrics of %s: decoding the engine's stats: %w", id, err)
	}
	return metricsOfStats(st, info.Detail["cpus"]), nil
}

// metricsOfStats converts the engine's stats; cpus is the CPU limit set
// at Create ("" when unknown).
func metricsOfStats(st container.StatsResponse, cpus string) driver.Metrics {
	m := driver.NewMetrics()
	m.Time = st.Read
	if m.Time.IsZero() || m.Time.Year() < 2000 {
		m.Time = time.Now()
	}
	m.CPUTime = time.Duration(st.CPUStats.CPUUsage.TotalUsage)
	ms := st.MemoryStats
	if ms.Usage > 0 || ms.Limit > 0 {
		used := ms.Usage
		cache := ms.Stats["inactive_file"] // cgroup v2
		if v, ok := ms.Stats["total_inactive_file"]; ok {
			cache = v // cgroup v1
		}
		if cache < used {
			used -= cache
		}
		m.MemoryBytes = int64(used)
		if ms.MaxUsage > 0 {
			m.MemoryPeakBytes = int64(ms.MaxUsage)
		}
		if ms.Limit > 0 {
			m.MemoryLimitBytes = int64(ms.Limit)
		}
	} else {
		m.CPUTime = driver.MetricUnknown
	}
	if st.PidsStats.Current > 0 {
		m.Processes = int64(st.PidsStats.Current)
	}
	if n, err := strconv.Atoi(cpus); err == nil && n > 0 {
		m.CPULimit = float64(n)
	}
	m.Notes = []string{"docker: the engine's one-shot stats; disk use is not reported, and the memory peak only on cgroup v1"}
	return m
}
