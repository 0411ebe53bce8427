package run

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/local"
)

// The environment variable that makes TestHelperStartRun act as a client
// process that starts a run and exits.
const helperEnv = "SANDBOXKIT_RUN_TEST_HELPER_ROOT"

// TestHelperStartRun is not a test: TestRunOutlivesClientProcess runs the
// test binary with it, as a separate client process that creates a local
// sandbox, starts a run in it, prints the sandbox's id and exits.
func TestHelperStartRun(t *testing.T) {
	root := os.Getenv(helperEnv)
	if root == "" {
		t.Skip("helper process for TestRunOutlivesClientProcess")
	}
	rt, err := local.New(local.WithRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	defer c.Close()
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	req := Request{ID: "outlive-process", Command: []string{"sh", "-c", "echo one; sleep 2; echo two; exit 7"}}
	if _, err := Start(ctx, sb, req); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("SANDBOX=" + sb.ID() + "\n")
}

// TestRunOutlivesClientProcess starts a run from another OS process, which
// exits (closing its client) while the run goes on, then finds the run from
// this process: status, exit code and the whole output.
func TestRunOutlivesClientProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("in the helper process")
	}
	t.Parallel()
	root := t.TempDir()
	ctx := testCtx(t)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperStartRun$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+root)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper process: %v\n%s", err, out)
	}
	var id string
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "SANDBOX="); ok {
			id = v
		}
	}
	if id == "" {
		t.Fatalf("the helper printed no sandbox id:\n%s", out)
	}

	rt, err := local.New(local.WithRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	t.Cleanup(func() { c.Close() })
	sb, err := c.Attach(ctx, id)
	if err != nil {
		t.Fatalf("attach from a new process: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.Destroy(ctx, id) // sb only attached: Destroy on it would leave the sandbox
	})
	r, err := Open(ctx, sb, "outlive-process")
	if err != nil {
		t.Fatalf("Open from a new process: %v", err)
	}
	cleanupKill(t, r)
	s := waitDone(t, r)
	if s.State != Exited || s.ExitCode != 7 {
		t.Errorf("status %+v, want exited 7", s)
	}
	if logs, err := r.Logs(ctx, 0); err != nil || string(logs) != "one\ntwo\n" {
		t.Errorf("Logs = %q, %v; want both lines", logs, err)
	}
}
