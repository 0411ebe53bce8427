package session_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

// The package step runs on a session already acquired (issue 22 item 9).
func TestInstallPackagesOnAcquiredSession(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{Packages: []string{"numpy"}})
	calls := recordPip(rt, 0)
	s := mustAcquire(t, m, "shared")
	ctx := context.Background()
	if err := s.InstallPackages(ctx, "pandas>=2", "numpy"); err != nil {
		t.Fatal(err)
	}
	got := calls()
	if len(got) != 2 || !slices.Equal(got[1], []string{"pip", "install", "--quiet", "--", "pandas>=2"}) {
		t.Fatalf("pip calls %q, want the setup's and then only pandas", got)
	}
	if err := s.InstallPackages(ctx, "pandas>=2"); err != nil || len(calls()) != 2 {
		t.Fatalf("installing again: %v, %d pip calls; want it skipped", err, len(calls()))
	}
	if !slices.Equal(s.Packages(), []string{"numpy", "pandas>=2"}) {
		t.Fatalf("Packages() = %q", s.Packages())
	}
	if err := s.InstallPackages(ctx, "x; rm -rf /"); sandbox.CodeOf(err) != sandbox.InvalidArgument || len(calls()) != 2 {
		t.Fatalf("injection: %v", err)
	}
}

// A negative InstallTimeout means no timeout of the install's own.
func TestInstallTimeoutNegativeMeansNone(t *testing.T) {
	t.Parallel()
	var ahead time.Duration
	m, rt := newManager(t, session.Options{Packages: []string{"numpy"}, InstallTimeout: -1})
	rt.Handle("pip", func(ctx context.Context, _ *memory.Call) int {
		if dl, ok := ctx.Deadline(); ok {
			ahead = time.Until(dl)
		}
		return 0
	})
	mustAcquire(t, m, "k")
	if ahead < time.Hour {
		t.Fatalf("install ran with a deadline %v ahead; want none of its own (NoTimeoutBound, %v)", ahead, session.NoTimeoutBound)
	}
}
