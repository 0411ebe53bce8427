package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// tmux drives one private tmux server (its own socket) for a test, as a
// person at a terminal would: typing keys and reading the screen.
type tmux struct {
	t    *testing.T
	sock string
}

func newTmux(t *testing.T) *tmux {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the shell's tmux test runs the local provider, on Linux")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (apt-get install tmux): the shell's terminal test needs it")
	}
	dir, err := os.MkdirTemp("", "tmx") // short: a unix socket path is at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	tm := &tmux{t: t, sock: dir + "/s"}
	t.Cleanup(func() {
		_ = exec.Command("tmux", "-S", tm.sock, "kill-server").Run()
		os.RemoveAll(dir)
	})
	return tm
}

func (tm *tmux) run(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", tm.sock}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (tm *tmux) screen() string { return tm.run("capture-pane", "-p") }

// waitFor waits until the screen shows want, count times at least.
func (tm *tmux) waitFor(want string, count int) {
	tm.t.Helper()
	end := time.Now().Add(30 * time.Second)
	for {
		s := tm.screen()
		if strings.Count(s, want) >= count {
			return
		}
		if time.Now().After(end) {
			tm.t.Fatalf("the screen did not show %q (%d times) within 30s:\n%s", want, count, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (tm *tmux) keys(keys ...string) {
	tm.t.Helper()
	tm.run(append([]string{"send-keys"}, keys...)...)
}

// shellScript runs the tool's shell in a tmux pane and then reports, on
// the screen, whether the pane's terminal settings were restored and the
// tool's exit status.
func shellScript(bin, url string, args ...string) string {
	return `before=$(stty -g); ` + bin + ` --url ` + url + ` shell ` + strings.Join(args, " ") +
		`; s=$?; if [ "$(stty -g)" = "$before" ]; then echo restored=yes; else echo restored=no; fi; echo exit-status=$s; sleep 600`
}

// TestShellUnderTmux uses "sandbox shell" as a person would: in a tmux
// window of a fixed size it types commands and reads the screen, resizes
// the window, interrupts a sleep with Ctrl-C, and leaves with "exit 3".
func TestShellUnderTmux(t *testing.T) {
	t.Parallel()
	tm := newTmux(t)
	bin := builtBinary(t)
	root := t.TempDir()
	url := "local://" + root
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := sandbox.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())

	tm.run("new-session", "-d", "-x", "100", "-y", "30", "sh", "-c", shellScript(bin, url, sb.ID()))
	tm.keys("echo tty-$((40+2)) && tty", "Enter")
	tm.waitFor("tty-42", 1)
	tm.waitFor("/dev/pts/", 1)
	tm.keys("stty size", "Enter")
	tm.waitFor("30 100", 1)

	// A new window size reaches the program in the sandbox.
	tm.run("resize-window", "-x", "120", "-y", "40")
	time.Sleep(300 * time.Millisecond) // SIGWINCH to the tool, then its Resize
	tm.keys("stty size", "Enter")
	tm.waitFor("40 120", 1)

	// Ctrl-C goes to the sandbox: it interrupts sleep, the shell lives on.
	// The job announces itself: a job-control shell's child takes the
	// terminal before it runs anything, so a Ctrl-C typed once the line
	// shows reaches the job (typed between the shell's fork and that
	// hand-over, it reaches the shell alone, which runs on: a fixed
	// 300 ms after an echo of the shell's own was too short under load).
	tm.keys("sh -c 'echo sleeping-$((3+4)); exec sleep 30'; echo slept-$((1+1))", "Enter")
	tm.waitFor("sleeping-7", 1)
	began := time.Now()
	tm.keys("C-c")
	tm.keys("echo alive-$((5+5))", "Enter")
	tm.waitFor("alive-10", 1)
	if d := time.Since(began); d > 20*time.Second {
		t.Errorf("Ctrl-C did not interrupt sleep 30 (the shell answered after %v)", d)
	}
	if strings.Contains(tm.screen(), "slept-2") {
		t.Errorf("the command line went on after Ctrl-C:\n%s", tm.screen())
	}

	// Its exit status is the tool's, and the terminal is restored.
	tm.keys("exit 3", "Enter")
	tm.waitFor("exit-status=3", 1)
	if !strings.Contains(tm.screen(), "restored=yes") {
		t.Errorf("the terminal's settings were not restored:\n%s", tm.screen())
	}
	// The sandbox named is left as it was.
	if _, err := sb.Refresh(ctx); err != nil {
		t.Errorf("the sandbox is gone after the shell: %v", err)
	}
}

// Without an ID, shell creates a sandbox and destroys it once the shell
// exits.
func TestShellThrowAwaySandbox(t *testing.T) {
	t.Parallel()
	tm := newTmux(t)
	bin := builtBinary(t)
	root := t.TempDir()
	url := "local://" + root
	tm.run("new-session", "-d", "-x", "80", "-y", "24", "sh", "-c", shellScript(bin, url))
	tm.keys("echo in-$((6*7))", "Enter")
	tm.waitFor("in-42", 1)
	tm.keys("exit", "Enter")
	tm.waitFor("exit-status=0", 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := sandbox.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for in, err := range c.List(ctx, sandbox.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("sandbox %s left behind by a shell without ID", in.ID)
	}
}

// With stdin not a terminal, its bytes are typed into the sandbox's
// terminal; the exit status passes through.
func TestShellPipedInput(t *testing.T) {
	t.Parallel()
	for name, url := range providers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out, errb bytes.Buffer
			a := newApp(strings.NewReader("echo piped-$((2*3))\nexit 4\n"), &out, &errb)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code := a.run(ctx, []string{"--url", url, "shell"})
			if code != 4 {
				t.Errorf("exit status %d, want 4; stderr %q", code, errb.String())
			}
			if !strings.Contains(out.String(), "piped-6") {
				t.Errorf("output %q does not hold piped-6", out.String())
			}
		})
	}
}

// Bad usage is refused with InvalidArgument before anything is created.
func TestShellUsage(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	a := newApp(strings.NewReader(""), &out, &errb)
	code := a.run(context.Background(), []string{"--url", "memory://shell-usage", "shell", "a", "b"})
	if code != exitToolFailure || !strings.Contains(errb.String(), "InvalidArgument") {
		t.Errorf("shell a b: exit %d, stderr %q", code, errb.String())
	}
}
