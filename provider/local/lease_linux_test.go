//go:build linux

package local

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// recorder is a slog.Handler that keeps the messages it is given.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}

func (r *recorder) has(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if strings.Contains(m, sub) {
			return true
		}
	}
	return false
}

// TestOpenLoggerReachesProvider: the logger given to sandbox.Open
// receives the local provider's own events, here the lease it enforces.
func TestOpenLoggerReachesProvider(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	c, err := sandbox.Open(ctx, "local://"+t.TempDir()+"?isolation=l1", sandbox.WithLogger(slog.New(rec)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Runtime().SetTimeout(ctx, sb.ID(), 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, err := sb.Refresh(ctx); return sandbox.CodeOf(err) == sandbox.NotFound })
	if !rec.has("lease ended") {
		t.Fatalf("the provider's lease event did not reach the logger given to Open; got %q", rec.msgs)
	}
}

// TestExecLeaseEndsMidCommand: a command still running when the lease
// ends fails with an error matching ErrLeaseExpired, not only "the agent
// went away".
func TestExecLeaseEndsMidCommand(t *testing.T) {
	t.Parallel() // waits out a lease on a Runtime of its own
	ctx := context.Background()
	rt := newRuntime(t, WithIsolation(L1), WithReapInterval(100*time.Millisecond))
	c := sandbox.NewClient(rt)
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy(ctx, sb.ID())
	if err := rt.SetTimeout(ctx, sb.ID(), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	// An attached handle runs within the owner's lease: it does not extend it.
	att, err := c.Attach(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	res, err := att.Exec(ctx, sandbox.Command{Args: []string{"sleep", "60"}, Timeout: 2 * time.Minute})
	if took := time.Since(began); took > 45*time.Second {
		t.Fatalf("Exec returned after %v, long after the lease ended", took)
	}
	if !errors.Is(err, sandbox.ErrLeaseExpired) || sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Exec past the lease: %v (code %v), want ErrLeaseExpired, NotFound", err, sandbox.CodeOf(err))
	}
	// Which comes first decides the form: the agent reports the command
	// killed (a Result with the error), or the connection to it breaks
	// (the error alone); both match ErrLeaseExpired.
	if res != nil && res.Signal == 0 && res.ExitCode == 0 {
		t.Fatalf("Exec past the lease: Result %+v, want the killed command's", res)
	}
}

// TestStaleLeaseDestroyedIsNotLeaseExpired: a handle whose known lease end
// went stale (the owner extended the lease through another handle) does
// not report a Destroy mid-command, past that stale end, as the end of the
// lease: the provider knows it did not end the sandbox for its lease.
func TestStaleLeaseDestroyedIsNotLeaseExpired(t *testing.T) {
	t.Parallel() // waits out a lease on a Runtime of its own
	ctx := context.Background()
	rt := newRuntime(t, WithIsolation(L1))
	c := sandbox.NewClient(rt)
	owner, err := c.Create(ctx, sandbox.CreateOptions{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy(ctx, owner.ID())
	stale, err := c.Attach(ctx, owner.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.SetTimeout(ctx, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3*time.Second + 500*time.Millisecond)
	go func() {
		time.Sleep(time.Second)
		_ = owner.Destroy(ctx)
	}()
	ectx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	res, err := stale.Exec(ectx, sandbox.Command{Args: []string{"sleep", "30"}})
	if errors.Is(err, sandbox.ErrLeaseExpired) {
		t.Fatalf("Exec on a sandbox destroyed mid-command: %v, want an error other than ErrLeaseExpired", err)
	}
	// Destroy kills the command: the agent reports it killed (a Result)
	// or the connection to it breaks (an error).
	if err == nil && res.Signal == 0 && res.ExitCode == 0 {
		t.Fatalf("Exec on a sandbox destroyed mid-command: %+v, want the killed command or an error", res)
	}
}

// TestLeaseEndedMessage: the error of a command whose lease ended says so
// in one line, without the agent connection's account of the loss, and a
// command on a handle after its own Destroy says the sandbox is gone, not
// that extending its lease failed.
func TestLeaseEndedMessage(t *testing.T) {
	t.Parallel() // waits out a lease on a Runtime of its own
	ctx := context.Background()
	rt := newRuntime(t, WithIsolation(L1), WithReapInterval(100*time.Millisecond))
	c := sandbox.NewClient(rt)
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy(ctx, sb.ID())
	att, err := c.Attach(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	_, err = att.Exec(ctx, sandbox.Command{Args: []string{"sleep", "60"}, Timeout: 2 * time.Minute})
	if !errors.Is(err, sandbox.ErrLeaseExpired) || sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Exec past the lease: %v, want ErrLeaseExpired, NotFound", err)
	}
	msg := err.Error()
	for _, w := range []string{"EOF", "outcome unknown", "went away", "local: "} {
		if strings.Contains(msg, w) {
			t.Errorf("lease error says %q: %s", w, msg)
		}
	}
	if !strings.Contains(msg, "the lease ended at") || strings.Count(msg, sb.ID()) != 1 {
		t.Errorf("lease error does not say once what happened: %s", msg)
	}

	own, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = own.Exec(ctx, sandbox.Command{Args: []string{"true"}, Timeout: 10 * time.Minute})
	if sandbox.CodeOf(err) != sandbox.NotFound || strings.Contains(err.Error(), "lease") {
		t.Errorf("Exec after Destroy: %v, want NotFound without the lease extension", err)
	}
}
