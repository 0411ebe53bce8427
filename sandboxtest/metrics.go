package sandboxtest

import (
	"context"
	"crypto/rand"
	"errors"
	"math"
	"path"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// The Metrics group checks Sandbox.Metrics on providers that report
// resource use (Capabilities.Metrics): values are consistent (a field is
// MetricUnknown or a measurement, the peak is not below the current
// value, use is not above its limit), and each field the provider
// reports moves the way the sandbox's activity says (files written, CPU
// burnt, memory held, processes started), so a provider that reports 0
// for what it cannot see fails.

func needsMetrics(c sandbox.Capabilities) string {
	if !c.Metrics {
		return "provider reports no resource metrics (Capabilities.Metrics=false: not a driver.MetricsReader)"
	}
	return ""
}

// metricsWait bounds how long a subtest polls for a value to move: the
// cloud providers sample every few seconds.
const metricsWait = 45 * time.Second

func readMetrics(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) sandbox.Metrics {
	t.Helper()
	m, err := sb.Metrics(ctx)
	if err != nil {
		t.Fatalf("Metrics: %v", err)
	}
	checkMetrics(t, m)
	return m
}

// checkMetrics fails t on an inconsistent Metrics.
func checkMetrics(t *testing.T, m sandbox.Metrics) {
	t.Helper()
	ints := map[string]int64{
		"CPUTime": int64(m.CPUTime), "MemoryBytes": m.MemoryBytes, "MemoryPeakBytes": m.MemoryPeakBytes,
		"DiskBytes": m.DiskBytes, "Processes": m.Processes, "MemoryLimitBytes": m.MemoryLimitBytes, "DiskLimitBytes": m.DiskLimitBytes,
	}
	for name, v := range ints {
		if v < 0 && v != sandbox.MetricUnknown {
			t.Errorf("%s = %d: neither a measurement nor MetricUnknown (%v)", name, v, m)
		}
	}
	for name, v := range map[string]float64{"CPUPercent": m.CPUPercent, "CPULimit": m.CPULimit} {
		if math.IsNaN(v) || (v < 0 && v != sandbox.MetricUnknown) {
			t.Errorf("%s = %v: neither a measurement nor MetricUnknown (%v)", name, v, m)
		}
	}
	if m.Time.IsZero() || m.Time.After(time.Now().Add(time.Minute)) {
		t.Errorf("Time = %v: not a measurement time", m.Time)
	}
	if sandbox.Known(m.MemoryPeakBytes) && sandbox.Known(m.MemoryBytes) && m.MemoryPeakBytes < m.MemoryBytes {
		t.Errorf("memory peak %d below current %d", m.MemoryPeakBytes, m.MemoryBytes)
	}
	if sandbox.Known(m.MemoryLimitBytes) && sandbox.Known(m.MemoryBytes) && m.MemoryBytes > m.MemoryLimitBytes {
		t.Errorf("memory %d above its limit %d", m.MemoryBytes, m.MemoryLimitBytes)
	}
	if sandbox.Known(m.DiskLimitBytes) && sandbox.Known(m.DiskBytes) && m.DiskBytes > m.DiskLimitBytes {
		t.Errorf("disk %d above its limit %d", m.DiskBytes, m.DiskLimitBytes)
	}
	if m.CPULimit == 0 || m.MemoryLimitBytes == 0 || m.DiskLimitBytes == 0 {
		t.Errorf("a limit of 0 (nothing may run) reported: unknown limits must be MetricUnknown (%v)", m)
	}
}

// pollMetrics reads Metrics until ok holds or metricsWait passes.
func pollMetrics(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, what string, ok func(sandbox.Metrics) bool) sandbox.Metrics {
	t.Helper()
	end := time.Now().Add(metricsWait)
	for {
		m := readMetrics(ctx, t, sb)
		if ok(m) {
			return m
		}
		if time.Now().After(end) || ctx.Err() != nil {
			t.Fatalf("%s: not seen within %v (last: %v; notes %q)", what, metricsWait, m, m.Notes)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

var metricsTests = []test{
	{name: "Consistent", needs: needsMetrics, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		m := readMetrics(ctx, t, sb)
		t.Logf("metrics of a new sandbox: %v (notes %q)", m, m.Notes)
		// Known memory is not 0 unless nothing at all runs in the sandbox
		// (a known process count of 0: a provider that measures memory as
		// its processes' resident sets, as local does without a cgroup).
		if sandbox.Known(m.MemoryBytes) && m.MemoryBytes == 0 && !(sandbox.Known(m.Processes) && m.Processes == 0) {
			t.Errorf("MemoryBytes 0 for a running sandbox: an unmeasured value must be MetricUnknown")
		}
	}},
	{name: "DiskGrows", needs: needsMetrics, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		before := readMetrics(ctx, t, sb)
		if !sandbox.Known(before.DiskBytes) {
			t.Skipf("provider reports no disk use (%q)", before.Notes)
		}
		data := make([]byte, 2<<20)
		_, _ = rand.Read(data) // incompressible, so every byte takes a block
		check(t, sb.WriteFile(ctx, path.Join(sb.Home(), "metrics-"+randHex(4)+".bin"), data))
		pollMetrics(ctx, t, sb, "disk use up by 1 MiB after writing 2 MiB", func(m sandbox.Metrics) bool {
			return m.DiskBytes >= before.DiskBytes+1<<20
		})
	}},
	{name: "CPUMoves", needs: needsMetrics, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		before := readMetrics(ctx, t, sb)
		if !sandbox.Known(before.CPUTime) {
			t.Skipf("provider reports no CPU time (%q)", before.Notes)
		}
		// About half a second of CPU in any POSIX shell.
		sh(ctx, t, sb, `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo $i`)
		after := pollMetrics(ctx, t, sb, "CPU time up by 20 ms after a busy loop", func(m sandbox.Metrics) bool {
			return m.CPUTime >= before.CPUTime+20*time.Millisecond
		})
		if p := after.CPUPercentSince(before); !sandbox.Known(p) || p <= 0 {
			t.Errorf("CPUPercentSince = %v after CPU time rose from %v to %v", p, before.CPUTime, after.CPUTime)
		}
	}},
	{name: "MemoryMoves", needs: func(c sandbox.Capabilities) string {
		if r := needsMetrics(c); r != "" {
			return r
		}
		return needsProcesses(c)
	}, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		before := readMetrics(ctx, t, sb)
		if !sandbox.Known(before.MemoryBytes) {
			t.Skipf("provider reports no memory use (%q)", before.Notes)
		}
		// A shell holding a 64 MiB string until killed.
		p, err := sb.Start(ctx, sandbox.Command{Shell: `s=$(head -c 67108864 /dev/zero | tr '\0' x); echo held; sleep 120; echo ${#s}`})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		defer func() {
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = p.Kill(kctx)
			_, _ = p.Wait(kctx)
		}()
		up := pollMetrics(ctx, t, sb, "memory up by 40 MiB while a shell holds 64 MiB", func(m sandbox.Metrics) bool {
			return m.MemoryBytes >= before.MemoryBytes+40<<20
		})
		if sandbox.Known(up.MemoryPeakBytes) && up.MemoryPeakBytes < before.MemoryBytes+40<<20 {
			t.Errorf("memory peak %d below the %d in use", up.MemoryPeakBytes, up.MemoryBytes)
		}
		if sandbox.Known(up.Processes) && up.Processes < 1 {
			t.Errorf("Processes = %d while a command runs", up.Processes)
		}
	}},
	{name: "ProcessesCount", needs: func(c sandbox.Capabilities) string {
		if r := needsMetrics(c); r != "" {
			return r
		}
		return needsProcesses(c)
	}, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		before := readMetrics(ctx, t, sb)
		if !sandbox.Known(before.Processes) {
			t.Skipf("provider reports no process count (%q)", before.Notes)
		}
		p, err := sb.Start(ctx, sandbox.Command{Args: []string{"sleep", "120"}})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		defer func() {
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = p.Kill(kctx)
			_, _ = p.Wait(kctx)
		}()
		pollMetrics(ctx, t, sb, "one more process after Start", func(m sandbox.Metrics) bool {
			return m.Processes >= before.Processes+1
		})
	}},
	{name: "Paused", needs: func(c sandbox.Capabilities) string {
		if r := needsMetrics(c); r != "" {
			return r
		}
		return needsPause(c)
	}, fn: func(ctx context.Context, t *testing.T, s *suite) {
		// A paused sandbox reports what it holds, or refuses with
		// ErrPaused; it never fails otherwise, and resumes as it was.
		sb := s.create(ctx, t, nil)
		check(t, sb.Pause(ctx))
		m, err := sb.Metrics(ctx)
		switch {
		case errors.Is(err, sandbox.ErrPaused):
		case err != nil:
			t.Fatalf("Metrics of a paused sandbox: %v, want values or an error matching ErrPaused", err)
		default:
			checkMetrics(t, m)
		}
		if err := sb.Resume(ctx); err != nil {
			t.Fatalf("Resume: %v", err)
		}
		readMetrics(ctx, t, sb)
	}},
	{name: "Gone", needs: needsMetrics, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		check(t, sb.Destroy(ctx))
		_, err := sb.Metrics(ctx)
		if !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("Metrics of a destroyed sandbox: %v, want an error matching ErrNotFound", err)
		}
	}},
}
