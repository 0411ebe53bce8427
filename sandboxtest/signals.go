package sandboxtest

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// A command, and a terminal's program, start with every signal at its
// default action and none blocked, as in a fresh machine, whatever the
// process that runs the provider ignores: a program started with SIGINT
// and SIGHUP ignored (nohup, a background job of a script) passed that on
// to the commands of local sandboxes, so Ctrl-C in a terminal, a Bash
// cell's interrupt and a hang-up ended nothing there. The check reads
// /proc/self/status, and is skipped where the sandbox has none. It covers
// the standard signals (1 to 31): the first real-time signals belong to
// the C library, which sets its own handlers there, and a program started
// by glibc's posix_spawn (GNU make's recipes, say) inherits 32 and 33
// ignored from it, sandbox or not.
func init() {
	execTests = append(execTests, test{name: "SignalsAtDefault", fn: testExecSignalsAtDefault})
	terminalTests = append(terminalTests, test{name: "SignalsAtDefault", needs: needsTerminals, fn: testTerminalSignalsAtDefault})
	processTests = append(processTests, test{name: "SignalsAtDefault", needs: needsProcesses, fn: testProcessSignalsAtDefault})
}

// statusArgs print the signal masks of the process the provider starts.
// No shell comes between: dash clears its signal mask when it starts.
var statusArgs = []string{"cat", "/proc/self/status"}

func testExecSignalsAtDefault(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	r := must[*sandbox.Result](t, "Exec")(sb.Exec(ctx, sandbox.Command{Args: statusArgs}))
	if r.ExitCode != 0 || !strings.Contains(string(r.Stdout), "SigIgn:") {
		t.Skipf("the sandbox shows no /proc/self/status (exit %d, stderr %q)", r.ExitCode, r.Stderr)
	}
	checkSignalMasks(t, "a command", string(r.Stdout))
}

func testTerminalSignalsAtDefault(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	term, scr := startTerm(ctx, t, sb, sandbox.TerminalOptions{Args: statusArgs})
	st := waitTerm(ctx, t, term, termWait)
	out := scr.String()
	if !st.Success() || !strings.Contains(out, "SigIgn:") {
		t.Skipf("the sandbox shows no /proc/self/status (exit %+v, screen %q)", st, out)
	}
	checkSignalMasks(t, "a terminal's program", out)
}

func testProcessSignalsAtDefault(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	p := must[*sandbox.Process](t, "Start")(sb.Start(ctx, sandbox.Command{Args: statusArgs}))
	r := must[*sandbox.Result](t, "Wait")(p.Wait(ctx))
	if r.ExitCode != 0 || !strings.Contains(string(r.Stdout), "SigIgn:") {
		t.Skipf("the sandbox shows no /proc/self/status (exit %d, stderr %q)", r.ExitCode, r.Stderr)
	}
	checkSignalMasks(t, "a background process", string(r.Stdout))
}

// checkSignalMasks fails unless the SigIgn and SigBlk lines of status
// name none of the standard signals.
func checkSignalMasks(t *testing.T, what, status string) {
	t.Helper()
	const standard = 1<<31 - 1 // bit n-1 is signal n
	for _, key := range []string{"SigIgn:", "SigBlk:"} {
		i := strings.Index(status, key)
		if i < 0 {
			t.Errorf("%s: no %s line in its status %q", what, key, status)
			continue
		}
		v, _, _ := strings.Cut(strings.TrimSpace(status[i+len(key):]), "\n")
		v = strings.TrimSpace(v)
		mask, err := strconv.ParseUint(v, 16, 64)
		if err != nil {
			t.Errorf("%s: %s %q is no mask", what, key, v)
			continue
		}
		if mask&standard != 0 {
			t.Errorf("%s starts with %s %s, want none of signals 1-31: a signal the provider's process ignores or blocks reached it", what, key, v)
		}
	}
}
