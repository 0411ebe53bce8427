package local

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

// BenchmarkEgressCreate measures Create (until the first exec works) of a
// sandbox with an allow-list policy (behind the egress proxy) and of one
// with the default network (pasta, where installed) and one without
// network (its namespace alone: what the proxy adds is the difference),
// interleaved so that the host's load falls on all alike, and reports
// the medians (<variant>-p50-ms) and their ratios. Run with -benchtime=20x for 20 of each.
func BenchmarkEgressCreate(b *testing.B) {
	rt, err := New(WithRoot(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	if l, _ := rt.Level(); l < L3 {
		b.Skipf("the egress proxy needs L3 or higher; this host gives %s", l.Describe())
	}
	ctx := context.Background()
	variants := []struct {
		name string
		req  func() *driver.CreateRequest
	}{
		{"default", func() *driver.CreateRequest { return &driver.CreateRequest{Timeout: time.Minute} }},
		{"no-network", func() *driver.CreateRequest {
			return &driver.CreateRequest{Timeout: time.Minute, NoNetwork: true, Network: &driver.NetworkPolicy{Mode: driver.NetworkDenyAll}}
		}},
		{"allow-list", func() *driver.CreateRequest {
			return &driver.CreateRequest{Timeout: time.Minute, Network: &driver.NetworkPolicy{Mode: driver.NetworkAllowList, AllowDomains: []string{"pypi.org"}}}
		}},
	}
	times := make([][]time.Duration, len(variants))
	for b.Loop() {
		for i, v := range variants {
			start := time.Now()
			in, err := rt.Create(ctx, v.req())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := rt.Exec(ctx, in.ID, &driver.Command{Args: []string{"true"}}); err != nil {
				b.Fatal(err)
			}
			times[i] = append(times[i], time.Since(start))
			b.StopTimer()
			_ = rt.Destroy(ctx, in.ID)
			b.StartTimer()
		}
	}
	p50 := make([]float64, len(variants))
	for i, v := range variants {
		slices.Sort(times[i])
		p50[i] = float64(times[i][len(times[i])/2].Microseconds()) / 1000
		b.ReportMetric(p50[i], v.name+"-p50-ms")
	}
	b.ReportMetric(p50[2]/p50[0], "allow-list/default")
	b.ReportMetric(p50[2]/p50[1], "allow-list/no-network")
}
