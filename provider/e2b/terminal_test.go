package e2b_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b"
)

// termScreen collects a terminal's output.
type termScreen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *termScreen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// waitFor waits until the output after from holds want and returns the
// offset past it.
func (s *termScreen) waitFor(t *testing.T, want string, from int) int {
	t.Helper()
	end := time.Now().Add(20 * time.Second)
	for {
		s.mu.Lock()
		out := s.buf.String()
		s.mu.Unlock()
		if i := strings.Index(out[min(from, len(out)):], want); i >= 0 {
			return from + i + len(want)
		}
		if time.Now().After(end) {
			t.Fatalf("terminal did not show %q; output %q", want, out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func typeKeys(t *testing.T, term *sandbox.Terminal, keys string) {
	t.Helper()
	if _, err := term.Write([]byte(keys)); err != nil {
		t.Fatalf("Write %q: %v", keys, err)
	}
}

// TestTerminal drives a shell on envd's pty through the adapter and the
// fake (over provider/local, a real pty): the size set at the start and
// by Resize reaches stty, typed input reaches read, Signal(SIGINT) is
// Ctrl-C for the foreground job, the exit status comes from the end
// event, and a second adapter re-attaches by the terminal's ID.
func TestTerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	scr := &termScreen{}
	term, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"sh"}, Rows: 30, Cols: 90, Output: scr})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	if term.ID() != strconv.Itoa(term.PID()) || term.PID() <= 0 {
		t.Errorf("ID %q, PID %d: the ID is the program's pid", term.ID(), term.PID())
	}
	typeKeys(t, term, "stty size\r")
	at := scr.waitFor(t, "30 90", 0)
	if err := term.Resize(ctx, 12, 34); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	typeKeys(t, term, "stty size\r")
	at = scr.waitFor(t, "12 34", at)
	typeKeys(t, term, "read x; echo \"got-$x-$((2*3))\"\r")
	typeKeys(t, term, "typed\r")
	at = scr.waitFor(t, "got-typed-6", at)
	// envd sends only SIGKILL and SIGTERM: SIGINT is typed as Ctrl-C.
	typeKeys(t, term, "echo nap-$((1+2)); sleep 30; echo not-interrupted\r")
	at = scr.waitFor(t, "nap-3", at)
	time.Sleep(200 * time.Millisecond)
	began := time.Now()
	if err := term.Signal(ctx, syscall.SIGINT); err != nil {
		t.Fatalf("Signal(SIGINT): %v", err)
	}
	typeKeys(t, term, "echo back-$((4*4))\r")
	scr.waitFor(t, "back-16", at)
	if d := time.Since(began); d > 20*time.Second {
		t.Errorf("SIGINT did not interrupt sleep (%v)", d)
	}
	if err := term.Signal(ctx, syscall.SIGHUP); !errors.Is(err, sandbox.ErrUnimplemented) {
		t.Errorf("Signal(SIGHUP): %v, want ErrUnimplemented (envd sends only SIGKILL and SIGTERM)", err)
	}

	// The process list names the terminal of its program.
	procs, err := sb.Processes(ctx)
	if err != nil {
		t.Fatalf("Processes: %v", err)
	}
	found := false
	for _, p := range procs {
		if p.PID == term.PID() {
			found = true
			if p.Terminal != term.ID() || !p.Handle {
				t.Errorf("Processes: the terminal's program %+v, want Terminal %q and Handle", p, term.ID())
			}
		} else if p.Terminal != "" {
			t.Errorf("Processes: %+v is no terminal's program", p)
		}
	}
	if !found {
		t.Errorf("Processes %+v does not list the terminal's program %d", procs, term.PID())
	}

	// Re-attach from a second adapter, as another OS process would.
	id := term.ID()
	if err := term.Close(); err != nil {
		t.Fatal(err)
	}
	rt2, err := e2b.New(e2b.WithAPIKey(e.fake.APIKey()), e2b.WithAPIURL(e.fake.APIURL()), e2b.WithSandboxURL(e.fake.SandboxURL()))
	if err != nil {
		t.Fatal(err)
	}
	c2 := sandbox.NewClient(rt2)
	defer c2.Close()
	sb2, err := c2.Attach(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"no-such-terminal", "999999"} {
		if _, err := sb2.AttachTerminal(ctx, bad, nil); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("AttachTerminal(%q): %v, want ErrNotFound", bad, err)
		}
	}
	scr2 := &termScreen{}
	att, err := sb2.AttachTerminal(ctx, id, scr2)
	if err != nil {
		t.Fatalf("AttachTerminal(%q): %v", id, err)
	}
	defer att.Close()
	typeKeys(t, att, "echo again-$((5*5))\r")
	scr2.waitFor(t, "again-25", 0)
	typeKeys(t, att, "exit 3\r")
	st, err := att.Wait(ctx)
	if err != nil || st.ExitCode != 3 || st.Signal != 0 || st.TimedOut {
		t.Fatalf("Wait: %+v, %v; want exit 3", st, err)
	}
	// The program has exited: its pty is gone.
	if _, err := att.Write([]byte("x")); err == nil {
		t.Error("Write after the program exited succeeded")
	}
	if err := att.Resize(ctx, 10, 10); err == nil {
		t.Error("Resize after the program exited succeeded")
	}
}

// A program ended by Ctrl-C reports SIGINT from envd's end event.
func TestTerminalCtrlCStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	scr := &termScreen{}
	term, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"sh", "-c", "echo go-$((3*3)); exec sleep 30"}, Output: scr})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	scr.waitFor(t, "go-9", 0)
	time.Sleep(200 * time.Millisecond)
	typeKeys(t, term, "\x03")
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	st, err := term.Wait(wctx)
	if err != nil || st.Signal != syscall.SIGINT || st.ExitCode != -1 {
		t.Fatalf("Wait after Ctrl-C: %+v, %v; want killed by SIGINT", st, err)
	}
}
