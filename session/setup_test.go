package session_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

func TestValidatePackages(t *testing.T) {
	t.Parallel()
	good := []string{"numpy", "numpy==1.26.4", "pandas>=2,<3", "requests[socks]~=2.31", "scikit-learn!=1.4.0",
		"foo.bar_baz-qux", "pkg==1.*", "Django>3", "a", "pkg===1.0", "x[a,b]<=2"}
	if err := session.ValidatePackages(good); err != nil {
		t.Fatalf("valid names rejected: %v", err)
	}
	bad := []string{"", "numpy; rm -rf /", "requests && curl evil.sh", "$(whoami)", "`id`", "pkg|sh", "a b",
		"--index-url=http://evil", "-e.", "pkg\n", "pkg>1;x", "../path", "git+https://x/y.git", "pkg>=1 ", "pkg'",
		"pkg\"", "pkg\\", "pkg&", "pkg>$HOME", "pkg(1)", "pkg{1}", "pkg==1!2", "pkg==*", "pkg*", "pkg#frag",
		"pkg @ file:///etc", "pkg;python_version<'3'", strings.Repeat("a", 201)}
	for _, n := range bad {
		err := session.ValidatePackages([]string{"ok", n})
		if !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("%q accepted (err %v)", n, err)
			continue
		}
		q := n
		if len(q) > 80 {
			q = q[:80]
		}
		if !strings.Contains(err.Error(), strings.Trim(strings.ReplaceAll(strings.ReplaceAll(q, `\`, `\\`), `"`, `\"`), "\n")) {
			t.Errorf("error %q does not name %q", err, n)
		}
	}
}

// recordPip installs a pip handler that records each argv and exits with code.
func recordPip(rt *memory.Runtime, code int) func() [][]string {
	var mu sync.Mutex
	var calls [][]string
	rt.Handle("pip", func(_ context.Context, c *memory.Call) int {
		mu.Lock()
		calls = append(calls, slices.Clone(c.Args))
		mu.Unlock()
		if code != 0 {
			c.Stderr.Write([]byte("ERROR: No matching distribution found\n"))
		}
		return code
	})
	return func() [][]string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
}

func TestPackagesInstalledWithArgv(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{Packages: []string{"numpy==1.26", "pandas>=2,<3"}})
	calls := recordPip(rt, 0)
	s := mustAcquire(t, m, "k")
	want := []string{"pip", "install", "--quiet", "--", "numpy==1.26", "pandas>=2,<3"}
	if got := calls(); len(got) != 1 || !slices.Equal(got[0], want) {
		t.Fatalf("pip calls = %q, want one %q", got, want)
	}
	for _, c := range rt.CallsOf(memory.OpExec) {
		if strings.Contains(c.Path, "pip") && strings.HasPrefix(c.Path, "sh") {
			t.Fatalf("install ran through a shell: %q", c.Path)
		}
	}
	if !slices.Equal(s.Packages(), want[4:]) {
		t.Fatalf("Packages() = %q", s.Packages())
	}
	mustAcquire(t, m, "k")
	if len(calls()) != 1 {
		t.Fatal("packages installed again for a reused session")
	}
}

func TestPackagesSkippedWhenTemplateShipsThem(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{
		Create:           sandbox.CreateOptions{Template: "ds"},
		Packages:         []string{"numpy", "pandas"},
		TemplatePackages: map[string][]string{"ds": {"numpy"}},
	})
	calls := recordPip(rt, 0)
	mustAcquire(t, m, "a")
	if got := calls(); len(got) != 1 || !slices.Equal(got[0][4:], []string{"pandas"}) {
		t.Fatalf("pip calls = %q, want only pandas", got)
	}

	m2, rt2 := newManager(t, session.Options{
		Create:           sandbox.CreateOptions{Template: "ds"},
		Packages:         []string{"numpy"},
		TemplatePackages: map[string][]string{"ds": {"numpy"}},
	})
	calls2 := recordPip(rt2, 0)
	mustAcquire(t, m2, "a")
	if len(calls2()) != 0 {
		t.Fatalf("pip ran although the template ships every package: %q", calls2())
	}
}

func TestPackageInstallFailureDestroysSandbox(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{Packages: []string{"nosuchpkg"}})
	recordPip(rt, 1)
	_, err := m.Acquire(context.Background(), "k")
	if err == nil || !strings.Contains(err.Error(), "No matching distribution") || !strings.Contains(err.Error(), "exit code 1") {
		t.Fatalf("Acquire = %v, want the pip failure with its stderr", err)
	}
	if rt.Live() != 0 {
		t.Fatalf("live = %d, want 0", rt.Live())
	}
}

func TestPackageInstallTimeout(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{Packages: []string{"numpy"}, InstallTimeout: 20 * time.Millisecond})
	rt.Handle("pip", func(ctx context.Context, _ *memory.Call) int { <-ctx.Done(); return 1 })
	_, err := m.Acquire(context.Background(), "k")
	if sandbox.CodeOf(err) != sandbox.DeadlineExceeded || !strings.Contains(err.Error(), "timed out after 20ms (command timeout)") {
		t.Fatalf("Acquire = %v, want a timeout naming the layer and duration", err)
	}
	if rt.Live() != 0 {
		t.Fatalf("live = %d, want 0", rt.Live())
	}
}

func TestSelectPackagesGetsEffectiveTemplate(t *testing.T) {
	t.Parallel()
	var got []string
	var mu sync.Mutex
	m, rt := newManager(t, session.Options{
		Create:            sandbox.CreateOptions{Template: "custom"},
		OnMissingTemplate: session.Fallback,
		FallbackTemplate:  "base",
		SelectPackages: func(tmpl string) ([]string, error) {
			mu.Lock()
			got = append(got, tmpl)
			mu.Unlock()
			if tmpl == "custom" {
				return nil, nil // the custom template has everything
			}
			return []string{"numpy"}, nil
		},
	})
	calls := recordPip(rt, 0)
	s := mustAcquire(t, m, "a")
	if !s.UsedRequestedTemplate() || s.Template() != "custom" || len(calls()) != 0 {
		t.Fatalf("template %q used=%v pip=%q", s.Template(), s.UsedRequestedTemplate(), calls())
	}
	rt.FailNext(memory.OpCreate, 1, notFound("template custom"))
	s2 := mustAcquire(t, m, "b")
	if s2.UsedRequestedTemplate() || s2.Template() != "base" {
		t.Fatalf("after fallback: template %q used=%v", s2.Template(), s2.UsedRequestedTemplate())
	}
	if !slices.Equal(got, []string{"custom", "base"}) {
		t.Fatalf("selector saw %q, want [custom base]", got)
	}
	if len(calls()) != 1 {
		t.Fatalf("pip calls = %q, want one for the fallback sandbox", calls())
	}
	var tmpls []string
	for _, c := range rt.CallsOf(memory.OpCreate) {
		tmpls = append(tmpls, c.Path)
	}
	if !slices.Equal(tmpls, []string{"custom", "custom", "base"}) {
		t.Fatalf("create templates = %q", tmpls)
	}
}

func TestSelectPackagesFailuresDestroySandbox(t *testing.T) {
	t.Parallel()
	for name, sel := range map[string]func(string) ([]string, error){
		"error":     func(string) ([]string, error) { return nil, errors.New("incompatible template") },
		"injection": func(string) ([]string, error) { return []string{"numpy", "x; curl evil|sh"}, nil },
	} {
		t.Run(name, func(t *testing.T) {
			m, rt := newManager(t, session.Options{SelectPackages: sel})
			calls := recordPip(rt, 0)
			_, err := m.Acquire(context.Background(), "k")
			if err == nil {
				t.Fatal("Acquire succeeded")
			}
			if name == "injection" && (!errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "x; curl evil|sh")) {
				t.Fatalf("error %v does not reject the name", err)
			}
			if rt.Live() != 0 || len(calls()) != 0 {
				t.Fatalf("live = %d, pip calls = %d", rt.Live(), len(calls()))
			}
		})
	}
}

func TestMissingTemplateFailsFast(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{Create: sandbox.CreateOptions{Template: "custom"}})
	rt.FailNext(memory.OpCreate, 1, notFound("template custom"))
	_, err := m.Acquire(context.Background(), "k")
	if !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), `template "custom" does not exist`) {
		t.Fatalf("Acquire = %v", err)
	}
	if len(rt.CallsOf(memory.OpCreate)) != 1 || rt.Live() != 0 {
		t.Fatal("fell back or left a sandbox despite FailFast")
	}
}

func TestReattachFinishesInterruptedSetup(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	ctx := context.Background()
	calls := recordPip(rt, 0)
	// A process created the labelled sandbox and died before installing.
	if _, err := c.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{session.DefaultLabelKey: "k"}}); err != nil {
		t.Fatal(err)
	}
	opts := session.Options{Packages: []string{"numpy"}, ReapInterval: -1}
	m1 := session.NewManager(c, opts)
	s := mustAcquire(t, m1, "k")
	if !s.Adopted() || len(calls()) != 1 {
		t.Fatalf("adopted=%v pip calls=%d: setup not finished on reattach", s.Adopted(), len(calls()))
	}
	m2 := session.NewManager(c, opts) // another restart: setup is recorded as done
	mustAcquire(t, m2, "k")
	if len(calls()) != 1 {
		t.Fatalf("pip calls = %d, want 1", len(calls()))
	}
	if len(rt.CallsOf(memory.OpCreate)) != 1 {
		t.Fatal("created a sandbox")
	}
}
