package e2b_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
)

// A stream that stalls (no more bytes, the connection stays open) is an
// error saying the outcome is unknown, within Command.Timeout plus
// ExecGrace: never TimedOut with a nil error, although the command ended
// long before its timeout. The stalls go through a Runtime whose grace is
// testGrace, so that the test need not wait ExecGrace for each.
func TestExecStallIsAnError(t *testing.T) {
	t.Parallel()
	const timeout = 3 * time.Second
	bound := timeout + testGrace
	// Each case on a fake of its own (a fault is armed for the fake's next
	// matching call), all at once: each waits out its bound.
	for _, kind := range []struct {
		name string
		k    e2bfake.FaultKind
	}{{"AfterTheStartEvent", e2bfake.StallStream}, {"BeforeTheStartEvent", e2bfake.StallResponse}} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			sb := mustCreate(t, e.client, sandbox.CreateOptions{})
			stalled := attachWithGrace(t, e, sb.ID(), testGrace)
			e.fake.Inject(&e2bfake.Fault{Kind: kind.k, Path: "POST /process.Process/Start"})
			ctx, cancel := context.WithTimeout(context.Background(), 5*bound)
			defer cancel()
			start := time.Now()
			res, err := stalled.Exec(ctx, sandbox.Command{Shell: "echo hi", Timeout: timeout})
			took := time.Since(start)
			t.Logf("returned after %v (bound %v): %v", took.Round(time.Millisecond), bound, err)
			if err == nil {
				t.Fatalf("result %+v and a nil error", res)
			}
			if !errors.Is(err, sandbox.ErrOutcomeUnknown) || sandbox.CodeOf(err) != sandbox.Unavailable {
				t.Errorf("%v (code %v), want ErrOutcomeUnknown (Unavailable)", err, sandbox.CodeOf(err))
			}
			if took > bound+5*time.Second {
				t.Errorf("took %v, want at most %v (+5 s of scheduling slack)", took, bound)
			}
		})
	}
	// envd's own timeout is still a timeout.
	t.Run("CommandTimeout", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		sb := mustCreate(t, e.client, sandbox.CreateOptions{})
		res, err := sb.Exec(ctxT(t), sandbox.Command{Shell: "echo a; sleep 30", Timeout: timeout})
		if err != nil || !res.TimedOut || string(res.Stdout) != "a\n" {
			t.Errorf("command timeout: %+v, %v; want TimedOut with \"a\\n\"", res, err)
		}
	})
}

// blockingReader blocks every Read until released, and counts the Reads
// begun.
type blockingReader struct {
	mu      sync.Mutex
	reads   int
	release chan struct{}
}

func (b *blockingReader) Read(p []byte) (int, error) {
	b.mu.Lock()
	b.reads++
	b.mu.Unlock()
	<-b.release
	return 0, io.EOF
}

func (b *blockingReader) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reads
}

// A command that does not read its Stdin ends, and Exec returns at once
// although the caller's reader blocks; the reader is not read after Exec
// returned.
func TestExecStdinNotReadAfterReturn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	in := &blockingReader{release: make(chan struct{})}
	defer close(in.release)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	res, err := sb.Exec(ctx, sandbox.Command{Shell: "echo done", Stdin: in, Timeout: 30 * time.Second})
	took := time.Since(start)
	t.Logf("blocked stdin: returned after %v", took.Round(time.Millisecond))
	if err != nil || string(res.Stdout) != "done\n" {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	if took > 25*time.Second {
		t.Errorf("Exec waited %v for a Read of Stdin that blocks", took)
	}
	n := in.count()
	select {
	case in.release <- struct{}{}: // the abandoned Read returns
	case <-time.After(time.Second):
	}
	time.Sleep(200 * time.Millisecond)
	if m := in.count(); m != n {
		t.Errorf("%d Reads of Stdin began after Exec returned", m-n)
	}
}

// The same holds for a background process: its Wait tells envd's timeout
// from a stream that stalled (the stall through a Runtime whose grace is
// testGrace, the timeout through one with ExecGrace).
func TestProcessStallIsAnError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	stalled := attachWithGrace(t, e, sb.ID(), testGrace)
	const timeout = 3 * time.Second
	bound := timeout + testGrace
	ctx, cancel := context.WithTimeout(context.Background(), 5*bound)
	defer cancel()
	e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.StallStream, Path: "POST /process.Process/Start"})
	start := time.Now()
	p, err := stalled.Start(ctx, sandbox.Command{Shell: "echo hi", Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	res, err := p.Wait(ctx)
	took := time.Since(start)
	t.Logf("stalled background stream: Wait returned after %v (bound %v): %v", took.Round(time.Millisecond), bound, err)
	if err == nil {
		t.Fatalf("stalled background stream: result %+v and a nil error", res)
	}
	if !errors.Is(err, sandbox.ErrOutcomeUnknown) {
		t.Errorf("stalled background stream: %v, want ErrOutcomeUnknown", err)
	}
	if took > bound+5*time.Second {
		t.Errorf("took %v, want at most %v", took, bound)
	}
	// envd's own timeout is still a timeout.
	p2, err := sb.Start(ctx, sandbox.Command{Shell: "sleep 30", Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	res, err = p2.Wait(ctx)
	if err != nil || !res.TimedOut {
		t.Errorf("background timeout: %+v, %v; want TimedOut", res, err)
	}
}
