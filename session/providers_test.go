package session_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/daytona"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/provider/local/localtest"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

// e2bClients starts an E2B fake (over a memory backend) and returns a
// constructor of adapters pointed at it: each call is a "process" of its own.
func e2bClients(t *testing.T, opts ...e2bfake.Option) func(t *testing.T) *sandbox.Client {
	fake := e2bfake.New(memory.New(), opts...)
	t.Cleanup(fake.Close)
	return func(t *testing.T) *sandbox.Client {
		rt, err := e2b.New(e2b.WithAPIKey(fake.APIKey()), e2b.WithAPIURL(fake.APIURL()), e2b.WithSandboxURL(fake.SandboxURL()))
		if err != nil {
			t.Fatal(err)
		}
		c := sandbox.NewClient(rt)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
}

func TestScenarioE2BFake(t *testing.T) {
	t.Parallel()
	scenario(t, e2bClients(t), false)
}

func TestTemplateFallbackE2BFake(t *testing.T) {
	t.Parallel()
	newClient := e2bClients(t)
	ctx := context.Background()
	m := session.NewManager(newClient(t), session.Options{
		Create:            sandbox.CreateOptions{Template: "no-such-template"},
		OnMissingTemplate: session.Fallback,
		FallbackTemplate:  "base",
	})
	defer m.Close(ctx)
	s, err := m.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if s.UsedRequestedTemplate() || s.Template() != "base" {
		t.Fatalf("template %q, used requested %v", s.Template(), s.UsedRequestedTemplate())
	}

	strict := session.NewManager(newClient(t), session.Options{Create: sandbox.CreateOptions{Template: "no-such-template"}})
	defer strict.Close(ctx)
	if _, err := strict.Acquire(ctx, "k2"); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("FailFast Acquire = %v, want NotFound", err)
	}
}

// localClients returns a constructor of local runtimes sharing one root:
// each call is a "process" of its own over the same sandboxes.
func localClients(t *testing.T) func(t *testing.T) *sandbox.Client {
	root := t.TempDir()
	return func(t *testing.T) *sandbox.Client {
		rt, err := local.New(local.WithRoot(root))
		if err != nil {
			t.Fatal(err)
		}
		c := sandbox.NewClient(rt)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
}

func TestScenarioLocal(t *testing.T) {
	t.Parallel()
	_, err := exec.LookPath("python3")
	scenario(t, localClients(t), err == nil)
}

// daytonaClients starts a Daytona fake executing through provider/local and
// returns a constructor of adapters pointed at it.
func daytonaClients(t *testing.T) func(t *testing.T) *sandbox.Client {
	be, err := localtest.Offline(local.WithRoot(t.TempDir())) // no test here needs a way out
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	fake := daytonafake.New(be)
	t.Cleanup(fake.Close)
	return func(t *testing.T) *sandbox.Client {
		rt, err := daytona.New(daytona.WithAPIKey(fake.APIKey()), daytona.WithAPIURL(fake.URL()), daytona.WithScratchDir("~/.sandboxkit"))
		if err != nil {
			t.Fatal(err)
		}
		c := sandbox.NewClient(rt)
		t.Cleanup(func() { _ = c.Close(); _ = rt.ResetTransport() })
		return c
	}
}

func TestScenarioDaytonaFake(t *testing.T) {
	t.Parallel()
	_, err := exec.LookPath("python3")
	scenario(t, daytonaClients(t), err == nil)
}
