package driver

import (
	"context"
	"time"
)

// MetricUnknown is the value of a Metrics field the provider does not report.
// It is never a measurement: every measured quantity is ≥ 0.
const MetricUnknown = -1

// Metrics is a sandbox's resource use at one moment, as a MetricsReader
// reports it. Every numeric field is MetricUnknown (-1) when the provider does
// not report it; 0 is a measured zero. NewMetrics returns one with every
// field MetricUnknown, for a driver to fill in what it knows.
type Metrics struct {
	// Time is when the values were measured; zero means the time of the
	// call.
	Time time.Time
	// CPUTime is the CPU time the sandbox's processes have used since it
	// started (user and system, all cores).
	CPUTime time.Duration
	// CPUPercent is the recent CPU use in percent of one core (200 is two
	// cores busy), for a provider that reports a rate rather than a total.
	CPUPercent float64
	// MemoryBytes is the memory in use now; MemoryPeakBytes the most in
	// use at once since the sandbox started (never below MemoryBytes).
	MemoryBytes     int64
	MemoryPeakBytes int64
	// DiskBytes is the disk space the sandbox's files use.
	DiskBytes int64
	// Processes is the number of processes running in the sandbox.
	Processes int64
	// CPULimit is the most cores the sandbox may use (2.5 for two and a
	// half cores).
	CPULimit float64
	// MemoryLimitBytes and DiskLimitBytes are the most memory and disk
	// the sandbox may use.
	MemoryLimitBytes int64
	DiskLimitBytes   int64
	// Notes says, where the provider knows, why a field is MetricUnknown or
	// how a value is measured (for a person, not for parsing).
	Notes []string
}

// NewMetrics returns Metrics with every field MetricUnknown.
func NewMetrics() Metrics {
	return Metrics{
		CPUTime: MetricUnknown, CPUPercent: MetricUnknown, MemoryBytes: MetricUnknown, MemoryPeakBytes: MetricUnknown,
		DiskBytes: MetricUnknown, Processes: MetricUnknown, CPULimit: MetricUnknown, MemoryLimitBytes: MetricUnknown, DiskLimitBytes: MetricUnknown,
	}
}

// MetricsReader is implemented by providers that report a sandbox's
// resource use (Sandbox.Metrics). Metrics reads it once, with a bounded
// wait (the provider's own one-shot endpoint, not a stream). A gone
// sandbox is NotFound; a paused one may report what it last had or
// fail with ErrPaused. Fields the provider does not report are MetricUnknown,
// never 0.
type MetricsReader interface {
	Metrics(ctx context.Context, id string) (Metrics, error)
}
