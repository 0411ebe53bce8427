package e2b

import (
	"context"
	"net/http"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/api"
)

var _ driver.MetricsReader = (*Runtime)(nil)

// Metrics reads GET /sandboxes/{id}/metrics and reports its latest
// sample (E2B samples every 5 s, so values may be that old; Time says
// when). E2B reports the CPU as a rate (cpuUsedPct, in percent of all
// cores together, converted here to percent of one core), memory now
// and the VM's total, disk used and total, and the core count: CPU time,
// the memory peak and the process count are MetricUnknown. A sandbox
// with no sample yet (just created) reports every field MetricUnknown,
// with a note. The sandbox's own CPU, memory and disk sizes are the
// limits.
func (r *Runtime) Metrics(ctx context.Context, id string) (driver.Metrics, error) {
	const op = "metrics"
	status, data, _, err := r.call(ctx, op, true, func(ctx context.Context) (*http.Response, error) {
		return r.api.GetSandboxMetrics(ctx, id, &api.GetSandboxMetricsParams{})
	})
	if err != nil {
		return driver.Metrics{}, r.scrub(err)
	}
	if status != http.StatusOK {
		if status == http.StatusNotFound {
			r.forget(id)
		}
		return driver.Metrics{}, r.scrub(apiErr(op, status, data))
	}
	var samples []api.SandboxMetric
	if err := decode(op, data, &samples); err != nil {
		return driver.Metrics{}, err
	}
	return metricsOfSamples(samples), nil
}

// metricsOfSamples converts the latest of E2B's samples.
func metricsOfSamples(samples []api.SandboxMetric) driver.Metrics {
	m := driver.NewMetrics()
	if len(samples) == 0 {
		m.Notes = []string{"e2b: no metrics sample yet (E2B samples every 5 s)"}
		return m
	}
	last := samples[0]
	for _, s := range samples[1:] {
		if s.TimestampUnix >= last.TimestampUnix {
			last = s
		}
	}
	m.Time = time.Unix(last.TimestampUnix, 0)
	if last.TimestampUnix == 0 {
		m.Time = last.Timestamp
	}
	if last.CpuCount > 0 {
		m.CPULimit = float64(last.CpuCount)
		if last.CpuUsedPct >= 0 {
			m.CPUPercent = float64(last.CpuUsedPct) * float64(last.CpuCount)
		}
	}
	nonNeg := func(v int64) int64 { return max(v, driver.MetricUnknown) }
	m.MemoryBytes, m.MemoryLimitBytes = nonNeg(last.MemUsed), nonNeg(last.MemTotal)
	m.DiskBytes, m.DiskLimitBytes = nonNeg(last.DiskUsed), nonNeg(last.DiskTotal)
	if m.MemoryLimitBytes == 0 {
		m.MemoryLimitBytes = driver.MetricUnknown // a VM with no memory is a missing field
	}
	if m.DiskLimitBytes == 0 {
		m.DiskLimitBytes = driver.MetricUnknown
	}
	m.Notes = []string{"e2b: the latest 5 s sample; CPU time, memory peak and process count are not reported"}
	return m
}
