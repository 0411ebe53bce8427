package daytonafake

import (
	"net/http"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/toolbox"
)

// The toolbox serves GET /system/metrics: the daemon's latest sample of
// the sandbox (SystemMetrics, every field present). cpuUsedPct is the CPU
// use in percent of the sandbox's CPU limit since the previous sample, 0
// until a first sample completes; byte fields are bytes. The daemon
// samples on its telemetry export; the fake samples its backend when
// asked. Fields come from the backend's driver.Metrics where it reports
// them; the totals are the sandbox's own cpu, memory and disk (GiB) as
// created, and where the backend reports no memory the fake answers the
// 32 MiB of an idle sandbox (and no disk, 0, where it reports none).

const idleMemory = 32 << 20

// sampler is the state between two samples, for cpuUsedPct.
type sampler struct {
	lastCPU time.Duration // -1 before a first sample with a CPU time
	lastAt  time.Time
	pct     float64
}

func (t *tb) metrics() {
	var m driver.Metrics
	if mr, ok := t.s.backend.(driver.MetricsReader); ok {
		var err error
		if m, err = mr.Metrics(t.ctx(), t.b.backendID); err != nil {
			emptyError(t.w, http.StatusInternalServerError)
			return
		}
	} else {
		m = driver.NewMetrics()
	}
	now := t.s.now().UTC()
	b := t.b
	cpus := max(b.cpu, 1)
	out := toolbox.SystemMetrics{
		Timestamp: now.Format(time.RFC3339), TimestampUnix: now.Unix(), CpuCount: cpus,
		MemTotal: int64(b.mem) << 30, DiskTotal: int64(b.disk) << 30, MemUsed: idleMemory,
	}
	if m.MemoryBytes >= 0 {
		out.MemUsed = m.MemoryBytes
	}
	if m.DiskBytes >= 0 {
		out.DiskUsed = m.DiskBytes
	}
	out.MemTotal = max(out.MemTotal, out.MemUsed)
	out.DiskTotal = max(out.DiskTotal, out.DiskUsed)
	out.DiskFree = out.DiskTotal - out.DiskUsed
	b.smu.Lock()
	sp := &b.sampler
	if m.CPUTime >= 0 && !sp.lastAt.IsZero() && sp.lastCPU >= 0 && now.After(sp.lastAt) && m.CPUTime >= sp.lastCPU {
		sp.pct = min(100, 100*float64(m.CPUTime-sp.lastCPU)/float64(now.Sub(sp.lastAt))/float64(cpus))
	}
	sp.lastCPU, sp.lastAt = m.CPUTime, now
	out.CpuUsedPct = sp.pct
	b.smu.Unlock()
	writeJSON(t.w, http.StatusOK, out)
}
