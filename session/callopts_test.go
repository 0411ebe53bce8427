package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

// InstallPackagesWith's timeout is the call's own, shorter or longer than
// Options.InstallTimeout.
func TestInstallPackagesPerCallTimeout(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{InstallTimeout: 50 * time.Millisecond, ReapInterval: -1})
	var ahead time.Duration
	rt.Handle("pip", func(ctx context.Context, c *memory.Call) int {
		if dl, ok := ctx.Deadline(); ok {
			ahead = time.Until(dl)
		}
		if strings.Contains(strings.Join(c.Args, " "), "slow") {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			// A handler woken late (a loaded host) may find both ready,
			// and select picks either: the deadline decides.
			if ctx.Err() != nil {
				return 1
			}
		}
		return 0
	})
	s := mustAcquire(t, m, "k")
	ctx := context.Background()
	if err := s.InstallPackagesWith(ctx, []string{"slow"}, session.InstallOptions{Timeout: time.Hour}); err != nil {
		t.Fatalf("install with a per-call hour over a 50ms default: %v", err)
	}
	if ahead < 50*time.Minute {
		t.Fatalf("install ran with a deadline %v ahead, want the call's hour", ahead)
	}
	err := s.InstallPackagesWith(ctx, []string{"slow-too"}, session.InstallOptions{Timeout: 30 * time.Millisecond})
	if sandbox.CodeOf(err) != sandbox.DeadlineExceeded || !strings.Contains(err.Error(), "timed out after 30ms") {
		t.Fatalf("install with a per-call 30ms: %v, want a timeout naming 30ms", err)
	}
	if err := s.InstallPackages(ctx, "quick"); err != nil || ahead > time.Second {
		t.Fatalf("InstallPackages: %v, deadline %v ahead; want Options.InstallTimeout (50ms)", err, ahead)
	}
}

// The same on the local provider: the install command really runs, with
// the call's timeout.
func TestInstallPackagesPerCallTimeoutLocal(t *testing.T) {
	t.Parallel()
	c := localClients(t)(t)
	ctx := context.Background()
	// The "install command" sleeps; the package names follow as $0 and $@.
	m := session.NewManager(c, session.Options{InstallCommand: []string{"sh", "-c", "sleep 1"}, InstallTimeout: 100 * time.Millisecond})
	defer m.Close(ctx)
	s, err := m.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InstallPackages(ctx, "pkg-a"); sandbox.CodeOf(err) != sandbox.DeadlineExceeded {
		t.Fatalf("install under the 100ms default: %v, want DeadlineExceeded", err)
	}
	if err := s.InstallPackagesWith(ctx, []string{"pkg-b"}, session.InstallOptions{Timeout: time.Minute}); err != nil {
		t.Fatalf("install with a per-call minute: %v", err)
	}
}

// setLease checks SetLease over c: applied at once to the session's
// sandbox, kept by later operations and given to per-call sandboxes made
// later; a shorter lease is refused naming both values.
func setLease(t *testing.T, c *sandbox.Client, otherTemplate string) {
	ctx := context.Background()
	m := session.NewManager(c, session.Options{Create: sandbox.CreateOptions{Timeout: 2 * time.Minute}, ReapInterval: -1})
	defer m.Close(ctx)
	s, err := m.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	leaseLeft := func(sb *sandbox.Sandbox) time.Duration {
		t.Helper()
		in, err := sb.Refresh(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if in.LeaseEnd.IsZero() {
			t.Fatalf("%s reports no lease end", sb.ID())
		}
		return time.Until(in.LeaseEnd)
	}
	if l := leaseLeft(s.Sandbox()); l > 3*time.Minute {
		t.Fatalf("lease %v left before SetLease, want about 2m", l)
	}
	if err := s.SetLease(ctx, 20*time.Minute); err != nil {
		t.Fatalf("SetLease(20m): %v", err)
	}
	if l := leaseLeft(s.Sandbox()); l < 19*time.Minute {
		t.Fatalf("lease %v left after SetLease(20m), want it applied at once", l)
	}
	err = s.SetLease(ctx, 5*time.Minute)
	if sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "5m0s") || !strings.Contains(err.Error(), "20m0s") {
		t.Fatalf("SetLease(5m) after 20m: %v, want InvalidArgument naming both", err)
	}
	if err := s.SetLease(ctx, 0); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Fatalf("SetLease(0): %v", err)
	}
	if _, err := s.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if l := leaseLeft(s.Sandbox()); l < 19*time.Minute {
		t.Fatalf("lease %v left after an Exec, want the session's 20m kept", l)
	}
	v, err := s.ForTemplate(ctx, otherTemplate)
	if err != nil {
		t.Fatalf("ForTemplate(%q): %v", otherTemplate, err)
	}
	if l := leaseLeft(v.Sandbox()); l < 19*time.Minute {
		t.Fatalf("per-call sandbox made after SetLease has %v left, want the session's 20m", l)
	}
	if err := s.SetLease(ctx, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	if l := leaseLeft(v.Sandbox()); l < 29*time.Minute {
		t.Fatalf("per-call sandbox has %v left after SetLease(30m), want it extended too", l)
	}
	// Another session of the manager keeps the manager's lease.
	o, err := m.Acquire(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if l := leaseLeft(o.Sandbox()); l > 3*time.Minute {
		t.Fatalf("another session has %v left, want the manager's 2m", l)
	}
}

func TestSetLeaseMemory(t *testing.T) {
	t.Parallel()
	setLease(t, sandbox.NewClient(memory.New()), "other")
}

func TestSetLeaseLocal(t *testing.T) {
	t.Parallel()
	setLease(t, localClients(t)(t), "default")
}

func TestSetLeaseE2BFake(t *testing.T) {
	t.Parallel()
	setLease(t, e2bClients(t)(t), "base")
}
