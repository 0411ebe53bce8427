package sandbox_test

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
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// scriptedTerms is a TerminalRuntime over memory whose terminals write a
// fixed list of chunks to their Output, one Write each, then exit 0: what
// a driver that reads a pseudo-terminal in pieces does.
type scriptedTerms struct {
	*memory.Runtime
	chunks []string
}

func (s *scriptedTerms) StartTerminal(_ context.Context, _ string, req *driver.TerminalRequest) (driver.TerminalHandle, error) {
	h := &scriptedTerm{done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for _, c := range s.chunks {
			_, _ = req.Output.Write([]byte(c))
		}
	}()
	return h, nil
}

func (s *scriptedTerms) AttachTerminal(context.Context, string, string, io.Writer) (driver.TerminalHandle, error) {
	return nil, errors.ErrUnsupported
}

type scriptedTerm struct{ done chan struct{} }

func (h *scriptedTerm) ID() string                                   { return "t1" }
func (h *scriptedTerm) PID() int                                     { return 1 }
func (h *scriptedTerm) Write(context.Context, []byte) error          { return nil }
func (h *scriptedTerm) Resize(context.Context, uint16, uint16) error { return nil }
func (h *scriptedTerm) Signal(context.Context, syscall.Signal) error { return nil }
func (h *scriptedTerm) Close() error                                 { return nil }
func (h *scriptedTerm) Wait(ctx context.Context) (driver.ExitStatus, error) {
	select {
	case <-h.done:
		return driver.ExitStatus{}, nil
	case <-ctx.Done():
		return driver.ExitStatus{}, ctx.Err()
	}
}

// A secret the driver delivers across two writes is still redacted from
// a terminal's output, on the Output writer and through Read.
func TestTerminalRedactsSecretSplitAcrossWrites(t *testing.T) {
	t.Parallel()
	const secret = "tok-terminal-5a9c3e"
	rt := &scriptedTerms{Runtime: memory.New(), chunks: []string{"key=" + secret[:7], secret[7:] + "\r\n", "tail"}}
	c := sandbox.NewClient(rt)
	defer c.Close()
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{SecretEnv: map[string]string{"K": secret}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	var out lockedBuf
	term, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := term.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "key=[REDACTED]\r\ntail" {
		t.Errorf("Output got %q", got)
	}
	term.Close()

	term, err = sb.StartTerminal(ctx, sandbox.TerminalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	if _, err := term.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(term)
	if string(b) != "key=[REDACTED]\r\ntail" {
		t.Errorf("Read got %q", b)
	}
}

// The buffer behind Read keeps at most BufferSize bytes: the oldest go
// and are counted.
func TestTerminalBufferBounded(t *testing.T) {
	t.Parallel()
	rt := &scriptedTerms{Runtime: memory.New(), chunks: []string{strings.Repeat("a", 100), strings.Repeat("b", 30)}}
	c := sandbox.NewClient(rt)
	defer c.Close()
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	term, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{BufferSize: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	if _, err := term.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(term)
	if want := strings.Repeat("a", 20) + strings.Repeat("b", 30); string(b) != want {
		t.Errorf("Read got %q, want the last 50 bytes", b)
	}
	if term.Dropped() != 80 {
		t.Errorf("Dropped = %d, want 80", term.Dropped())
	}
}

// A provider without terminals says so.
func TestTerminalUnimplemented(t *testing.T) {
	t.Parallel()
	c := sandbox.NewClient(bareRuntime{memory.New()})
	defer c.Close()
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	if _, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{}); !errors.Is(err, sandbox.ErrUnimplemented) {
		t.Errorf("StartTerminal: %v, want ErrUnimplemented", err)
	}
	if _, err := sb.AttachTerminal(ctx, "t1", nil); !errors.Is(err, sandbox.ErrUnimplemented) {
		t.Errorf("AttachTerminal: %v, want ErrUnimplemented", err)
	}
}

// Read blocks until output comes, and Close ends a Read that waits.
func TestTerminalReadUnblockedByClose(t *testing.T) {
	t.Parallel()
	c := sandbox.NewClient(memory.New())
	defer c.Close()
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	term, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(term); done <- err }()
	time.Sleep(50 * time.Millisecond)
	term.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ReadAll after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a blocked Read")
	}
	att, err := sb.AttachTerminal(ctx, term.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := att.Signal(ctx, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st, err := att.Wait(ctx)
	if err != nil || st.Signal != syscall.SIGKILL {
		t.Errorf("Wait after SIGKILL: %+v %v", st, err)
	}
	att.Close()
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
