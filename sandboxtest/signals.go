package sandboxtest

import (
	"context"
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
// /proc/self/status, and is skipped where the sandbox has none.
func init() {
	execTests = append(execTests, test{name: "SignalsAtDefault", fn: testExecSignalsAtDefault})
	terminalTests = append(terminalTests, test{name: "SignalsAtDefault", needs: needsTerminals, fn: testTerminalSignalsAtDefault})
}

// statusScript prints the signal masks of the process that runs it.
const statusScript = "exec cat /proc/self/status"

func testExecSignalsAtDefault(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	r := must[*sandbox.Result](t, "Exec")(sb.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", statusScript}}))
	if r.ExitCode != 0 || !strings.Contains(string(r.Stdout), "SigIgn:") {
		t.Skipf("the sandbox shows no /proc/self/status (exit %d, stderr %q)", r.ExitCode, r.Stderr)
	}
	checkSignalMasks(t, "a command", string(r.Stdout))
}

func testTerminalSignalsAtDefault(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	term, scr := startTerm(ctx, t, sb, sandbox.TerminalOptions{Args: []string{"sh", "-c", statusScript}})
	st := waitTerm(ctx, t, term, termWait)
	out := scr.String()
	if !st.Success() || !strings.Contains(out, "SigIgn:") {
		t.Skipf("the sandbox shows no /proc/self/status (exit %+v, screen %q)", st, out)
	}
	checkSignalMasks(t, "a terminal's program", out)
}

// checkSignalMasks fails unless the SigIgn and SigBlk lines of status are
// all zeros.
func checkSignalMasks(t *testing.T, what, status string) {
	t.Helper()
	for _, key := range []string{"SigIgn:", "SigBlk:"} {
		i := strings.Index(status, key)
		if i < 0 {
			t.Errorf("%s: no %s line in its status %q", what, key, status)
			continue
		}
		v, _, _ := strings.Cut(strings.TrimSpace(status[i+len(key):]), "\n")
		v = strings.TrimSpace(v)
		if strings.Trim(v, "0") != "" {
			t.Errorf("%s starts with %s %s, want none: a signal the provider's process ignores or blocks reached it", what, key, v)
		}
	}
}
