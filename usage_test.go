package sandbox_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// fixedMetrics is a memory runtime whose Metrics answers m (or err).
type fixedMetrics struct {
	*memory.Runtime
	m   driver.Metrics
	err error
}

func (f *fixedMetrics) Metrics(context.Context, string) (driver.Metrics, error) { return f.m, f.err }

func TestMetricsUnimplemented(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sandbox.NewClient(bareRuntime{memory.New()})
	defer c.Close()
	if c.Capabilities().Metrics {
		t.Error("Capabilities.Metrics without a driver.MetricsReader")
	}
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	_, err = sb.Metrics(ctx)
	if !errors.Is(err, sandbox.ErrUnimplemented) || !strings.Contains(err.Error(), "metrics") {
		t.Fatalf("Metrics without a MetricsReader: %v, want ErrUnimplemented naming metrics", err)
	}
	if !sandbox.NewClient(memory.New()).Capabilities().Metrics {
		t.Error("Capabilities.Metrics false for a driver.MetricsReader")
	}
}

// The portable layer normalises what a driver gets wrong: a value below
// -1 or NaN is unknown, a peak below the current value is raised, a
// missing time is the call's; driver errors are wrapped with the op.
func TestMetricsNormalised(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dm := driver.NewMetrics()
	dm.MemoryBytes, dm.MemoryPeakBytes, dm.DiskBytes = 5000, 4000, -7
	dm.CPUPercent, dm.CPULimit = math.NaN(), math.Inf(1)
	dm.CPUTime = -5 * time.Second
	f := &fixedMetrics{Runtime: memory.New(), m: dm}
	c := sandbox.NewClient(f)
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	before := time.Now()
	m, err := sb.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.MemoryPeakBytes != 5000 || m.DiskBytes != sandbox.MetricUnknown || m.CPUTime != sandbox.MetricUnknown ||
		m.CPUPercent != sandbox.MetricUnknown || m.CPULimit != sandbox.MetricUnknown || m.Time.Before(before) {
		t.Errorf("normalised: %v at %v", m, m.Time)
	}
	if !sandbox.Known(m.MemoryBytes) || sandbox.Known(m.DiskBytes) {
		t.Errorf("Known: memory %v, disk %v", sandbox.Known(m.MemoryBytes), sandbox.Known(m.DiskBytes))
	}
	if s := m.String(); !strings.Contains(s, "disk=?") || !strings.Contains(s, "mem=4.9 KiB") {
		t.Errorf("String = %q", s)
	}
	f.err = errors.New("boom")
	if _, err := sb.Metrics(ctx); err == nil || !strings.Contains(err.Error(), "metrics") || !strings.Contains(err.Error(), "boom") {
		t.Errorf("driver error: %v, want it wrapped with the op", err)
	}
}

func TestCPUPercentSince(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	a := sandbox.Metrics{Time: t0, CPUTime: time.Second, CPUPercent: sandbox.MetricUnknown}
	b := sandbox.Metrics{Time: t0.Add(2 * time.Second), CPUTime: 2 * time.Second, CPUPercent: sandbox.MetricUnknown}
	if p := b.CPUPercentSince(a); p != 50 {
		t.Errorf("1 s of CPU in 2 s: %v%%, want 50", p)
	}
	b.CPUTime = sandbox.MetricUnknown
	b.CPUPercent = 12
	if p := b.CPUPercentSince(a); p != 12 {
		t.Errorf("without CPU time: %v, want the provider's 12", p)
	}
	b.CPUPercent = sandbox.MetricUnknown
	if p := b.CPUPercentSince(a); sandbox.Known(p) {
		t.Errorf("nothing known: %v, want MetricUnknown", p)
	}
}
