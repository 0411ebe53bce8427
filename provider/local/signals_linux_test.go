package local

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/sigreset"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// inheritedChildEnv marks the copy of the test binary that
// TestInheritedSignalsNotPassedOn starts with signals ignored ("exec"),
// and then, having blocked two more, becomes ("copy").
const inheritedChildEnv = "SANDBOXKIT_TEST_INHERITED_SIGNALS_CHILD"

// The agent is this program re-executed, and so starts with the signals
// the program ignores and blocks; commands keep an ignored or blocked
// signal across exec. A program started with SIGINT and SIGHUP ignored
// (nohup, a background job of a script) and SIGUSR1 and SIGWINCH blocked
// (perf blocks SIGWINCH) must still give its sandboxes' commands,
// terminals and background processes the default actions, nothing
// blocked: the conformance checks Exec/SignalsAtDefault,
// Terminal/SignalsAtDefault and Process/SignalsAtDefault run in a copy of
// this test binary started so, at the best level and at L1.
func TestInheritedSignalsNotPassedOn(t *testing.T) {
	switch os.Getenv(inheritedChildEnv) {
	case "exec":
		err := sigreset.RestartBlocked(inheritedChildEnv, "copy", syscall.SIGUSR1, syscall.SIGWINCH)
		t.Fatalf("starting the copy with SIGUSR1 and SIGWINCH blocked: %v", err)
	case "copy":
		if !signal.Ignored(syscall.SIGINT) || !signal.Ignored(syscall.SIGHUP) {
			t.Fatal("this copy was to start with SIGINT and SIGHUP ignored")
		}
		if m, err := sigreset.Blocked(); err != nil || m&(1<<(syscall.SIGWINCH-1)) == 0 || m&(1<<(syscall.SIGUSR1-1)) == 0 {
			t.Fatalf("this copy was to start with SIGUSR1 and SIGWINCH blocked: mask %#x, %v", m, err)
		}
		groups := []string{"Exec", "Terminal", "Process"}
		t.Run("best", func(t *testing.T) {
			sandboxtest.Run(t, sandboxtest.Harness{NewClient: func(t *testing.T) *sandbox.Client {
				return sandbox.NewClient(newRuntime(t, WithNetwork(NetworkNone)))
			}, Groups: groups, ShortGroups: groups})
		})
		t.Run("L1", func(t *testing.T) {
			sandboxtest.Run(t, sandboxtest.Harness{NewClient: func(t *testing.T) *sandbox.Client {
				return sandbox.NewClient(levelRuntime(t, L1))
			}, Groups: groups, ShortGroups: groups})
		})
		return
	}
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skipf("needs sh to start a copy with signals ignored: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `trap '' INT HUP; exec "$0" "$@"`, os.Args[0],
		"-test.run=^TestInheritedSignalsNotPassedOn$/^(best|L1)$/^(Exec|Terminal|Process)$/^SignalsAtDefault$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), inheritedChildEnv+"=exec")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the copy started with SIGINT and SIGHUP ignored and SIGUSR1 and SIGWINCH blocked failed: %v\n%s", err, out)
	}
	for _, level := range []string{"best", "L1"} {
		for _, group := range []string{"Exec", "Terminal", "Process"} {
			name := "TestInheritedSignalsNotPassedOn/" + level + "/" + group + "/SignalsAtDefault"
			if !strings.Contains(string(out), "--- PASS: "+name+" ") {
				t.Errorf("%s did not pass in the copy started with signals ignored and blocked:\n%s", name, out)
			}
		}
	}
}
