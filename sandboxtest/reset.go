package sandboxtest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

func init() {
	execTests = append(execTests, test{name: "IdleConnectionsReset", fn: testExecIdleConnectionsReset})
	fileTests = append(fileTests, test{name: "IdleConnectionsReset", fn: testFilesIdleConnectionsReset})
}

// resetCycles is how many times the IdleConnectionsReset subtests reset
// the idle connections and call again: a retry that recovers only the
// first time fails on a later cycle.
const resetCycles = 5

// resetWait bounds how long resetter.reset waits for a connection to turn
// idle: a server marks one idle only once its handler has returned, which
// can come after the client already has the whole answer.
const resetWait = 2 * time.Second

// resetter calls the harness's ResetIdle hook and sums what it reset.
type resetter struct {
	t     *testing.T
	s     *suite
	total int
}

// newResetter skips the subtest when the harness has no ResetIdle hook,
// and otherwise fails it, at its end, if no reset found a connection to
// drop: the subtest then proved nothing.
func newResetter(t *testing.T, s *suite) *resetter {
	t.Helper()
	if s.h.Faults.ResetIdle == nil {
		t.Skip("the harness cannot reset idle connections (Harness.Faults.ResetIdle is nil)")
	}
	r := &resetter{t: t, s: s}
	t.Cleanup(func() {
		if r.total == 0 && !t.Skipped() {
			t.Error("ResetIdle never found an idle connection to reset: the client kept none, so the subtest proved nothing")
		}
	})
	return r
}

// reset resets the client's idle connections, polling for up to resetWait
// until there is one to reset.
func (r *resetter) reset(ctx context.Context) {
	deadline := time.Now().Add(resetWait)
	for {
		n := r.s.h.Faults.ResetIdle(r.t, r.s.c)
		r.total += n
		if n > 0 || time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// testExecIdleConnectionsReset: after the server drops every idle pooled
// connection, the next Exec succeeds with its exact output, and the
// command ran exactly once: no error, no silent second run, no empty
// output with exit 0.
func testExecIdleConnectionsReset(ctx context.Context, t *testing.T, s *suite) {
	r := newResetter(t, s)
	sb := s.create(ctx, t, nil)
	sh(ctx, t, sb, "true") // the client now pools a connection
	var want strings.Builder
	for i := 1; i <= resetCycles; i++ {
		r.reset(ctx)
		// Each run appends one line and prints the file: a run repeated
		// behind the caller's back shows as a doubled line.
		fmt.Fprintf(&want, "run%d\n", i)
		line := fmt.Sprintf("echo run%d >> count.txt; cat count.txt", i)
		res, err := sb.Exec(ctx, sandbox.Command{Shell: line})
		if err != nil {
			t.Fatalf("cycle %d: Exec after the server reset the idle connections: %v", i, err)
		}
		if got := string(res.Stdout); got != want.String() || len(res.Stderr) != 0 || res.ExitCode != 0 || res.TimedOut {
			t.Fatalf("cycle %d: Exec after the server reset the idle connections: stdout %q, stderr %q, exit %d, timed out %v; want stdout %q, no stderr, exit 0",
				i, got, res.Stderr, res.ExitCode, res.TimedOut, want.String())
		}
	}
	// Count the runs once more, through a connection reset too.
	r.reset(ctx)
	res, err := sb.Exec(ctx, sandbox.Command{Shell: "cat count.txt"})
	if err != nil {
		t.Fatalf("Exec cat count.txt after the server reset the idle connections: %v", err)
	}
	if got := string(res.Stdout); got != want.String() || res.ExitCode != 0 {
		t.Fatalf("after %d commands count.txt holds %q (exit %d), want one line per command run: %q", resetCycles, got, res.ExitCode, want.String())
	}
}

// testFilesIdleConnectionsReset: after the server drops every idle pooled
// connection, a WriteFile and then a ReadFile round-trip their bytes
// exactly.
func testFilesIdleConnectionsReset(ctx context.Context, t *testing.T, s *suite) {
	r := newResetter(t, s)
	sb := s.create(ctx, t, nil)
	check(t, sb.WriteFile(ctx, "reset/warm", []byte("warm"))) // the client now pools a connection
	for i := 1; i <= resetCycles; i++ {
		// Every byte value, and a length that differs per cycle, so a
		// short, stale or doubled write shows.
		data := make([]byte, 0, 256*i+16)
		for range i {
			for b := range 256 {
				data = append(data, byte(b))
			}
		}
		data = fmt.Appendf(data, "cycle %d\n", i)
		r.reset(ctx)
		if err := sb.WriteFile(ctx, "reset/data.bin", data); err != nil {
			t.Fatalf("cycle %d: WriteFile after the server reset the idle connections: %v", i, err)
		}
		r.reset(ctx)
		got, err := sb.ReadFile(ctx, "reset/data.bin")
		if err != nil {
			t.Fatalf("cycle %d: ReadFile after the server reset the idle connections: %v", i, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("cycle %d: ReadFile after the server reset the idle connections: %d bytes, want the %d written (first difference at %d)",
				i, len(got), len(data), firstDiff(got, data))
		}
	}
}

// firstDiff returns the index of the first byte where a and b differ, or
// the shorter length when one is a prefix of the other.
func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
