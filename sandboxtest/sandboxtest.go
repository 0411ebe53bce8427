// Package sandboxtest is the conformance suite every provider runs, like
// testing/fstest.TestFS. It drives the provider through the portable
// sandbox.Client and sandbox.Sandbox, so it checks what users rely on, and
// skips (with the reason) what a provider declares it cannot do in its
// Capabilities. Its last group, "Driver", runs package drivertest on the
// provider's driver.Runtime itself, which fails a driver on its own.
//
// A provider's test calls it once per configuration:
//
//	func TestConformance(t *testing.T) {
//		sandboxtest.Run(t, sandboxtest.Harness{
//			NewClient: func(t *testing.T) *sandbox.Client { return sandbox.NewClient(myprovider.New()) },
//		})
//	}
//
// A provider tested in several configurations runs the whole suite in one
// and, through Harness.Groups, the groups a configuration changes in the
// others; SANDBOXTEST_FULL=1 (FullEnv) runs every group everywhere. The
// groups of one Run go a few at once (SANDBOXTEST_PARALLEL, ParallelEnv),
// each on its own Client; the subtests of a group run one after another,
// but for the few that mostly wait out a timeout or a provider's bound on a
// sandbox of their own (Exec's timeout and deadline subtests,
// Ports/ServerNeverClosesFreesDescriptors, Exec/StallIsAnError), which
// start first and run beside their group on a Client of their own.
// Several Runs may go at once (a provider's configurations, as parallel
// subtests): the subtests that load the host on purpose run alone across
// all of them, each last in its group, once every group of its Run has run
// the others.
//
// Commands the suite runs are POSIX shell lines and argvs using mostly echo,
// printf, cat, pwd, printenv, sleep, true, false and exit, with ";", "&&",
// ">&2" and "$NAME"; the file subtests also use mkdir, touch, rm and ln -s
// (Files/ReadThroughSymlink makes its links from the sandbox's shell).
package sandboxtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/drivertest"
	"github.com/sandboxkit/sandbox/internal/testpar"
)

// Harness describes the provider under test.
type Harness struct {
	// NewClient returns a Client on the provider under test. It is called
	// once per top-level group, from several goroutines at once (groups
	// run concurrently, see ParallelEnv); the suite closes the Client.
	// Each group's Client should own its provider state (a fake, a root)
	// so that one group's faults and listings do not reach another's.
	NewClient func(t *testing.T) *sandbox.Client
	// Create holds the options every sandbox of the suite is created with
	// (a template, provider options); the suite adds its own labels.
	Create sandbox.CreateOptions
	// Skip names subtests (as "Group/Name", or "Group/Name/Case" for one
	// case of a subtest that runs several) to skip, with the reason. Run
	// fails on a key that names no subtest or case of the suite.
	Skip map[string]string
	// Timeout bounds each subtest (default 5 minutes: subtests that move
	// tens of MiB or make hundreds of calls through an adapter, its fake and
	// a backend, with -race, outlast 2 minutes on a starved 2-core host).
	Timeout time.Duration
	// ReadOnlyDir is a directory of every sandbox that its commands cannot
	// write, for the PermissionDenied row of Files/ErrorTable (default
	// /usr). The row skips itself where the sandbox's commands can write
	// it; a provider without read-only places skips it through Skip
	// ("Files/ErrorTable/ReadOnly"), saying why.
	ReadOnlyDir string
	// Fault hooks, for providers tested against a fake that can inject
	// faults; the subtests that need one skip when it is nil (see
	// faults.go).
	Faults FaultHooks
	// StressExecs and StressSandboxes size Stress/ConcurrentExecExact:
	// that many concurrent execs over that many sandboxes (defaults 200
	// and 10) in a full run (FullEnv); a plain run does half the execs
	// and -short a fifth, over the same sandboxes. The environment
	// variable named by StressEnv overrides both, in every mode.
	StressExecs, StressSandboxes int
	// SameProvider, when set, returns a new Client on the same provider
	// state as c (its sandboxes, their processes and terminals), made as
	// another OS process would make it, for the subtests that attach
	// from a second Client after the first one closed. The suite closes
	// it; closing it must leave c working.
	SameProvider func(t *testing.T, c *sandbox.Client) *sandbox.Client
	// HTTPClient, when set, returns the client the Ports group sends its
	// requests through Sandbox.Expose's endpoints with (a fake's edge
	// reached without DNS); nil uses a plain client.
	HTTPClient func(t *testing.T) *http.Client
	// SnapshotSparseSize is the size of the sparse file (a hole and a
	// 4-byte tail, made with truncate) that Snapshots/SparseFile writes,
	// snapshots and checks is still sparse in a sandbox made from the
	// snapshot; 0 skips it (a provider whose sandboxes hold files in
	// memory). 1 GiB is the size providers on disk use.
	SnapshotSparseSize int64
	// Egress, when set, lets the Brokered group check enforcement on the
	// wire against loopback upstreams (see EgressHooks); its Enforced
	// subtests skip without it.
	Egress EgressHooks
	// Groups, when set, names the only groups to run ("Lifecycle",
	// "Exec", ..., "Driver" for drivertest). A provider tested in several
	// configurations (isolation levels, scratch directories) runs the
	// whole suite in one and, in the others, the groups a configuration
	// changes; FullEnv set to 1 runs every group everywhere.
	Groups []string
	// ShortGroups, when set, names the only groups to run under go test
	// -short instead (FullEnv set to 1 still runs them all): for a
	// configuration whose Groups the primary configuration already runs,
	// the few that tell it apart, so that the inner loop stays short
	// while a plain run (make test, CI) keeps every group Groups names.
	ShortGroups []string
}

type suite struct {
	h     Harness
	c     *sandbox.Client
	caps  sandbox.Capabilities
	runID string
}

// FullEnv names the environment variable that, set to 1, runs every
// group in every configuration, ignoring Harness.Groups: a provider's
// test runs the whole suite in one configuration and a subset in the
// others, and a full run (CI's, or before a release) checks them all. A
// full run also gives the subtests that repeat a check under load (see
// full) their full counts and sizes.
const FullEnv = "SANDBOXTEST_FULL"

// full reports whether FullEnv asks for the full run. The subtests that
// repeat one check many times to catch a race, or move more bytes than
// the check needs so that a rare one shows, do all of it then; a plain
// run does a part that still catches the bug each was written for (each
// says why), and -short a smaller part where that holds too.
func full() bool { return os.Getenv(FullEnv) == "1" }

// ParallelEnv names the environment variable that sets how many groups
// of one Run go at once (default 6, defaultParallel; 1 runs them one
// after another).
// Groups are independent (each has its own Client and, in every
// provider's harness, its own provider state), and their time is mostly
// waiting on sandboxes, not CPU, so a few at once finish the suite in a
// fraction of the time even on a 2-core machine.
const ParallelEnv = "SANDBOXTEST_PARALLEL"

// group is one of the suite's groups of subtests.
type group struct {
	name  string
	tests []test
}

// groups returns the suite's groups, in the order they start: those that
// take longest first, so that the last to end is not one started late. The
// subtests of one group run one after another: they share the group's
// Client, and some inject faults into it or count what it lists. It is a
// function, not a variable, because the files of the package add their
// subtests to the groups' lists in init functions, which run after
// package variables are set.
func groups() []group {
	return []group{
		{"Exec", execTests},
		{"Ports", portTests},
		{"Snapshots", snapshotTests},
		{"Watch", watchTests},
		{"Files", fileTests},
		{"Process", processTests},
		{"Terminal", terminalTests},
		{"Lifecycle", lifecycleTests},
		{"Stress", stressTests},
		{"Pause", pauseTests},
		{"Network", networkTests},
		{"Brokered", brokeredTests},
		{"Metrics", metricsTests},
		{"Processes", processListTests},
		{"Concurrency", concurrencyTests},
		{"Telemetry", telemetryTests},
	}
}

// driverGroup is the name of the group that runs drivertest.
const driverGroup = "Driver"

// Run runs the whole suite (or the groups Harness.Groups names) as
// subtests of t, a few groups at once (see ParallelEnv).
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewClient == nil {
		t.Fatal("sandboxtest: Harness.NewClient is nil")
	}
	if h.Timeout == 0 {
		h.Timeout = 5 * time.Minute
	}
	selected, err := h.selection(testing.Short())
	if err != nil {
		t.Fatal(err)
	}
	par, err := parallelism()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkSkip(h.Skip); err != nil {
		t.Fatal(err)
	}
	// Each group runs as a subtest started from its own goroutine
	// (testing allows concurrent Run calls), bounded by sem, rather than
	// through t.Parallel, whose bound (-parallel, GOMAXPROCS by default)
	// counts waiting groups as if they used a CPU each.
	// The slot is taken before the goroutine starts, so that groups start
	// in the order groups lists them, the longest first.
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	// rest counts the groups still running their subtests other than
	// those marked alone, which run last (see below). Every selected
	// group is counted before any starts.
	var rest sync.WaitGroup
	for _, g := range groups() {
		if selected[g.name] {
			rest.Add(1)
		}
	}
	start := func(name string, inRest bool, fn func(t *testing.T, release, restDone func())) {
		if !selected[name] {
			return
		}
		wg.Add(1)
		sem <- struct{}{}
		release := sync.OnceFunc(func() { <-sem })
		restDone := sync.OnceFunc(func() {
			if inRest {
				rest.Done()
			}
		})
		go func() {
			defer wg.Done()
			defer release()
			defer restDone() // also when -run leaves the group out, or it fails early
			t.Run(name, func(t *testing.T) { fn(t, release, restDone) })
		}()
	}
	// The Driver group takes no part in excl: drivertest's bounds are
	// sized for a CPU-starved machine, and holding excl for reading
	// throughout its run, every alone subtest (and every subtest queued
	// behind that one) would wait for all of it.
	start(driverGroup, false, func(t *testing.T, _, _ func()) { runDriver(t, h) })
	for _, g := range groups() {
		start(g.name, true, func(t *testing.T, release, restDone func()) {
			s := newSuite(t, h)
			skipped := func(tc test) (string, bool) {
				reason, skip := h.Skip[g.name+"/"+tc.name]
				if !skip && tc.needs != nil {
					reason = tc.needs(s.caps)
					skip = reason != ""
				}
				return reason, skip
			}
			// Subtests marked own run beside the rest of the group, each
			// on a Client of its own; the group ends when they have. They
			// start before the rest: each mostly waits out a bound, and
			// started last it would add that wait to the group's time.
			var beside sync.WaitGroup
			for _, tc := range g.tests {
				if _, skip := skipped(tc); tc.own && !skip {
					beside.Add(1)
					go func() {
						defer beside.Done()
						runTest(t, tc, false, "", func(t *testing.T) *suite { return newSuite(t, h) })
					}()
				}
			}
			var alone []test
			for _, tc := range g.tests {
				reason, skip := skipped(tc)
				switch {
				case tc.own && !skip:
					continue
				case tc.alone && !skip:
					alone = append(alone, tc)
					continue
				}
				runTest(t, tc, skip, reason, func(*testing.T) *suite { return s })
			}
			restDone()
			// Subtests marked alone run once every group of the Run has
			// run its others: started among them, each held up every
			// other subtest of the test binary (excl) for as long as the
			// longest running one took to end. The group gives up its
			// slot meanwhile, so that the groups not yet started can.
			if len(alone) > 0 {
				release()
				rest.Wait()
				for _, tc := range alone {
					runTest(t, tc, false, "", func(*testing.T) *suite { return s })
				}
			}
			beside.Wait()
		})
	}
	wg.Wait()
}

// Subtests returns the names of the subtests of group (Harness.Skip keys
// without the group's prefix), in the order the group lists them (those
// marked alone run last); none for a name that is no group. A harness
// whose provider cannot do what a whole group checks skips each of them,
// and so skips the group's subtests added later too.
func Subtests(group string) []string {
	var names []string
	for _, g := range groups() {
		if g.name == group {
			for _, tc := range g.tests {
				names = append(names, tc.name)
			}
		}
	}
	return names
}

// excl is held by every subtest of the suite while it runs, for reading,
// and by a subtest marked alone for writing: such a subtest loads the host
// on purpose (busy goroutines, hundreds of execs), and beside it other
// subtests' bounded waits would measure that load instead of their
// provider. It is one for the whole test binary, so that the Runs of one
// package (a provider's configurations, run at once) respect each other's.
var excl sync.RWMutex

// fdCounting is held by a subtest that counts the test process's descriptors
// (test.countsFDs) while it runs. Each runs in a child process of the
// test binary, alone there, and compares the child's count before and
// after with a small slack (in the test process, every other test's
// descriptors blurred the count: a round that did not settle cost its
// 10 s wait); the lock keeps the children, each holding a hundred
// connections at times, to one at a time.
var fdCounting sync.Mutex

// newSuite returns a suite on a Client of its own, closed when t ends.
func newSuite(t *testing.T, h Harness) *suite {
	c := h.NewClient(t)
	t.Cleanup(func() { _ = c.Close() })
	return &suite{h: h, c: c, caps: c.Capabilities(), runID: randHex(6)}
}

// runTest runs tc as a subtest of t, skipped with reason when skip, on
// the suite suiteFor returns. The lock is taken outside the
// subtest, so that its time and its context's bound leave out the wait.
func runTest(t *testing.T, tc test, skip bool, reason string, suiteFor func(t *testing.T) *suite) {
	switch {
	case skip, tc.outsideExcl:
	case tc.alone:
		excl.Lock()
		defer excl.Unlock()
	default:
		excl.RLock()
		defer excl.RUnlock()
	}
	if tc.countsFDs && !skip {
		fdCounting.Lock()
		defer fdCounting.Unlock()
	}
	t.Run(tc.name, func(t *testing.T) {
		if skip {
			t.Skip(reason)
		}
		if tc.countsFDs && !testpar.InChild(t) {
			// Alone in a child process of the test binary, where no
			// other test's descriptors blur the count.
			testpar.RunInChild(t)
			return
		}
		s := suiteFor(t)
		ctx, cancel := context.WithTimeout(context.Background(), s.h.Timeout)
		defer cancel()
		tc.fn(ctx, t, s)
	})
}

// checkSkip returns an error naming each key of skip that names no
// subtest or case of the suite (a misspelt or renamed key would otherwise
// skip nothing, silently). Keys under "Driver/" are drivertest's, which
// checks them.
func checkSkip(skip map[string]string) error {
	known := map[string]bool{}
	for _, g := range groups() {
		for _, tc := range g.tests {
			known[g.name+"/"+tc.name] = true
			for _, c := range tc.cases {
				known[g.name+"/"+tc.name+"/"+c] = true
			}
		}
	}
	var bad []string
	for k := range skip {
		if !known[k] && !strings.HasPrefix(k, driverGroup+"/") {
			bad = append(bad, strconv.Quote(k))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return fmt.Errorf("sandboxtest: Harness.Skip names %s, which is no subtest of the suite (want \"Group/Name\", or \"Group/Name/Case\" for a case a subtest lets be skipped)", strings.Join(bad, ", "))
}

// selection returns the set of groups h runs: ShortGroups' under -short
// (short) when set, Groups' otherwise (see selectGroups). Both lists are
// checked either way, so that a misspelt name fails every run.
func (h Harness) selection(short bool) (map[string]bool, error) {
	sel, err := selectGroups("Groups", h.Groups)
	if err != nil || h.ShortGroups == nil {
		return sel, err
	}
	shortSel, err := selectGroups("ShortGroups", h.ShortGroups)
	if err != nil || !short {
		return sel, err
	}
	return shortSel, nil
}

// selectGroups returns the set of groups to run: those names lists (all
// when it is empty or FullEnv is 1), or an error naming one that is no
// group (and field, the Harness field that lists it).
func selectGroups(field string, names []string) (map[string]bool, error) {
	all := map[string]bool{driverGroup: true}
	for _, g := range groups() {
		all[g.name] = true
	}
	if len(names) == 0 {
		return all, nil
	}
	sel := map[string]bool{}
	for _, n := range names {
		if !all[n] {
			return nil, fmt.Errorf("sandboxtest: Harness.%s names %q, which is no group of the suite", field, n)
		}
		sel[n] = true
	}
	if full() {
		return all, nil
	}
	return sel, nil
}

// defaultParallel is how many groups of a Run go at once unless
// ParallelEnv says otherwise.
const defaultParallel = 6

// parallelism returns how many groups run at once: ParallelEnv's value,
// or defaultParallel.
func parallelism() (int, error) {
	v := os.Getenv(ParallelEnv)
	if v == "" {
		return defaultParallel, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("sandboxtest: %s=%q: want a whole number of groups at once, at least 1", ParallelEnv, v)
	}
	return n, nil
}

// runDriver runs drivertest on the Runtime of the harness's Clients, so a
// provider's one conformance test checks both layers. Skip entries named
// "Driver/<subtest>" go to drivertest.
func runDriver(t *testing.T, h Harness) {
	skip := map[string]string{}
	for k, v := range h.Skip {
		if name, ok := strings.CutPrefix(k, "Driver/"); ok {
			skip[name] = v
		}
	}
	if reason, ok := h.Skip["Files/ErrorTable/ReadOnly"]; ok {
		if _, set := skip["Codes/ReadOnly"]; !set {
			skip["Codes/ReadOnly"] = reason
		}
	}
	o := h.Create
	drivertest.Run(t, drivertest.Harness{
		NewRuntime: func(t *testing.T) driver.Runtime {
			c := h.NewClient(t)
			t.Cleanup(func() { _ = c.Close() })
			return c.Runtime()
		},
		Create: driver.CreateRequest{Template: o.Template, Labels: o.Labels, Env: o.Env, Timeout: o.Timeout,
			AutoPause: o.AutoPause, Resources: driver.Resources(o.Resources), NoNetwork: o.NoNetwork, Options: o.ProviderOptions},
		Skip:        skip,
		Timeout:     h.Timeout,
		ReadOnlyDir: h.ReadOnlyDir,
	})
}

type test struct {
	name  string
	needs func(sandbox.Capabilities) string // "" when runnable, else why not
	fn    func(ctx context.Context, t *testing.T, s *suite)
	// alone: no other subtest of the suite runs beside this one (it
	// loads the host on purpose; see excl). It runs last in its group,
	// once every group of its Run has run its other subtests.
	alone bool
	// countsFDs: it counts the test process's descriptors, and opens many:
	// it runs in a child process of the test binary, and no two such
	// subtests run at once, in any Run (see fdCounting).
	countsFDs bool
	// cases are the names of its cases that Harness.Skip may name one by
	// one ("Group/Name/Case"), for a subtest that runs several.
	cases []string
	// own: it runs beside the rest of its group, on a Client of its own
	// (Harness.NewClient), as if it were a group of its own, started
	// before the rest. For a subtest that mostly waits out a timeout or a
	// provider's bound on a sandbox of its own: it arms its Client's
	// faults for itself alone, and the group's other subtests do not wait
	// behind it.
	own bool
	// outsideExcl: it takes no part in excl. For an own subtest that
	// waits out a bound of many seconds with seconds of slack, more than
	// an alone subtest's load adds: taking excl, it would hold every alone
	// subtest, and every subtest behind that one, for its whole wait.
	outsideExcl bool
}

func needsProcesses(c sandbox.Capabilities) string {
	if !c.Processes {
		return "provider has no background processes (Capabilities.Processes=false: not a driver.ProcessRuntime)"
	}
	return ""
}

func needsPause(c sandbox.Capabilities) string {
	if !c.Pause {
		return "provider has no pause (Capabilities.Pause=false: not a driver.Pauser)"
	}
	return ""
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// skipCase skips t, the case named name of the suite's subtest parent
// ("Group/Name"), when Harness.Skip names it ("Group/Name/Case").
func (s *suite) skipCase(t *testing.T, parent, name string) {
	t.Helper()
	if reason, ok := s.h.Skip[parent+"/"+name]; ok {
		t.Skip(reason)
	}
}

// create makes a sandbox labelled for this run and destroys it at cleanup.
func (s *suite) create(ctx context.Context, t *testing.T, labels map[string]string) *sandbox.Sandbox {
	t.Helper()
	opts := s.h.Create
	opts.Labels = map[string]string{"sandboxtest": s.runID}
	for k, v := range s.h.Create.Labels {
		opts.Labels[k] = v
	}
	for k, v := range labels {
		opts.Labels[k] = v
	}
	sb, err := s.c.Create(ctx, opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sb.Destroy(ctx); err != nil {
			t.Errorf("cleanup Destroy(%s): %v", sb.ID(), err)
		}
	})
	return sb
}

func must[T any](t *testing.T, what string) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func sh(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, line string) *sandbox.Result {
	t.Helper()
	return must[*sandbox.Result](t, "Exec "+line)(sb.Exec(ctx, sandbox.Command{Shell: line}))
}

func wantCode(t *testing.T, err error, code sandbox.Code, sentinels ...error) {
	t.Helper()
	if got := sandbox.CodeOf(err); got != code {
		t.Fatalf("error %v: code %v, want %v", err, got, code)
	}
	var se *sandbox.Error
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not a *sandbox.Error", err, err)
	}
	for _, s := range sentinels {
		if !errors.Is(err, s) {
			t.Fatalf("error %v does not match %v", err, s)
		}
	}
}

var lifecycleTests = []test{
	{name: "CreateAttachDestroy", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		in := sb.Info()
		if in.ID == "" || in.ID != sb.ID() {
			t.Fatalf("Info.ID %q, ID() %q", in.ID, sb.ID())
		}
		if in.State != sandbox.StateRunning {
			t.Errorf("new sandbox state %q, want running", in.State)
		}
		if in.Provider != s.c.Provider() {
			t.Errorf("Info.Provider %q, want %q", in.Provider, s.c.Provider())
		}
		if !strings.HasPrefix(in.Home, "/") {
			t.Errorf("Info.Home %q is not absolute", in.Home)
		}
		if in.Labels["sandboxtest"] != s.runID {
			t.Errorf("labels %v lack sandboxtest=%s", in.Labels, s.runID)
		}
		att := must[*sandbox.Sandbox](t, "Attach")(s.c.Attach(ctx, sb.ID()))
		if att.ID() != sb.ID() || att.Info().Labels["sandboxtest"] != s.runID {
			t.Errorf("Attach returned %+v", att.Info())
		}
		if r := sh(ctx, t, att, "echo attached"); string(r.Stdout) != "attached\n" {
			t.Errorf("exec through attached handle: %q", r.Stdout)
		}
		if err := sb.Destroy(ctx); err != nil {
			t.Fatalf("Destroy: %v", err)
		}
		_, err := s.c.Attach(ctx, sb.ID())
		wantCode(t, err, sandbox.NotFound, sandbox.ErrNotFound)
		if err := sb.Destroy(ctx); err != nil {
			t.Errorf("second Destroy = %v, want nil (idempotent)", err)
		}
		_, err = sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
		if sandbox.CodeOf(err) != sandbox.NotFound {
			t.Errorf("Exec on destroyed sandbox: %v, want NotFound", err)
		}
	}},
	{name: "ListByLabelsAndPages", fn: func(ctx context.Context, t *testing.T, s *suite) {
		group := randHex(4)
		var ids []string
		for i := range 3 {
			sb := s.create(ctx, t, map[string]string{"group": group, "n": fmt.Sprint(i % 2)})
			ids = append(ids, sb.ID())
		}
		got := map[string]bool{}
		for in, err := range s.c.List(ctx, sandbox.ListOptions{Labels: map[string]string{"group": group}, PageSize: 1}) {
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if got[in.ID] {
				t.Errorf("List yielded %s twice", in.ID)
			}
			got[in.ID] = true
		}
		for _, id := range ids {
			if !got[id] {
				t.Errorf("List with page size 1 missed %s (got %v)", id, got)
			}
		}
		if len(got) != 3 {
			t.Errorf("List returned %d sandboxes, want 3", len(got))
		}
		n := 0
		for in, err := range s.c.List(ctx, sandbox.ListOptions{Labels: map[string]string{"group": group, "n": "1"}}) {
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if in.Labels["n"] != "1" {
				t.Errorf("label filter let through %v", in.Labels)
			}
			n++
		}
		if n != 1 {
			t.Errorf("AND of labels matched %d sandboxes, want 1", n)
		}
		for range s.c.List(ctx, sandbox.ListOptions{Labels: map[string]string{"group": group}, States: []sandbox.State{sandbox.StateError}}) {
			t.Error("state filter error matched a running sandbox")
		}
		// Stopping early must not fail.
		for range s.c.List(ctx, sandbox.ListOptions{Labels: map[string]string{"group": group}}) {
			break
		}
	}},
	{name: "ListExcludeIDs", fn: func(ctx context.Context, t *testing.T, s *suite) {
		// A caller looking for another sandbox than those it holds: the
		// excluded ones never come back, and pages that held only excluded
		// sandboxes (page size 1, the oldest excluded) do not end the look-up.
		group := randHex(4)
		var ids []string
		for range 3 {
			ids = append(ids, s.create(ctx, t, map[string]string{"group": group}).ID())
		}
		list := func(exclude []string) []string {
			var got []string
			for in, err := range s.c.List(ctx, sandbox.ListOptions{Labels: map[string]string{"group": group}, PageSize: 1, ExcludeIDs: exclude}) {
				if err != nil {
					t.Fatalf("List excluding %v: %v", exclude, err)
				}
				got = append(got, in.ID)
			}
			return got
		}
		for _, ex := range [][]string{{ids[0], ids[1]}, {ids[1]}, {ids[2], "no-such-id"}} {
			got := list(ex)
			var want []string
			for _, id := range ids {
				if !slices.Contains(ex, id) {
					want = append(want, id)
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("List excluding %v = %v, want %v", ex, got, want)
			}
		}
		if got := list(ids); len(got) != 0 {
			t.Errorf("List excluding every match = %v, want none", got)
		}
	}},
	{name: "GetOrCreate", fn: func(ctx context.Context, t *testing.T, s *suite) {
		opts := s.h.Create
		opts.Labels = map[string]string{"sandboxtest": s.runID, "key": randHex(4)}
		sb, created, err := s.c.GetOrCreate(ctx, opts)
		if err != nil || !created {
			t.Fatalf("first GetOrCreate: created=%v err=%v", created, err)
		}
		t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
		again, created, err := s.c.GetOrCreate(ctx, opts)
		if err != nil || created || again.ID() != sb.ID() {
			t.Fatalf("second GetOrCreate: id %v created=%v err=%v, want %s reused", again, created, err, sb.ID())
		}
		_, _, err = s.c.GetOrCreate(ctx, sandbox.CreateOptions{})
		wantCode(t, err, sandbox.InvalidArgument)
	}},
	{name: "SetTimeoutOnlyExtends", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		if err := sb.SetTimeout(ctx, 20*time.Minute); err != nil {
			t.Fatalf("SetTimeout(20m): %v", err)
		}
		in := must[sandbox.Info](t, "Refresh")(sb.Refresh(ctx))
		if in.LeaseEnd.IsZero() {
			t.Skip("provider reports no lease end")
		}
		if time.Until(in.LeaseEnd) < 15*time.Minute {
			t.Fatalf("lease ends in %v after SetTimeout(20m)", time.Until(in.LeaseEnd))
		}
		if err := sb.SetTimeout(ctx, time.Minute); err != nil {
			t.Fatalf("SetTimeout(1m): %v", err)
		}
		in2 := must[sandbox.Info](t, "Refresh")(sb.Refresh(ctx))
		if in2.LeaseEnd.Before(in.LeaseEnd.Add(-time.Second)) {
			t.Errorf("SetTimeout(1m) shortened the lease from %v to %v", in.LeaseEnd, in2.LeaseEnd)
		}
		wantCode(t, sb.SetTimeout(ctx, -time.Second), sandbox.InvalidArgument)
	}},
	{name: "BadInput", fn: func(ctx context.Context, t *testing.T, s *suite) {
		for _, id := range []string{"", "../x", "a b", "id\x00", strings.Repeat("x", 300)} {
			_, err := s.c.Attach(ctx, id)
			wantCode(t, err, sandbox.InvalidArgument, sandbox.ErrInvalidArgument)
			if !strings.Contains(err.Error(), "sandbox id") {
				t.Errorf("error %q does not name the input", err)
			}
		}
		_, err := s.c.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"bad key!": "v"}})
		wantCode(t, err, sandbox.InvalidArgument)
		_, err = s.c.Create(ctx, sandbox.CreateOptions{Timeout: -time.Second})
		wantCode(t, err, sandbox.InvalidArgument)
		_, err = s.c.Create(ctx, sandbox.CreateOptions{Env: map[string]string{"1X": "v"}})
		wantCode(t, err, sandbox.InvalidArgument)
	}},
}

var execTests = []test{
	{name: "ExitCodes", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		for line, want := range map[string]int{"true": 0, "false": 1, "exit 3": 3, "echo x; exit 42": 42} {
			if r := sh(ctx, t, sb, line); r.ExitCode != want || r.TimedOut {
				t.Errorf("%q: exit %d timedOut=%v, want %d", line, r.ExitCode, r.TimedOut, want)
			}
		}
		r := must[*sandbox.Result](t, "Exec argv")(sb.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", "exit 7"}}))
		if r.ExitCode != 7 {
			t.Errorf("argv sh -c 'exit 7': exit %d", r.ExitCode)
		}
		r = must[*sandbox.Result](t, "Exec missing")(sb.Exec(ctx, sandbox.Command{Args: []string{"no-such-program-sandboxtest"}}))
		if r.ExitCode != 127 {
			t.Errorf("missing program: exit %d, want 127 (stderr %q)", r.ExitCode, r.Stderr)
		}
	}},
	{name: "SplitStreams", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		r := sh(ctx, t, sb, "echo out; echo err >&2; echo out2")
		if string(r.Stdout) != "out\nout2\n" || string(r.Stderr) != "err\n" {
			t.Errorf("stdout %q stderr %q", r.Stdout, r.Stderr)
		}
	}},
	{name: "ArgvIsNotShell", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		arg := `a b; echo $HOME 'q' "d" \ > x`
		r := must[*sandbox.Result](t, "Exec")(sb.Exec(ctx, sandbox.Command{Args: []string{"echo", arg}}))
		if string(r.Stdout) != arg+"\n" {
			t.Errorf("argv echo printed %q, want %q", r.Stdout, arg+"\n")
		}
	}},
	{name: "EnvAndDir", fn: func(ctx context.Context, t *testing.T, s *suite) {
		opts := s.h.Create
		opts.Labels = map[string]string{"sandboxtest": s.runID}
		opts.Env = map[string]string{"SBX_CREATE_ENV": "from-create"}
		sb := must[*sandbox.Sandbox](t, "Create")(s.c.Create(ctx, opts))
		t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
		r := must[*sandbox.Result](t, "Exec")(sb.Exec(ctx, sandbox.Command{
			Shell: "printenv SBX_CMD_ENV; printenv SBX_CREATE_ENV", Env: map[string]string{"SBX_CMD_ENV": "v a=l"}}))
		if string(r.Stdout) != "v a=l\nfrom-create\n" {
			t.Errorf("env: %q (stderr %q)", r.Stdout, r.Stderr)
		}
		home := sb.Home()
		if r := sh(ctx, t, sb, "pwd"); string(r.Stdout) != home+"\n" {
			t.Errorf("default dir %q, want home %q", r.Stdout, home)
		}
		if err := sb.MkdirAll(ctx, "sub dir"); err != nil {
			t.Fatal(err)
		}
		r = must[*sandbox.Result](t, "Exec")(sb.Exec(ctx, sandbox.Command{Args: []string{"pwd"}, Dir: "sub dir"}))
		if string(r.Stdout) != home+"/sub dir\n" {
			t.Errorf("Dir relative: pwd %q", r.Stdout)
		}
	}},
	{name: "Stdin", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		in := "line one\nline two\x00\xff\n"
		r := must[*sandbox.Result](t, "Exec")(sb.Exec(ctx, sandbox.Command{Args: []string{"cat"}, Stdin: strings.NewReader(in)}))
		if string(r.Stdout) != in {
			t.Errorf("cat echoed %q, want %q", r.Stdout, in)
		}
		// Without Stdin, stdin is closed: cat ends at once instead of hanging.
		r = must[*sandbox.Result](t, "Exec")(sb.Exec(ctx, sandbox.Command{Args: []string{"cat"}, Timeout: 20 * time.Second}))
		if r.TimedOut || r.ExitCode != 0 || len(r.Stdout) != 0 {
			t.Errorf("cat without stdin: exit %d timedOut %v out %q", r.ExitCode, r.TimedOut, r.Stdout)
		}
	}},
	{name: "StreamsBeforeExit", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w := &signalWriter{want: "ready", hit: cancel}
		start := time.Now()
		r, err := sb.Exec(cctx, sandbox.Command{Shell: "echo ready; sleep 60", Stdout: w})
		if sandbox.CodeOf(err) != sandbox.Canceled {
			t.Fatalf("Exec after cancel: err %v, want Canceled", err)
		}
		if r == nil || !strings.Contains(string(r.Stdout), "ready") {
			t.Fatalf("partial result %+v lacks the output streamed before cancel", r)
		}
		if time.Since(start) > 45*time.Second {
			t.Errorf("cancel did not end the command (took %v)", time.Since(start))
		}
		if !strings.Contains(w.String(), "ready") {
			t.Errorf("live writer got %q", w.String())
		}
	}},
	{name: "TimeoutKeepsPartialOutput", own: true, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		start := time.Now()
		r, err := sb.Exec(ctx, sandbox.Command{Shell: "echo partial; echo e >&2; sleep 60", Timeout: 2 * time.Second})
		if err != nil {
			t.Fatalf("timed-out Exec returned error %v, want a Result", err)
		}
		if !r.TimedOut || r.TimeoutBy != sandbox.TimeoutCommand || r.Timeout != 2*time.Second || r.ExitCode != -1 || r.Signal != 0 {
			t.Errorf("result %+v, want TimedOut by command after 2s, exit -1, no Signal (TimedOut is a timeout's one mark)", r)
		}
		if string(r.Stdout) != "partial\n" || string(r.Stderr) != "e\n" {
			t.Errorf("partial output %q / %q", r.Stdout, r.Stderr)
		}
		if time.Since(start) > 45*time.Second {
			t.Errorf("timeout did not end the command (took %v)", time.Since(start))
		}
		// The sandbox still works afterwards.
		if r := sh(ctx, t, sb, "echo after"); string(r.Stdout) != "after\n" {
			t.Errorf("after timeout: %q", r.Stdout)
		}
	}},
	{name: "ContextDeadline", own: true, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		r, err := sb.Exec(dctx, sandbox.Command{Shell: "echo early; sleep 60"})
		if r == nil {
			t.Fatalf("no partial result (err %v)", err)
		}
		if !r.TimedOut || r.TimeoutBy != sandbox.TimeoutContext {
			t.Errorf("result %+v err %v: want TimedOut by context", r, err)
		}
		if err != nil && sandbox.CodeOf(err) != sandbox.DeadlineExceeded {
			t.Errorf("err %v, want nil or DeadlineExceeded", err)
		}
		if !strings.Contains(string(r.Stdout), "early") {
			t.Errorf("partial stdout %q", r.Stdout)
		}
	}},
	{name: "ContextDeadlineKeepsOutputInFlight", own: true, fn: func(ctx context.Context, t *testing.T, s *suite) {
		// The caller's writer is slow: it holds its first write until
		// after the deadline, so the command's second line, written well
		// before the deadline, is still on its way when ctx ends. Output
		// the command wrote before the deadline is part of the partial
		// result however far behind the reading was.
		sb := s.create(ctx, t, nil)
		sh(ctx, t, sb, "true") // started: the command runs at once
		for _, d := range []time.Duration{3 * time.Second, 8 * time.Second} {
			if outputInFlight(ctx, t, sb, d) {
				return
			}
		}
		t.Skip("the command's second line was not seen written before the deadline (3 s, then 8 s): this host is too loaded to tell")
	}},
	{name: "OutputCap", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		var live bytes.Buffer
		r := must[*sandbox.Result](t, "Exec")(sb.Exec(ctx, sandbox.Command{Shell: "echo hello world; echo er >&2", MaxOutput: 4, Stdout: &live}))
		if string(r.Stdout) != "hell" || !r.StdoutTruncated {
			t.Errorf("capped stdout %q truncated=%v", r.Stdout, r.StdoutTruncated)
		}
		if string(r.Stderr) != "er\n" || r.StderrTruncated {
			t.Errorf("stderr %q truncated=%v", r.Stderr, r.StderrTruncated)
		}
		if live.String() != "hello world\n" {
			t.Errorf("live writer got %q, want the whole output", live.String())
		}
	}},
	{name: "SecretsRedacted", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		secret := "s3cr3t-" + randHex(8)
		var live bytes.Buffer
		r := must[*sandbox.Result](t, "Exec")(sb.Exec(ctx, sandbox.Command{
			Shell: "echo token=$TOKEN; echo $TOKEN >&2", SecretEnv: map[string]string{"TOKEN": secret}, Stdout: &live}))
		for _, out := range []string{string(r.Stdout), string(r.Stderr), live.String()} {
			if strings.Contains(out, secret) {
				t.Fatalf("secret leaked: %q", out)
			}
		}
		if string(r.Stdout) != "token=[REDACTED]\n" {
			t.Errorf("stdout %q", r.Stdout)
		}
	}},
	{name: "OverlappingSecretsRedacted", fn: func(ctx context.Context, t *testing.T, s *suite) {
		// Two values that overlap in the output (the end of one is the
		// start of the other) are replaced as one span: no part of either
		// shows. So is a value of several lines.
		sb := s.create(ctx, t, nil)
		user, pass := "deploy-X", "X"+randHex(12)+"_pw"
		key := "-----BEGIN KEY-----\n" + randHex(16) + "\n-----END KEY-----"
		var live bytes.Buffer
		r := must[*sandbox.Result](t, "Exec")(sb.Exec(ctx, sandbox.Command{
			Shell:     `printf 'login deploy-%s ok\n' "$P"; printf '%s\n' "$KEY"`,
			SecretEnv: map[string]string{"U": user, "P": pass, "KEY": key}, Stdout: &live}))
		for _, out := range []string{string(r.Stdout), live.String()} {
			for _, part := range []string{pass[1:], user[:len(user)-1], key[20:36]} {
				if strings.Contains(out, part) {
					t.Fatalf("part %q of a secret in the output: %q", part, out)
				}
			}
		}
		if want := "login [REDACTED] ok\n[REDACTED]\n"; string(r.Stdout) != want {
			t.Errorf("stdout %q, want %q", r.Stdout, want)
		}
	}},
	{name: "BadInput", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		for name, cmd := range map[string]sandbox.Command{
			"empty":       {},
			"both":        {Args: []string{"true"}, Shell: "true"},
			"empty argv0": {Args: []string{""}},
			"nul":         {Args: []string{"echo", "a\x00b"}},
			"timeout":     {Args: []string{"true"}, Timeout: -1},
			"max output":  {Args: []string{"true"}, MaxOutput: -1},
			"env":         {Args: []string{"true"}, Env: map[string]string{"A=B": "c"}},
			"dir":         {Args: []string{"true"}, Dir: "a\nb"},
		} {
			_, err := sb.Exec(ctx, cmd)
			if sandbox.CodeOf(err) != sandbox.InvalidArgument {
				t.Errorf("%s: err %v, want InvalidArgument", name, err)
			}
		}
	}},
}

// signalWriter calls hit once when want appears in what was written.
// laggingWriter is a caller's slow writer: its first Write returns only
// lag after until is closed.
// outputInFlight runs ContextDeadlineKeepsOutputInFlight's command under
// a deadline d away and checks its partial result. Whether the second
// line was written before the deadline is known from a file the command
// makes after writing it, looked for while the command runs (a loaded
// host may start the command late); it reports false, having checked
// only what does not depend on that, when the file was not seen in time.
func outputInFlight(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, d time.Duration) bool {
	t.Helper()
	mark := fmt.Sprintf("inflight-%d", d/time.Millisecond)
	dctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	deadline, _ := dctx.Deadline()
	var before atomic.Bool
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-dctx.Done():
				return
			case <-tick.C:
			}
			if _, err := sb.Stat(dctx, mark); err == nil {
				before.Store(time.Now().Before(deadline))
				return
			}
		}
	}()
	live := &laggingWriter{until: dctx.Done(), lag: 300 * time.Millisecond}
	r, err := sb.Exec(dctx, sandbox.Command{Shell: "echo first; sleep 0.5; echo second; : > " + mark + "; sleep 60", Stdout: live})
	<-polled
	if r == nil {
		t.Fatalf("no partial result (err %v)", err)
	}
	if !r.TimedOut || r.TimeoutBy != sandbox.TimeoutContext {
		t.Errorf("result %+v err %v: want TimedOut by context", r, err)
	}
	if !before.Load() {
		t.Logf("with a %v deadline the second line was not seen written in time (partial stdout %q)", d, r.Stdout)
		return false
	}
	if string(r.Stdout) != "first\nsecond\n" {
		t.Errorf("partial stdout %q, want %q: output written before the %v deadline was lost", r.Stdout, "first\nsecond\n", d)
	}
	return true
}

type laggingWriter struct {
	until <-chan struct{}
	lag   time.Duration
	once  sync.Once
}

func (w *laggingWriter) Write(b []byte) (int, error) {
	w.once.Do(func() {
		<-w.until
		time.Sleep(w.lag)
	})
	return len(b), nil
}

type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	hit  func()
	done bool
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.want) {
		w.done = true
		w.hit()
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// startSleeper starts a background "sleep 60" in sb and returns once it
// has written its first line (so it runs), killing it should that never
// come.
func startSleeper(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) *sandbox.Process {
	t.Helper()
	return startAnnounced(ctx, t, sb, "echo started; sleep 60")
}

// startAnnounced starts the shell script in the background, and returns
// once it has written "started" (the script must), killing it should that
// never come.
func startAnnounced(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, script string) *sandbox.Process {
	t.Helper()
	seen := make(chan struct{})
	var once sync.Once
	w := &signalWriter{want: "started", hit: func() { once.Do(func() { close(seen) }) }}
	p := must[*sandbox.Process](t, "Start")(sb.Start(ctx, sandbox.Command{Shell: script, Stdout: w}))
	select {
	case <-seen:
	case <-ctx.Done():
		_ = p.Kill(context.WithoutCancel(ctx))
		t.Fatal("no live output from the background process")
	}
	return p
}

var processTests = []test{
	{name: "WaitExitCode", needs: needsProcesses, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		p := must[*sandbox.Process](t, "Start")(sb.Start(ctx, sandbox.Command{Shell: "echo bg; sleep 0.2; exit 4"}))
		if p.PID() <= 0 {
			t.Errorf("PID %d", p.PID())
		}
		r := must[*sandbox.Result](t, "Wait")(p.Wait(ctx))
		if r.ExitCode != 4 || string(r.Stdout) != "bg\n" {
			t.Errorf("Wait: exit %d stdout %q", r.ExitCode, r.Stdout)
		}
		again := must[*sandbox.Result](t, "Wait again")(p.Wait(ctx))
		if again.ExitCode != 4 {
			t.Errorf("second Wait: %d", again.ExitCode)
		}
	}},
	{name: "OutlivesStartContext", needs: needsProcesses, own: true, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		sctx, cancel := context.WithCancel(ctx)
		p := must[*sandbox.Process](t, "Start")(sb.Start(sctx, sandbox.Command{Shell: "sleep 1; echo survived"}))
		cancel()
		r := must[*sandbox.Result](t, "Wait")(p.Wait(ctx))
		if r.ExitCode != 0 || string(r.Stdout) != "survived\n" {
			t.Errorf("after Start ctx canceled: exit %d out %q", r.ExitCode, r.Stdout)
		}
	}},
	{name: "Kill", needs: needsProcesses, fn: func(ctx context.Context, t *testing.T, s *suite) {
		p := startSleeper(ctx, t, s.create(ctx, t, nil))
		if err := p.Kill(ctx); err != nil {
			t.Fatalf("Kill: %v", err)
		}
		r := must[*sandbox.Result](t, "Wait")(p.Wait(ctx))
		if r.ExitCode == 0 {
			t.Errorf("killed process exit 0")
		}
		if string(r.Stdout) != "started\n" {
			t.Errorf("captured %q", r.Stdout)
		}
	}},
	{name: "Stdin", needs: needsProcesses, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		p := must[*sandbox.Process](t, "Start")(sb.Start(ctx, sandbox.Command{Args: []string{"cat"}, Stdin: strings.NewReader("to the background\n")}))
		r := must[*sandbox.Result](t, "Wait")(p.Wait(ctx))
		if string(r.Stdout) != "to the background\n" {
			t.Errorf("cat got %q", r.Stdout)
		}
	}},
	{name: "AttachByPID", needs: needsProcesses, own: true, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		p := must[*sandbox.Process](t, "Start")(sb.Start(ctx, sandbox.Command{Shell: "sleep 2; echo late; exit 5"}))
		defer p.Close()
		att := must[*sandbox.Process](t, "AttachProcess")(sb.AttachProcess(ctx, p.PID(), nil, nil))
		r := must[*sandbox.Result](t, "Wait attached")(att.Wait(ctx))
		if r.ExitCode != 5 || string(r.Stdout) != "late\n" {
			t.Errorf("attached Wait: exit %d out %q", r.ExitCode, r.Stdout)
		}
		_, err := sb.AttachProcess(ctx, 999999, nil, nil)
		if sandbox.CodeOf(err) != sandbox.NotFound {
			t.Errorf("attach to unknown pid: %v, want NotFound", err)
		}
	}},
}

var fileTests = []test{
	{name: "RunRightAfterWrite", fn: testRunRightAfterWrite},
	{name: "BinaryRoundTrip", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		all := make([]byte, 0, 512)
		for i := range 256 {
			all = append(all, byte(i))
		}
		all = append(all, 0, 0, '\n', 0)
		if err := sb.WriteFile(ctx, "bin/all.bytes", all); err != nil {
			t.Fatal(err)
		}
		got := must[[]byte](t, "ReadFile")(sb.ReadFile(ctx, "bin/all.bytes"))
		if !bytes.Equal(got, all) {
			t.Fatalf("round trip changed the bytes: %x", got)
		}
		fi := must[sandbox.FileInfo](t, "Stat")(sb.Stat(ctx, "bin/all.bytes"))
		if fi.Size != int64(len(all)) || fi.IsDir() || fi.Name() != "all.bytes" {
			t.Errorf("Stat: %+v", fi)
		}
		if err := sb.WriteFile(ctx, "empty", nil); err != nil {
			t.Fatal(err)
		}
		if got := must[[]byte](t, "ReadFile empty")(sb.ReadFile(ctx, "empty")); len(got) != 0 {
			t.Errorf("empty file read back %d bytes", len(got))
		}
		// Overwrite truncates.
		check(t, sb.WriteFile(ctx, "bin/all.bytes", []byte("short")))
		if got := must[[]byte](t, "ReadFile")(sb.ReadFile(ctx, "bin/all.bytes")); string(got) != "short" {
			t.Errorf("overwrite left %q", got)
		}
	}},
	{name: "LargeStreamed", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		const size = 10 << 20
		src := io.LimitReader(&patternReader{}, size)
		h := sha256.New()
		if err := sb.Upload(ctx, "big/ten.bin", io.TeeReader(src, h)); err != nil {
			t.Fatalf("Upload: %v", err)
		}
		want := h.Sum(nil)
		rc := must[io.ReadCloser](t, "Download")(sb.Download(ctx, "big/ten.bin"))
		defer rc.Close()
		h2 := sha256.New()
		n, err := io.Copy(h2, rc)
		if err != nil || n != size || !bytes.Equal(h2.Sum(nil), want) {
			t.Fatalf("download: %d bytes, err %v, hash match %v", n, err, bytes.Equal(h2.Sum(nil), want))
		}
		if fi := must[sandbox.FileInfo](t, "Stat")(sb.Stat(ctx, "big/ten.bin")); fi.Size != size {
			t.Errorf("Stat size %d", fi.Size)
		}
	}},
	{name: "UnicodeNames", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		name := "dür ü/файл 名前 report..final.md"
		if err := sb.WriteFile(ctx, name, []byte("ü")); err != nil {
			t.Fatal(err)
		}
		if got := must[[]byte](t, "ReadFile")(sb.ReadFile(ctx, name)); string(got) != "ü" {
			t.Errorf("got %q", got)
		}
		list := must[[]sandbox.FileInfo](t, "ReadDir")(sb.ReadDir(ctx, "dür ü"))
		if len(list) != 1 || list[0].Name() != "файл 名前 report..final.md" {
			t.Errorf("ReadDir: %+v", list)
		}
	}},
	{name: "Missing", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		_, err := sb.ReadFile(ctx, "nope/missing.txt")
		wantCode(t, err, sandbox.NotFound, sandbox.ErrNotFound, fs.ErrNotExist)
		var se *sandbox.Error
		if errors.As(err, &se) && (se.Path != sb.Home()+"/nope/missing.txt" || se.SandboxID != sb.ID() || se.Op == "") {
			t.Errorf("*Error fields: %+v", se)
		}
		_, err = sb.Stat(ctx, "missing")
		wantCode(t, err, sandbox.NotFound, fs.ErrNotExist)
		_, err = sb.ReadDir(ctx, "missing")
		wantCode(t, err, sandbox.NotFound, fs.ErrNotExist)
		wantCode(t, sb.Remove(ctx, "missing"), sandbox.NotFound, fs.ErrNotExist)
		wantCode(t, sb.Rename(ctx, "missing", "other"), sandbox.NotFound, fs.ErrNotExist)
	}},
	{name: "DirectoryWhereFileExpected", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		if err := sb.MkdirAll(ctx, "d/e"); err != nil {
			t.Fatal(err)
		}
		if err := sb.MkdirAll(ctx, "d/e"); err != nil {
			t.Errorf("MkdirAll on an existing dir: %v", err)
		}
		_, err := sb.ReadFile(ctx, "d")
		wantCode(t, err, sandbox.FailedPrecondition, sandbox.ErrIsDirectory)
		wantCode(t, sb.WriteFile(ctx, "d/e", []byte("x")), sandbox.FailedPrecondition, sandbox.ErrIsDirectory)
		check(t, sb.WriteFile(ctx, "f", []byte("x")))
		_, err = sb.ReadDir(ctx, "f")
		wantCode(t, err, sandbox.FailedPrecondition, sandbox.ErrNotDirectory)
		wantCode(t, sb.MkdirAll(ctx, "f/g"), sandbox.FailedPrecondition)
		if fi := must[sandbox.FileInfo](t, "Stat")(sb.Stat(ctx, "d")); !fi.IsDir() {
			t.Errorf("Stat(dir).IsDir false: %+v", fi)
		}
	}},
	{name: "BatchOrder", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		check(t, sb.MkdirAll(ctx, "adir"))
		files := []sandbox.File{{Path: "b1.txt", Data: []byte("1")}, {Path: "adir", Data: []byte("x")}, {Path: "c/c2.txt", Data: []byte("2")}, {Path: "bad\x00", Data: nil}}
		err := sb.WriteFiles(ctx, files)
		// One joined error, one entry per failed file in input order,
		// each naming its path.
		j, ok := err.(interface{ Unwrap() []error })
		if !ok || len(j.Unwrap()) != 2 {
			t.Fatalf("WriteFiles: want 2 joined failures, got %v", err)
		}
		errs := j.Unwrap()
		if !errors.Is(errs[0], sandbox.ErrIsDirectory) || !strings.Contains(errs[0].Error(), "adir") {
			t.Errorf("directory in the way: %v", errs[0])
		}
		if sandbox.CodeOf(errs[1]) != sandbox.InvalidArgument || !strings.Contains(errs[1].Error(), `bad\x00`) {
			t.Errorf("bad path: %v", errs[1])
		}
		if !errors.Is(err, sandbox.ErrIsDirectory) || !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("the joined error does not match each failure's code: %v", err)
		}
		if got := must[[]byte](t, "ReadFile")(sb.ReadFile(ctx, "b1.txt")); string(got) != "1" {
			t.Errorf("b1.txt = %q", got)
		}
		if got := must[[]byte](t, "ReadFile")(sb.ReadFile(ctx, "c/c2.txt")); string(got) != "2" {
			t.Errorf("c/c2.txt = %q", got)
		}
	}},
	{name: "DirOps", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		for _, p := range []string{"ops/b", "ops/a", "ops/c/x"} {
			check(t, sb.WriteFile(ctx, p, []byte(p)))
		}
		list := must[[]sandbox.FileInfo](t, "ReadDir")(sb.ReadDir(ctx, "ops"))
		var names []string
		for _, fi := range list {
			names = append(names, fi.Name())
		}
		if strings.Join(names, ",") != "a,b,c" || !list[2].IsDir() || list[0].Path != sb.Home()+"/ops/a" {
			t.Errorf("ReadDir: %+v", list)
		}
		check(t, sb.Rename(ctx, "ops/a", "ops/b"))
		if got := must[[]byte](t, "ReadFile")(sb.ReadFile(ctx, "ops/b")); string(got) != "ops/a" {
			t.Errorf("rename did not replace: %q", got)
		}
		check(t, sb.Rename(ctx, "ops/c", "moved"))
		if got := must[[]byte](t, "ReadFile")(sb.ReadFile(ctx, "moved/x")); string(got) != "ops/c/x" {
			t.Errorf("dir rename: %q", got)
		}
		check(t, sb.Remove(ctx, "moved"))
		if _, err := sb.Stat(ctx, "moved/x"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Remove left the tree: %v", err)
		}
		// Absolute paths under home work like relative ones.
		check(t, sb.WriteFile(ctx, sb.Home()+"/abs.txt", []byte("abs")))
		if got := must[[]byte](t, "ReadFile")(sb.ReadFile(ctx, "abs.txt")); string(got) != "abs" {
			t.Errorf("absolute path: %q", got)
		}
	}},
	{name: "ExecSeesFiles", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		check(t, sb.WriteFile(ctx, "in.txt", []byte("from upload\n")))
		r := sh(ctx, t, sb, "cat in.txt; echo from exec > out.txt")
		if string(r.Stdout) != "from upload\n" {
			t.Errorf("cat: %q (stderr %q)", r.Stdout, r.Stderr)
		}
		if got := must[[]byte](t, "ReadFile")(sb.ReadFile(ctx, "out.txt")); string(got) != "from exec\n" {
			t.Errorf("file written by exec: %q", got)
		}
	}},
	{name: "BadPaths", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		for _, p := range []string{"", "a\x00b", "a\nb", "\x1b[2J"} {
			_, err := sb.ReadFile(ctx, p)
			wantCode(t, err, sandbox.InvalidArgument)
			wantCode(t, sb.WriteFile(ctx, p, nil), sandbox.InvalidArgument)
		}
		wantCode(t, sb.Upload(ctx, "x", nil), sandbox.InvalidArgument)
		if err := sb.Upload(ctx, "x", nil); !strings.Contains(err.Error(), "reader") {
			t.Errorf("nil reader error %q does not name the input", err)
		}
	}},
	{name: "FSView", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		files := map[string]string{"view/a.txt": "alpha", "view/dir/b.txt": "beta", "view/dir/sub/c.bin": "\x00\x01\x02", "view/empty": ""}
		for p, d := range files {
			check(t, sb.WriteFile(ctx, p, []byte(d)))
		}
		sub, err := fs.Sub(sb.FS(ctx), "view")
		if err != nil {
			t.Fatal(err)
		}
		if err := fstest.TestFS(sub, "a.txt", "dir/b.txt", "dir/sub/c.bin", "empty"); err != nil {
			t.Fatal(err)
		}
		if b, err := fs.ReadFile(sub, "dir/b.txt"); err != nil || string(b) != "beta" {
			t.Errorf("fs.ReadFile: %q %v", b, err)
		}
		if _, err := fs.ReadFile(sub, "nope"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("missing through FS: %v", err)
		}
	}},
}

// patternReader yields a deterministic non-repeating-looking byte stream:
// byte i (from 1) is byte(i*2654435761>>13) ^ byte(i>>8), which repeats
// every patternPeriod bytes.
type patternReader struct{ n uint64 }

// patternPeriod is the period of patternReader's stream: both terms of a
// byte depend only on the low 21 bits of its index.
const patternPeriod = 1 << 21

// patternTable holds one period of patternReader's stream, from index 0,
// made once: Read copies from it, since computing the tens of MiB the
// file subtests move a byte at a time (each write checked by -race) cost
// seconds.
var patternTable = sync.OnceValue(func() []byte {
	b := make([]byte, patternPeriod)
	for i := range b {
		n := uint64(i)
		b[i] = byte(n*2654435761>>13) ^ byte(n>>8)
	}
	return b
})

func (p *patternReader) Read(b []byte) (int, error) {
	tab := patternTable()
	done := 0
	for done < len(b) {
		k := copy(b[done:], tab[(p.n+1)%patternPeriod:])
		done += k
		p.n += uint64(k)
	}
	return len(b), nil
}

var pauseTests = []test{
	{name: "PauseResume", needs: needsPause, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		check(t, sb.WriteFile(ctx, "kept.txt", []byte("kept")))
		if err := sb.Pause(ctx); err != nil {
			t.Fatalf("Pause: %v", err)
		}
		if err := sb.Pause(ctx); err != nil {
			t.Errorf("second Pause: %v", err)
		}
		if in := must[sandbox.Info](t, "Refresh")(sb.Refresh(ctx)); in.State != sandbox.StatePaused {
			t.Errorf("state after Pause %q", in.State)
		}
		_, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}, Timeout: 10 * time.Second})
		if !errors.Is(err, sandbox.ErrPaused) {
			t.Errorf("Exec on paused sandbox: %v, want ErrPaused", err)
		}
		if err := sb.Resume(ctx); err != nil {
			t.Fatalf("Resume: %v", err)
		}
		if err := sb.Resume(ctx); err != nil {
			t.Errorf("second Resume: %v", err)
		}
		if in := sb.Info(); in.State != sandbox.StateRunning {
			t.Errorf("state after Resume %q", in.State)
		}
		if r := sh(ctx, t, sb, "cat kept.txt"); string(r.Stdout) != "kept" {
			t.Errorf("file after resume: %q", r.Stdout)
		}
	}},
	{name: "ProcessSurvivesPause", needs: func(c sandbox.Capabilities) string {
		if r := needsPause(c); r != "" {
			return r
		}
		if !c.PauseKeepsMemory {
			return "pause does not keep memory (Capabilities.PauseKeepsMemory=false)"
		}
		return needsProcesses(c)
	}, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		p := must[*sandbox.Process](t, "Start")(sb.Start(ctx, sandbox.Command{Shell: "sleep 1; echo done"}))
		check(t, sb.Pause(ctx))
		check(t, sb.Resume(ctx))
		r := must[*sandbox.Result](t, "Wait")(p.Wait(ctx))
		if r.ExitCode != 0 || string(r.Stdout) != "done\n" {
			t.Errorf("process across pause: exit %d out %q", r.ExitCode, r.Stdout)
		}
	}},
}

var concurrencyTests = []test{
	{name: "ParallelCalls", fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := fmt.Sprintf("par/%d.txt", i)
				data := []byte(strings.Repeat(fmt.Sprint(i), 1000))
				if err := sb.WriteFile(ctx, p, data); err != nil {
					errs <- err
					return
				}
				r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"cat", p}})
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(r.Stdout, data) {
					errs <- fmt.Errorf("goroutine %d read back %d bytes", i, len(r.Stdout))
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}},
	{name: "ParallelCreate", fn: func(ctx context.Context, t *testing.T, s *suite) {
		var wg sync.WaitGroup
		ids := make([]string, 4)
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				opts := s.h.Create
				opts.Labels = map[string]string{"sandboxtest": s.runID}
				sb, err := s.c.Create(ctx, opts)
				if err != nil {
					t.Errorf("Create %d: %v", i, err)
					return
				}
				ids[i] = sb.ID()
				if r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"echo", sb.ID()}}); err != nil || string(r.Stdout) != sb.ID()+"\n" {
					t.Errorf("exec in %s: %v %v", sb.ID(), r, err)
				}
				if err := sb.Destroy(ctx); err != nil {
					t.Errorf("Destroy %s: %v", sb.ID(), err)
				}
			}()
		}
		wg.Wait()
		seen := map[string]bool{}
		for _, id := range ids {
			if id != "" && seen[id] {
				t.Errorf("two creates returned id %s", id)
			}
			seen[id] = true
		}
	}},
}
