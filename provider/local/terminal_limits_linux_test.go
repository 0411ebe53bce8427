package local

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/sberrors"
)

// One sandbox that opens pseudo-terminals until the kernel refuses takes
// only its own share (its devpts instance's max=): another sandbox still
// gets a terminal, and the first one's own StartTerminal says why it
// cannot.
func TestTerminalPtysBoundedPerSandbox(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := sandbox.NewClient(levelRuntime(t, L4))
	defer c.Close()
	a, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Destroy(context.Background())
	b, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy(context.Background())
	// Several processes, so that the open-files limit is not what stops
	// them first.
	script := `import os, sys, time
total = 0
for w in range(6):
    r, wr = os.pipe()
    if os.fork() == 0:
        os.close(r)
        fds = []
        try:
            while True:
                fds.append(os.open("/dev/ptmx", os.O_RDWR|os.O_NOCTTY))
        except OSError as e:
            os.write(wr, b"%d %d" % (len(fds), e.errno))
        os.close(wr)
        time.sleep(60)
        os._exit(0)
    os.close(wr)
    n, errno = os.read(r, 100).split()
    total += int(n)
    if int(n) == 0:
        break
print(total, flush=True)
open("ready", "w").write(str(total))
time.sleep(60)
`
	var out termOut
	p, err := a.Start(ctx, sandbox.Command{Args: []string{"python3", "-c", script}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill(context.Background())
	var held string
	for i := 0; i < 600 && held == ""; i++ {
		// The script creates the file, then writes it: empty is not ready.
		if bs, err := a.ReadFile(ctx, "ready"); err == nil && len(bs) > 0 {
			held = string(bs)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if held == "" {
		t.Fatalf("the opener did not finish: %s", out.String())
	}
	var n int
	fmt.Sscan(held, &n)
	if n == 0 || n > sandboxPtys() {
		t.Fatalf("sandbox a opened %d pseudo-terminals; want 1..%d", n, sandboxPtys())
	}
	tm, err := b.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"true"}})
	if err != nil {
		t.Fatalf("sandbox b cannot start a terminal while sandbox a holds %d: %v", n, err)
	}
	if _, err := tm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = a.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"true"}})
	if sberrors.CodeOf(err) != sberrors.ResourceExhausted || !strings.Contains(err.Error(), fmt.Sprint(sandboxPtys())) {
		t.Fatalf("StartTerminal in the sandbox holding all its terminals: %v; want ResourceExhausted naming %d", err, sandboxPtys())
	}
}

// At L1 terminals come from the host's /dev/ptmx: the agent opens at most
// sandboxPtys of them for one sandbox and refuses the next with
// ResourceExhausted naming the cap; one ending makes room again.
func TestTerminalCapAtHostPtmx(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := sandbox.NewClient(levelRuntime(t, L1))
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	limit := sandboxPtys()
	var tms []*sandbox.Terminal
	defer func() {
		for _, tm := range tms {
			_ = tm.Signal(context.Background(), 9)
			_ = tm.Close()
		}
	}()
	for i := 0; i < limit; i++ {
		tm, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"sleep", "60"}, Output: &termOut{}})
		if err != nil {
			t.Fatalf("terminal %d of %d: %v", i+1, limit, err)
		}
		tms = append(tms, tm)
	}
	_, err = sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"true"}, Output: &termOut{}})
	if sberrors.CodeOf(err) != sberrors.ResourceExhausted || !strings.Contains(err.Error(), fmt.Sprint(limit)) {
		t.Fatalf("terminal %d: %v; want ResourceExhausted naming the cap %d", limit+1, err, limit)
	}
	if err := tms[0].Signal(ctx, 9); err != nil {
		t.Fatal(err)
	}
	if _, err := tms[0].Wait(ctx); err != nil {
		t.Fatal(err)
	}
	tm, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"true"}, Output: &termOut{}})
	if err != nil {
		t.Fatalf("a terminal after one ended: %v", err)
	}
	_, _ = tm.Wait(ctx)
}
