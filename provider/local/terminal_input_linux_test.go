package local

import (
	"bytes"
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// Input the program does not read (a paste into sleep) neither holds up
// the terminal's control frames nor piles up in the agent: the paste's
// Write is held back (here until its context ends), while Resize and
// Ctrl-C (Signal) sent afterwards are applied at once.
func TestTerminalPasteDoesNotBlockControl(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := sandbox.NewClient(levelRuntime(t, L4))
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	tm, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"sleep", "40"}, Output: &termOut{}})
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	// Far more than the window: the agent takes termInputWindow frames,
	// the rest waits in Write.
	paste := bytes.Repeat([]byte("echo pasted line\n"), 4<<20/17)
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	_, werr := tm.WriteContext(wctx, paste)
	wcancel()
	if !errors.Is(werr, context.DeadlineExceeded) {
		t.Fatalf("a 4 MiB paste into a program that does not read: Write returned %v; want it held back until its context ended", werr)
	}
	sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
	defer scancel()
	if err := tm.Resize(sctx, 30, 100); err != nil {
		t.Fatalf("Resize after the paste: %v", err)
	}
	if err := tm.Signal(sctx, syscall.SIGINT); err != nil {
		t.Fatalf("Ctrl-C after the paste: %v", err)
	}
	w2, w2cancel := context.WithTimeout(ctx, 8*time.Second)
	defer w2cancel()
	st, err := tm.Wait(w2)
	if err != nil {
		t.Fatalf("Ctrl-C after a large paste did not end sleep: %v", err)
	}
	if st.Signal != syscall.SIGINT {
		t.Fatalf("sleep ended %+v; want by SIGINT", st)
	}
}

// Input a program reads arrives whole and in order through the window,
// more than it holds at once.
func TestTerminalLargeInputArrivesInOrder(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := sandbox.NewClient(levelRuntime(t, L4))
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	var out termOut
	tm, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"sh", "-c", "stty -echo; sha256sum; echo done"}, Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	var in bytes.Buffer
	for i := 0; in.Len() < 1<<20; i++ {
		in.WriteString("line ")
		in.WriteString(time.Duration(i).String())
		in.WriteString("\n")
	}
	r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"sha256sum"}, Stdin: bytes.NewReader(in.Bytes())})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // stty -echo before the input
	if _, err := tm.WriteContext(ctx, append(in.Bytes(), 4)); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if want := string(bytes.Fields(r.Stdout)[0]); !bytes.Contains([]byte(out.String()), []byte(want)) {
		t.Fatalf("terminal's sha256sum of the input: %q; want %s", out.String(), want)
	}
}
