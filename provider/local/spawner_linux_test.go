package local

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/sberrors"
)

// TestSpawnerReplaced kills the spawner and checks that the Runtime starts
// another at once: 20 concurrent sandboxes, created (L2 and above start
// their agent then) and used (L1 starts it on first use), all work.
func TestSpawnerReplaced(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"best", nil},
		{"L1", []Option{WithIsolation(L1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rt := newRuntime(t, tc.opts...)
			c := sandbox.NewClient(rt)
			sb := mustCreate(ctx, t, c, sandbox.CreateOptions{})
			if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
				t.Fatal(err)
			}
			rt.spMu.Lock()
			sp := rt.sp
			rt.spMu.Unlock()
			if sp == nil {
				t.Fatal("no spawner after a sandbox's agent started")
			}
			if err := sp.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			const n = 20
			var ok atomic.Int64
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					sb, err := c.Create(ctx, sandbox.CreateOptions{})
					if err != nil {
						t.Errorf("Create %d after the spawner died: %v", i, err)
						return
					}
					defer func() { _ = sb.Destroy(context.Background()) }()
					r, err := sb.Exec(ctx, sandbox.Command{Shell: "echo ok"})
					if err != nil || string(r.Stdout) != "ok\n" {
						t.Errorf("Exec %d after the spawner died: %v %+v", i, err, r)
						return
					}
					ok.Add(1)
				})
			}
			wg.Wait()
			t.Logf("%d/%d sandboxes created and used after the spawner was killed", ok.Load(), n)
		})
	}
}

// TestStuckAgentIsAnError: when the agent does not report a command's end
// (stopped here), Exec returns an error saying the outcome is unknown,
// not a timeout the agent never reported.
func TestStuckAgentIsAnError(t *testing.T) {
	t.Parallel() // it waits out the client's bound on its own sandbox
	ctx := context.Background()
	rt := newRuntime(t, WithIsolation(L1))
	sb := mustCreate(ctx, t, sandbox.NewClient(rt), sandbox.CreateOptions{})
	if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	m, err := rt.readMeta(sb.ID())
	if err != nil || m.AgentPID == 0 {
		t.Fatalf("no agent: %+v %v", m, err)
	}
	if err := syscall.Kill(m.AgentPID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(m.AgentPID, syscall.SIGCONT)
	start := time.Now()
	r, err := sb.Exec(ctx, sandbox.Command{Shell: "sleep 30", Timeout: time.Second})
	if !errors.Is(err, sberrors.ErrOutcomeUnknown) {
		t.Fatalf("Exec with a stopped agent: %+v, %v; want an error matching ErrOutcomeUnknown", r, err)
	}
	// Goal: the 1 s timeout plus the 10 s the client waits for the agent.
	if took := time.Since(start); took > time.Minute {
		t.Errorf("Exec returned after %v", took)
	}
}
