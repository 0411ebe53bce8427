package e2b_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// rawGet sends GET url with key as X-API-Key and returns status and body.
func rawGet(t *testing.T, url, key string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// The fake serves GET /sandboxes/{id}/metrics as E2B's API does: an array
// of samples with exactly E2B's fields, start/end filtering by Unix
// seconds, 404 with E2B's error body for an unknown sandbox, 401 without
// the key; and the adapter reports the latest sample.
func TestMetricsEndpointShape(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := context.Background()
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(sb.WriteFile(ctx, "f.bin", make([]byte, 70_000)))
	m, err := sb.Metrics(ctx)
	check(err)
	if m.DiskBytes < 70_000 || m.CPULimit != 2 || m.MemoryBytes <= 0 || sandbox.Known(m.CPUTime) || sandbox.Known(m.Processes) || sandbox.Known(m.MemoryPeakBytes) {
		t.Errorf("adapter's metrics: %v", m)
	}
	status, body := rawGet(t, e.fake.APIURL()+"/sandboxes/"+sb.ID()+"/metrics", e.fake.APIKey())
	if status != http.StatusOK {
		t.Fatalf("GET metrics: %d %s", status, body)
	}
	var samples []map[string]any
	check(json.Unmarshal(body, &samples))
	if len(samples) == 0 {
		t.Fatalf("no samples: %s", body)
	}
	var keys []string
	for k := range samples[0] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"cpuCount", "cpuUsedPct", "diskTotal", "diskUsed", "memCache", "memTotal", "memUsed", "timestamp", "timestampUnix"}
	if !slices.Equal(keys, want) {
		t.Errorf("sample fields %v, want E2B's %v", keys, want)
	}
	if status, body := rawGet(t, e.fake.APIURL()+"/sandboxes/"+sb.ID()+"/metrics?end=1", e.fake.APIKey()); status != 200 || string(body) != "[]\n" && string(body) != "[]" {
		t.Errorf("metrics ending in 1970: %d %q, want an empty array", status, body)
	}
	if status, body := rawGet(t, e.fake.APIURL()+"/sandboxes/nope/metrics", e.fake.APIKey()); status != http.StatusNotFound || !json.Valid(body) {
		t.Errorf("metrics of an unknown sandbox: %d %s", status, body)
	}
	if status, _ := rawGet(t, e.fake.APIURL()+"/sandboxes/"+sb.ID()+"/metrics", ""); status != http.StatusUnauthorized {
		t.Errorf("metrics without the key: %d, want 401", status)
	}
}
