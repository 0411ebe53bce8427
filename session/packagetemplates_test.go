package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

// wantMismatch checks err is the PackageTemplates refusal naming each of
// names.
func wantMismatch(t *testing.T, what string, err error, names ...string) {
	t.Helper()
	if !errors.Is(err, session.ErrTemplateMismatch) || sandbox.CodeOf(err) != sandbox.FailedPrecondition {
		t.Fatalf("%s: %v (code %v), want ErrTemplateMismatch, FailedPrecondition", what, err, sandbox.CodeOf(err))
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("%s: error %q does not name %q", what, err, n)
		}
	}
}

// A package tied to the requested template is refused on the fallback:
// the sandbox is destroyed and nothing is installed.
func TestPackageTemplatesRefuseFallback(t *testing.T) {
	t.Parallel()
	opts := session.Options{
		Create:            sandbox.CreateOptions{Template: "custom"},
		OnMissingTemplate: session.Fallback,
		FallbackTemplate:  "base",
		Packages:          []string{"requests", "Native_Tools[fast]>=2"},
		PackageTemplates:  map[string]string{"native-tools": "custom"},
		ReapInterval:      -1,
	}
	m, rt := newManager(t, opts)
	calls := recordPip(rt, 0)
	ctx := context.Background()

	// The requested template exists: installed as usual.
	s := mustAcquire(t, m, "ok")
	if len(calls()) != 1 {
		t.Fatalf("pip calls %q, want one", calls())
	}

	rt.FailNext(memory.OpCreate, 1, notFound("template custom"))
	_, err := m.Acquire(ctx, "fell-back")
	wantMismatch(t, "Acquire on the fallback", err, "Native_Tools[fast]>=2", `"custom"`, `"base"`, "fallback")
	if rt.Live() != 1 || len(calls()) != 1 {
		t.Fatalf("after the refusal: %d live sandboxes (want the first only), pip calls %q", rt.Live(), calls())
	}

	// A per-call template is another template too: its sandbox is
	// destroyed, the session's own kept.
	_, err = s.ForTemplate(ctx, "other")
	wantMismatch(t, "ForTemplate(other)", err, `"other"`, `"custom"`)
	if rt.Live() != 1 {
		t.Fatalf("%d live sandboxes after the per-call refusal, want 1", rt.Live())
	}

	// Installing later follows the rule as well, and keeps the sandbox.
	b := mustAcquire(t, session.NewManager(m.Client(), session.Options{Create: sandbox.CreateOptions{Template: "base"},
		PackageTemplates: map[string]string{"native.tools": "custom"}, ReapInterval: -1}), "later")
	err = b.InstallPackagesWith(ctx, []string{"native-tools"}, session.InstallOptions{})
	wantMismatch(t, "InstallPackages on base", err, "native-tools", `"custom"`, `"base"`)
	if _, err := b.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
		t.Fatalf("the session's sandbox was not kept: %v", err)
	}
}

// A sandbox a previous process left for the key on another template is
// refused on reattach and destroyed; a fresh one is made on the
// requested template, and refused too when that is still the wrong one.
func TestPackageTemplatesRefuseReattach(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	recordPip(rt, 0)
	c := sandbox.NewClient(rt)
	ctx := context.Background()
	if _, err := c.Create(ctx, sandbox.CreateOptions{Template: "base", Labels: map[string]string{session.DefaultLabelKey: "k"}}); err != nil {
		t.Fatal(err)
	}
	m := session.NewManager(c, session.Options{Create: sandbox.CreateOptions{Template: "gpu"}, Packages: []string{"numpy"},
		PackageTemplates: map[string]string{"numpy": "gpu"}, ReapInterval: -1})
	defer m.Close(ctx)
	s, err := m.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if s.Adopted() || s.Template() != "gpu" || rt.Live() != 1 {
		t.Fatalf("adopted %v, template %q, %d live; want a fresh sandbox on gpu, the old one destroyed", s.Adopted(), s.Template(), rt.Live())
	}
	if err := m.Release(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, sandbox.CreateOptions{Template: "base", Labels: map[string]string{session.DefaultLabelKey: "k"}}); err != nil {
		t.Fatal(err)
	}
	rt.FailNext(memory.OpCreate, 1, notFound("template gpu"))
	strict := session.NewManager(c, session.Options{Create: sandbox.CreateOptions{Template: "gpu"}, OnMissingTemplate: session.Fallback,
		FallbackTemplate: "base", Packages: []string{"numpy"}, PackageTemplates: map[string]string{"numpy": "gpu"}, ReapInterval: -1})
	defer strict.Close(ctx)
	_, err = strict.Acquire(ctx, "k")
	wantMismatch(t, "reattach, then create on the fallback", err, `"numpy"`, `"gpu"`, `"base"`)
	if rt.Live() != 0 {
		t.Fatalf("%d live sandboxes, want the mismatched ones destroyed", rt.Live())
	}
}

func TestPackageTemplatesValidated(t *testing.T) {
	t.Parallel()
	for _, bad := range []map[string]string{{"numpy>=2": "gpu"}, {"a b": "gpu"}, {"numpy": ""}, {"numpy": "x\ny"}} {
		m, _ := newManager(t, session.Options{PackageTemplates: bad})
		if _, err := m.Acquire(context.Background(), "k"); sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "PackageTemplates") {
			t.Errorf("PackageTemplates %q: %v, want InvalidArgument naming it", bad, err)
		}
	}
}

// On E2B (through its fake) a missing template falls back and the rule
// refuses the package the requested template was for.
func TestPackageTemplatesE2BFake(t *testing.T) {
	t.Parallel()
	newClient := e2bClients(t)
	c := newClient(t)
	ctx := context.Background()
	m := session.NewManager(c, session.Options{
		Create:            sandbox.CreateOptions{Template: "no-such-template"},
		OnMissingTemplate: session.Fallback,
		FallbackTemplate:  "base",
		Packages:          []string{"numpy"},
		PackageTemplates:  map[string]string{"numpy": "no-such-template"},
	})
	defer m.Close(ctx)
	_, err := m.Acquire(ctx, "k")
	wantMismatch(t, "Acquire", err, `"numpy"`, `"no-such-template"`, `"base"`)
	if n := countLive(t, c); n != 0 {
		t.Fatalf("%d live sandboxes after the refusal, want 0", n)
	}
}

// On the local provider the sandbox runs the host's default template, so
// a package tied to another one is refused.
func TestPackageTemplatesLocal(t *testing.T) {
	t.Parallel()
	c := localClients(t)(t)
	ctx := context.Background()
	m := session.NewManager(c, session.Options{Packages: []string{"numpy"}, PackageTemplates: map[string]string{"numpy": "gpu"},
		InstallCommand: []string{"true"}})
	defer m.Close(ctx)
	_, err := m.Acquire(ctx, "k")
	wantMismatch(t, "Acquire", err, `"numpy"`, `"gpu"`, "default")
	if n := countLive(t, c); n != 0 {
		t.Fatalf("%d live sandboxes after the refusal, want 0", n)
	}
}
