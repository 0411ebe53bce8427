package run

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/hostrt"
	"github.com/sandboxkit/sandbox/sandboxtest"
	"go.uber.org/goleak"

	"github.com/sandboxkit/sandbox/internal/testpar"
)

// TestMain runs more tests at once than go test's default of one per CPU:
// they wait on commands in sandboxes far more than they compute.
func TestMain(m *testing.M) {
	testpar.Widen(3)
	goleak.VerifyTestMain(m)
}

// harness gives the scenarios a sandbox world: each newRuntime call is a
// fresh Runtime over the same sandboxes, as a new process would open.
type harness struct {
	newRuntime func(t *testing.T) driver.Runtime
}

// world is one sandbox as the scenarios use it: the id, and a way to get a
// handle from a brand-new client, optionally over a wrapped runtime.
type world struct {
	h  harness
	id string
}

func newWorld(t *testing.T, h harness) *world {
	t.Helper()
	c := sandbox.NewClient(h.newRuntime(t))
	t.Cleanup(func() { c.Close() })
	sb, err := c.Create(testCtx(t), sandbox.CreateOptions{Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatalf("create sandbox: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sb.Destroy(ctx); err != nil {
			t.Errorf("destroy sandbox: %v", err)
		}
	})
	return &world{h: h, id: sb.ID()}
}

// client attaches to the world's sandbox through a new Client, as another
// process would; wrap, when non-nil, wraps the new Runtime.
func (w *world) client(t *testing.T, wrap func(driver.Runtime) driver.Runtime) (*sandbox.Client, *sandbox.Sandbox) {
	t.Helper()
	rt := w.h.newRuntime(t)
	if wrap != nil {
		rt = wrap(rt)
	}
	c := sandbox.NewClient(rt)
	sb, err := c.Attach(testCtx(t), w.id)
	if err != nil {
		c.Close()
		t.Fatalf("attach: %v", err)
	}
	return c, sb
}

func (w *world) sandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	c, sb := w.client(t, nil)
	t.Cleanup(func() { c.Close() })
	return sb
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// start starts req and makes sure the run is killed when the test ends.
func start(t *testing.T, sb *sandbox.Sandbox, req Request) *Run {
	t.Helper()
	r, err := Start(testCtx(t), sb, req)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	cleanupKill(t, r)
	return r
}

func cleanupKill(t *testing.T, r *Run) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = r.Kill(ctx)
	})
}

// procs counts, inside the sandbox, the run's wrapper processes and the
// sleep processes of its command (the commands of these tests sleep).
func procs(t *testing.T, sb *sandbox.Sandbox, r *Run) (wrappers, sleeps int) {
	t.Helper()
	script := prelude + `d=$1
n=0
for p in $(sk_pids "SANDBOXKIT_RUN=$2" "SANDBOXKIT_RUN_DIR=$1"); do
	if [ "$(cat /proc/$p/comm 2>/dev/null)" = sleep ]; then n=$((n + 1)); fi
done
echo "$(sk_roots | wc -l) $n"`
	res, err := sb.Exec(testCtx(t), sandbox.Command{Args: []string{"sh", "-c", script, "count", r.dir, r.token}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("count processes: %v %+v %s", err, res, res.Stderr)
	}
	f := strings.Fields(string(res.Stdout))
	if len(f) != 2 {
		t.Fatalf("count processes: output %q", res.Stdout)
	}
	wrappers, _ = strconv.Atoi(f[0])
	sleeps, _ = strconv.Atoi(f[1])
	return wrappers, sleeps
}

// procsStarted is procs once the run's command has started its sleep: a
// command prints "ready" before it execs sleep (or before its background
// sleep has), so a count taken at once can miss the sleep on a loaded
// host. It counts again, every 20 ms for up to 10 s, while no sleep is
// seen; a count of more than one is returned as soon as it is seen.
func procsStarted(t *testing.T, sb *sandbox.Sandbox, r *Run) (wrappers, sleeps int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		wrappers, sleeps = procs(t, sb, r)
		if sleeps > 0 || time.Now().After(deadline) {
			return wrappers, sleeps
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readFile(t *testing.T, sb *sandbox.Sandbox, p string) string {
	t.Helper()
	b, err := sb.ReadFile(testCtx(t), p)
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("read %s: %v", p, err)
	}
	return string(b)
}

func waitDone(t *testing.T, r *Run) Status {
	t.Helper()
	s, err := r.Wait(testCtx(t))
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return s
}

// counterCommand appends a line to the file at counter each time it runs,
// prints "ready", then sleeps.
func counterCommand(counter string, secs int) []string {
	return []string{"sh", "-c", `echo run >> "$1"; echo ready; exec sleep "$2"`, "cmd", counter, strconv.Itoa(secs)}
}

// waitReady waits until the run's output holds "ready": Start returns
// once the run is admitted, which can be before its command ran.
func waitReady(t *testing.T, r *Run) {
	t.Helper()
	ctx := testCtx(t)
	for {
		logs, err := r.Logs(ctx, 0)
		if err != nil {
			t.Fatalf("Logs: %v", err)
		}
		if strings.Contains(string(logs), "ready\n") {
			return
		}
		if !sleep(ctx, 20*time.Millisecond) {
			t.Fatalf("the command never printed ready; output %q", logs)
		}
	}
}

// reach says what a scenario checks beyond the run package's own logic,
// that is, which configurations can change its outcome.
type reach uint8

const (
	// viaAdapter: how a provider's client carries commands, their argv,
	// env and output bytes, request contexts, and concurrent clients.
	viaAdapter reach = 1 << iota
	// viaProcesses: how a provider starts, detaches and ends processes.
	viaProcesses
)

// scenarios are the behaviours every provider must show.
var scenarios = []struct {
	name  string
	f     func(t *testing.T, h harness)
	reach reach
}{
	{"DoubleStartOneProcess", testDoubleStart, 0},
	{"ConcurrentStartsOneProcess", testConcurrentStarts, viaAdapter | viaProcesses},
	{"NewClientSeesStatusAndLogs", testNewClient, viaAdapter | viaProcesses},
	{"Kill", testKill, viaAdapter | viaProcesses},
	{"KillDoneRunIsNoop", testKillDone, 0},
	{"VanishedProcessIsLost", testVanished, viaProcesses},
	{"OutcomeUnknownAfterAdmission", testOutcomeUnknownAfterAdmission, viaProcesses},
	{"OutcomeUnknownBeforeAdmission", testOutcomeUnknownBeforeAdmission, 0},
	{"ChangedRequestConflicts", testConflict, 0},
	{"ShortRequestTimeoutDoesNotKillRun", testShortRequestTimeout, viaAdapter | viaProcesses},
	{"BudgetEndsRun", testBudget, viaProcesses},
	{"ReadLogsEachLineOnce", testReadLogs, viaAdapter},
	{"ArgvAndEnvAreData", testArgvEnvData, viaAdapter},
	{"AnyByteID", testAnyByteID, 0},
	{"OpenMissing", testOpenMissing, 0},
	{"PendingRunLaunchedByNextStart", testPendingLaunched, 0},
	{"KillPendingRunNeverRuns", testKillPending, 0},
	{"BinaryOutput", testBinaryOutput, viaAdapter},
	{"ReconcileKillsDuplicateWrapper", testReconcileKillsDuplicate, viaProcesses},
	{"BadAdmissionRecordRefused", testBadAdmissionRecord, 0},
}

// fullRun reports whether every scenario runs in every configuration
// (sandboxtest.FullEnv set to 1, as CI and a release check set it).
func fullRun() bool { return os.Getenv(sandboxtest.FullEnv) == "1" }

// runScenarios runs the scenarios over h: all of them when only is zero,
// else those whose reach meets only. A configuration that differs from
// one run whole in its adapter or its processes alone runs the scenarios
// that difference can change; the rest check the run package's logic
// through the same calls, and run everywhere when fullRun.
func runScenarios(t *testing.T, h harness, only reach) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			if only != 0 && sc.reach&only == 0 && !fullRun() {
				t.Skipf("this configuration cannot change the scenario's outcome (%s=1 runs it)", sandboxtest.FullEnv)
			}
			t.Parallel()
			sc.f(t, h)
		})
	}
}

// newHostRuntime returns the test host runtime with its sandboxes' homes
// under a directory whose path needs quoting in any shell.
func newHostRuntime(t *testing.T) *hostrt.Runtime {
	root := path.Join(t.TempDir(), `sand $(x) 'q' "d"`)
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return hostrt.New(root)
}

func hostHarness(t *testing.T) harness {
	rt := newHostRuntime(t)
	return harness{newRuntime: func(*testing.T) driver.Runtime { return rt }}
}

func TestHostRuntime(t *testing.T) {
	t.Parallel()
	runScenarios(t, hostHarness(t), 0)
}

// Killing a run ends its own processes only, not those of a run of the
// same id in another sandbox whose processes it can see (two sandboxes of
// a host runtime share the host's process table).
func TestKillStaysInItsSandbox(t *testing.T) {
	t.Parallel()
	h := hostHarness(t)
	req := Request{ID: "same-id", Command: counterCommand("same.count", 300)}
	w1, w2 := newWorld(t, h), newWorld(t, h)
	sb1, sb2 := w1.sandbox(t), w2.sandbox(t)
	r1, r2 := start(t, sb1, req), start(t, sb2, req)
	waitReady(t, r1)
	waitReady(t, r2)
	if _, n := procsStarted(t, sb2, r2); n != 1 {
		t.Fatalf("the second sandbox's run has %d command processes before the kill, want 1", n)
	}
	if err := r1.Kill(testCtx(t)); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if _, n := procs(t, sb2, r2); n != 1 {
		t.Errorf("after killing the run in one sandbox, the same-id run in the other has %d command processes, want 1", n)
	}
	s, err := r2.Status(testCtx(t))
	if err != nil || s.State != Running {
		t.Errorf("the other sandbox's run: Status = %+v, %v; want running", s, err)
	}
}

func testDoubleStart(t *testing.T, h harness) {
	w := newWorld(t, h)
	sb := w.sandbox(t)
	req := Request{ID: "double", Command: counterCommand("double.count", 300)}
	r1 := start(t, sb, req)
	r2 := start(t, sb, req)
	waitReady(t, r1)
	if r1.PID() == 0 || r1.PID() != r2.PID() {
		t.Fatalf("PIDs %d and %d, want the same non-zero pid", r1.PID(), r2.PID())
	}
	if got := readFile(t, sb, "double.count"); got != "run\n" {
		t.Errorf("command ran %d times (%q), want once", strings.Count(got, "\n"), got)
	}
	if wr, cmd := procsStarted(t, sb, r1); wr != 1 || cmd != 1 {
		t.Errorf("%d wrappers and %d command processes, want 1 and 1", wr, cmd)
	}
	s, err := r2.Status(testCtx(t))
	if err != nil || s.State != Running {
		t.Errorf("Status = %+v, %v; want running", s, err)
	}
}

func testConcurrentStarts(t *testing.T, h harness) {
	w := newWorld(t, h)
	req := Request{ID: "many", Command: counterCommand("many.count", 300)}
	const n = 6
	var wg sync.WaitGroup
	pids := make([]int, n)
	errs := make([]error, n)
	for i := range n {
		// Each start through its own client, as from separate processes.
		c, sb := w.client(t, nil)
		t.Cleanup(func() { c.Close() })
		wg.Go(func() {
			r, err := Start(testCtx(t), sb, req)
			errs[i] = err
			if err == nil {
				pids[i] = r.PID()
				cleanupKill(t, r)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Start %d: %v", i, err)
		}
		if pids[i] == 0 || pids[i] != pids[0] {
			t.Fatalf("pids %v, want all the same", pids)
		}
	}
	sb := w.sandbox(t)
	r, err := Open(testCtx(t), sb, "many")
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, r)
	if got := readFile(t, sb, "many.count"); got != "run\n" {
		t.Errorf("command ran %d times, want once", strings.Count(got, "\n"))
	}
}

func testNewClient(t *testing.T, h harness) {
	w := newWorld(t, h)
	c1, sb1 := w.client(t, nil)
	req := Request{ID: "restart", Command: []string{"sh", "-c", `echo first; sleep 1; echo second; exit 3`}}
	r1, err := Start(testCtx(t), sb1, req)
	if err != nil {
		t.Fatal(err)
	}
	cleanupKill(t, r1)
	pid := r1.PID()
	// Drop the first client entirely.
	if err := c1.Close(); err != nil {
		t.Fatalf("close client: %v", err)
	}

	sb2 := w.sandbox(t)
	r2, err := Open(testCtx(t), sb2, "restart")
	if err != nil {
		t.Fatalf("Open from a new client: %v", err)
	}
	if r2.Fingerprint() != r1.Fingerprint() {
		t.Errorf("fingerprint %s, want %s", r2.Fingerprint(), r1.Fingerprint())
	}
	s, err := r2.Status(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.State != Running && s.State != Exited {
		t.Fatalf("status from new client = %+v", s)
	}
	if s.PID != pid {
		t.Errorf("pid %d, want %d", s.PID, pid)
	}
	s = waitDone(t, r2)
	if s.State != Exited || s.ExitCode != 3 || s.Killed || s.BudgetExceeded {
		t.Errorf("final status %+v, want exited 3", s)
	}
	logs, err := r2.Logs(testCtx(t), 0)
	if err != nil || string(logs) != "first\nsecond\n" {
		t.Errorf("Logs = %q, %v", logs, err)
	}
	// A third client starting the same request gets the finished run.
	r3, err := Start(testCtx(t), w.sandbox(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if s3, err := r3.Status(testCtx(t)); err != nil || s3 != s {
		t.Errorf("restart of a finished run: status %+v, %v; want %+v", s3, err, s)
	}
}

func testKill(t *testing.T, h harness) {
	w := newWorld(t, h)
	sb := w.sandbox(t)
	// The command's child holds the output open too.
	r := start(t, sb, Request{ID: "kill", Command: []string{"sh", "-c", `sleep 300 & echo ready; wait`}})
	waitReady(t, r)
	if _, cmd := procsStarted(t, sb, r); cmd != 1 {
		t.Fatalf("%d sleep processes before kill, want 1", cmd)
	}
	if err := r.Kill(testCtx(t)); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	s, err := r.Status(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.State != Exited || !s.Killed || s.ExitCode == 0 {
		t.Errorf("status after Kill = %+v, want exited, killed, non-zero", s)
	}
	if wr, cmd := procs(t, sb, r); wr != 0 || cmd != 0 {
		t.Errorf("after Kill: %d wrappers and %d command processes remain", wr, cmd)
	}
	// Killing again, and from another client, changes nothing.
	r2, err := Open(testCtx(t), w.sandbox(t), "kill")
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Kill(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if s2, err := r2.Status(testCtx(t)); err != nil || s2 != s {
		t.Errorf("after a second Kill: status %+v, %v; want %+v", s2, err, s)
	}
}

func testKillDone(t *testing.T, h harness) {
	w := newWorld(t, h)
	sb := w.sandbox(t)
	r := start(t, sb, Request{ID: "quick", Command: []string{"true"}})
	s := waitDone(t, r)
	if err := r.Kill(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if s2, err := r.Status(testCtx(t)); err != nil || s2 != s || s2.ExitCode != 0 || s2.Killed {
		t.Errorf("Kill of a finished run changed %+v to %+v, %v", s, s2, err)
	}
}

func testVanished(t *testing.T, h harness) {
	w := newWorld(t, h)
	sb := w.sandbox(t)
	r := start(t, sb, Request{ID: "vanish", Command: []string{"sh", "-c", "echo ready; exec sleep 300"}})
	waitReady(t, r)
	// Something outside the run kills the wrapper and the command without
	// a chance to record an exit, as a sandbox restart would.
	// sk_pids reads each process's environment once (one grep), not a
	// tr and a grep per process of a busy host.
	script := prelude + `kill -KILL "$1"
for p in $(sk_pids "SANDBOXKIT_RUN=$2"); do kill -KILL "$p"; done`
	res, err := sb.Exec(testCtx(t), sandbox.Command{Args: []string{"sh", "-c", script, "k", strconv.Itoa(r.PID()), r.token}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("kill from outside: %v %+v", err, res)
	}
	s := waitDone(t, r)
	if s.State != Lost || s.ExitCode != LostExitCode {
		t.Errorf("status = %+v, want lost with exit code %d", s, LostExitCode)
	}
	// Starting again does not resurrect it.
	r2 := start(t, sb, Request{ID: "vanish", Command: []string{"sh", "-c", "echo ready; exec sleep 300"}})
	if s2, err := r2.Status(testCtx(t)); err != nil || s2.State != Lost {
		t.Errorf("after a second Start: %+v, %v; want still lost", s2, err)
	}
	if wr, cmd := procs(t, sb, r); wr != 0 || cmd != 0 {
		t.Errorf("%d wrappers and %d command processes, want none", wr, cmd)
	}
}

// faultRuntime fails Exec calls whose script is admitScript with an
// outcome-unknown error, the first fail times: after running them
// (the request reached the sandbox) or without (it was lost on the way).
type faultRuntime struct {
	driver.Runtime
	fail     atomic.Int32
	afterRun bool
	faults   atomic.Int32
	// failStatus fails that many status polls with Code Unavailable.
	failStatus atomic.Int32
}

func (f *faultRuntime) Exec(ctx context.Context, id string, cmd *driver.Command) (driver.ExitStatus, error) {
	if len(cmd.Args) >= 3 && cmd.Args[2] == statusScript && f.failStatus.Add(-1) >= 0 {
		return driver.ExitStatus{}, sandbox.Errorf(sandbox.Unavailable, "502 bad gateway")
	}
	if len(cmd.Args) < 3 || cmd.Args[2] != admitScript || f.fail.Add(-1) < 0 {
		return f.Runtime.Exec(ctx, id, cmd)
	}
	f.faults.Add(1)
	if f.afterRun {
		if _, err := f.Runtime.Exec(ctx, id, cmd); err != nil {
			return driver.ExitStatus{}, err
		}
	}
	return driver.ExitStatus{}, fmt.Errorf("connection reset while reading the response: %w", sandbox.ErrOutcomeUnknown)
}

func testOutcomeUnknown(t *testing.T, h harness, afterRun bool, id string) {
	w := newWorld(t, h)
	f := &faultRuntime{afterRun: afterRun}
	f.fail.Store(1)
	c, sb := w.client(t, func(rt driver.Runtime) driver.Runtime { f.Runtime = rt; return f })
	t.Cleanup(func() { c.Close() })
	r := start(t, sb, Request{ID: id, Command: counterCommand(id+".count", 300)})
	if f.faults.Load() != 1 {
		t.Fatalf("%d faults injected, want 1", f.faults.Load())
	}
	s, err := r.Status(testCtx(t))
	if err != nil || s.State != Running || s.PID != r.PID() || s.PID == 0 {
		t.Fatalf("status %+v, %v; want running as pid %d", s, err, r.PID())
	}
	waitReady(t, r)
	if got := readFile(t, sb, id+".count"); got != "run\n" {
		t.Errorf("command ran %d times, want once", strings.Count(got, "\n"))
	}
	if wr, cmd := procsStarted(t, sb, r); wr != 1 || cmd != 1 {
		t.Errorf("%d wrappers and %d command processes, want 1 and 1", wr, cmd)
	}
}

func testOutcomeUnknownAfterAdmission(t *testing.T, h harness) {
	testOutcomeUnknown(t, h, true, "unknown-after")
}

func testOutcomeUnknownBeforeAdmission(t *testing.T, h harness) {
	testOutcomeUnknown(t, h, false, "unknown-before")
}

func testReconcileKillsDuplicate(t *testing.T, h harness) {
	w := newWorld(t, h)
	sb := w.sandbox(t)
	req := Request{ID: "dup", Command: counterCommand("dup.count", 300)}
	r := start(t, sb, req)
	// Plant a process that looks like a second wrapper of the same run
	// (argv[1] is the run's run.sh), as a launcher of another version
	// could leave. GNU tail takes its options after the file name.
	script := `setsid tail "$1/run.sh" -f </dev/null >/dev/null 2>&1 &`
	if res, err := sb.Exec(testCtx(t), sandbox.Command{Args: []string{"sh", "-c", script, "dup", r.dir}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("plant duplicate: %v %+v", err, res)
	}
	// The planted process starts in the background: it may not have
	// exec'd tail yet when the planting command returns (seen under load).
	for deadline := time.Now().Add(10 * time.Second); ; {
		wr, _ := procs(t, sb, r)
		if wr == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d wrappers 10 s after planting, want 2", wr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	f := &faultRuntime{afterRun: true}
	f.fail.Store(1)
	c, sb2 := w.client(t, func(rt driver.Runtime) driver.Runtime { f.Runtime = rt; return f })
	t.Cleanup(func() { c.Close() })
	r2 := start(t, sb2, req)
	waitReady(t, r2)
	if r2.PID() != r.PID() {
		t.Errorf("reconciled pid %d, want the admitted %d", r2.PID(), r.PID())
	}
	if wr, cmd := procsStarted(t, sb, r); wr != 1 || cmd != 1 {
		t.Errorf("%d wrappers and %d command processes, want 1 and 1", wr, cmd)
	}
	if s, err := r.Status(testCtx(t)); err != nil || s.State != Running {
		t.Errorf("the admitted run was hurt: %+v, %v", s, err)
	}
}

func TestWaitRidesOutTransientFailures(t *testing.T) {
	t.Parallel()
	w := newWorld(t, hostHarness(t))
	f := &faultRuntime{}
	c, sb := w.client(t, func(rt driver.Runtime) driver.Runtime { f.Runtime = rt; return f })
	t.Cleanup(func() { c.Close() })
	r := start(t, sb, Request{ID: "flaky", Command: []string{"sleep", "1"}})
	f.failStatus.Store(waitTransient)
	s, err := r.Wait(testCtx(t))
	if err != nil || s.State != Exited || s.ExitCode != 0 {
		t.Errorf("Wait through %d failed polls = %+v, %v; want exited 0", waitTransient, s, err)
	}
	f.failStatus.Store(waitTransient + 1)
	if _, err := r.Wait(testCtx(t)); sandbox.CodeOf(err) != sandbox.Unavailable {
		t.Errorf("Wait through %d failed polls: %v; want the Unavailable error", waitTransient+1, err)
	}
}

func testConflict(t *testing.T, h harness) {
	w := newWorld(t, h)
	sb := w.sandbox(t)
	base := Request{ID: "conflict", Command: []string{"sleep", "60"}, Env: map[string]string{"A": "1"}}
	start(t, sb, base)
	for name, req := range map[string]Request{
		"command": {ID: "conflict", Command: []string{"sleep", "61"}, Env: base.Env},
		"env":     {ID: "conflict", Command: base.Command, Env: map[string]string{"A": "2"}},
		"dir":     {ID: "conflict", Command: base.Command, Env: base.Env, Dir: "/"},
	} {
		_, err := Start(testCtx(t), w.sandbox(t), req)
		if !errors.Is(err, ErrConflict) || sandbox.CodeOf(err) != sandbox.AlreadyExists {
			t.Errorf("changed %s: err = %v (code %v), want ErrConflict/AlreadyExists", name, err, sandbox.CodeOf(err))
		}
	}
	// The budget is not part of the request's identity.
	same := base
	same.Budget = time.Hour
	if _, err := Start(testCtx(t), sb, same); err != nil {
		t.Errorf("same request with another budget: %v", err)
	}
}

func testShortRequestTimeout(t *testing.T, h harness) {
	w := newWorld(t, h)
	sb := w.sandbox(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	r, err := Start(ctx, sb, Request{ID: "outlive", Command: []string{"sh", "-c", "sleep 1; echo done"}, Budget: time.Minute})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	cleanupKill(t, r)
	s := waitDone(t, r)
	if s.State != Exited || s.ExitCode != 0 {
		t.Errorf("status %+v, want exited 0", s)
	}
	if logs, err := r.Logs(testCtx(t), 0); err != nil || string(logs) != "done\n" {
		t.Errorf("Logs = %q, %v", logs, err)
	}
}

func testBudget(t *testing.T, h harness) {
	w := newWorld(t, h)
	sb := w.sandbox(t)
	r := start(t, sb, Request{ID: "budget", Command: []string{"sh", "-c", "echo begin; sleep 60"}, Budget: 2 * time.Second})
	s := waitDone(t, r)
	if s.State != Exited || s.ExitCode != 124 || !s.BudgetExceeded {
		t.Errorf("status %+v, want exited 124 with the budget exceeded", s)
	}
	if logs, err := r.Logs(testCtx(t), 0); err != nil || string(logs) != "begin\n" {
		t.Errorf("Logs = %q, %v", logs, err)
	}
}

func testReadLogs(t *testing.T, h harness) {
	w := newWorld(t, h)
	sb := w.sandbox(t)
	// Lines written in pieces, with pauses inside lines.
	script := `i=0; while [ $i -lt 12 ]; do printf 'line %d ' $i; sleep 0.05; printf 'end\n'; i=$((i+1)); done; printf tail`
	r := start(t, sb, Request{ID: "logs", Command: []string{"sh", "-c", script}})
	var got bytes.Buffer
	var off int64
	for i := 0; ; i++ {
		if i > 2000 {
			t.Fatal("ReadLogs never reached EOF")
		}
		c, err := r.ReadLogs(testCtx(t), off, 20)
		if err != nil {
			t.Fatal(err)
		}
		if c.Next != off+int64(len(c.Data)) {
			t.Fatalf("Next %d after %d bytes from %d", c.Next, len(c.Data), off)
		}
		if !c.EOF && len(c.Data) > 0 && c.Data[len(c.Data)-1] != '\n' {
			t.Fatalf("chunk %q cuts a line", c.Data)
		}
		got.Write(c.Data)
		off = c.Next
		if c.EOF {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var want strings.Builder
	for i := range 12 {
		fmt.Fprintf(&want, "line %d end\n", i)
	}
	want.WriteString("tail")
	if got.String() != want.String() {
		t.Errorf("polled output:\n%q\nwant\n%q", got.String(), want.String())
	}
	tail, err := r.Logs(testCtx(t), 9)
	if err != nil || string(tail) != " end\ntail" {
		t.Errorf("Logs(9) = %q, %v", tail, err)
	}
	if c, err := r.ReadLogs(testCtx(t), off+100, 0); err != nil || len(c.Data) != 0 || !c.EOF {
		t.Errorf("read past the end = %+v, %v", c, err)
	}
	if _, err := r.ReadLogs(testCtx(t), -1, 0); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("negative offset: %v", err)
	}
}

func testArgvEnvData(t *testing.T, h harness) {
	w := newWorld(t, h)
	sb := w.sandbox(t)
	if err := sb.MkdirAll(testCtx(t), "work dir"); err != nil {
		t.Fatal(err)
	}
	hostile := []string{"$(touch pwned)", "; touch pwned2", "'\"`", "-n", "a\nb", ""}
	req := Request{
		ID:      "data",
		Command: append([]string{"sh", "-c", `printf '[%s]' "$@"; printf '{%s}' "$V" "$PATH" "$(pwd)"`, "x"}, hostile...),
		Dir:     "work dir",
		Env:     map[string]string{"V": "v $(touch pwned3)\n'", "PATH": "/usr/bin:/bin:/opt/custom"},
	}
	r := start(t, sb, req)
	s := waitDone(t, r)
	logs, err := r.Logs(testCtx(t), 0)
	if err != nil {
		t.Fatalf("Logs: %v", err)
	}
	want := "[$(touch pwned)][; touch pwned2]['\"`][-n][a\nb][]" +
		"{v $(touch pwned3)\n'}{/usr/bin:/bin:/opt/custom}{" + path.Join(sb.Home(), "work dir") + "}"
	if s.ExitCode != 0 || string(logs) != want {
		t.Errorf("exit %d, output\n%q\nwant\n%q", s.ExitCode, logs, want)
	}
	for _, p := range []string{"pwned", "pwned2", "pwned3", "work dir/pwned", "work dir/pwned3"} {
		if _, err := sb.Stat(testCtx(t), p); err == nil {
			t.Errorf("%s exists: input was run as shell text", p)
		}
	}
	// A missing working directory is refused before admission.
	_, err = Start(testCtx(t), sb, Request{ID: "nodir", Command: []string{"touch", "ran"}, Dir: "no/such/dir"})
	if sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("missing dir: err = %v, want InvalidArgument", err)
	}
	if _, err := Open(testCtx(t), sb, "nodir"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("a refused run was admitted: Open = %v", err)
	}
}

func testAnyByteID(t *testing.T, h harness) {
	w := newWorld(t, h)
	sb := w.sandbox(t)
	ids := []string{"../../etc", "a/b", "\x00\xff\n", ".", strings.Repeat("x", 300), strings.Repeat("x", 299) + "y"}
	for i, id := range ids {
		r := start(t, sb, Request{ID: id, Command: []string{"echo", strconv.Itoa(i)}})
		if s := waitDone(t, r); s.ExitCode != 0 {
			t.Errorf("id %q: %+v", id, s)
		}
	}
	for i, id := range ids {
		r, err := Open(testCtx(t), w.sandbox(t), id)
		if err != nil {
			t.Fatalf("Open(%q): %v", id, err)
		}
		if logs, err := r.Logs(testCtx(t), 0); err != nil || string(logs) != strconv.Itoa(i)+"\n" {
			t.Errorf("id %q: Logs = %q, %v", id, logs, err)
		}
	}
	list, err := List(testCtx(t), w.sandbox(t))
	slices.Sort(list)
	want := slices.Sorted(slices.Values(ids))
	if err != nil || !slices.Equal(list, want) {
		t.Errorf("List = %q, %v; want %q", list, err, want)
	}
	// A finished run can be removed, and its id used again.
	r, err := Open(testCtx(t), sb, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Remove(testCtx(t)); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := Open(testCtx(t), sb, ids[0]); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Open after Remove: %v", err)
	}
	r = start(t, sb, Request{ID: ids[0], Command: []string{"echo", "again"}})
	if s := waitDone(t, r); s.ExitCode != 0 {
		t.Errorf("reused id: %+v", s)
	}
	if logs, err := r.Logs(testCtx(t), 0); err != nil || string(logs) != "again\n" {
		t.Errorf("reused id: Logs = %q, %v", logs, err)
	}
	// A running run cannot be removed.
	r = start(t, sb, Request{ID: "running", Command: []string{"sleep", "60"}})
	if err := r.Remove(testCtx(t)); sandbox.CodeOf(err) != sandbox.FailedPrecondition {
		t.Errorf("Remove of a running run: %v", err)
	}
}

func testOpenMissing(t *testing.T, h harness) {
	w := newWorld(t, h)
	_, err := Open(testCtx(t), w.sandbox(t), "nope")
	if !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Open of a missing run: %v", err)
	}
}

// admitOnly leaves the records of a start that claimed the run and was
// interrupted before it launched the wrapper.
func admitOnly(t *testing.T, sb *sandbox.Sandbox, req Request) *Run {
	t.Helper()
	r := newRun(sb, req.ID)
	r.fp = fingerprint(req.Command, home(sb), req.Env)
	record := r.fp + " " + hex.EncodeToString([]byte(req.ID)) + "\n"
	if err := sb.WriteFile(testCtx(t), r.dir+"/request", []byte(record)); err != nil {
		t.Fatal(err)
	}
	o, err := Open(testCtx(t), sb, req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := o.Status(testCtx(t)); err != nil || s.State != Pending {
		t.Fatalf("interrupted start: status %+v, %v; want pending", s, err)
	}
	return o
}

func testPendingLaunched(t *testing.T, h harness) {
	w := newWorld(t, h)
	sb := w.sandbox(t)
	req := Request{ID: "pending", Command: counterCommand("pending.count", 300)}
	admitOnly(t, sb, req)
	r := start(t, w.sandbox(t), req)
	waitReady(t, r)
	if s, err := r.Status(testCtx(t)); err != nil || s.State != Running {
		t.Errorf("after the next Start: %+v, %v; want running", s, err)
	}
	if got := readFile(t, sb, "pending.count"); got != "run\n" {
		t.Errorf("command ran %d times, want once", strings.Count(got, "\n"))
	}
}

func testKillPending(t *testing.T, h harness) {
	w := newWorld(t, h)
	sb := w.sandbox(t)
	req := Request{ID: "pending-kill", Command: counterCommand("pending-kill.count", 300)}
	r := admitOnly(t, sb, req)
	if err := r.Kill(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	// Starting it now finds it killed, and does not run it.
	r2 := start(t, sb, req)
	s, err := r2.Status(testCtx(t))
	if err != nil || s.State != Exited || !s.Killed {
		t.Errorf("status %+v, %v; want exited, killed", s, err)
	}
	if got := readFile(t, sb, "pending-kill.count"); got != "" {
		t.Errorf("a run killed before it started ran %d times", strings.Count(got, "\n"))
	}
}

func testBinaryOutput(t *testing.T, h harness) {
	w := newWorld(t, h)
	sb := w.sandbox(t)
	var all []byte
	for b := range 256 {
		all = append(all, byte(b))
	}
	if err := sb.WriteFile(testCtx(t), "bytes.bin", all); err != nil {
		t.Fatal(err)
	}
	r := start(t, sb, Request{ID: "binary", Command: []string{"cat", "bytes.bin", "bytes.bin"}})
	waitDone(t, r)
	want := append(slices.Clone(all), all...)
	logs, err := r.Logs(testCtx(t), 0)
	if err != nil || !bytes.Equal(logs, want) {
		t.Errorf("Logs = %d bytes, %v; want the 512 bytes written", len(logs), err)
	}
	var got []byte
	var off int64
	for {
		c, err := r.ReadLogs(testCtx(t), off, 100)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c.Data...)
		off = c.Next
		if c.EOF {
			break
		}
	}
	if !bytes.Equal(got, want) {
		t.Errorf("ReadLogs gave %d bytes, not the 512 written", len(got))
	}
}

func TestValidation(t *testing.T) {
	w := newWorld(t, hostHarness(t))
	sb := w.sandbox(t)
	for name, req := range map[string]Request{
		"long id":         {ID: strings.Repeat("x", MaxIDLen+1), Command: []string{"true"}},
		"no command":      {ID: "x"},
		"empty argv0":     {ID: "x", Command: []string{""}},
		"NUL in arg":      {ID: "x", Command: []string{"echo", "a\x00"}},
		"bad env":         {ID: "x", Command: []string{"true"}, Env: map[string]string{"A-B": "1"}},
		"reserved env":    {ID: "x", Command: []string{"true"}, Env: map[string]string{"SANDBOXKIT_RUN": "1"}},
		"negative budget": {ID: "x", Command: []string{"true"}, Budget: -time.Second},
	} {
		if _, err := Start(testCtx(t), sb, req); sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("%s: err = %v, want InvalidArgument", name, err)
		}
	}
	if _, err := os.Stat(path.Join(sb.Home(), RecordsDir)); err == nil {
		t.Errorf("invalid requests created the runs directory")
	}
}

// A Start without an id gets a fresh one of seed 003's form, so two such
// Starts are two runs (idempotency is by id), each found again by its id.
func TestDefaultID(t *testing.T) {
	w := newWorld(t, hostHarness(t))
	sb := w.sandbox(t)
	req := Request{Command: counterCommand("default.count", 300)}
	r1 := start(t, sb, req)
	r2 := start(t, sb, req)
	re := regexp.MustCompile(`^run-` + regexp.QuoteMeta(sb.ID()) + `-[0-9]{13}-[0-9a-f]{8}$`)
	for _, r := range []*Run{r1, r2} {
		if !re.MatchString(r.ID()) {
			t.Errorf("default id %q does not match %s", r.ID(), re)
		}
	}
	if r1.ID() == r2.ID() {
		t.Fatalf("two Starts without an id got the same id %q", r1.ID())
	}
	waitReady(t, r1)
	waitReady(t, r2)
	if got := readFile(t, sb, "default.count"); got != "run\nrun\n" {
		t.Errorf("command ran %d times (%q), want twice", strings.Count(got, "\n"), got)
	}
	o, err := Open(testCtx(t), sb, r1.ID())
	if err != nil || o.ID() != r1.ID() {
		t.Fatalf("Open(%q): %v, %v", r1.ID(), o, err)
	}
	// Retrying with the returned id is deduplicated.
	req.ID = r1.ID()
	if r3 := start(t, sb, req); r3.PID() != r1.PID() {
		t.Errorf("Start with the default id again: pid %d, want %d", r3.PID(), r1.PID())
	}
}

func TestEncodeID(t *testing.T) {
	seen := map[string]string{}
	ids := []string{"a", "a\x00", "A", "ab", "b", strings.Repeat("z", maxInlineID), strings.Repeat("z", maxInlineID+1), "\xff", "/", ".."}
	for _, id := range ids {
		e := encodeID(id)
		if prev, ok := seen[e]; ok {
			t.Errorf("ids %q and %q share the name %q", prev, id, e)
		}
		seen[e] = id
		if len(e) > 200 || strings.Trim(e, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
			t.Errorf("name %q of %q is not a safe file name", e, id)
		}
	}
}

func TestFingerprint(t *testing.T) {
	base := fingerprint([]string{"a", "b"}, "/d", map[string]string{"X": "1", "Y": "2"})
	if base != fingerprint([]string{"a", "b"}, "/d", map[string]string{"Y": "2", "X": "1"}) {
		t.Error("fingerprint depends on map order")
	}
	for name, fp := range map[string]string{
		"argv split": fingerprint([]string{"ab"}, "/d", map[string]string{"X": "1", "Y": "2"}),
		"argv join":  fingerprint([]string{"a", "b", ""}, "/d", map[string]string{"X": "1", "Y": "2"}),
		"dir":        fingerprint([]string{"a", "b"}, "/e", map[string]string{"X": "1", "Y": "2"}),
		"env value":  fingerprint([]string{"a", "b"}, "/d", map[string]string{"X": "1", "Y": "3"}),
		"env shift":  fingerprint([]string{"a", "b"}, "/d", map[string]string{"X": "1Y", "": "2"}),
		"bad utf8":   fingerprint([]string{"a", "\xff"}, "/d", nil),
		"bad utf8 2": fingerprint([]string{"a", "\xfe"}, "/d", nil),
	} {
		if fp == base {
			t.Errorf("%s: same fingerprint", name)
		}
	}
}

// Offsets count the file's bytes even when the sandbox's secrets make the
// returned data longer or shorter: a poller sees every line once.
func TestReadLogsWithRedaction(t *testing.T) {
	c := sandbox.NewClient(newHostRuntime(t))
	defer c.Close()
	ctx := testCtx(t)
	sb, err := c.Create(ctx, sandbox.CreateOptions{SecretEnv: map[string]string{"S": "abc"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	r := start(t, sb, Request{ID: "redacted", Command: []string{"sh", "-c", `printf 'key=abc\nline2\nline3\nabcabc\n'`}})
	if _, err := r.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	var off int64
	for range 100 {
		ch, err := r.ReadLogs(ctx, off, 8)
		if err != nil {
			t.Fatal(err)
		}
		got.Write(ch.Data)
		off = ch.Next
		if ch.EOF {
			break
		}
	}
	want := "key=[REDACTED]\nline2\nline3\n[REDACTED][REDACTED]\n"
	if got.String() != want {
		t.Fatalf("polled %q, want %q", got.String(), want)
	}
}

// A secret that occurs in the run's own records (here "1", in pids,
// digests and counts, and "0" in the exit code) leaves them intact: only
// the output handed to the caller is redacted.
func TestSecretsInRecordsDoNotCorruptThem(t *testing.T) {
	c := sandbox.NewClient(newHostRuntime(t))
	defer c.Close()
	ctx := testCtx(t)
	sb, err := c.Create(ctx, sandbox.CreateOptions{SecretEnv: map[string]string{"ONE": "1", "ZERO": "0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	for i := range 5 {
		id := fmt.Sprintf("run-%d-10", i)
		r := start(t, sb, Request{ID: id, Command: []string{"sh", "-c", `printf 'a1b0c\n'; exit 10`}})
		st, err := r.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.ExitCode != 10 {
			t.Fatalf("exit code %d, want 10", st.ExitCode)
		}
		ch, err := r.ReadLogs(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := "a[REDACTED]b[REDACTED]c\n"; string(ch.Data) != want || !ch.EOF {
			t.Fatalf("ReadLogs %q (EOF %v), want %q", ch.Data, ch.EOF, want)
		}
		logs, err := r.Logs(ctx, 0)
		if err != nil || string(logs) != "a[REDACTED]b[REDACTED]c\n" {
			t.Fatalf("Logs %q, %v", logs, err)
		}
		if _, err := Open(ctx, sb, id); err != nil {
			t.Fatalf("Open: %v", err)
		}
	}
	ids, err := List(ctx, sb)
	if err != nil || len(ids) != 5 {
		t.Fatalf("List %q, %v", ids, err)
	}
}

// An admission record that is not exactly "<pid> <fingerprint>" of the
// run's request is refused by Status, Open and Start (ErrBadRecord), and a
// Start that finds one kills no wrapper on its word.
func testBadAdmissionRecord(t *testing.T, h harness) {
	w := newWorld(t, h)
	sb := w.sandbox(t)
	counter := path.Join(sb.Home(), "counter")
	req := Request{ID: "admission", Command: counterCommand(counter, 300)}
	r := start(t, sb, req)
	waitReady(t, r)
	rec := path.Join(r.dir, "admission")
	good := strings.TrimSpace(readFile(t, sb, rec))
	pid, fp, err := parseAdmission(good)
	if err != nil || pid != r.PID() || fp != r.Fingerprint() {
		t.Fatalf("admission record %q: pid %d fp %s (%v); the run has pid %d fp %s", good, pid, fp, err, r.PID(), r.Fingerprint())
	}
	other := strings.Repeat("ab", 32)
	p := strconv.Itoa(pid)
	for _, bad := range []string{p, p + " " + other, p + " " + fp + " extra", p + " " + strings.ToUpper(fp), "x" + p + " " + fp, p + "  " + fp} {
		if err := sb.WriteFile(testCtx(t), rec, []byte(bad+"\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Status(testCtx(t)); !errors.Is(err, ErrBadRecord) || sandbox.CodeOf(err) != sandbox.Internal {
			t.Errorf("Status with admission record %q: %v, want ErrBadRecord", bad, err)
		}
		if _, err := Open(testCtx(t), sb, req.ID); !errors.Is(err, ErrBadRecord) {
			t.Errorf("Open with admission record %q: %v, want ErrBadRecord", bad, err)
		}
		if _, err := Start(testCtx(t), sb, req); !errors.Is(err, ErrBadRecord) {
			t.Errorf("Start with admission record %q: %v, want ErrBadRecord", bad, err)
		}
		if wrappers, _ := procs(t, sb, r); wrappers != 1 {
			t.Errorf("with admission record %q: %d wrappers after Start, want the admitted one alive", bad, wrappers)
		}
	}
	if _, err := r.Status(testCtx(t)); err == nil || !strings.Contains(err.Error(), other) && !strings.Contains(err.Error(), "64 hex digits") {
		t.Errorf("error %v does not say what is wrong with the record", err)
	}
	if err := sb.WriteFile(testCtx(t), rec, []byte(good+"\n")); err != nil {
		t.Fatal(err)
	}
	if st, err := r.Status(testCtx(t)); err != nil || st.State != Running || st.PID != pid {
		t.Fatalf("Status with the record restored: %+v, %v", st, err)
	}
}

func TestParseAdmission(t *testing.T) {
	fp := strings.Repeat("0123456789abcdef", 4)
	if pid, got, err := parseAdmission("4242 " + fp); err != nil || pid != 4242 || got != fp {
		t.Fatalf("parseAdmission of a good record: %d %q %v", pid, got, err)
	}
	if pid, got, err := parseAdmission(""); err != nil || pid != 0 || got != "" {
		t.Fatalf("parseAdmission of no record: %d %q %v", pid, got, err)
	}
	for _, bad := range []string{"4242", "4242 ", " 4242 " + fp, "4242 " + fp + " ", "4242\t" + fp, "4242  " + fp, "0 " + fp,
		"04242 " + fp, "-1 " + fp, "+1 " + fp, "4242 " + fp[:63], "4242 " + fp + "0", "4242 " + strings.ToUpper(fp),
		"4242 " + fp + " 7", "99999999999 " + fp, "4242 " + fp[:62] + "g0", fp + " 4242"} {
		if _, _, err := parseAdmission(bad); !errors.Is(err, ErrBadRecord) || sandbox.CodeOf(err) != sandbox.Internal {
			t.Errorf("parseAdmission(%q) = %v, want ErrBadRecord", bad, err)
		}
	}
}
