package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// findRow returns the row of id in top's JSON output.
func findRow(t *testing.T, out, id string) metricsJSON {
	t.Helper()
	var rows []metricsJSON
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("top --json printed %q: %v", out, err)
	}
	for _, r := range rows {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("top --json has no row for %s: %q", id, out)
	return metricsJSON{}
}

// On the memory provider, top reports the files' bytes and marks CPU and
// memory unknown: null in JSON and "-" in the table, never 0.
func TestCLITopOnceMemory(t *testing.T) {
	t.Parallel()
	url := cleanMemoryURL(t)
	id := createSandbox(t, url)
	sb := openSandbox(t, url, id)
	if err := sb.WriteFile(context.Background(), "data.bin", make([]byte, 300_000)); err != nil {
		t.Fatal(err)
	}
	r := mustOK(t, invoke(t, url, nil, "top", "--once", "--json"), "top --once --json")
	row := findRow(t, r.stdout, id)
	if row.DiskBytes == nil || *row.DiskBytes < 300_000 {
		t.Errorf("disk_bytes = %v, want ≥ 300000 after writing a 300000-byte file", row.DiskBytes)
	}
	if row.CPUSeconds != nil || row.MemoryBytes != nil || row.MemoryLimit != nil {
		t.Errorf("unknown fields not null: cpu %v, memory %v, memory limit %v", row.CPUSeconds, row.MemoryBytes, row.MemoryLimit)
	}
	if !strings.Contains(r.stdout, `"cpu_seconds": null`) && !strings.Contains(r.stdout, `"cpu_seconds":null`) {
		t.Errorf("cpu_seconds is not printed as null: %q", r.stdout)
	}
	r = mustOK(t, invoke(t, url, nil, "top", "--once"), "top --once")
	var line string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, id) {
			line = l
		}
	}
	f := strings.Fields(line)
	if len(f) != 9 || f[2] != "-" || f[3] != "-" || f[4] != "-" || !strings.HasSuffix(f[7], "Ki") {
		t.Errorf("table row %q: want 9 columns, CPU%%, CPU TIME and MEM as -, DISK in KiB (table %q)", line, r.stdout)
	}
	if strings.Contains(r.stdout, "\033[") {
		t.Errorf("--once printed terminal escapes: %q", r.stdout)
	}
}

// On the local provider, top reads the sandbox's cgroup: memory and
// processes are measured (not null, not 0: its agent runs).
func TestCLITopOnceLocal(t *testing.T) {
	t.Parallel()
	url := localURL(t)
	id := createSandbox(t, url)
	t.Cleanup(func() { destroyAll(t, url) })
	r := mustOK(t, invoke(t, url, nil, "top", "--once", "--json"), "top --once --json")
	row := findRow(t, r.stdout, id)
	if row.MemoryBytes == nil || *row.MemoryBytes <= 0 || row.Processes == nil || *row.Processes < 1 {
		t.Errorf("local row: memory %v, processes %v: want measured values (%q)", row.MemoryBytes, row.Processes, r.stdout)
	}
	if row.DiskBytes == nil {
		t.Errorf("local row: disk_bytes null (%q)", r.stdout)
	}
}

func TestCLITopBadInput(t *testing.T) {
	t.Parallel()
	url := cleanMemoryURL(t)
	for _, args := range [][]string{{"--interval", "0"}, {"--interval", "-1s"}} {
		r := invoke(t, url, nil, append([]string{"top", "--once"}, args...)...)
		if r.code != exitToolFailure || !strings.Contains(r.stderr, "--interval") {
			t.Errorf("top %v: exit %d, stderr %q: want a usage error naming --interval", args, r.code, r.stderr)
		}
	}
	r := invoke(t, url, nil, "top", "--once", "--label", "novalue")
	if r.code != exitToolFailure || !strings.Contains(r.stderr, "label") {
		t.Errorf("top --label novalue: exit %d, stderr %q", r.code, r.stderr)
	}
}

// The MCP metrics tool is read-only and reports the session's sandbox,
// unknown values null.
func TestMCPMetrics(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t, memoryURL(t), mcpConfig{})
	cs := connect(t, srv, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tool := range res.Tools {
		if tool.Name == "metrics" {
			found = true
			if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
				t.Errorf("metrics tool not annotated read-only: %+v", tool.Annotations)
			}
		}
	}
	if !found {
		t.Fatal("no metrics tool")
	}
	ok[writeOut](t, cs, "write_file", map[string]any{"path": "a.txt", "content": strings.Repeat("x", 5000)})
	m := ok[metricsJSON](t, cs, "metrics", map[string]any{})
	if m.DiskBytes == nil || *m.DiskBytes < 5000 {
		t.Errorf("metrics disk_bytes = %v, want ≥ 5000 after writing 5000 bytes", m.DiskBytes)
	}
	if m.CPUSeconds != nil || m.MemoryBytes != nil {
		t.Errorf("metrics of the memory provider: cpu %v, memory %v: want null (unknown)", m.CPUSeconds, m.MemoryBytes)
	}
	cr := call(t, cs, "metrics", map[string]any{})
	if strings.Contains(text(cr), `"cpu_seconds":0`) {
		t.Errorf("unknown CPU printed as 0: %s", text(cr))
	}
}

// Without --once, top redraws every --interval, showing a sandbox created
// after it started, until interrupted: then it exits 130.
func TestCLITopRefreshes(t *testing.T) {
	t.Parallel()
	url := cleanMemoryURL(t)
	first := createSandbox(t, url)
	var out, errb lockedBuffer
	a := newApp(nil, &out, &errb)
	a.getenv = func(string) string { return "" }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	go func() { code <- a.run(ctx, []string{"--url", url, "top", "--interval", "100ms"}) }()
	waitOutput(t, &out, first)
	second := createSandbox(t, url)
	waitOutput(t, &out, second)
	if n := strings.Count(out.String(), clearScreen); n < 2 {
		t.Errorf("%d redraws, want at least 2: %q", n, out.String())
	}
	cancel()
	select {
	case c := <-code:
		if c != exitInterrupted {
			t.Errorf("top ended with %d, want %d (stderr %q)", c, exitInterrupted, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("top did not end within 10s of its context")
	}
}
