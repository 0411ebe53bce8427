package daytona_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
)

// TestServerRestartedBetweenCalls: the fake restarts (every connection
// cut) between two commands; the second runs on a new connection after at
// most one transport reset, and each command ran exactly once.
func TestServerRestartedBetweenCalls(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	e := newEnv(t, []daytonafake.Option{daytonafake.WithAddr(addr)})
	if want := "http://" + addr + "/api"; e.fake.URL() != want {
		t.Fatalf("URL %s, want %s", e.fake.URL(), want)
	}
	sb := e.create(t)
	var resets atomic.Int32
	defer e.c.OnTransportReset(func() { resets.Add(1) })()
	sh(t, sb, "echo 1 >> runs")
	if err := e.fake.Restart(); err != nil {
		t.Fatal(err)
	}
	r := sh(t, sb, "echo 2 >> runs; cat runs")
	if got := string(r.Stdout); got != "1\n2\n" {
		t.Errorf("runs = %q, want each command once", got)
	}
	t.Logf("transport resets after the restart: %d", resets.Load())
	if n := resets.Load(); n > 1 {
		t.Errorf("%d transport resets, want at most 1", n)
	}
}

// TestServerRestartedMidExec: the fake restarts while a command runs. The
// Exec returns (an error when the answer was lost) instead of hanging,
// the command is not run a second time, and the sandbox keeps working.
func TestServerRestartedMidExec(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	ctx := ctxT(t)
	type result struct {
		r   *sandbox.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := sb.Exec(ctx, sandbox.Command{Shell: "echo started > marker; sleep 2; echo ran >> runs"})
		done <- result{r, err}
	}()
	waitFile(ctx, t, sb, "marker")
	if err := e.fake.Restart(); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	res := <-done
	t.Logf("Exec across a restart: %v after the restart, err %v", time.Since(begin), res.err)
	if res.err == nil && res.r.ExitCode != 0 {
		t.Errorf("Exec across a restart: exit %d, stderr %q", res.r.ExitCode, res.r.Stderr)
	}
	waitFile(ctx, t, sb, "runs")
	r := sh(t, sb, "cat runs")
	if got := strings.Count(string(r.Stdout), "ran"); got != 1 {
		t.Errorf("the command ran %d times, want 1", got)
	}
}

// waitFile polls, bounded by ctx, until name exists in sb.
func waitFile(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, name string) {
	t.Helper()
	for {
		if _, err := sb.Stat(ctx, name); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never appeared: %v", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
