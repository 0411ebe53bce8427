package sandbox_test

import (
	"context"
	"syscall"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// statusRuntime answers every Exec with a fixed ExitStatus.
type statusRuntime struct {
	*memory.Runtime
	st driver.ExitStatus
}

func (s *statusRuntime) Exec(context.Context, string, *driver.Command) (driver.ExitStatus, error) {
	return s.st, nil
}

// TestResultSignal: the portable layer passes the provider's Signal into
// Result.Signal with ExitCode -1, and a timeout reports TimedOut and no
// Signal whatever the provider said.
func TestResultSignal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		st       driver.ExitStatus
		wantCode int
		wantSig  syscall.Signal
		timedOut bool
	}{
		{name: "signal", st: driver.ExitStatus{ExitCode: -1, Signal: syscall.SIGSEGV}, wantCode: -1, wantSig: syscall.SIGSEGV},
		{name: "signal with a stray code", st: driver.ExitStatus{ExitCode: 139, Signal: syscall.SIGSEGV}, wantCode: -1, wantSig: syscall.SIGSEGV},
		{name: "exit", st: driver.ExitStatus{ExitCode: 137}, wantCode: 137},
		{name: "timeout", st: driver.ExitStatus{ExitCode: -1, TimedOut: true, Signal: syscall.SIGKILL}, wantCode: -1, timedOut: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sandbox.NewClient(&statusRuntime{Runtime: memory.New(), st: tc.st})
			defer c.Close()
			ctx := context.Background()
			sb, err := c.Create(ctx, sandbox.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Destroy(ctx)
			r, err := sb.Exec(ctx, sandbox.Command{Shell: "true"})
			if err != nil {
				t.Fatal(err)
			}
			if r.ExitCode != tc.wantCode || r.Signal != tc.wantSig || r.TimedOut != tc.timedOut {
				t.Errorf("Result exit %d signal %d timed out %v; want %d, %d, %v", r.ExitCode, r.Signal, r.TimedOut, tc.wantCode, tc.wantSig, tc.timedOut)
			}
		})
	}
}
