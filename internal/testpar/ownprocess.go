package testpar

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// ownEnv names the environment variable that tells a child started by
// OwnProcess which test it runs.
const ownEnv = "SANDBOXKIT_TEST_OWN_PROCESS"

// OwnProcess lets a test that counts what its process holds (open
// descriptors, sockets) run beside the package's other tests, whose
// descriptors would otherwise blur its counts: it runs the test again in
// a child process of the test binary, alone there, and reports whether
// the caller is that child. A test calls it first:
//
//	if !testpar.OwnProcess(t, nil) {
//		return // the child ran the test; its result is this test's
//	}
//
// In the parent it calls t.Parallel, holds one (when not nil) while the
// child runs, so that the tests sharing one run one at a time, and
// fails the test with the child's output if the child failed; in verbose
// mode it logs that output. The child gets the parent's -short and a
// timeout that ends before the parent's.
func OwnProcess(t *testing.T, one *sync.Mutex) bool {
	t.Helper()
	if os.Getenv(ownEnv) == t.Name() {
		return true
	}
	t.Parallel()
	if one != nil {
		one.Lock()
		defer one.Unlock()
	}
	ctx := context.Background()
	timeout := 10 * time.Minute
	if d, ok := t.Deadline(); ok {
		// Room to report the child's output before the parent's end.
		timeout = max(time.Until(d)*9/10, time.Second)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Verbose in the child, to tell that it ran the test: a pattern that
	// matched nothing would pass too.
	args := []string{
		"-test.run=" + runPattern(t.Name()),
		"-test.count=1",
		"-test.timeout=" + timeout.String(),
		"-test.v",
	}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), ownEnv+"="+t.Name())
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		t.Fatalf("%s in its own process, after %v: %v\n%s", t.Name(), took, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()+" ") {
		t.Fatalf("%s in its own process, after %v: the child did not run it\n%s", t.Name(), took, out)
	}
	if testing.Verbose() {
		t.Logf("%s in its own process (%v):\n%s", t.Name(), took, out)
	}
	return false
}

// runPattern is the -test.run pattern that matches the test named name
// (a subtest's name holds its parents', slash-separated) and no other.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}
