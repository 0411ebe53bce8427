package sandboxtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

func init() {
	lifecycleTests = append(lifecycleTests,
		test{name: "LeaseCoversCommand", fn: testLeaseCoversCommand},
		test{name: "LifecycleNeedsOwner", fn: testLifecycleNeedsOwner},
	)
}

// createLeased makes a sandbox of the run with a lease of d and destroys
// it at cleanup.
func (s *suite) createLeased(ctx context.Context, t *testing.T, d time.Duration) *sandbox.Sandbox {
	t.Helper()
	opts := s.h.Create
	opts.Timeout = d
	opts.Labels = map[string]string{"sandboxtest": s.runID}
	for k, v := range s.h.Create.Labels {
		opts.Labels[k] = v
	}
	sb, err := s.c.Create(ctx, opts)
	if err != nil {
		t.Fatalf("Create with a lease of %v: %v", d, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sb.Destroy(ctx); err != nil {
			t.Errorf("cleanup Destroy(%s): %v", sb.ID(), err)
		}
	})
	return sb
}

// testLeaseCoversCommand: an Exec whose timeout outlives the lease extends
// the lease of an owned sandbox to cover it (up to the provider's maximum
// lease), and an attached handle's Exec leaves the owner's lease alone.
func testLeaseCoversCommand(ctx context.Context, t *testing.T, s *suite) {
	sb := s.createLeased(ctx, t, time.Minute)
	if sb.Info().LeaseEnd.IsZero() {
		t.Skip("provider reports no lease end: nothing to extend")
	}
	const timeout = 30 * time.Minute
	// The command's effective timeout is also bounded by its context's
	// deadline: give it one past the timeout (the command itself is short).
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*time.Hour)
	defer cancel()
	if _, err := sb.Exec(ectx, sandbox.Command{Args: []string{"true"}, Timeout: timeout}); err != nil {
		t.Fatalf("Exec with Timeout %v: %v", timeout, err)
	}
	want := timeout
	if m := s.caps.MaxLease; m > 0 && m < want {
		want = m
	}
	in := must[sandbox.Info](t, "Refresh")(sb.Refresh(ctx))
	if got := time.Until(in.LeaseEnd); got < want-time.Minute {
		t.Fatalf("after an Exec with Timeout %v on a 1m lease, the lease ends in %v, want at least %v", timeout, got.Round(time.Second), want)
	}
	att := must[*sandbox.Sandbox](t, "Attach")(s.c.Attach(ctx, sb.ID()))
	const long = 3 * time.Hour
	if _, err := att.Exec(ectx, sandbox.Command{Args: []string{"true"}, Timeout: long}); err != nil {
		t.Fatalf("Exec through an attached handle: %v", err)
	}
	in = must[sandbox.Info](t, "Refresh")(sb.Refresh(ctx))
	if got := time.Until(in.LeaseEnd); got > 2*time.Hour {
		t.Fatalf("an attached handle's Exec extended its owner's lease: it ends in %v", got.Round(time.Second))
	}
}

// testLifecycleNeedsOwner: Pause, Resume and SetTimeout on a handle that
// does not own its sandbox fail with FailedPrecondition and change
// nothing; on the owner they work.
func testLifecycleNeedsOwner(ctx context.Context, t *testing.T, s *suite) {
	sb := s.createLeased(ctx, t, 10*time.Minute)
	att := must[*sandbox.Sandbox](t, "Attach")(s.c.Attach(ctx, sb.ID()))
	if att.Owned() {
		t.Fatal("an attached handle is Owned")
	}
	calls := map[string]func() error{"set-timeout": func() error { return att.SetTimeout(ctx, 2*time.Hour) }}
	if s.caps.Pause {
		calls["pause"] = func() error { return att.Pause(ctx) }
		calls["resume"] = func() error { return att.Resume(ctx) }
	}
	for op, call := range calls {
		err := call()
		wantCode(t, err, sandbox.FailedPrecondition, sandbox.ErrFailedPrecondition)
		var se *sandbox.Error
		if errors.As(err, &se); se.Op != op || se.SandboxID != sb.ID() {
			t.Errorf("%s on an attached handle: op %q, id %q", op, se.Op, se.SandboxID)
		}
	}
	in := must[sandbox.Info](t, "Refresh")(sb.Refresh(ctx))
	if in.State != sandbox.StateRunning {
		t.Fatalf("refused calls left the sandbox %v, want running", in.State)
	}
	if !in.LeaseEnd.IsZero() && time.Until(in.LeaseEnd) > time.Hour {
		t.Fatalf("a refused SetTimeout extended the lease: it ends in %v", time.Until(in.LeaseEnd).Round(time.Second))
	}
	if err := sb.SetTimeout(ctx, 20*time.Minute); err != nil {
		t.Fatalf("owner's SetTimeout: %v", err)
	}
	if !s.caps.Pause {
		return
	}
	own := must[*sandbox.Sandbox](t, "AttachWith Own")(s.c.AttachWith(ctx, sb.ID(), sandbox.AttachOptions{Own: true}))
	if err := own.Pause(ctx); err != nil {
		t.Fatalf("Pause through a handle attached with Own: %v", err)
	}
	if in := must[sandbox.Info](t, "Refresh")(sb.Refresh(ctx)); in.State != sandbox.StatePaused {
		t.Fatalf("after the owner's Pause the sandbox is %v", in.State)
	}
	if err := att.Resume(ctx); sandbox.CodeOf(err) != sandbox.FailedPrecondition {
		t.Fatalf("Resume of a paused sandbox through an attached handle: %v, want FailedPrecondition", err)
	}
	if in := must[sandbox.Info](t, "Refresh")(sb.Refresh(ctx)); in.State != sandbox.StatePaused {
		t.Fatalf("a refused Resume left the sandbox %v, want paused", in.State)
	}
	if err := sb.Resume(ctx); err != nil {
		t.Fatalf("owner's Resume: %v", err)
	}
	sh(ctx, t, sb, "true")
}
