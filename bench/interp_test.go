//go:build linux

package bench

import (
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/interp"
)

// BenchmarkLocalInterpCell measures a warm Python cell round trip (1+1)
// against a bare Exec of true in the same local sandbox, interleaved, and
// reports the ratio as "x-exec" (goal: at most 2, issue 19). Run it with
//
//	go test ./bench -run '^$' -bench 'LocalInterpCell' -benchtime 30x
func BenchmarkLocalInterpCell(b *testing.B) {
	c, rt := localClient(b)
	ctx := b.Context()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Destroy(ctx)
	if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"python3", "-c", "pass"}}); err != nil {
		b.Skipf("python3 does not run in the sandbox: %v", err)
	}
	k, err := interp.New(ctx, sb, interp.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close(ctx)
	if _, err := k.Run(ctx, "0", interp.RunOptions{}); err != nil {
		b.Fatal(err)
	}
	var tv, tb []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		ex, err := k.Run(ctx, "1+1", interp.RunOptions{})
		if err != nil || ex.Text() != "2" {
			b.Fatalf("1+1: %v %+v", err, ex)
		}
		tv = append(tv, time.Since(t0))
		t0 = time.Now()
		if res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil || res.ExitCode != 0 {
			b.Fatalf("true: %v", err)
		}
		tb = append(tb, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(ms(median(tv)), "p50-ms")
	b.ReportMetric(ms(pct(tv, 0.95)), "p95-ms")
	b.ReportMetric(ms(median(tb)), "exec-p50-ms")
	b.ReportMetric(float64(median(tv))/float64(median(tb)), "x-exec")
	b.Logf("level %s: cell p50 %.1f ms, Exec true p50 %.1f ms", levelName(rt), ms(median(tv)), ms(median(tb)))
}
