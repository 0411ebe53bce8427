package daytona

import (
	"context"
	"net/http"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/toolbox"
)

var _ driver.MetricsReader = (*Runtime)(nil)

// Metrics reads the toolbox's GET /system/metrics: the daemon's latest
// sample of the sandbox's CPU (cpuUsedPct, in percent of its CPU limit
// over the last sample window, 0 before the first completes; converted
// here to percent of one core), memory used and total, disk used and
// total, and CPU count. CPU time, the memory peak and the process count
// are MetricUnknown: Daytona does not report them. A stopped sandbox
// (Pause) fails with ErrPaused, as every toolbox call does; one stopped
// behind the Runtime's back is started first, as for the file calls.
func (r *Runtime) Metrics(ctx context.Context, id string) (driver.Metrics, error) {
	resp, err := r.toolboxCall(ctx, id, "metrics", false, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		return c.GetSystemMetrics(ctx)
	}, http.StatusOK)
	if err != nil {
		return driver.Metrics{}, err
	}
	var s toolbox.SystemMetrics
	if err := decode("toolbox metrics", resp, &s); err != nil {
		return driver.Metrics{}, err
	}
	return metricsOfSystem(s), nil
}

// metricsOfSystem converts the toolbox's sample.
func metricsOfSystem(s toolbox.SystemMetrics) driver.Metrics {
	m := driver.NewMetrics()
	if s.TimestampUnix > 0 {
		m.Time = time.Unix(s.TimestampUnix, 0)
	} else if t, err := time.Parse(time.RFC3339, s.Timestamp); err == nil {
		m.Time = t
	}
	if s.CpuCount > 0 {
		m.CPULimit = float64(s.CpuCount)
		if s.CpuUsedPct >= 0 {
			m.CPUPercent = s.CpuUsedPct * float64(s.CpuCount)
		}
	}
	if s.MemTotal > 0 {
		m.MemoryLimitBytes = s.MemTotal
		m.MemoryBytes = max(s.MemUsed, driver.MetricUnknown)
	}
	if s.DiskTotal > 0 {
		m.DiskLimitBytes = s.DiskTotal
		m.DiskBytes = max(s.DiskUsed, driver.MetricUnknown)
	}
	m.Notes = []string{"daytona: the toolbox's latest sample; CPU time, memory peak and process count are not reported"}
	return m
}
