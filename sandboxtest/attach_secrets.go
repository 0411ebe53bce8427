package sandboxtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// Secrets given to one command or terminal (Command.SecretEnv,
// TerminalOptions.SecretEnv) stay redacted where the handle that started
// it shows that command again: an attach to it, and Processes. An attach
// from another handle redacts the secrets it is given
// (AttachProcessOptions, AttachTerminalOptions).
func init() {
	terminalTests = append(terminalTests, test{name: "AttachRedactsTerminalSecrets", needs: needsTerminals, fn: testTerminalAttachSecrets})
	processTests = append(processTests, test{name: "AttachRedactsCommandSecrets", needs: needsProcesses, fn: testProcessAttachSecrets})
	processListTests = append(processListTests, test{name: "RedactCommandSecrets", needs: needsProcessList, fn: testProcessesCommandSecrets})
}

func testTerminalAttachSecrets(ctx context.Context, t *testing.T, s *suite) {
	const secret = "sbx-attach-term-6e1f0a"
	sb := s.create(ctx, t, nil)
	term, _ := startTerm(ctx, t, sb, sandbox.TerminalOptions{Args: []string{"sh"}, SecretEnv: map[string]string{"TERM_SECRET": secret}})
	id := term.ID()
	check(t, term.Close())
	// The same handle: it knows the terminal's secret.
	scr := &screen{}
	att := must[*sandbox.Terminal](t, "AttachTerminal")(sb.AttachTerminal(ctx, id, scr))
	defer att.Close()
	typeIn(t, att, "echo \"v=$TERM_SECRET\"; echo one-$((3*3))\r")
	scr.waitFor(t, "one-9", 0, termWait)
	if strings.Contains(scr.String(), secret) {
		t.Errorf("the terminal's SecretEnv value in clear through an attach from the handle that started it: %q", scr.String())
	}
	check(t, att.Close())
	// Another handle, given the secret.
	other := must[*sandbox.Sandbox](t, "Attach")(s.c.Attach(ctx, sb.ID()))
	scr2 := &screen{}
	att2 := must[*sandbox.Terminal](t, "AttachTerminalWith")(other.AttachTerminalWith(ctx, id, sandbox.AttachTerminalOptions{
		Output: scr2, SecretEnv: map[string]string{"TERM_SECRET": secret}}))
	defer att2.Close()
	typeIn(t, att2, "echo \"v=$TERM_SECRET\"; echo two-$((4*4))\r")
	scr2.waitFor(t, "two-16", 0, termWait)
	if strings.Contains(scr2.String(), secret) {
		t.Errorf("the secret given to AttachTerminalWith in clear: %q", scr2.String())
	}
	typeIn(t, att2, "exit\r")
	waitTerm(ctx, t, att2, termWait)
}

func testProcessAttachSecrets(ctx context.Context, t *testing.T, s *suite) {
	const secret = "sbx-attach-proc-2b7d94"
	sb := s.create(ctx, t, nil)
	n := 0
	run := func(name string, attach func(pid int, out *screen) (*sandbox.Process, error)) {
		// The command prints only once the test, attached, writes its
		// gate file: however slow the attach, it sees that output.
		n++
		gate := fmt.Sprintf("attach-gate-%d", n)
		p := must[*sandbox.Process](t, "Start")(sb.Start(ctx, sandbox.Command{
			Shell:     `while [ ! -e ` + gate + ` ]; do sleep 0.05; done; echo "v=$TOK"; echo end`,
			SecretEnv: map[string]string{"TOK": secret}}))
		defer p.Close()
		out := &screen{}
		att := must[*sandbox.Process](t, name)(attach(p.PID(), out))
		check(t, sb.WriteFile(ctx, gate, nil))
		r := must[*sandbox.Result](t, "Wait attached")(att.Wait(ctx))
		if !strings.Contains(string(r.Stdout), "end") {
			t.Fatalf("%s: the attach saw %q; want the output after it", name, r.Stdout)
		}
		if strings.Contains(string(r.Stdout), secret) || strings.Contains(out.String(), secret) {
			t.Errorf("%s: the command's SecretEnv value in clear: Result %q, stream %q", name, r.Stdout, out.String())
		}
	}
	run("AttachProcess from the starting handle", func(pid int, out *screen) (*sandbox.Process, error) {
		return sb.AttachProcess(ctx, pid, out, nil)
	})
	other := must[*sandbox.Sandbox](t, "Attach")(s.c.Attach(ctx, sb.ID()))
	run("AttachProcessWith from another handle", func(pid int, out *screen) (*sandbox.Process, error) {
		return other.AttachProcessWith(ctx, pid, sandbox.AttachProcessOptions{Stdout: out, SecretEnv: map[string]string{"TOK": secret}})
	})
}

func testProcessesCommandSecrets(ctx context.Context, t *testing.T, s *suite) {
	const secret = "sbx-ps-secret-83c1d5"
	sb := s.create(ctx, t, nil)
	// The shell expands the secret into the arguments of the process it
	// starts.
	p := must[*sandbox.Process](t, "Start")(sb.Start(ctx, sandbox.Command{Shell: `sh -c 'sleep 30; true' "$TOK"`,
		SecretEnv: map[string]string{"TOK": secret}}))
	defer func() { _ = p.Kill(context.Background()); p.Close() }()
	deadline := time.Now().Add(30 * time.Second) // a bound for a loaded host, not a goal
	for {
		ps := must[[]sandbox.ProcessInfo](t, "Processes")(sb.Processes(ctx))
		seen := false
		for _, pi := range ps {
			line := strings.Join(pi.Args, " ")
			if strings.Contains(line, secret) {
				t.Fatalf("the command's SecretEnv value in clear in Processes: pid %d %q", pi.PID, line)
			}
			seen = seen || strings.Contains(line, "sleep 30")
		}
		if seen {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the started command is not in Processes after 30s: %+v", ps)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
