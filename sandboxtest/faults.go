package sandboxtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// FaultHooks let the suite inject faults into the fake a provider is
// tested against. Each hook gets a Client that Harness.NewClient returned
// and arms the fault in the fake behind it.
type FaultHooks struct {
	// Stall makes the connection of the next command run through c stall:
	// it stops moving bytes and never closes. Exec/StallIsAnError uses it.
	Stall func(t *testing.T, c *sandbox.Client)
	// FailOutputFetch makes every fetch of a command's output fail, until
	// t ends, for providers that fetch output apart from the command (as
	// Daytona's adapter downloads large outputs from files).
	// Exec/LostOutputIsAnError uses it.
	FailOutputFetch func(t *testing.T, c *sandbox.Client)
	// ResetIdle resets, on the server side and with a TCP RST, every idle
	// kept-alive connection the provider's client behind c holds, before
	// any request on them is read, as a busy server or proxy that drops
	// idle connections does: the client's next request finds its pooled
	// connection dead, and nothing it sends there runs. It returns how
	// many connections it reset. The IdleConnectionsReset subtests
	// (reset.go) use it.
	ResetIdle func(t *testing.T, c *sandbox.Client) int
	// Grace is how long past Command.Timeout the provider's Exec may run
	// whatever its connection does (the provider's documented grace;
	// default 10 s).
	Grace time.Duration
}

func init() {
	execTests = append(execTests,
		test{name: "StallIsAnError", fn: testStallIsAnError, own: true, outsideExcl: true},
		test{name: "LostOutputIsAnError", fn: testLostOutputIsAnError},
	)
}

// stallTimeout is the command timeout of the stall subtests.
const stallTimeout = 3 * time.Second

// testStallIsAnError: a stalled connection ends Exec within
// Command.Timeout plus the provider's grace, with an error; never a
// result (a timeout, an exit code) and a nil error.
func testStallIsAnError(ctx context.Context, t *testing.T, s *suite) {
	if s.h.Faults.Stall == nil {
		t.Skip("the harness cannot make a connection stall (Harness.Faults.Stall is nil)")
	}
	grace := s.h.Faults.Grace
	if grace == 0 {
		grace = 10 * time.Second
	}
	sb := s.create(ctx, t, nil)
	bound := stallTimeout + grace
	ctx, cancel := context.WithTimeout(ctx, bound+30*time.Second)
	defer cancel()
	s.h.Faults.Stall(t, s.c)
	start := time.Now()
	res, err := sb.Exec(ctx, sandbox.Command{Shell: "echo stalled", Timeout: stallTimeout})
	took := time.Since(start)
	t.Logf("stalled Exec returned after %v (bound %v): %v", took.Round(time.Millisecond), bound, err)
	if err == nil {
		t.Fatalf("stalled connection: result %+v with a nil error, want an error", res)
	}
	if ctx.Err() != nil {
		t.Fatalf("stalled connection: Exec returned only when the test's context ended (%v): %v", took, err)
	}
	if code := sandbox.CodeOf(err); code != sandbox.Unavailable {
		t.Errorf("stalled connection: %v: code %v, want Unavailable (outcome unknown)", err, code)
	}
	// Slack for a loaded machine: the bound itself is kept by timers.
	if took > bound+5*time.Second {
		t.Errorf("stalled connection: Exec took %v, want at most Timeout+grace = %v", took, bound)
	}
}

// lostOutputSize is more than a provider is likely to carry inline.
const lostOutputSize = 2 << 20

// testLostOutputIsAnError: when the output of a command that ran cannot
// be fetched, Exec returns an error, not a short result.
func testLostOutputIsAnError(ctx context.Context, t *testing.T, s *suite) {
	if s.h.Faults.FailOutputFetch == nil {
		t.Skip("the harness cannot fail output fetches (Harness.Faults.FailOutputFetch is nil)")
	}
	sb := s.create(ctx, t, nil)
	s.h.Faults.FailOutputFetch(t, s.c)
	// 64 writes of 32 KiB, with printf only.
	line := `i=0; while [ $i -lt 64 ]; do printf '%032768d' 0; i=$((i+1)); done`
	res, err := sb.Exec(ctx, sandbox.Command{Shell: line, MaxOutput: 4 << 20})
	if err == nil {
		t.Fatalf("output fetch failed: %d bytes of stdout (of %d), exit %d and a nil error, want an error", len(res.Stdout), lostOutputSize, res.ExitCode)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("output fetch failed: %v: the test's context ended first", err)
	}
	if code := sandbox.CodeOf(err); code != sandbox.Unavailable {
		t.Errorf("output fetch failed: %v: code %v, want Unavailable (outcome unknown)", err, code)
	}
	if strings.Contains(err.Error(), strings.Repeat("0", 64)) {
		t.Errorf("the error carries the command's output: %.200s", err)
	}
}
