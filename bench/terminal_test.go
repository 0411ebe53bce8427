//go:build linux

package bench

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/local"
)

// echoWatch counts the bytes a terminal wrote and wakes the waiter.
type echoWatch struct{ got chan int }

func (e *echoWatch) Write(p []byte) (int, error) {
	e.got <- len(p)
	return len(p), nil
}

// wait waits for n bytes of output.
func (e *echoWatch) wait(b *testing.B, n int) {
	for n > 0 {
		select {
		case k := <-e.got:
			n -= k
		case <-time.After(10 * time.Second):
			b.Fatal("no echo within 10s")
		}
	}
}

// BenchmarkLocalTerminalEcho: a keystroke's round trip through a terminal
// of the sandbox: write one byte, wait for its echo (the sandbox's line
// discipline echoes it; cat is the program reading the terminal), against
// the same on a pseudo-terminal of this process. Target: p50 ≤ 2 ms.
func BenchmarkLocalTerminalEcho(b *testing.B) {
	ctx := context.Background()
	c, rt := localClient(b)
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Destroy(ctx)
	ew := &echoWatch{got: make(chan int, 1024)}
	term, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"cat"}, Output: ew})
	if err != nil {
		b.Fatal(err)
	}
	defer term.Close()
	raw, cleanup := rawPTY(b)
	defer cleanup()
	b.Run(levelName(rt), func(b *testing.B) {
		var tv, tb []time.Duration
		key := []byte{'x'}
		buf := make([]byte, 64)
		for b.Loop() {
			t0 := time.Now()
			if _, err := term.Write(key); err != nil {
				b.Fatal(err)
			}
			ew.wait(b, 1)
			t1 := time.Now()
			if _, err := raw.Write(key); err != nil {
				b.Fatal(err)
			}
			if _, err := raw.Read(buf); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			tv, tb = append(tv, t1.Sub(t0)), append(tb, t2.Sub(t1))
		}
		b.ReportMetric(ms(median(tv)), "p50-ms")
		b.ReportMetric(ms(pct(tv, 0.95)), "p95-ms")
		b.ReportMetric(ms(median(tb)), "raw-p50-ms")
		b.ReportMetric(float64(median(tv))/float64(median(tb)), "x-raw")
	})
	_, _ = term.Write([]byte{4}) // end of input: cat exits
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, _ = term.Wait(wctx)
}

// rawPTY is the baseline: a pseudo-terminal of this process with cat
// reading its slave end.
func rawPTY(b *testing.B) (*os.File, func()) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		b.Skipf("no pseudo-terminal for the baseline: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		b.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		b.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		b.Skipf("opening the baseline's pseudo-terminal: %v", err)
	}
	cmd := exec.Command("cat")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s, s, s
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	s.Close()
	return m, func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		m.Close()
	}
}

// BenchmarkE2BFakeTerminalEcho: a keystroke's round trip through a
// terminal of e2b over e2bfake over provider/local: one byte sent with
// envd's SendInput (ProcessInput.pty), echoed by the sandbox's line
// discipline (cat reads the terminal), back as a pty data event of the
// Start stream. Target: p50 ≤ 5 ms.
func BenchmarkE2BFakeTerminalEcho(b *testing.B) {
	ctx := context.Background()
	loc, err := local.New(local.WithRoot(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer loc.Close()
	_, sb := e2bOver(b, loc)
	ew := &echoWatch{got: make(chan int, 1024)}
	term, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"cat"}, Output: ew})
	if err != nil {
		b.Fatal(err)
	}
	defer term.Close()
	var tv []time.Duration
	key := []byte{'x'}
	for b.Loop() {
		t0 := time.Now()
		if _, err := term.Write(key); err != nil {
			b.Fatal(err)
		}
		ew.wait(b, 1)
		tv = append(tv, time.Since(t0))
	}
	b.ReportMetric(ms(median(tv)), "p50-ms")
	b.ReportMetric(ms(pct(tv, 0.95)), "p95-ms")
	_, _ = term.Write([]byte{4}) // end of input: cat exits
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, _ = term.Wait(wctx)
}
