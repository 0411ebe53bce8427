package sandbox

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

// MetricUnknown is the value of a Metrics field the provider does not report.
// Every measured quantity is ≥ 0, so a field is known exactly when it is
// not negative: 0 is a measured zero, never a stand-in for "unknown".
const MetricUnknown = driver.MetricUnknown

// Metrics is a sandbox's resource use at one moment (Sandbox.Metrics):
// what it uses now, and the limits it runs under.
//
// Each numeric field is MetricUnknown (-1) where the provider does not report
// it (test with m.MemoryBytes >= 0 or Known): a provider that cannot see
// a quantity says so rather than report 0. What each provider reports:
//
//   - local: CPU time, memory now and peak, processes and the CPU and
//     memory limits from the sandbox's cgroup (v2, or the v1 cpuacct,
//     memory and pids controllers); the peak only where the kernel keeps
//     one (memory.peak, Linux 5.19+, or v1 max_usage_in_bytes); disk used
//     from the home's file system when it has a quota (DiskGiB), else by
//     summing the home's blocks, with no disk limit.
//   - docker: the engine's one-shot stats (CPU time, memory now, processes,
//     memory limit) and the container's CPU limit; no peak and no disk.
//   - e2b: the latest sample of the API's metrics endpoint (collected
//     every few seconds): CPU percent, memory now and total, disk used
//     and total; no CPU time, peak or process count.
//   - daytona: the toolbox's /system/metrics snapshot: CPU percent of
//     its limit, memory and disk used and total; no CPU time, peak or
//     process count.
//   - memory: the bytes its files hold and its running processes; no CPU
//     and no memory of its own.
//
// Notes says, in words, why a field is unknown or how it was measured.
type Metrics struct {
	// Time is when the values were measured (the provider's sample time
	// where it reports one, else the time of the call).
	Time time.Time
	// CPUTime is the CPU time (user and system, all cores) the sandbox's
	// processes have used since it started. Two readings give the CPU
	// use between them (see CPUPercentSince).
	CPUTime time.Duration
	// CPUPercent is the recent CPU use in percent of one core (200 means
	// two cores busy), for providers that report a rate (E2B, Daytona)
	// rather than a total.
	CPUPercent float64
	// MemoryBytes is the memory in use now; MemoryPeakBytes the most in
	// use at once since the sandbox started, never below MemoryBytes.
	MemoryBytes     int64
	MemoryPeakBytes int64
	// DiskBytes is the disk space the sandbox's files use.
	DiskBytes int64
	// Processes is the number of processes in the sandbox (where the
	// provider runs a helper inside it, such as local's agent, it counts).
	Processes int64
	// CPULimit is the most cores the sandbox may use.
	CPULimit float64
	// MemoryLimitBytes and DiskLimitBytes are the most memory and disk it
	// may use.
	MemoryLimitBytes int64
	DiskLimitBytes   int64
	// Notes explains unknown fields and how values were measured.
	Notes []string
}

// Known reports whether v, a Metrics field, holds a measurement (is not
// MetricUnknown). It accepts any of the field types.
func Known[T int64 | float64 | time.Duration](v T) bool { return v >= 0 }

// CPUPercentSince returns the CPU use between an earlier reading prev
// and m, in percent of one core, computed from the CPUTime of both; or,
// where CPUTime is unknown, m's own CPUPercent (which may be MetricUnknown).
func (m Metrics) CPUPercentSince(prev Metrics) float64 {
	if Known(m.CPUTime) && Known(prev.CPUTime) && m.Time.After(prev.Time) && m.CPUTime >= prev.CPUTime {
		return 100 * float64(m.CPUTime-prev.CPUTime) / float64(m.Time.Sub(prev.Time))
	}
	return m.CPUPercent
}

// maxSampleSkew is how far from the host's clock a sample time may be
// before metricsOf replaces it.
const maxSampleSkew = 24 * time.Hour

// metricsOf converts a driver's Metrics, normalising what a driver (or a
// daemon inside the sandbox it asks, which the sandbox controls) may get
// wrong: any negative or NaN value becomes MetricUnknown; a missing time,
// or one JSON cannot encode or more than a day from now, becomes now (with
// a note); where a limit is known, CPU percent above 100 times the CPU
// limit, or memory, its peak or disk above twice their limit, becomes
// MetricUnknown with a note; and a peak below the current value (the two read at
// slightly different moments) is raised to it.
func metricsOf(d driver.Metrics, now time.Time) Metrics {
	i := func(v int64) int64 { return max(v, MetricUnknown) }
	f := func(v float64) float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return MetricUnknown
		}
		return v
	}
	m := Metrics{
		Time: d.Time, CPUTime: max(d.CPUTime, MetricUnknown), CPUPercent: f(d.CPUPercent),
		MemoryBytes: i(d.MemoryBytes), MemoryPeakBytes: i(d.MemoryPeakBytes), DiskBytes: i(d.DiskBytes),
		Processes: i(d.Processes), CPULimit: f(d.CPULimit), MemoryLimitBytes: i(d.MemoryLimitBytes),
		DiskLimitBytes: i(d.DiskLimitBytes), Notes: slices.Clone(d.Notes),
	}
	switch {
	case m.Time.IsZero():
		m.Time = now
	case m.Time.Year() < 1 || m.Time.Year() > 9999 || m.Time.Sub(now).Abs() > maxSampleSkew:
		// Out of the range JSON can encode, or far from now: a clock
		// gone wrong or a hostile daemon; it would fail every encoding
		// of the Metrics (a whole `sandbox top --json` table).
		m.Time = now
		m.Notes = append(m.Notes, "the provider's sample time was implausible (more than 24h from this host's clock): the time is when this call returned")
	}
	if Known(m.CPULimit) && m.CPULimit > 0 && Known(m.CPUPercent) && m.CPUPercent > 100*m.CPULimit {
		m.CPUPercent = MetricUnknown
		m.Notes = append(m.Notes, "the provider reported a CPU use above its CPU limit: CPU percent is unknown")
	}
	if Known(m.MemoryLimitBytes) && m.MemoryLimitBytes > 0 {
		if m.MemoryBytes > 2*m.MemoryLimitBytes || m.MemoryBytes > math.MaxInt64/2 {
			m.MemoryBytes = MetricUnknown
			m.Notes = append(m.Notes, "the provider reported memory use far above the memory limit: memory is unknown")
		}
		if m.MemoryPeakBytes > 2*m.MemoryLimitBytes || m.MemoryPeakBytes > math.MaxInt64/2 {
			m.MemoryPeakBytes = MetricUnknown
			m.Notes = append(m.Notes, "the provider reported a memory peak far above the memory limit: the peak is unknown")
		}
	}
	if Known(m.DiskLimitBytes) && m.DiskLimitBytes > 0 && (m.DiskBytes > 2*m.DiskLimitBytes || m.DiskBytes > math.MaxInt64/2) {
		m.DiskBytes = MetricUnknown
		m.Notes = append(m.Notes, "the provider reported disk use far above the disk limit: disk is unknown")
	}
	if Known(m.MemoryPeakBytes) && m.MemoryPeakBytes < m.MemoryBytes {
		m.MemoryPeakBytes = m.MemoryBytes
	}
	return m
}

// Metrics reports the sandbox's resource use now: CPU, memory (current
// and peak), disk, processes and its limits (see Metrics for what each
// provider reports; fields it does not are MetricUnknown). It reads once and
// does not wait for a new sample; without a deadline on ctx it is bounded
// by CallTimeouts.Lookup. Providers without resource metrics
// (Capabilities.Metrics false) return an error matching ErrUnimplemented;
// a destroyed sandbox one matching ErrNotFound.
func (s *Sandbox) Metrics(ctx context.Context) (_ Metrics, err error) {
	const op = "metrics"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	mr, ok := s.c.rt.(driver.MetricsReader)
	if !ok {
		return Metrics{}, s.wrap(op, "", fmt.Errorf("sandbox: provider %s reports no resource metrics: %w", s.c.rt.Name(), ErrUnimplemented))
	}
	var dm driver.Metrics
	ctx, end := bound(ctx, op, s.c.calls.Lookup)
	err = end(s.c.retry(ctx, op, true, nil, func() error {
		var err error
		dm, err = mr.Metrics(ctx, s.id)
		return err
	}))
	if err != nil {
		return Metrics{}, s.wrap(op, "", err)
	}
	return metricsOf(dm, time.Now()), nil
}

// String renders m on one line, with "?" for unknown fields, the form the
// CLI's top prints in its detail view and tests log.
func (m Metrics) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cpu=%s cpu%%=%s mem=%s peak=%s disk=%s procs=%s limits: cpu=%s mem=%s disk=%s",
		durOrQ(m.CPUTime), floatOrQ(m.CPUPercent), bytesOrQ(m.MemoryBytes), bytesOrQ(m.MemoryPeakBytes),
		bytesOrQ(m.DiskBytes), intOrQ(m.Processes), floatOrQ(m.CPULimit), bytesOrQ(m.MemoryLimitBytes), bytesOrQ(m.DiskLimitBytes))
	return b.String()
}

func durOrQ(d time.Duration) string {
	if !Known(d) {
		return "?"
	}
	return d.Round(time.Millisecond).String()
}

func floatOrQ(v float64) string {
	if !Known(v) {
		return "?"
	}
	return fmt.Sprintf("%.1f", v)
}

func intOrQ(v int64) string {
	if !Known(v) {
		return "?"
	}
	return fmt.Sprint(v)
}

// bytesOrQ renders n bytes with a binary unit (B, KiB, MiB, GiB, TiB).
func bytesOrQ(n int64) string {
	if !Known(n) {
		return "?"
	}
	return formatBytes(n)
}

// formatBytes renders n bytes with a binary unit ("512 B", "1.5 MiB").
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit && exp < 3; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGT"[exp])
}
