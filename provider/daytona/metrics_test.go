package daytona_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/daytona"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// daytonafake serves the toolbox's GET /system/metrics with exactly the
// daemon's SystemMetrics fields, and the adapter converts it (cpuUsedPct
// of the CPU limit, the sandbox's own sizes as limits).
func TestSystemMetricsShape(t *testing.T) {
	t.Parallel()
	fake := daytonafake.New(memory.New())
	t.Cleanup(fake.Close)
	rt, err := daytona.New(daytona.WithAPIKey(fake.APIKey()), daytona.WithAPIURL(fake.URL()))
	if err != nil {
		t.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	defer c.Close()
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	if err := sb.WriteFile(ctx, "f.bin", make([]byte, 70_000)); err != nil {
		t.Fatal(err)
	}
	m, err := sb.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.DiskBytes < 70_000 || m.CPULimit != 1 || m.MemoryLimitBytes != 1<<30 || m.DiskLimitBytes != 3<<30 ||
		sandbox.Known(m.CPUTime) || sandbox.Known(m.Processes) || sandbox.Known(m.MemoryPeakBytes) {
		t.Errorf("adapter's metrics: %v", m)
	}
	req, _ := http.NewRequest(http.MethodGet, fake.ToolboxURL()+"/"+sb.ID()+"/system/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+fake.APIKey())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /system/metrics: %d %s", resp.StatusCode, body)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"cpuCount", "cpuUsedPct", "diskFree", "diskTotal", "diskUsed", "memCache", "memTotal", "memUsed", "timestamp", "timestampUnix"}
	if !slices.Equal(keys, want) {
		t.Errorf("fields %v, want the daemon's %v", keys, want)
	}
}
