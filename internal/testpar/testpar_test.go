package testpar

import (
	"flag"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// An explicit -parallel is kept; without one, Widen sets perCPU per CPU.
func TestWiden(t *testing.T) {
	f := flag.Lookup("test.parallel")
	if f == nil {
		t.Fatal("no test.parallel flag")
	}
	old := f.Value.String()
	t.Cleanup(func() { _ = flag.Set("test.parallel", old) })
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	Widen(3)
	if explicit {
		if got := f.Value.String(); got != old {
			t.Fatalf("-parallel %s given, Widen changed it to %s", old, got)
		}
		return
	}
	if got, want := f.Value.String(), strconv.Itoa(3*runtime.GOMAXPROCS(0)); got != want {
		t.Fatalf("test.parallel = %s, want %s", got, want)
	}
}

// TestOwnProcessHelper is run by TestOwnProcessReportsTheChild alone.
func TestOwnProcessHelper(t *testing.T) {
	mode := os.Getenv("TESTPAR_HELPER")
	if mode == "" {
		t.Skip("run by TestOwnProcessReportsTheChild")
	}
	if !OwnProcess(t, nil) {
		return
	}
	t.Logf("child %d of %d", os.Getpid(), os.Getppid())
	if mode == "fail" {
		t.Error("the child failed")
	}
}

// TestOwnProcessReportsTheChild: the test runs in a child of the test
// process, and its failure is the test's.
func TestOwnProcessReportsTheChild(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"pass", "fail"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestOwnProcessHelper$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTPAR_HELPER="+mode)
		out, err := cmd.CombinedOutput()
		if mode == "fail" {
			if err == nil || !strings.Contains(string(out), "the child failed") {
				t.Errorf("a failing child: %v, output:\n%s", err, out)
			}
			continue
		}
		if err != nil {
			t.Fatalf("a passing child: %v, output:\n%s", err, out)
		}
		parent := cmd.Process.Pid
		m := regexp.MustCompile(`child (\d+) of (\d+)`).FindStringSubmatch(string(out))
		if m == nil || m[2] != strconv.Itoa(parent) || m[1] == m[2] {
			t.Errorf("the test did not run in a child of the test process %d: output:\n%s", parent, out)
		}
	}
}

// A pattern matches the test it names, a subtest's level by level, and
// no test whose name merely starts the same.
func TestRunPattern(t *testing.T) {
	if got, want := runPattern("TestA/b.c"), `^TestA$/^b\.c$`; got != want {
		t.Errorf("runPattern = %q, want %q", got, want)
	}
}

// The child gets the command line's own flags, with their values, and
// none of the testing package's.
func TestOwnFlags(t *testing.T) {
	in := []string{"-test.run=^X$", "-mine", "v", "-test.v", "-test.timeout", "5m", "--other=1", "-test.testlogfile=/tmp/log", "arg"}
	got := strings.Join(ownFlags(in), " ")
	if want := "-mine v --other=1 arg"; got != want {
		t.Errorf("ownFlags(%q) = %q, want %q", in, got, want)
	}
}
