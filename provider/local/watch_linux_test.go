package local

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// At L1 the sandbox shares the host's /proc: its process list is its
// agent's descendants only (never the host's other processes, nor the
// agent), and a zombie (a child its parent never reaps) is left out.
func TestProcessesL1OnlyTheSandbox(t *testing.T) {
	t.Parallel()
	rt := levelRuntime(t, L1)
	c := sandbox.NewClient(rt)
	defer c.Close()
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	// "true &" is forked by the shell, which then becomes sleep: sleep
	// never reaps it, so it stays a zombie while sleep runs.
	p, err := sb.Start(ctx, sandbox.Command{Shell: "true & exec sleep 60"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Kill(ctx); _, _ = p.Wait(ctx) }()
	// The zombie's pid, from the host's /proc (L1 shares it).
	var zombie int
	deadline := time.Now().Add(10 * time.Second)
	for zombie == 0 && time.Now().Before(deadline) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.PID()) + "/task/" + strconv.Itoa(p.PID()) + "/children")
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			st, _ := os.ReadFile("/proc/" + f + "/stat")
			if i := strings.LastIndexByte(string(st), ')'); i > 0 && strings.HasPrefix(string(st[i+1:]), " Z") {
				zombie = pid
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if zombie == 0 {
		t.Fatal("no zombie child appeared")
	}
	list, err := sb.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := rt.readMeta(sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	has := func(pid int) bool {
		return slices.ContainsFunc(list, func(pi sandbox.ProcessInfo) bool { return pi.PID == pid })
	}
	if !has(p.PID()) {
		t.Errorf("the started process %d is not listed: %+v", p.PID(), list)
	}
	if has(os.Getpid()) || has(1) || has(m.AgentPID) {
		t.Errorf("the list holds the host's test process, init or the agent (%d): %+v", m.AgentPID, list)
	}
	if has(zombie) {
		t.Errorf("the zombie %d is listed: %+v", zombie, list)
	}
	for _, pi := range list {
		if pi.PID == p.PID() && (!pi.Handle || strings.Join(pi.Args, " ") != "sleep 60") {
			t.Errorf("started process listed as %+v", pi)
		}
	}
}

// A watch is added as the sandbox's user: a directory it may not read is
// PermissionDenied, not watched with the agent's rights.
func TestWatchUnreadableDir(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs a root host, where the sandbox's commands run as their own unprivileged user")
	}
	rt := levelRuntime(t, L1)
	c := sandbox.NewClient(rt)
	defer c.Close()
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	if sb.Info().Detail["user"] == "" || strings.Contains(sb.Info().Detail["user"], "root") {
		t.Skipf("commands run as root here (%q)", sb.Info().Detail["user"])
	}
	dir := t.TempDir() // root's
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err = sb.Watch(ctx, dir, sandbox.WatchOptions{})
	if sandbox.CodeOf(err) != sandbox.PermissionDenied {
		t.Errorf("watch of a directory the sandbox's user cannot read: %v, want PermissionDenied", err)
	}
}

// A terminal's program is listed as a handle, with its terminal's ID.
func TestProcessesMarkTerminal(t *testing.T) {
	t.Parallel()
	rt := levelRuntime(t, L1)
	c := sandbox.NewClient(rt)
	defer c.Close()
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	term, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	list, err := sb.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list, func(pi sandbox.ProcessInfo) bool { return pi.PID == term.PID() })
	if i < 0 {
		t.Fatalf("the terminal's program %d is not listed: %+v", term.PID(), list)
	}
	if !list[i].Handle || list[i].Terminal != term.ID() {
		t.Errorf("terminal program listed as %+v, want Handle and Terminal %q", list[i], term.ID())
	}
}
