package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// The Terminal group: programs on a pseudo-terminal (Sandbox.StartTerminal)
// behave as in a terminal. It runs where the provider is a
// driver.TerminalRuntime. The shells it types into are POSIX sh; it
// checks output the program printed, never the terminal's echo of what
// was typed (each marker is computed, "$((6*7))", so the echo never
// matches it).
var terminalTests = []test{
	{name: "IsATTY", needs: needsTerminals, fn: testTerminalIsATTY},
	{name: "SizeAndResize", needs: needsTerminals, fn: testTerminalResize},
	{name: "InputReachesRead", needs: needsTerminals, fn: testTerminalRead},
	{name: "TypeAheadReachesShell", needs: needsTerminals, fn: testTerminalTypeAhead},
	{name: "CtrlCInterruptsShellJob", needs: needsTerminals, fn: testTerminalCtrlCShell},
	{name: "CtrlCEndsProgram", needs: needsTerminals, fn: testTerminalCtrlCProgram},
	{name: "ExitStatus", needs: needsTerminals, fn: testTerminalExit},
	{name: "ReadAPI", needs: needsTerminals, fn: testTerminalReadAPI},
	{name: "Reattach", needs: needsTerminals, fn: testTerminalReattach},
	{name: "ReattachAcrossClients", needs: needsTerminalsAcross, fn: testTerminalReattachAcross},
	{name: "SecretsRedacted", needs: needsTerminals, fn: testTerminalSecrets},
	{name: "DestroyEndsTerminal", needs: needsTerminals, fn: testTerminalDestroy},
	{name: "BadInput", needs: needsTerminals, fn: testTerminalBadInput},
}

func needsTerminals(c sandbox.Capabilities) string {
	if !c.Terminals {
		return "provider has no terminals (Capabilities.Terminals=false: not a driver.TerminalRuntime)"
	}
	return ""
}

func needsTerminalsAcross(c sandbox.Capabilities) string {
	if r := needsTerminals(c); r != "" {
		return r
	}
	if !c.AttachAcrossClients {
		return "provider keeps terminals only for the Client that started them (Capabilities.AttachAcrossClients=false)"
	}
	return ""
}

// screen collects a terminal's output for the tests; safe for concurrent
// use.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits until the screen shows want (after from bytes), for at
// most d, and returns the offset just past it.
func (s *screen) waitFor(t *testing.T, want string, from int, d time.Duration) int {
	t.Helper()
	end := time.Now().Add(d)
	for {
		out := s.String()
		if from <= len(out) {
			if i := strings.Index(out[from:], want); i >= 0 {
				return from + i + len(want)
			}
		}
		if time.Now().After(end) {
			t.Fatalf("terminal did not show %q within %v; screen:\n%q", want, d, out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func startTerm(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, opts sandbox.TerminalOptions) (*sandbox.Terminal, *screen) {
	t.Helper()
	scr := &screen{}
	if opts.Output == nil {
		opts.Output = scr
	}
	term, err := sb.StartTerminal(ctx, opts)
	if err != nil {
		t.Fatalf("StartTerminal: %v", err)
	}
	t.Cleanup(func() { _ = term.Close() })
	return term, scr
}

func typeIn(t *testing.T, term *sandbox.Terminal, keys string) {
	t.Helper()
	if _, err := term.Write([]byte(keys)); err != nil {
		t.Fatalf("Write %q: %v", keys, err)
	}
}

func waitTerm(ctx context.Context, t *testing.T, term *sandbox.Terminal, d time.Duration) *sandbox.ExitStatus {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	st, err := term.Wait(wctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return st
}

const termWait = 20 * time.Second

func testTerminalIsATTY(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	term, scr := startTerm(ctx, t, sb, sandbox.TerminalOptions{Rows: 33, Cols: 101,
		Args: []string{"sh", "-c", `if test -t 0 && test -t 1; then echo tty-yes; else echo tty-no; fi; stty size; echo "term=$TERM"; echo "user=$(id -u)."`}})
	st := waitTerm(ctx, t, term, termWait)
	out := scr.String()
	// The terminal's program runs as Exec's commands do.
	if uid, err := sb.Output(ctx, sandbox.Command{Shell: "id -u"}); err == nil {
		if want := "user=" + strings.TrimSpace(string(uid)) + "."; !strings.Contains(out, want) {
			t.Errorf("the terminal's program is not the user Exec runs as (%s); output %q", want, out)
		}
	}
	if !strings.Contains(out, "tty-yes") {
		t.Errorf("test -t 0 && test -t 1 is false on the terminal; output %q", out)
	}
	if !strings.Contains(out, "33 101") {
		t.Errorf("stty size does not show 33 101; output %q", out)
	}
	if !strings.Contains(out, "term=xterm-256color") {
		t.Errorf("TERM is not xterm-256color by default; output %q", out)
	}
	if !st.Success() {
		t.Errorf("exit status %+v, want 0", st)
	}
}

func testTerminalResize(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	term, scr := startTerm(ctx, t, sb, sandbox.TerminalOptions{Args: []string{"sh"}})
	typeIn(t, term, "stty size\r")
	at := scr.waitFor(t, "24 80", 0, termWait) // the default size
	if err := term.Resize(ctx, 40, 132); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	typeIn(t, term, "stty size\r")
	scr.waitFor(t, "40 132", at, termWait)
	typeIn(t, term, "exit\r")
	waitTerm(ctx, t, term, termWait)
}

func testTerminalRead(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	term, scr := startTerm(ctx, t, sb, sandbox.TerminalOptions{Args: []string{"sh", "-c", `echo ready-$((20+1)); read line; echo "got-$line"`}})
	scr.waitFor(t, "ready-21", 0, termWait)
	typeIn(t, term, "hello world\r")
	st := waitTerm(ctx, t, term, termWait)
	scr.waitFor(t, "got-hello world", 0, time.Second)
	if !st.Success() {
		t.Errorf("exit status %+v", st)
	}
}

// A line typed while a command that does not read its input runs is
// read by the shell after it, as in any terminal.
func testTerminalTypeAhead(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	term, scr := startTerm(ctx, t, sb, sandbox.TerminalOptions{Args: []string{"sh"}})
	typeIn(t, term, "echo napping-$((8+1)); sleep 1\r")
	scr.waitFor(t, "napping-9", 0, termWait)
	typeIn(t, term, "echo ahead-$((9+9))\r")
	scr.waitFor(t, "ahead-18", 0, termWait)
	typeIn(t, term, "exit 6\r")
	if st := waitTerm(ctx, t, term, termWait); st.ExitCode != 6 {
		t.Errorf("exit status %+v, want 6", st)
	}
}

func testTerminalCtrlCShell(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	term, scr := startTerm(ctx, t, sb, sandbox.TerminalOptions{Args: []string{"sh"}})
	began := time.Now()
	// The job announces itself: a job-control shell's child takes the
	// terminal before it runs anything, so a Ctrl-C typed once the line
	// shows reaches the job (typed between the shell's fork and that
	// hand-over, it reaches the shell alone, which runs on).
	typeIn(t, term, "sh -c 'echo started-$((1+1)); exec sleep 30'; echo not-interrupted\r")
	at := scr.waitFor(t, "started-2", 0, termWait)
	typeIn(t, term, "\x03")
	typeIn(t, term, "echo alive-$((6*7))\r")
	scr.waitFor(t, "alive-42", at, termWait)
	if d := time.Since(began); d > 25*time.Second {
		t.Errorf("Ctrl-C did not interrupt sleep 30 (the shell answered after %v)", d)
	}
	if strings.Contains(scr.String(), "job control turned off") {
		t.Errorf("the shell found no controlling terminal for job control: %q", scr.String())
	}
	if strings.Contains(scr.String(), "\nnot-interrupted\r\n") {
		t.Errorf("the line went on after Ctrl-C: %q", scr.String())
	}
	typeIn(t, term, "exit 0\r")
	waitTerm(ctx, t, term, termWait)
}

func testTerminalCtrlCProgram(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	// The program announces that it runs: a Ctrl-C before it runs (while
	// the provider still sets up its terminal) may reach nothing.
	term, scr := startTerm(ctx, t, sb, sandbox.TerminalOptions{Args: []string{"sh", "-c", "echo running-$((2+3)); exec sleep 30"}})
	scr.waitFor(t, "running-5", 0, termWait)
	typeIn(t, term, "\x03")
	st := waitTerm(ctx, t, term, 10*time.Second)
	if st.Signal != syscall.SIGINT && st.ExitCode != 130 {
		t.Errorf("sleep after Ctrl-C: %+v, want killed by SIGINT (or exit status 130)", st)
	}
	// Signal reaches the foreground job as well.
	term2, _ := startTerm(ctx, t, sb, sandbox.TerminalOptions{Args: []string{"sleep", "30"}})
	if err := term2.Signal(ctx, syscall.SIGTERM); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	st = waitTerm(ctx, t, term2, 10*time.Second)
	if st.Signal != syscall.SIGTERM && st.ExitCode != 143 {
		t.Errorf("sleep after Signal(SIGTERM): %+v, want killed by SIGTERM (or exit status 143)", st)
	}
}

func testTerminalExit(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	term, _ := startTerm(ctx, t, sb, sandbox.TerminalOptions{Args: []string{"sh"}})
	typeIn(t, term, "exit 3\r")
	st := waitTerm(ctx, t, term, termWait)
	if st.ExitCode != 3 || st.Signal != 0 || st.TimedOut {
		t.Errorf("exit 3: %+v", st)
	}
	again := waitTerm(ctx, t, term, time.Second)
	if *again != *st {
		t.Errorf("second Wait: %+v, first %+v", again, st)
	}
	if _, err := term.Write([]byte("x")); err == nil {
		t.Errorf("Write after the program exited succeeded")
	}
	// A Timeout ends the program and says so.
	tt, _ := startTerm(ctx, t, sb, sandbox.TerminalOptions{Args: []string{"sleep", "30"}, Timeout: 500 * time.Millisecond})
	st = waitTerm(ctx, t, tt, termWait)
	if !st.TimedOut || st.ExitCode != -1 {
		t.Errorf("Timeout: %+v, want TimedOut", st)
	}
}

func testTerminalReadAPI(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	term, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"sh", "-c", "read x; echo out-$x-$((3*3)); exit 7"}})
	if err != nil {
		t.Fatalf("StartTerminal: %v", err)
	}
	defer term.Close()
	var rw io.ReadWriter = term
	if _, err := io.WriteString(rw, "abc\r"); err != nil {
		t.Fatalf("Write: %v", err)
	}
	st := waitTerm(ctx, t, term, termWait)
	if st.ExitCode != 7 {
		t.Errorf("exit status %+v, want 7", st)
	}
	// Every byte is there after Wait, then EOF.
	done := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(term); done <- b }()
	select {
	case b := <-done:
		if !strings.Contains(string(b), "out-abc-9") {
			t.Errorf("Read returned %q, want it to hold out-abc-9", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read did not reach EOF after the program exited")
	}
}

func testTerminalReattach(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	term, _ := startTerm(ctx, t, sb, sandbox.TerminalOptions{Args: []string{"sh"}})
	id := term.ID()
	if id == "" {
		t.Fatal("Terminal.ID is empty")
	}
	check(t, term.Close())
	if _, err := term.Write([]byte("x")); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Write on a closed handle: %v, want ErrClosed", err)
	}
	scr := &screen{}
	att, err := sb.AttachTerminal(ctx, id, scr)
	if err != nil {
		t.Fatalf("AttachTerminal(%q): %v", id, err)
	}
	defer att.Close()
	typeIn(t, att, "echo back-$((5*5))\r")
	scr.waitFor(t, "back-25", 0, termWait)
	typeIn(t, att, "exit 4\r")
	if st := waitTerm(ctx, t, att, termWait); st.ExitCode != 4 {
		t.Errorf("exit status through the attached handle: %+v, want 4", st)
	}
	_, err = sb.AttachTerminal(ctx, "no-such-terminal", nil)
	if !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("AttachTerminal of an unknown id: %v, want ErrNotFound", err)
	}
}

func testTerminalReattachAcross(ctx context.Context, t *testing.T, s *suite) {
	if s.h.SameProvider == nil {
		t.Skip("the harness has no SameProvider to make a second Client on the same provider state")
	}
	sb := s.create(ctx, t, nil)
	c1 := s.h.SameProvider(t, s.c)
	sb1 := must[*sandbox.Sandbox](t, "Attach (first client)")(c1.Attach(ctx, sb.ID()))
	term, err := sb1.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"sh"}})
	if err != nil {
		t.Fatalf("StartTerminal: %v", err)
	}
	id := term.ID()
	check(t, term.Close())
	check(t, c1.Close())
	c2 := s.h.SameProvider(t, s.c)
	defer c2.Close()
	sb2 := must[*sandbox.Sandbox](t, "Attach (second client)")(c2.Attach(ctx, sb.ID()))
	scr := &screen{}
	att, err := sb2.AttachTerminal(ctx, id, scr)
	if err != nil {
		t.Fatalf("AttachTerminal from a second client: %v", err)
	}
	defer att.Close()
	typeIn(t, att, "echo across-$((4*4))\r")
	scr.waitFor(t, "across-16", 0, termWait)
	typeIn(t, att, "exit 5\r")
	if st := waitTerm(ctx, t, att, termWait); st.ExitCode != 5 {
		t.Errorf("exit status: %+v, want 5", st)
	}
}

func testTerminalSecrets(ctx context.Context, t *testing.T, s *suite) {
	const boxSecret, termSecret = "sbx-term-secret-4d2c8e", "sbx-term-own-91af3b"
	// A value of several lines (a private key): a terminal writes each of
	// its newlines as CR LF.
	const keySecret = "-----BEGIN KEY-----\nsbx-term-key-line-7e1c0a\n-----END KEY-----"
	opts := s.labelled(nil)
	opts.SecretEnv = map[string]string{"BOX_SECRET": boxSecret, "KEY_SECRET": keySecret}
	sb := must[*sandbox.Sandbox](t, "Create")(s.c.Create(ctx, opts))
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	// The sandbox's secret is printed in two writes with a pause between,
	// so that it crosses reads of the terminal.
	term, scr := startTerm(ctx, t, sb, sandbox.TerminalOptions{
		SecretEnv: map[string]string{"TERM_SECRET": termSecret},
		Args:      []string{"sh", "-c", `printf 'a=%s' "${BOX_SECRET%??????}"; sleep 0.3; printf '%s\n' "${BOX_SECRET#${BOX_SECRET%??????}}"; echo "b=$TERM_SECRET"; printf 'k=%s\n' "$KEY_SECRET"; echo done-$((2*2))`}})
	waitTerm(ctx, t, term, termWait)
	out := scr.String()
	if !strings.Contains(out, "done-4") {
		t.Fatalf("the program did not run to the end: %q", out)
	}
	for _, sec := range []string{boxSecret, termSecret, "sbx-term-key-line-7e1c0a"} {
		if strings.Contains(out, sec) {
			t.Errorf("terminal output holds a secret: %q", out)
		}
	}
	if strings.Count(out, "[REDACTED]") < 3 {
		t.Errorf("terminal output %q: want the three secrets replaced by [REDACTED]", out)
	}
}

func testTerminalDestroy(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	term, scr := startTerm(ctx, t, sb, sandbox.TerminalOptions{Args: []string{"sh"}})
	typeIn(t, term, "echo up-$((7+1))\r")
	scr.waitFor(t, "up-8", 0, termWait)
	check(t, sb.Destroy(ctx))
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := term.Wait(wctx)
	if wctx.Err() != nil {
		t.Fatalf("Wait did not return after Destroy: %v", err)
	}
	if err == nil && st.Success() {
		t.Errorf("the terminal's shell exited 0 after Destroy: %+v", st)
	}
}

func testTerminalBadInput(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	bad := []struct {
		name string
		opts sandbox.TerminalOptions
	}{
		{"empty program", sandbox.TerminalOptions{Args: []string{""}}},
		{"NUL in args", sandbox.TerminalOptions{Args: []string{"sh", "a\x00b"}}},
		{"bad env name", sandbox.TerminalOptions{Env: map[string]string{"A=B": "x"}}},
		{"negative timeout", sandbox.TerminalOptions{Timeout: -time.Second}},
		{"negative buffer", sandbox.TerminalOptions{BufferSize: -1}},
	}
	for _, b := range bad {
		term, err := sb.StartTerminal(ctx, b.opts)
		if err == nil {
			term.Close()
			t.Errorf("%s: StartTerminal succeeded", b.name)
			continue
		}
		if sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", b.name, err)
		}
	}
	term, _ := startTerm(ctx, t, sb, sandbox.TerminalOptions{Args: []string{"sh"}})
	if err := term.Resize(ctx, 0, 80); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("Resize(0, 80): %v, want InvalidArgument", err)
	}
	if _, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Dir: "no/such/dir"}); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("a missing Dir: %v, want NotFound", err)
	}
	typeIn(t, term, "exit\r")
	waitTerm(ctx, t, term, termWait)
}
