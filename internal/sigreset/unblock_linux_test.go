package sigreset

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

const blockedChildEnv = "SANDBOXKIT_SIGRESET_BLOCKED_CHILD"

// A copy of this test binary started with SIGUSR1 and SIGWINCH blocked
// re-executes itself with ReexecUnblocked, and the children of the copy
// start with none of signals 1-31 blocked.
func TestReexecUnblocked(t *testing.T) {
	switch os.Getenv(blockedChildEnv) {
	case "exec":
		// The trampoline: become the copy, with the signals blocked.
		if err := RestartBlocked(blockedChildEnv, "copy", syscall.SIGUSR1, syscall.SIGWINCH); err != nil {
			t.Fatal(err)
		}
	case "copy":
		if m, err := Blocked(); err != nil || m&(1<<(syscall.SIGWINCH-1)) == 0 {
			if os.Getenv(reexecEnv) == "" {
				t.Fatalf("this copy was to start with SIGWINCH blocked: mask %#x, %v", m, err)
			}
		}
		if err := ReexecUnblocked(); err != nil {
			t.Fatal(err)
		}
		if m, err := Blocked(); err != nil || m != 0 {
			t.Errorf("after ReexecUnblocked, signals %#x are blocked (%v)", m, err)
		}
		checkChildMask(t, "SigBlk")
		return
	}
	t.Parallel()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("the check reads /proc/self/status: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReexecUnblocked$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), blockedChildEnv+"=exec")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestReexecUnblocked") {
		t.Fatalf("the copy started with SIGUSR1 and SIGWINCH blocked: %v\n%s", err, out)
	}
}
