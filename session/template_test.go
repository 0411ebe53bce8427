package session_test

import (
	"context"
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

// countLive counts the sandboxes c's provider lists.
func countLive(t *testing.T, c *sandbox.Client) int {
	t.Helper()
	n := 0
	for _, err := range c.List(context.Background(), sandbox.ListOptions{}) {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		n++
	}
	return n
}

// perCallTemplate checks the per-call template override over the clients
// newClient makes (each one a "process" over the same sandboxes): a call
// with WithTemplate runs in a second sandbox of that template, reused by
// later calls, reattached after a restart, and destroyed with the session.
func perCallTemplate(t *testing.T, newClient func(t *testing.T) *sandbox.Client, tmpl string) {
	ctx := context.Background()
	opts := session.Options{ReapInterval: -1}
	c := newClient(t)
	m := session.NewManager(c, opts)
	defer m.Close(ctx)
	s := mustAcquire(t, m, "k")

	own, err := s.Exec(ctx, sandbox.Command{Shell: "echo own > mark && cat mark"})
	if err != nil || string(own.Stdout) != "own\n" {
		t.Fatalf("Exec on the session's own sandbox: %v, %v", own, err)
	}
	if d := own.Diagnostics; d.SandboxID != s.ID() || d.PerCallTemplate != "" || d.Attempts != 1 {
		t.Fatalf("own result's diagnostics: %+v (session %s)", d, s.ID())
	}
	r, err := s.Exec(ctx, sandbox.Command{Shell: "cat mark 2>/dev/null || echo none"}, session.WithTemplate(tmpl))
	if err != nil {
		t.Fatalf("Exec WithTemplate(%q): %v", tmpl, err)
	}
	d := r.Diagnostics
	if string(r.Stdout) != "none\n" || d.SandboxID == s.ID() || d.SandboxID == "" || d.PerCallTemplate != tmpl ||
		d.Template != tmpl || d.Key != "k" || d.FallbackTemplateUsed || d.Attempts != 1 {
		t.Fatalf("Exec WithTemplate(%q): stdout %q, diagnostics %+v (session %s)", tmpl, r.Stdout, d, s.ID())
	}
	variant := d.SandboxID
	if err := s.WriteFile(ctx, "f.txt", []byte("in variant"), session.WithTemplate(tmpl)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReadFile(ctx, "f.txt", session.WithTemplate(tmpl)); err != nil || string(got) != "in variant" {
		t.Fatalf("ReadFile WithTemplate: %q, %v", got, err)
	}
	if _, err := s.ReadFile(ctx, "f.txt"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadFile of the per-call sandbox's file in the session's own: %v, want not found", err)
	}
	var ran string
	if err := s.Do(ctx, func(_ context.Context, sb *sandbox.Sandbox) error { ran = sb.ID(); return nil }, session.WithTemplate(tmpl)); err != nil || ran != variant {
		t.Fatalf("Do WithTemplate ran on %q (%v), want %s", ran, err, variant)
	}
	v, err := s.ForTemplate(ctx, tmpl)
	if err != nil || v.ID() != variant || v.Key() != "k" {
		t.Fatalf("ForTemplate: %v, %v", v, err)
	}
	if own, err := s.ForTemplate(ctx, ""); err != nil || own != s {
		t.Fatalf("ForTemplate of the session's own template: %v, %v; want the session", own, err)
	}
	if n := countLive(t, c); n != 2 {
		t.Fatalf("%d sandboxes after repeated per-call calls, want 2 (the session's and the template's)", n)
	}

	// Another process reattaches both: the key's own sandbox is never
	// taken for the per-call one, and the per-call one is adopted.
	c2 := newClient(t)
	m2 := session.NewManager(c2, opts)
	defer m2.Close(ctx)
	s2 := mustAcquire(t, m2, "k")
	if s2.ID() != s.ID() {
		t.Fatalf("restart reattached %s, want the session's own %s", s2.ID(), s.ID())
	}
	r2, err := s2.Exec(ctx, sandbox.Command{Args: []string{"cat", "f.txt"}}, session.WithTemplate(tmpl))
	if err != nil || string(r2.Stdout) != "in variant" || r2.Diagnostics.SandboxID != variant || !r2.Diagnostics.Adopted {
		t.Fatalf("per-call Exec after restart: %v, %v", r2, err)
	}
	if n := countLive(t, c2); n != 2 {
		t.Fatalf("%d sandboxes after the restart, want 2", n)
	}
	// Releasing the session destroys its per-call sandbox too.
	if err := m2.Release(ctx, s2); err != nil {
		t.Fatal(err)
	}
	if n := countLive(t, c2); n != 0 {
		t.Fatalf("%d sandboxes left after Release, want 0", n)
	}
}

func TestPerCallTemplateMemory(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	perCallTemplate(t, func(t *testing.T) *sandbox.Client { return sandbox.NewClient(rt) }, "python-3.12")
}

func TestPerCallTemplateLocal(t *testing.T) {
	t.Parallel()
	// local knows one template, "default", which differs from the
	// session's "" (the provider's default) as a name.
	perCallTemplate(t, localClients(t), "default")
}

// A per-call sandbox ends with its session, however the session ends, and
// counts towards MaxLive.
func TestPerCallTemplateEndsWithSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("reaped", func(t *testing.T) {
		clk := &fakeClock{now: time.Unix(1e9, 0)}
		rt := memory.New()
		c := sandbox.NewClient(rt)
		m := session.NewManager(c, session.Options{IdleTimeout: time.Minute, ReapInterval: -1, Clock: clk.Now})
		defer m.Close(ctx)
		s := mustAcquire(t, m, "k")
		if _, err := s.Exec(ctx, sandbox.Command{Args: []string{"true"}}, session.WithTemplate("other")); err != nil {
			t.Fatal(err)
		}
		clk.Add(30 * time.Second)
		// Using the per-call sandbox keeps the session in use.
		if _, err := s.Exec(ctx, sandbox.Command{Args: []string{"true"}}, session.WithTemplate("other")); err != nil {
			t.Fatal(err)
		}
		clk.Add(45 * time.Second)
		if n := m.ReapIdle(ctx); n != 0 {
			t.Fatalf("reaped %d sessions 45 s after the per-call sandbox was used, want 0", n)
		}
		clk.Add(time.Minute)
		if n := m.ReapIdle(ctx); n != 1 || rt.Live() != 0 {
			t.Fatalf("reaped %d, live %d; want 1 and 0", n, rt.Live())
		}
	})
	t.Run("closed", func(t *testing.T) {
		rt := memory.New()
		c := sandbox.NewClient(rt)
		m := session.NewManager(c, session.Options{ReapInterval: -1})
		s := mustAcquire(t, m, "k")
		for _, tmpl := range []string{"a", "b"} {
			if _, err := s.ForTemplate(ctx, tmpl); err != nil {
				t.Fatal(err)
			}
		}
		if rt.Live() != 3 {
			t.Fatalf("live %d, want 3", rt.Live())
		}
		if err := m.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if rt.Live() != 0 {
			t.Fatalf("live %d after Close, want 0", rt.Live())
		}
		if _, err := s.Exec(ctx, sandbox.Command{Args: []string{"true"}}, session.WithTemplate("a")); !errors.Is(err, session.ErrEnded) {
			t.Fatalf("per-call Exec after Close: %v, want ErrEnded", err)
		}
	})
	t.Run("gone", func(t *testing.T) {
		m, rt := newManager(t, session.Options{ReapInterval: -1})
		s := mustAcquire(t, m, "k")
		v, err := s.ForTemplate(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Destroy(ctx, s.ID()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Exec(ctx, sandbox.Command{Args: []string{"true"}}); !errors.Is(err, session.ErrGone) {
			t.Fatalf("Exec on a gone sandbox: %v, want ErrGone", err)
		}
		if rt.Live() != 0 {
			t.Fatalf("live %d after the session's sandbox was found gone, want 0 (its per-call sandbox %s destroyed)", rt.Live(), v.ID())
		}
	})
	t.Run("cap", func(t *testing.T) {
		m, rt := newManager(t, session.Options{MaxLive: 1, ReapInterval: -1})
		s := mustAcquire(t, m, "k")
		if _, err := s.ForTemplate(ctx, "a"); !errors.Is(err, sandbox.ErrLimit) {
			t.Fatalf("per-call sandbox at the MaxLive cap: %v, want ErrLimit", err)
		}
		if rt.Live() != 1 {
			t.Fatalf("live %d, want 1", rt.Live())
		}
	})
	t.Run("invalid", func(t *testing.T) {
		m, rt := newManager(t, session.Options{ReapInterval: -1})
		s := mustAcquire(t, m, "k")
		if _, err := s.Exec(ctx, sandbox.Command{Args: []string{"true"}}, session.WithTemplate("a\nb")); sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Fatalf("control character in a per-call template: %v, want InvalidArgument", err)
		}
		if rt.Live() != 1 {
			t.Fatalf("live %d, want 1", rt.Live())
		}
	})
	t.Run("missing", func(t *testing.T) {
		m, rt := newManager(t, session.Options{ReapInterval: -1})
		s := mustAcquire(t, m, "k")
		rt.FailNext(memory.OpCreate, 1, notFound("template nope"))
		if _, err := s.ForTemplate(ctx, "nope"); sandbox.CodeOf(err) != sandbox.NotFound {
			t.Fatalf("missing per-call template under FailFast: %v, want NotFound", err)
		}
		if rt.Live() != 1 {
			t.Fatalf("live %d, want 1", rt.Live())
		}
	})
}

// Every Exec and Run result says which sandbox ran it and how.
func TestResultDiagnostics(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	ctx := context.Background()
	rt.FailNext(memory.OpCreate, 1, notFound("template custom"))
	m := session.NewManager(c, session.Options{Create: sandbox.CreateOptions{Template: "custom"}, OnMissingTemplate: session.Fallback,
		FallbackTemplate: "base", ReapInterval: -1, LeaseRefreshInterval: time.Hour})
	defer m.Close(ctx)
	s := mustAcquire(t, m, "conv")
	r, err := s.Exec(ctx, sandbox.Command{Args: []string{"echo", "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	d := r.Diagnostics
	if d.Key != "conv" || d.SandboxID != s.ID() || d.Provider != "memory" || d.Template != "base" || !d.FallbackTemplateUsed ||
		d.LeaseEnd.IsZero() || d.Attempts != 1 || d.Workspace != s.Workspace() || d.PerCallTemplate != "" {
		t.Fatalf("Exec result's diagnostics: %+v", d)
	}
	// A sandbox paused behind the session's back refuses the call, which
	// runs again once woken: two attempts.
	if err := rt.Pause(ctx, s.ID()); err != nil {
		t.Fatal(err)
	}
	// (A short command needs no lease extension, which would wake it.)
	r, err = s.Exec(ctx, sandbox.Command{Args: []string{"echo", "hi"}, Timeout: time.Second})
	if err != nil || string(r.Stdout) != "hi\n" {
		t.Fatalf("Exec after pause: %v, %v", r, err)
	}
	if r.Diagnostics.Attempts != 2 {
		t.Fatalf("attempts after a refusal while paused = %d, want 2", r.Diagnostics.Attempts)
	}
	rt.Handle("python3", func(_ context.Context, call *memory.Call) int {
		_, _ = call.Stdout.Write([]byte("ran\n"))
		return 0
	})
	rr, err := s.Run(ctx, "print('ran')", session.RunOptions{})
	if err != nil || string(rr.Stdout) != "ran\n" {
		t.Fatalf("Run: %v, %v", rr, err)
	}
	if d := rr.Diagnostics; d.SandboxID != s.ID() || d.Attempts != 1 || !d.FallbackTemplateUsed {
		t.Fatalf("Run result's diagnostics: %+v", d)
	}
	rv, err := s.Run(ctx, "print('ran')", session.RunOptions{Template: "gpu"})
	if err != nil {
		t.Fatal(err)
	}
	if d := rv.Diagnostics; d.SandboxID == s.ID() || d.PerCallTemplate != "gpu" || d.Template != "gpu" || d.FallbackTemplateUsed {
		t.Fatalf("per-call Run result's diagnostics: %+v", d)
	}
}
