package e2bfake

import (
	"net/http"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/api"
)

// The E2B API serves a sandbox's resource use as samples (GET
// /sandboxes/{id}/metrics?start=&end=, Unix seconds; both optional):
// a JSON array of SandboxMetric, oldest first, every field present;
// cpuUsedPct is the CPU use in percent of all the sandbox's cores
// together over the time since the previous sample (0 for the first), as
// envd computes it. E2B samples every 5 s; the fake samples its backend
// when asked (at most once per second, the resolution of timestampUnix)
// and keeps what it sampled, so a paused sandbox answers what it had.
// Fields come from the backend's driver.Metrics where it reports them;
// where it does not, the fake answers as an idle E2B sandbox of the sizes
// GetSandbox reports: 2 cores, 512 MiB of which 32 MiB used, a 10 GiB
// disk, and no CPU use.

const (
	fakeCPUCount   = 2
	fakeMemTotal   = 512 << 20
	fakeMemIdle    = 32 << 20
	fakeDiskTotal  = 10240 << 20
	maxMetricsKept = 720 // an hour of 5 s samples
)

// metricsLog is what the fake sampled of one sandbox.
type metricsLog struct {
	samples []api.SandboxMetric
	lastCPU time.Duration // the backend's CPUTime at the last sample; -1 unknown
	lastAt  time.Time
}

func (c controlPlane) GetSandboxMetrics(w http.ResponseWriter, r *http.Request, id api.SandboxID, params api.GetSandboxMetricsParams) {
	b, ok := c.lookup(w, id)
	if !ok {
		return
	}
	if (params.Start != nil && *params.Start < 0) || (params.End != nil && *params.End < 0) {
		writeError(w, http.StatusBadRequest, "start and end must be Unix seconds, not negative")
		return
	}
	c.s.mu.Lock()
	paused, bid := b.paused, b.backendID
	c.s.mu.Unlock()
	if !paused {
		if mr, ok := c.s.backend.(driver.MetricsReader); ok {
			m, err := mr.Metrics(r.Context(), bid)
			if err != nil {
				writeError(w, http.StatusInternalServerError, "failed to get sandbox metrics")
				return
			}
			c.s.mu.Lock()
			b.metrics.add(m, c.s.now())
			c.s.mu.Unlock()
		}
	}
	c.s.mu.Lock()
	out := make([]api.SandboxMetric, 0, len(b.metrics.samples))
	for _, sm := range b.metrics.samples {
		if (params.Start != nil && sm.TimestampUnix < *params.Start) || (params.End != nil && sm.TimestampUnix > *params.End) {
			continue
		}
		out = append(out, sm)
	}
	c.s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// add records a sample of m taken at now, replacing one of the same
// second.
func (l *metricsLog) add(m driver.Metrics, now time.Time) {
	sm := api.SandboxMetric{
		Timestamp: now.UTC().Truncate(time.Second), TimestampUnix: now.Unix(),
		CpuCount: fakeCPUCount, MemTotal: fakeMemTotal, MemUsed: fakeMemIdle, DiskTotal: fakeDiskTotal,
	}
	if m.CPULimit > 0 {
		sm.CpuCount = int32(max(1, int(m.CPULimit+0.5)))
	}
	if m.MemoryLimitBytes > 0 {
		sm.MemTotal = m.MemoryLimitBytes
	}
	if m.MemoryBytes >= 0 {
		sm.MemUsed = m.MemoryBytes
	}
	if m.DiskBytes >= 0 {
		sm.DiskUsed = m.DiskBytes
	}
	if m.DiskLimitBytes > 0 {
		sm.DiskTotal = m.DiskLimitBytes
	}
	sm.MemTotal = max(sm.MemTotal, sm.MemUsed)
	sm.DiskTotal = max(sm.DiskTotal, sm.DiskUsed)
	if m.CPUTime >= 0 && l.lastCPU >= 0 && !l.lastAt.IsZero() && now.After(l.lastAt) && m.CPUTime >= l.lastCPU {
		pct := 100 * float64(m.CPUTime-l.lastCPU) / float64(now.Sub(l.lastAt)) / float64(sm.CpuCount)
		sm.CpuUsedPct = float32(min(100, pct))
	}
	l.lastCPU, l.lastAt = m.CPUTime, now
	if n := len(l.samples); n > 0 && l.samples[n-1].TimestampUnix == sm.TimestampUnix {
		l.samples[n-1] = sm
		return
	}
	l.samples = append(l.samples, sm)
	if len(l.samples) > maxMetricsKept {
		l.samples = l.samples[len(l.samples)-maxMetricsKept:]
	}
}
