package testpar

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// ownEnv names the environment variable that tells a child started by
// RunInChild which test it runs.
const ownEnv = "SANDBOXKIT_TEST_OWN_PROCESS"

// OwnProcess lets a top-level test that counts what its process holds
// (open descriptors, sockets) run beside the package's other tests,
// whose descriptors would otherwise blur its counts: it runs the test
// again in a child process of the test binary, alone there, and reports
// whether the caller is that child. A test calls it first:
//
//	if !testpar.OwnProcess(t, nil) {
//		return // the child ran the test; its result is this test's
//	}
//
// In the parent it calls t.Parallel, holds one (when not nil) while the
// child runs, so that the tests sharing one run one at a time, and then
// reports the child's result (see RunInChild).
func OwnProcess(t *testing.T, one *sync.Mutex) bool {
	t.Helper()
	if InChild(t) {
		return true
	}
	t.Parallel()
	if one != nil {
		one.Lock()
		defer one.Unlock()
	}
	RunInChild(t)
	return false
}

// InChild reports whether this process is the child RunInChild started
// to run t.
func InChild(t *testing.T) bool { return os.Getenv(ownEnv) == t.Name() }

// RunInChild runs t (a test or a subtest) again in a child process of
// the test binary, which runs it alone, and makes the child's result t's:
// it fails t with the child's output if the child failed, skips t if the
// child skipped it, and in verbose mode logs the output. The child gets
// the command line's flags that are not the testing package's, the
// parent's -short, and a timeout that ends before the parent's. The
// caller runs t's body only where InChild(t) holds.
func RunInChild(t *testing.T) {
	t.Helper()
	timeout := 10 * time.Minute
	if d, ok := t.Deadline(); ok {
		// Room to report the child's output before the parent's end.
		timeout = max(time.Until(d)*9/10, time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// Verbose in the child, to tell that it ran the test: a pattern that
	// matched nothing would pass too.
	args := append(ownFlags(os.Args[1:]),
		"-test.run="+runPattern(t.Name()),
		"-test.count=1",
		"-test.timeout="+timeout.String(),
		"-test.v",
	)
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), ownEnv+"="+t.Name())
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start).Round(time.Millisecond)
	switch {
	case err != nil:
		t.Fatalf("%s in its own process, after %v: %v\n%s", t.Name(), took, err, out)
	case strings.Contains(string(out), "--- SKIP: "+t.Name()+" "):
		t.Skipf("%s in its own process was skipped:\n%s", t.Name(), out)
	case !strings.Contains(string(out), "--- PASS: "+t.Name()+" "):
		t.Fatalf("%s in its own process, after %v: the child did not run it\n%s", t.Name(), took, out)
	}
	if testing.Verbose() {
		t.Logf("%s in its own process (%v):\n%s", t.Name(), took, out)
	}
}

// ownFlags returns the arguments of args that are not the testing
// package's flags (-test.*, which RunInChild sets itself or which name
// this process's outputs: a profile, go test's log), with their values.
func ownFlags(args []string) []string {
	var keep []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || !strings.HasPrefix(name, "test.") {
			keep = append(keep, a)
			continue
		}
		if !hasValue && !isBoolFlag(name) {
			i++ // -test.name value
		}
	}
	return keep
}

// isBoolFlag reports whether the flag name takes no separate value.
func isBoolFlag(name string) bool {
	f := flag.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
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
