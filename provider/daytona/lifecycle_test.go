package daytona_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/daytona"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// TestGetOrCreateOnceInProcess: 200 goroutines on one Client send one
// create to the server; 4 Clients (each its own Runtime, as 4 processes
// would be) × 50 goroutines leave one sandbox, named after the key.
func TestGetOrCreateOnceInProcess(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, memory.New(), nil)
	ctx := ctxT(t)
	opts := sandbox.CreateOptions{Labels: map[string]string{"user": "ada"}}
	ids, created := sandboxtest.GetOrCreateMany(ctx, t, e.c, opts, 200)
	if n := e.fake.Count("POST", "/api/sandbox"); n != 1 || len(ids) != 1 || created != 1 {
		t.Fatalf("200 callers on one Client: %d creates sent, %d sandboxes returned, %d told created; want 1, 1, 1", n, len(ids), created)
	}

	opts.Labels = map[string]string{"user": "grace"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	all := map[string]int{}
	made := 0
	for range 4 {
		rt, err := daytona.New(daytona.WithAPIKey(e.fake.APIKey()), daytona.WithAPIURL(e.fake.URL()))
		if err != nil {
			t.Fatal(err)
		}
		c := sandbox.NewClient(rt)
		defer c.Close()
		wg.Go(func() {
			ids, created := sandboxtest.GetOrCreateMany(ctx, t, c, opts, 50)
			mu.Lock()
			defer mu.Unlock()
			for id, n := range ids {
				all[id] += n
			}
			made += created
		})
	}
	wg.Wait()
	var left []string
	for info, err := range e.c.List(ctx, sandbox.ListOptions{Labels: opts.Labels}) {
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, info.ID)
	}
	t.Logf("4 Clients: %d creates reached the server", e.fake.Count("POST", "/api/sandbox")-1)
	if len(all) != 1 || made != 1 || len(left) != 1 {
		t.Fatalf("4 Clients × 50: sandboxes returned %v, %d told created, %v left; want 1, 1, 1", all, made, left)
	}
}

const childEnv = "SANDBOXKIT_DAYTONA_GETORCREATE_CHILD"

// TestGetOrCreateOnceAcrossProcesses: 4 OS processes × 50 goroutines
// calling GetOrCreate on one fake leave exactly one sandbox, which every
// caller got.
func TestGetOrCreateOnceAcrossProcesses(t *testing.T) {
	t.Parallel()
	if os.Getenv(childEnv) != "" {
		t.Skip("in a child process")
	}
	e := newEnvOn(t, memory.New(), nil)
	ctx := ctxT(t)
	outs := runChildren(ctx, t, 4, "^TestGetOrCreateChild$", childEnv+"=1", "CHILD_URL="+e.fake.URL(), "CHILD_KEY="+e.fake.APIKey())
	ids := map[string]int{}
	created := 0
	for i := range outs {
		sc := bufio.NewScanner(strings.NewReader(outs[i]))
		for sc.Scan() {
			var id string
			var made bool
			if _, err := fmt.Sscanf(sc.Text(), "GOT %s %t", &id, &made); err == nil {
				ids[id]++
				if made {
					created++
				}
			}
		}
	}
	live := e.fake.Sandboxes()
	total := 0
	for _, n := range ids {
		total += n
	}
	if total != 200 || len(ids) != 1 || created != 1 || len(live) != 1 {
		t.Fatalf("4 processes × 50: %d answers, sandboxes returned %v, %d told created, %v live; want 200, 1, 1, 1", total, ids, created, live)
	}
	t.Logf("%d creates reached the server (the losers' 409s attach)", e.fake.Count("POST", "/api/sandbox"))
}

// runChildren runs n copies of this test binary running the test run
// with env added, starts them together (each says READY on stdout once
// set up, then waits for a line on stdin) and returns their outputs.
func runChildren(ctx context.Context, t *testing.T, n int, run string, env ...string) []string {
	t.Helper()
	var wg sync.WaitGroup
	outs := make([]string, n)
	errs := make([]error, n)
	gates := make([]io.WriteCloser, n)
	ready := make(chan error, n)
	for i := range n {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+run, "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if gates[i], err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			br := bufio.NewReader(stdout)
			var all strings.Builder
			signalled := false
			for {
				line, err := br.ReadString('\n')
				all.WriteString(line)
				if !signalled && strings.HasPrefix(line, "READY") {
					signalled = true
					ready <- nil
				}
				if err != nil {
					break
				}
			}
			if !signalled {
				ready <- fmt.Errorf("child %d ended before it was ready", i)
			}
			errs[i] = cmd.Wait()
			outs[i] = all.String() + stderr.String()
		})
	}
	var failed error
	for range n {
		if err := <-ready; err != nil {
			failed = err
		}
	}
	for _, g := range gates {
		_, _ = io.WriteString(g, "go\n")
		_ = g.Close()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil || failed != nil {
			t.Fatalf("child %d: %v %v\n%s", i, err, failed, outs[i])
		}
	}
	return outs
}

// awaitGo says READY and waits for the parent's go-ahead on stdin.
func awaitGo(t *testing.T) {
	fmt.Println("READY")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("waiting for the go-ahead: %v", err)
	}
}

// TestGetOrCreateChild is the child process of
// TestGetOrCreateOnceAcrossProcesses.
func TestGetOrCreateChild(t *testing.T) {
	t.Parallel()
	if os.Getenv(childEnv) == "" {
		t.Skip("runs only as a child of TestGetOrCreateOnceAcrossProcesses")
	}
	rt, err := daytona.New(daytona.WithAPIKey(os.Getenv("CHILD_KEY")), daytona.WithAPIURL(os.Getenv("CHILD_URL")))
	if err != nil {
		t.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	defer c.Close()
	defer rt.ResetTransport()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var out strings.Builder
	awaitGo(t)
	for range 50 {
		wg.Go(func() {
			sb, made, err := c.GetOrCreate(ctxT(t), sandbox.CreateOptions{Labels: map[string]string{"across": "processes"}})
			if err != nil {
				t.Errorf("GetOrCreate: %v", err)
				return
			}
			mu.Lock()
			fmt.Fprintf(&out, "GOT %s %t\n", sb.ID(), made)
			mu.Unlock()
		})
	}
	wg.Wait()
	fmt.Print(out.String())
}

// TestLostCreateResponseLeavesNoOrphan: the server makes the sandbox but
// its answer is stalled until the caller gives up, or dropped: nothing is
// left once Close returns that the caller does not hold.
func TestLostCreateResponseLeavesNoOrphan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault daytonafake.Fault
		ctx   time.Duration
	}{
		{"stall", daytonafake.FaultStallResponse, time.Second},
		{"drop", daytonafake.FaultDropResponse, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, memory.New(), nil)
			e.fake.FailNext("POST", "/api/sandbox", tc.fault)
			ctx, cancel := context.WithTimeout(context.Background(), tc.ctx)
			defer cancel()
			sb, err := e.c.Create(ctx, sandbox.CreateOptions{})
			held := 0
			if err == nil {
				held = 1
				defer sb.Destroy(context.Background())
			} else {
				t.Logf("create: %v", err)
			}
			if err := e.c.Close(); err != nil {
				t.Fatal(err)
			}
			if live := e.fake.Sandboxes(); len(live) != held {
				t.Fatalf("%d sandboxes live once Close returned, %d held by the caller", len(live), held)
			}
		})
	}
}

// TestCreateCancelledWhileCreatingIsPrompt: a Create cancelled 50 ms in,
// while the sandbox is still creating (so Delete answers 409 for a while),
// returns at once; the sandbox is deleted in the background before Close
// returns.
func TestCreateCancelledWhileCreatingIsPrompt(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, memory.New(), []daytonafake.Option{daytonafake.WithCreatePolls(4)})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := e.c.Create(ctx, sandbox.CreateOptions{})
	took := time.Since(begin)
	t.Logf("Create cancelled at 50ms returned after %v", took)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Create: %v, want DeadlineExceeded", err)
	}
	if took > 5*time.Second {
		t.Fatalf("Create took %v, want at most 5s (goal 1s)", took)
	}
	begin = time.Now()
	if err := e.c.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close waited %v for the clean-up", time.Since(begin))
	if live := e.fake.Sandboxes(); len(live) != 0 {
		t.Fatalf("sandboxes %v left once Close returned", live)
	}
}

// gatedBackend is a memory Runtime whose Create waits for release.
type gatedBackend struct {
	*memory.Runtime
	entered, release chan struct{}
}

func (g *gatedBackend) Create(ctx context.Context, req *driver.CreateRequest) (driver.Info, error) {
	close(g.entered)
	<-g.release
	return g.Runtime.Create(ctx, req)
}

// TestDeleteDuringCreateWins: a DELETE that arrives while the server is
// still creating the sandbox wins: the sandbox does not come back and its
// backend is freed.
func TestDeleteDuringCreateWins(t *testing.T) {
	t.Parallel()
	mem := memory.New()
	be := &gatedBackend{Runtime: mem, entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnvOn(t, be, nil)
	ctx := ctxT(t)
	done := make(chan error, 1)
	go func() {
		_, err := e.rt.Create(ctx, &driver.CreateRequest{Timeout: time.Minute})
		done <- err
	}()
	<-be.entered
	live := e.fake.Sandboxes()
	if len(live) != 1 {
		t.Fatalf("%d sandboxes while one is creating", len(live))
	}
	if err := e.rt.Destroy(ctx, live[0]); err != nil {
		t.Fatalf("Destroy during create: %v", err)
	}
	close(be.release)
	if err := <-done; sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("Create of a sandbox deleted meanwhile: %v, want NotFound", err)
	}
	if live := e.fake.Sandboxes(); len(live) != 0 {
		t.Errorf("sandbox came back after its delete: %v", live)
	}
	e.fake.Close()
	e.fake.Close() // idempotent
	if n := mem.Live(); n != 0 {
		t.Errorf("%d backend sandboxes leaked", n)
	}
}
