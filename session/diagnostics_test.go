package session_test

import (
	"context"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

func TestDiagnostics(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	ctx := context.Background()
	rt.FailNext(memory.OpCreate, 1, notFound("template custom"))
	opts := session.Options{Create: sandbox.CreateOptions{Template: "custom"}, OnMissingTemplate: session.Fallback, ReapInterval: -1}
	m1 := session.NewManager(c, opts)
	s1 := mustAcquire(t, m1, "conv")
	if _, err := s1.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	d := s1.Diagnostics()
	if d.Key != "conv" || d.SandboxID != s1.ID() || d.Provider != "memory" || !d.FallbackTemplateUsed || d.Adopted ||
		d.Workspace != s1.Workspace() || d.LeaseEnd.IsZero() {
		t.Fatalf("created session's diagnostics: %+v", d)
	}
	m2 := session.NewManager(c, session.Options{})
	defer m2.Close(ctx)
	s2 := mustAcquire(t, m2, "conv")
	if d := s2.Diagnostics(); !d.Adopted || d.SandboxID != s1.ID() {
		t.Fatalf("adopted session's diagnostics: %+v", d)
	}
}
