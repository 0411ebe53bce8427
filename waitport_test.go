package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// procNetTCP is a /proc/net/tcp listing with one socket listening on port.
func procNetTCP(port int) string {
	return "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		fmt.Sprintf("   0: 00000000:%04X 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0000000000000000 100 0 0 10 0\n", port)
}

func TestWaitForPortFailsAtOnceWhenServerDies(t *testing.T) {
	sb, _ := newSandbox(t, sandbox.CreateOptions{})
	ctx := context.Background() // no deadline: the server's exit, not a bound, must end the wait
	p, err := sb.Start(ctx, sandbox.Command{Shell: "echo listening soon; echo 'Traceback: address already in use' >&2; exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = p.WaitForPort(ctx, 8000)
	took := time.Since(start)
	if err == nil {
		t.Fatal("WaitForPort on a server that exited returned nil")
	}
	// Goal: within one poll interval (at most 1 s); 5× that bounds a
	// loaded host.
	if took > 5*time.Second {
		t.Errorf("WaitForPort took %v to notice the server died", took)
	}
	var ee *sandbox.ExitError
	if !errors.As(err, &ee) || ee.ExitCode != 3 || !strings.Contains(string(ee.Stderr), "address already in use") {
		t.Errorf("errors.As(*ExitError) = %+v from %v; want exit 3 with the stderr tail", ee, err)
	}
	msg := err.Error()
	for _, want := range []string{"port 8000", "exited with code 3", "address already in use"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition {
		t.Errorf("code %v, want FailedPrecondition", sandbox.CodeOf(err))
	}
	// The caller still gets the whole Result.
	if r, err := p.Wait(ctx); err != nil || r.ExitCode != 3 {
		t.Errorf("Wait after WaitForPort = %v, %v", r, err)
	}
}

func TestWaitForPortQuotesABoundedStderrTail(t *testing.T) {
	t.Parallel()
	sb, _ := newSandbox(t, sandbox.CreateOptions{})
	ctx := t.Context()
	p, err := sb.Start(ctx, sandbox.Command{Shell: "i=0; while [ $i -lt 400 ]; do echo 'noise noise noise noise' >&2; i=$((i+1)); done; echo FINAL-LINE >&2; exit 1"})
	if err != nil {
		t.Fatal(err)
	}
	err = sb.WaitForPortWith(ctx, 8000, sandbox.WaitForPortOptions{Process: p})
	if err == nil || !strings.Contains(err.Error(), "FINAL-LINE") || !strings.Contains(err.Error(), "exited with code 1") {
		t.Fatalf("error %v does not end with the server's last stderr line", err)
	}
	if n := len(err.Error()); n > 1500 {
		t.Errorf("error is %d bytes for 10 kB of stderr; want a bounded tail", n)
	}
}

func TestWaitForPortWithoutDeadlineEndsAtItsBound(t *testing.T) {
	sb, _ := newSandbox(t, sandbox.CreateOptions{})
	start := time.Now()
	err := sb.WaitForPortWith(context.Background(), 8123, sandbox.WaitForPortOptions{Timeout: 300 * time.Millisecond})
	took := time.Since(start)
	if err == nil {
		t.Fatal("WaitForPortWith returned nil with nothing listening")
	}
	if took < 300*time.Millisecond || took > 2*time.Second {
		t.Errorf("returned after %v, want about the 300ms bound", took)
	}
	if sandbox.CodeOf(err) != sandbox.DeadlineExceeded {
		t.Errorf("code %v, want DeadlineExceeded", sandbox.CodeOf(err))
	}
	for _, want := range []string{"port 8123", "/proc/net/tcp", "polls", "WaitForPortOptions.Timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if sandbox.DefaultPortWait <= 0 {
		t.Errorf("DefaultPortWait = %v", sandbox.DefaultPortWait)
	}
}

func TestWaitForPortCallerDeadlineSaysWhatWasPolled(t *testing.T) {
	t.Parallel()
	sb, _ := newSandbox(t, sandbox.CreateOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := sb.WaitForPort(ctx, 8124)
	if sandbox.CodeOf(err) != sandbox.DeadlineExceeded || !strings.Contains(err.Error(), "port 8124 not listening after") {
		t.Fatalf("WaitForPort = %v, want DeadlineExceeded saying how long port 8124 was polled", err)
	}
}

func TestWaitForPortHappyPath(t *testing.T) {
	t.Parallel()
	sb, _ := newSandbox(t, sandbox.CreateOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A "server" that makes the port listen after a moment and keeps running.
	if err := sb.WriteFile(ctx, "listing", []byte(procNetTCP(8125))); err != nil {
		t.Fatal(err)
	}
	p, err := sb.Start(ctx, sandbox.Command{Shell: "sleep 0.2; mkdir -p /proc/net; cp listing /proc/net/tcp; sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Kill(context.Background()); _, _ = p.Wait(context.Background()) }()
	if err := p.WaitForPort(ctx, 8125); err != nil {
		t.Fatalf("WaitForPort: %v", err)
	}
}

func TestWaitForPortServerThatHandsOffIsNotAFailure(t *testing.T) {
	t.Parallel()
	sb, _ := newSandbox(t, sandbox.CreateOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The started process makes the port listen and exits 0, as a server
	// that daemonizes does.
	if err := sb.WriteFile(ctx, "listing", []byte(procNetTCP(8126))); err != nil {
		t.Fatal(err)
	}
	p, err := sb.Start(ctx, sandbox.Command{Shell: "mkdir -p /proc/net; cp listing /proc/net/tcp; exit 0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitForPort(ctx, 8126); err != nil {
		t.Fatalf("WaitForPort: %v", err)
	}
}

func TestWaitForPortRefusesAnotherSandboxsProcess(t *testing.T) {
	t.Parallel()
	sb, _ := newSandbox(t, sandbox.CreateOptions{})
	other, err := sb.Client().Create(t.Context(), sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := other.Start(t.Context(), sandbox.Command{Shell: "sleep 5"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Kill(context.Background()); _, _ = p.Wait(context.Background()) }()
	err = sb.WaitForPortWith(t.Context(), 8000, sandbox.WaitForPortOptions{Process: p})
	if sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "process") {
		t.Fatalf("WaitForPortWith with another sandbox's process = %v, want InvalidArgument naming it", err)
	}
}

// TestWaitForPortWaitsForAChildAfterExitZero: a server started as
// "srv &" exits 0 at once and its child listens later; the wait goes on
// until the port listens. When nothing ever does, the wait ends at its
// bound and says the server exited 0.
func TestWaitForPortWaitsForAChildAfterExitZero(t *testing.T) {
	t.Parallel()
	sb, _ := newSandbox(t, sandbox.CreateOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := sb.Start(ctx, sandbox.Command{Shell: "exit 0"})
	if err != nil {
		t.Fatal(err)
	}
	listened := make(chan error, 1)
	go func() {
		if _, err := p.Wait(ctx); err != nil {
			listened <- err
			return
		}
		time.Sleep(300 * time.Millisecond) // the child binds after its parent exited
		listened <- sb.WriteFile(ctx, "/proc/net/tcp", []byte(procNetTCP(8127)))
	}()
	if err := p.WaitForPort(ctx, 8127); err != nil {
		t.Fatalf("WaitForPort after the server exited 0 and its child listened later: %v", err)
	}
	if err := <-listened; err != nil {
		t.Fatal(err)
	}

	q, err := sb.Start(ctx, sandbox.Command{Shell: "exit 0"})
	if err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(ctx, 700*time.Millisecond)
	defer stop()
	err = sb.WaitForPortWith(short, 8128, sandbox.WaitForPortOptions{Process: q})
	if sandbox.CodeOf(err) != sandbox.DeadlineExceeded || !strings.Contains(err.Error(), "exited with code 0") {
		t.Errorf("wait for a port nothing listens on after exit 0: %v; want DeadlineExceeded saying the server exited 0", err)
	}
}
