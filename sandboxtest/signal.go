package sandboxtest

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// The signal subtests: a command or process ended by a signal reports
// ExitCode -1 and, where the provider can tell (Capabilities.ReportsSignal),
// the signal in Result.Signal; a provider that cannot tell reports Signal
// 0, never a wrong signal.
func init() {
	execTests = append(execTests, test{name: "KilledBySignal", fn: testKilledBySignal})
	processTests = append(processTests,
		test{name: "SignalNamed", needs: needsProcesses, fn: testSignalNamed},
		test{name: "SignalTrapped", needs: needsProcesses, fn: testSignalTrapped},
		test{name: "SignalAfterExit", needs: needsProcesses, fn: testSignalAfterExit})
	terminalTests = append(terminalTests, test{name: "SignalAfterExit", needs: needsTerminals, fn: testTerminalSignalAfterExit})
}

// signalPrompt bounds a Signal of a program that has exited: it has
// nothing to deliver, so it needs no wait (5x a generous round trip).
const signalPrompt = 4 * time.Second

// signalExited sends SIGTERM, SIGKILL and Kill to a program that has
// exited and fails unless each returns nil within signalPrompt.
func signalExited(ctx context.Context, t *testing.T, what string, signal func(context.Context, syscall.Signal) error) {
	t.Helper()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		start := time.Now()
		err := signal(ctx, sig)
		if err != nil {
			t.Errorf("Signal(%v) of %s that has exited: %v; want nil (it is already ended: nothing to deliver)", sig, what, err)
		}
		if d := time.Since(start); d > signalPrompt {
			t.Errorf("Signal(%v) of %s that has exited took %v, want under %v (there is nothing to wait for)", sig, what, d.Round(time.Millisecond), signalPrompt)
		}
	}
}

// testSignalAfterExit: Signal and Kill of a process that has exited
// return nil at once and change nothing: a cleanup Kill after Wait, or
// one that races the exit, is harmless, and Wait still tells how the
// process ended. (ErrNotFound is for a sandbox or pid that is unknown.)
func testSignalAfterExit(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	p := must[*sandbox.Process](t, "Start")(sb.Start(ctx, sandbox.Command{Shell: "echo done; exit 4"}))
	defer p.Close()
	r := must[*sandbox.Result](t, "Wait")(p.Wait(ctx))
	signalExited(ctx, t, "a process", p.Signal)
	if err := p.Kill(ctx); err != nil {
		t.Errorf("Kill of a process that has exited: %v, want nil", err)
	}
	again := must[*sandbox.Result](t, "Wait after the signals")(p.Wait(ctx))
	if r.ExitCode != 4 || again.ExitCode != 4 || again.Signal != 0 || string(again.Stdout) != "done\n" {
		t.Errorf("Wait before the signals: exit %d; after: exit %d, Signal %v, stdout %q; want exit 4, no signal, %q both times",
			r.ExitCode, again.ExitCode, again.Signal, again.Stdout, "done\n")
	}

	// Nobody waits: the process has ended (its file is there) or is
	// ending as the signal comes; either way the signal is no error.
	q := must[*sandbox.Process](t, "Start")(sb.Start(ctx, sandbox.Command{Shell: "echo gone > signal-after-exit"}))
	defer q.Close()
	for {
		if _, err := sb.Stat(ctx, "signal-after-exit"); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the process's file never appeared: %v", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := q.Kill(ctx); err != nil {
		t.Errorf("Kill of a process that has ended (or is ending), before any Wait: %v, want nil", err)
	}
	if _, err := q.Wait(ctx); err != nil {
		t.Errorf("Wait after that Kill: %v", err)
	}
}

// testTerminalSignalAfterExit: as testSignalAfterExit, for a terminal's
// program.
func testTerminalSignalAfterExit(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	term, _ := startTerm(ctx, t, sb, sandbox.TerminalOptions{Args: []string{"sh", "-c", "exit 3"}})
	st := waitTerm(ctx, t, term, termWait)
	signalExited(ctx, t, "a terminal's program", term.Signal)
	again := waitTerm(ctx, t, term, termWait)
	if st.ExitCode != 3 || *again != *st {
		t.Errorf("Wait before the signals %+v, after %+v; want exit 3 both times", st, again)
	}
}

// checkSignalled checks r, the Result of a command that sig ended.
// exitCodes are the codes a provider that cannot tell may show besides -1
// (the shell's 128+n).
func checkSignalled(t *testing.T, s *suite, what string, r *sandbox.Result, sig syscall.Signal, exitCodes ...int) {
	t.Helper()
	if r.TimedOut {
		t.Errorf("%s: TimedOut set for a command a signal ended: %+v", what, r)
	}
	if s.caps.ReportsSignal {
		if r.Signal != sig || r.ExitCode != -1 {
			t.Errorf("%s: Signal %d (%v), exit %d; want Signal %d (%v), exit -1 (the provider declares ReportsSignal)",
				what, int(r.Signal), r.Signal, r.ExitCode, int(sig), sig)
		}
		return
	}
	if r.Signal != 0 {
		t.Errorf("%s: Signal %d (%v) from a provider that declares it cannot report signals; want 0", what, int(r.Signal), r.Signal)
	}
	ok := r.ExitCode == -1
	for _, c := range exitCodes {
		ok = ok || r.ExitCode == c
	}
	if !ok {
		t.Errorf("%s: exit %d, want -1 or one of %v", what, r.ExitCode, exitCodes)
	}
}

// testKilledBySignal: a shell that sends itself SIGTERM ends with no
// error, ExitCode -1 and Signal SIGTERM (or, where the provider sees only
// the shell's $?, 143 and Signal 0).
func testKilledBySignal(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	r, err := sb.Exec(ctx, sandbox.Command{Shell: "echo before; kill -TERM $$; echo after"})
	if err != nil {
		t.Fatalf("Exec of a command that a signal ends: %v, want a Result", err)
	}
	checkSignalled(t, s, "kill -TERM $$", r, syscall.SIGTERM, 128+int(syscall.SIGTERM))
	if string(r.Stdout) != "before\n" {
		t.Errorf("stdout %q, want %q", r.Stdout, "before\n")
	}
	if r.Success() {
		t.Error("Success() true for a command a signal ended")
	}
}

// testSignalNamed: a background process ended by Process.Signal reports
// the signal sent, for SIGTERM and SIGKILL.
func testSignalNamed(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		p := startSleeper(ctx, t, sb)
		if err := p.Signal(ctx, sig); err != nil {
			t.Fatalf("Signal(%v): %v", sig, err)
		}
		r := must[*sandbox.Result](t, "Wait")(p.Wait(ctx))
		checkSignalled(t, s, "Signal("+sig.String()+")", r, sig, 128+int(sig))
	}
}

// testSignalTrapped: a process that traps the signal sent and then exits
// on its own reports its own exit code and no signal: the signal was
// handled, it did not end the process (a provider must not infer "killed"
// from having sent a signal).
func testSignalTrapped(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	p := startAnnounced(ctx, t, sb, `trap 'echo trapped; exit 3' TERM; echo started; while :; do sleep 0.1; done`)
	if err := p.Signal(ctx, syscall.SIGTERM); err != nil {
		t.Fatalf("Signal(SIGTERM): %v", err)
	}
	r := must[*sandbox.Result](t, "Wait")(p.Wait(ctx))
	if r.ExitCode != 3 || r.Signal != 0 || r.TimedOut {
		t.Errorf("a process that trapped SIGTERM and exited 3: exit %d, Signal %d (%v), TimedOut %v; want exit 3, Signal 0",
			r.ExitCode, int(r.Signal), r.Signal, r.TimedOut)
	}
	if !strings.Contains(string(r.Stdout), "trapped") {
		t.Errorf("stdout %q: the trap did not run", r.Stdout)
	}
}
