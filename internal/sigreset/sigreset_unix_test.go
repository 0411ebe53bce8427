//go:build unix

package sigreset

import (
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const childEnv = "SANDBOXKIT_SIGRESET_CHILD"

// A copy of this test binary started with SIGINT and SIGHUP ignored calls
// Unignore: it still ignores them (a SIGHUP to itself does not end it),
// and a program it starts has neither ignored.
func TestUnignore(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		if !signal.Ignored(syscall.SIGINT) || !signal.Ignored(syscall.SIGHUP) {
			t.Fatal("this copy was to start with SIGINT and SIGHUP ignored")
		}
		Unignore()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		checkChildMask(t, "SigIgn")
		return
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("the check reads /proc/self/status: %v", err)
	}
	cmd := exec.Command("sh", "-c", `trap '' INT HUP; exec "$0" "$@"`, os.Args[0], "-test.run=^TestUnignore$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestUnignore") {
		t.Fatalf("the copy started with SIGINT and SIGHUP ignored: %v\n%s", err, out)
	}
}

// checkChildMask fails unless a program this process starts has none of
// signals 1-31 in the mask key (SigIgn, SigBlk) of its /proc/self/status.
func checkChildMask(t *testing.T, key string) {
	t.Helper()
	out, err := exec.Command("cat", "/proc/self/status").Output()
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil || mask&(1<<31-1) != 0 {
				t.Errorf("a child starts with %s %s, want none of signals 1-31", key, strings.TrimSpace(v))
			}
		}
	}
}
