package sandbox

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

// A sample time JSON cannot encode, or far from the host's clock, becomes
// the call's time with a note, so one bad row never fails an encoding of
// many (sandbox top --json, the MCP metrics tool).
func TestMetricsOfImplausibleTime(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, ts := range []time.Time{
		time.Unix(1e12, 0), time.Unix(-1e12, 0), // past year 9999 and before year 1
		now.Add(25 * time.Hour), now.Add(-25 * time.Hour),
	} {
		d := driver.NewMetrics()
		d.Time = ts
		m := metricsOf(d, now)
		if !m.Time.Equal(now) || len(m.Notes) != 1 {
			t.Errorf("time %v: metricsOf kept %v, notes %q", ts, m.Time, m.Notes)
		}
		if _, err := json.Marshal(m); err != nil {
			t.Errorf("time %v: json.Marshal: %v", ts, err)
		}
	}
	d := driver.NewMetrics()
	d.Time = now.Add(-time.Minute)
	if m := metricsOf(d, now); !m.Time.Equal(d.Time) || len(m.Notes) != 0 {
		t.Errorf("a plausible time was changed: %v, %q", m.Time, m.Notes)
	}
}

// Where a limit is known, a value far past it (reported by a daemon the
// sandbox controls) becomes unknown with a note; values within it stay.
func TestMetricsOfImplausibleAgainstLimits(t *testing.T) {
	t.Parallel()
	now := time.Now()
	d := driver.NewMetrics()
	d.Time = now
	d.CPULimit, d.CPUPercent = 2, 201
	d.MemoryLimitBytes, d.MemoryBytes, d.MemoryPeakBytes = 1<<30, 2<<30+1, 1<<62
	d.DiskLimitBytes, d.DiskBytes = 1<<30, 1<<40
	m := metricsOf(d, now)
	if Known(m.CPUPercent) || Known(m.MemoryBytes) || Known(m.MemoryPeakBytes) || Known(m.DiskBytes) || len(m.Notes) != 4 {
		t.Errorf("implausible values kept: %v, notes %q", m, m.Notes)
	}
	d.CPUPercent, d.MemoryBytes, d.MemoryPeakBytes, d.DiskBytes = 200, 2<<30, 2<<30, 2<<30
	m = metricsOf(d, now)
	if m.CPUPercent != 200 || m.MemoryBytes != 2<<30 || m.MemoryPeakBytes != 2<<30 || m.DiskBytes != 2<<30 || len(m.Notes) != 0 {
		t.Errorf("values within bounds changed: %v, notes %q", m, m.Notes)
	}
	d.CPULimit, d.MemoryLimitBytes, d.DiskLimitBytes = MetricUnknown, MetricUnknown, MetricUnknown
	d.CPUPercent, d.MemoryBytes, d.DiskBytes = 5000, 1<<40, 1<<50
	if m := metricsOf(d, now); m.CPUPercent != 5000 || m.MemoryBytes != 1<<40 || m.DiskBytes != 1<<50 {
		t.Errorf("without limits values changed: %v", m)
	}
}
