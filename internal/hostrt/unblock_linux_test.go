package hostrt

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/sigreset"
)

const blockedChildEnv = "SANDBOXKIT_HOSTRT_BLOCKED_CHILD"

// In a copy of this test binary started with SIGUSR1 and SIGWINCH
// blocked, the runtime's commands start with none of signals 1-31
// blocked, as a sandbox's do (checked by a command that is not a shell:
// dash clears its mask when it starts), and a missing program is still
// reported as one.
func TestCommandsStartUnblocked(t *testing.T) {
	switch os.Getenv(blockedChildEnv) {
	case "exec":
		err := sigreset.RestartBlocked(blockedChildEnv, "copy", syscall.SIGUSR1, syscall.SIGWINCH)
		t.Fatalf("starting the copy with signals blocked: %v", err)
	case "copy":
		if m, err := sigreset.Blocked(); err != nil || m == 0 {
			t.Fatal("this copy was to start with SIGUSR1 and SIGWINCH blocked")
		}
		r := New(t.TempDir())
		in := create(t, r, nil)
		st, out, _ := run(t, r, in.ID, driver.Command{Args: []string{"grep", "SigBlk", "/proc/self/status"}})
		v, ok := strings.CutPrefix(strings.TrimSpace(out), "SigBlk:")
		mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if st.ExitCode != 0 || !ok || err != nil || mask&(1<<31-1) != 0 {
			t.Errorf("a command printed %q and exited %+v: want SigBlk naming none of signals 1-31, exit 0", out, st)
		}
		st, _, stderr := run(t, r, in.ID, driver.Command{Args: []string{"no-such-program-hostrt"}})
		if st.ExitCode != 127 || !strings.Contains(stderr, "not found") {
			t.Errorf("missing program: got %+v %q, want exit 127 and a message", st, stderr)
		}
		return
	}
	t.Parallel()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("the check reads /proc/self/status: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCommandsStartUnblocked$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), blockedChildEnv+"=exec")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestCommandsStartUnblocked") {
		t.Fatalf("the copy started with SIGUSR1 and SIGWINCH blocked: %v\n%s", err, out)
	}
}
