package sandbox_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
	"go.opentelemetry.io/otel/codes"
)

// hostileMetrics answers Metrics with a fixed sample, as a provider
// relaying a daemon inside the sandbox (Daytona's toolbox, e2b's
// metrics) may.
type hostileMetrics struct {
	*memory.Runtime
	m driver.Metrics
}

func (h hostileMetrics) Metrics(context.Context, string) (driver.Metrics, error) { return h.m, nil }

// A sample out of range (time past year 9999, CPU and memory far past
// their limits) comes out of Sandbox.Metrics as unknowns with notes and a
// usable time, and encodes as JSON.
func TestMetricsHostileSample(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := driver.NewMetrics()
	m.Time = time.Unix(1e12, 0)
	m.CPULimit, m.CPUPercent = float64(1<<40), 1e6*float64(1<<40)
	m.MemoryLimitBytes, m.MemoryBytes = 1, 1<<62
	m.DiskLimitBytes, m.DiskBytes = 1, 1<<62
	c := sandbox.NewClient(hostileMetrics{memory.New(), m})
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := sb.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(got.Time); d < 0 || d > time.Minute {
		t.Errorf("Time = %v, want now", got.Time)
	}
	if sandbox.Known(got.CPUPercent) || sandbox.Known(got.MemoryBytes) || sandbox.Known(got.DiskBytes) || len(got.Notes) != 4 {
		t.Errorf("hostile values kept: %v, notes %q", got, got.Notes)
	}
	if _, err := json.Marshal(got); err != nil {
		t.Errorf("json.Marshal: %v", err)
	}
}

// Metrics records a span like the other portable calls, with the
// failure's code when the provider has no metrics.
func TestMetricsSpan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOTelSDK(t)
	c := sandbox.NewClient(memory.New(), sandbox.WithTracerProvider(o.tp), sandbox.WithMeterProvider(o.mp))
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Metrics(ctx); err != nil {
		t.Fatal(err)
	}
	s := o.span(t, "sandbox.metrics")
	var id string
	for _, a := range s.Attributes {
		if a.Key == sandbox.AttrSandboxID {
			id = a.Value.AsString()
		}
	}
	if id != sb.ID() || s.Status.Code == codes.Error {
		t.Errorf("span %q: sandbox id %q (want %q), status %v", s.Name, id, sb.ID(), s.Status)
	}
}
