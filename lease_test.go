package sandbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// leaseAtLeast fails t unless sb's lease, as the provider reports it, ends
// at least d from now (less a second for the calls in between).
func leaseAtLeast(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, since time.Time, d time.Duration) time.Time {
	t.Helper()
	in, err := sb.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Measured from a moment before the call that extended the lease: a
	// starved host may take seconds between that call and this check.
	if got := in.LeaseEnd.Sub(since); got < d-time.Second {
		t.Fatalf("lease ends %v after the extending call began, want at least %v", got.Round(time.Second), d)
	}
	return in.LeaseEnd
}

func TestExecExtendsLeaseToCoverTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}, Timeout: 30 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	end := leaseAtLeast(ctx, t, sb, since, 30*time.Minute+sandbox.CommandLeaseGrace)
	if n := len(rt.CallsOf(memory.OpSetTimeout)); n != 1 {
		t.Fatalf("%d SetTimeout calls, want 1", n)
	}
	// A command that fits in the lease the handle knows costs no call.
	gets := len(rt.CallsOf(memory.OpGet))
	if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}, Timeout: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if n, g := len(rt.CallsOf(memory.OpSetTimeout)), len(rt.CallsOf(memory.OpGet)); n != 1 || g != gets {
		t.Fatalf("a command within the lease made %d SetTimeout and %d Get calls, want none", n-1, g-gets)
	}
	if in, _ := sb.Refresh(ctx); in.LeaseEnd.Before(end) {
		t.Fatalf("lease moved back from %v to %v", end, in.LeaseEnd)
	}
	// A lease just extended by the timeout and a minute (as the session
	// package does before a command) is not extended again.
	if err := sb.SetTimeout(ctx, 2*time.Hour+time.Minute); err != nil {
		t.Fatal(err)
	}
	sets := len(rt.CallsOf(memory.OpSetTimeout))
	if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}, Timeout: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if n := len(rt.CallsOf(memory.OpSetTimeout)); n != sets {
		t.Fatalf("a command within a lease just extended for it extended it again (%d calls)", n-sets)
	}
	// The client's default command timeout counts as the command's.
	c2 := sandbox.NewClient(rt, sandbox.WithCommandTimeout(3*time.Hour))
	sb2, err := c2.AttachWith(ctx, sb.ID(), sandbox.AttachOptions{Own: true})
	if err != nil {
		t.Fatal(err)
	}
	since = time.Now()
	if _, err := sb2.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	leaseAtLeast(ctx, t, sb, since, 3*time.Hour)
}

func TestStartExtendsLeaseToCoverTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// Without a Timeout a background process may run for ever: no extension.
	p, err := sb.Start(ctx, sandbox.Command{Args: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(rt.CallsOf(memory.OpSetTimeout)); n != 0 {
		t.Fatalf("Start without a Timeout extended the lease (%d calls)", n)
	}
	since := time.Now()
	p, err = sb.Start(ctx, sandbox.Command{Args: []string{"true"}, Timeout: 45 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	leaseAtLeast(ctx, t, sb, since, 45*time.Minute)
}

// A terminal covers the lease as a background process does: a Timeout is
// covered, no Timeout (it may run for ever) extends nothing, and a handle
// that does not own the sandbox never extends it.
func TestStartTerminalExtendsLeaseToCoverTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	run := func(sb *sandbox.Sandbox, timeout time.Duration) {
		t.Helper()
		term, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"true"}, Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		defer term.Close()
		if _, err := term.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	run(sb, 0)
	if n := len(rt.CallsOf(memory.OpSetTimeout)); n != 0 {
		t.Fatalf("StartTerminal without a Timeout extended the lease (%d calls)", n)
	}
	att, err := c.Attach(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	run(att, 45*time.Minute)
	if n := len(rt.CallsOf(memory.OpSetTimeout)); n != 0 {
		t.Fatalf("StartTerminal through a handle that does not own the sandbox extended the lease (%d calls)", n)
	}
	since := time.Now()
	run(sb, 45*time.Minute)
	leaseAtLeast(ctx, t, sb, since, 45*time.Minute)
}

// maxLeaseRuntime declares a maximum lease over memory.
type maxLeaseRuntime struct {
	*memory.Runtime
	max time.Duration
}

func (r maxLeaseRuntime) Capabilities() driver.Capabilities {
	c := r.Runtime.Capabilities()
	c.MaxLease = r.max
	return c
}

func TestExecLeaseExtensionClampedToMaxLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sandbox.NewClient(maxLeaseRuntime{memory.New(), 10 * time.Minute})
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}, Timeout: 30 * time.Minute}); err != nil {
		t.Fatalf("a command longer than the maximum lease: %v", err)
	}
	end := leaseAtLeast(ctx, t, sb, since, 10*time.Minute)
	if got := time.Until(end); got > 10*time.Minute+time.Second {
		t.Fatalf("lease ends in %v, beyond the maximum of 10m", got)
	}
}

func TestExecOnAttachedHandleLeavesLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	att, err := c.Attach(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := att.Exec(ctx, sandbox.Command{Args: []string{"true"}, Timeout: 30 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if n := len(rt.CallsOf(memory.OpSetTimeout)); n != 0 {
		t.Fatalf("an attached handle's Exec extended its owner's lease (%d calls)", n)
	}
	if in, _ := sb.Refresh(ctx); time.Until(in.LeaseEnd) > time.Minute {
		t.Fatalf("lease ends in %v, want the owner's minute", time.Until(in.LeaseEnd))
	}
}

func TestExecLeaseEndsMidCommand(t *testing.T) {
	t.Parallel()
	for _, auto := range []bool{false, true} {
		t.Run(map[bool]string{false: "Destroyed", true: "AutoPaused"}[auto], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := sandbox.NewClient(memory.New())
			defer c.Close()
			sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: 2 * time.Second, AutoPause: auto})
			if err != nil {
				t.Fatal(err)
			}
			// An attached handle does not extend the lease, so it ends
			// while the command runs.
			att, err := c.Attach(ctx, sb.ID())
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			_, err = att.Exec(ctx, sandbox.Command{Shell: "sleep 30", Timeout: time.Minute})
			if took := time.Since(began); took > 20*time.Second {
				t.Fatalf("Exec returned after %v, long after the lease ended", took)
			}
			if !errors.Is(err, sandbox.ErrLeaseExpired) {
				t.Fatalf("Exec past the lease: %v, want ErrLeaseExpired", err)
			}
			var se *sandbox.Error
			if !errors.As(err, &se) || se.Op != "exec" || se.SandboxID != sb.ID() {
				t.Fatalf("error %#v: want a *sandbox.Error of exec on %s", err, sb.ID())
			}
			want := sandbox.NotFound
			if auto {
				want = sandbox.FailedPrecondition
				if !errors.Is(err, sandbox.ErrPaused) {
					t.Errorf("auto-paused: %v does not match ErrPaused", err)
				}
			}
			if got := sandbox.CodeOf(err); got != want {
				t.Errorf("code %v, want %v", got, want)
			}
		})
	}
}

func TestExecSandboxDestroyedMidCommandIsNotLeaseExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		done <- c.Destroy(ctx, sb.ID())
	}()
	_, err = sb.Exec(ctx, sandbox.Command{Shell: "sleep 30", Timeout: time.Minute})
	if derr := <-done; derr != nil {
		t.Fatal(derr)
	}
	if err == nil || errors.Is(err, sandbox.ErrLeaseExpired) {
		t.Fatalf("Exec on a sandbox destroyed within its lease: %v, want an error other than ErrLeaseExpired", err)
	}
	if gets := rt.CallsOf(memory.OpGet); len(gets) != 0 {
		t.Fatalf("a loss within the known lease looked the sandbox up %d times, want none", len(gets))
	}
}

func TestLifecycleNeedsOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Minute, Labels: map[string]string{"k": "owner"}})
	if err != nil {
		t.Fatal(err)
	}
	before := sb.Info()
	att, err := c.Attach(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	found, created, err := c.GetOrCreate(ctx, sandbox.CreateOptions{Labels: map[string]string{"k": "owner"}})
	if err != nil || created {
		t.Fatalf("GetOrCreate: created %v, %v", created, err)
	}
	for name, h := range map[string]*sandbox.Sandbox{"Attach": att, "GetOrCreate": found} {
		for op, call := range map[string]func() error{
			"pause":       func() error { return h.Pause(ctx) },
			"resume":      func() error { return h.Resume(ctx) },
			"set-timeout": func() error { return h.SetTimeout(ctx, time.Hour) },
		} {
			err := call()
			var se *sandbox.Error
			if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !errors.As(err, &se) || se.Op != op {
				t.Fatalf("%s handle, %s: %v, want FailedPrecondition", name, op, err)
			}
			if !errors.Is(err, sandbox.ErrFailedPrecondition) {
				t.Errorf("%s: %v does not match ErrFailedPrecondition", op, err)
			}
			if msg := err.Error(); !strings.Contains(msg, "AttachOptions") || !strings.Contains(msg, "own") {
				t.Errorf("%s: %q does not say why or what to do", op, msg)
			}
		}
	}
	for _, op := range []string{memory.OpPause, memory.OpResume, memory.OpSetTimeout} {
		if n := len(rt.CallsOf(op)); n != 0 {
			t.Fatalf("a non-owner's refused call reached the provider: %d %s calls", n, op)
		}
	}
	in, err := sb.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if in.State != sandbox.StateRunning || !in.LeaseEnd.Equal(before.LeaseEnd) {
		t.Fatalf("refused calls changed the sandbox: %v until %v, was %v until %v", in.State, in.LeaseEnd, before.State, before.LeaseEnd)
	}
	// The owner, and a handle attached with Own, may.
	own, err := c.AttachWith(ctx, sb.ID(), sandbox.AttachOptions{Own: true})
	if err != nil {
		t.Fatal(err)
	}
	var since time.Time
	for _, h := range []*sandbox.Sandbox{sb, own} {
		since = time.Now()
		if err := h.SetTimeout(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := h.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		if err := h.Resume(ctx); err != nil {
			t.Fatal(err)
		}
	}
	leaseAtLeast(ctx, t, sb, since, time.Hour)
	// GetOrCreate still wakes a paused sandbox it hands out.
	if err := sb.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	found, _, err = c.GetOrCreate(ctx, sandbox.CreateOptions{Labels: map[string]string{"k": "owner"}})
	if err != nil || found.Info().State != sandbox.StateRunning {
		t.Fatalf("GetOrCreate of a paused sandbox: %v, %v", found, err)
	}
}

func TestProcessLeaseEndsWhileRunning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sandbox.NewClient(memory.New())
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	att, err := c.Attach(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	p, err := att.Start(ctx, sandbox.Command{Shell: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := p.Wait(wctx)
	if !errors.Is(err, sandbox.ErrLeaseExpired) || sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Wait on a process whose lease ended: %+v, %v; want ErrLeaseExpired, NotFound", res, err)
	}
}

func TestExecRunsWhenLeaseExtensionFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rt.FailNext(memory.OpSetTimeout, 1, sandbox.Errorf(sandbox.Unavailable, "control plane down"))
	res, err := sb.Exec(ctx, sandbox.Command{Shell: "echo ran", Timeout: 30 * time.Minute})
	if err != nil || string(res.Stdout) != "ran\n" {
		t.Fatalf("Exec after a failed lease extension: %v, %v; want it to run", res, err)
	}
	// A sandbox that is gone fails the call before it runs.
	if err := c.Destroy(ctx, sb.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, sandbox.Command{Shell: "echo ran", Timeout: 30 * time.Minute}); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Exec on a destroyed sandbox: %v, want NotFound", err)
	}
}

// TestStaleLeaseDestroyedIsNotLeaseExpired: a handle whose known lease end
// is stale (the owner extended the lease through another handle) and whose
// sandbox is then destroyed mid-command, past that stale end, hears that
// the sandbox was destroyed, not that its lease ended: the provider says
// why the sandbox ended, and a plain NotFound from it is a Destroy.
func TestStaleLeaseDestroyedIsNotLeaseExpired(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		own     bool // the lease is extended through a second owner (AttachOptions.Own)
		process bool // Start and Wait instead of Exec
		byID    bool // Client.Destroy(id) instead of the owner's Destroy
	}{
		{name: "Exec"},
		{name: "ExecSecondOwnerByID", own: true, byID: true},
		{name: "Wait", process: true},
		{name: "WaitByID", process: true, byID: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := sandbox.NewClient(memory.New())
			defer c.Close()
			owner, err := c.Create(ctx, sandbox.CreateOptions{Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			stale, err := c.Attach(ctx, owner.ID())
			if err != nil {
				t.Fatal(err)
			}
			extender := owner
			if tc.own {
				if extender, err = c.AttachWith(ctx, owner.ID(), sandbox.AttachOptions{Own: true}); err != nil {
					t.Fatal(err)
				}
			}
			if err := extender.SetTimeout(ctx, 10*time.Minute); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2*time.Second + 500*time.Millisecond)
			go func() {
				time.Sleep(300 * time.Millisecond)
				if tc.byID {
					_ = c.Destroy(ctx, owner.ID())
				} else {
					_ = owner.Destroy(ctx)
				}
			}()
			cmd := sandbox.Command{Shell: "sleep 30"}
			if tc.process {
				p, err := stale.Start(ctx, cmd)
				if err != nil {
					t.Fatal(err)
				}
				wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				_, err = p.Wait(wctx)
				if errors.Is(err, sandbox.ErrLeaseExpired) {
					t.Fatalf("Wait on a process whose sandbox was destroyed: %v, want no ErrLeaseExpired", err)
				}
				return
			}
			_, err = stale.Exec(ctx, cmd)
			if err == nil || errors.Is(err, sandbox.ErrLeaseExpired) {
				t.Fatalf("Exec on a sandbox destroyed mid-command: %v, want an error other than ErrLeaseExpired", err)
			}
			if sandbox.CodeOf(err) != sandbox.NotFound && !errors.Is(err, sandbox.ErrOutcomeUnknown) {
				t.Errorf("code %v: %v, want NotFound or outcome unknown", sandbox.CodeOf(err), err)
			}
		})
	}
}

// TestConcurrentExecsExtendTheLeaseOnce: commands started together on a
// lease too short for them wait for one extension rather than each making
// its own (a get and a set-timeout per command, before).
func TestConcurrentExecsExtendTheLeaseOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := memory.New()
	// A slow look-up, as over a network: every command sees the short
	// lease before the first extension is done.
	c := sandbox.NewClient(slowGet{rt})
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			_, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}, Timeout: 30 * time.Minute})
			errs <- err
		}()
	}
	since := time.Now()
	close(start)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if s, g := len(rt.CallsOf(memory.OpSetTimeout)), len(rt.CallsOf(memory.OpGet)); s != 1 || g != 1 {
		t.Fatalf("%d concurrent commands made %d set-timeout and %d get calls, want 1 each", n, s, g)
	}
	leaseAtLeast(ctx, t, sb, since, 30*time.Minute+sandbox.CommandLeaseGrace)
}

// slowGet is the memory provider with a look-up that takes 50 ms.
type slowGet struct{ *memory.Runtime }

func (s slowGet) Get(ctx context.Context, id string) (driver.Info, error) {
	time.Sleep(50 * time.Millisecond)
	return s.Runtime.Get(ctx, id)
}
