package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sandboxtest"
	"github.com/sandboxkit/sandbox/sberrors"
)

func TestL2LandlockSeccomp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt, err := New(WithRoot(t.TempDir()), WithIsolation(L2))
	var ie *IsolationError
	if errors.As(err, &ie) {
		t.Skipf("no L2 on this host: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	c := sandbox.NewClient(rt)
	marker := filepath.Join(t.TempDir(), "outside")
	on := mustCreate(ctx, t, c, sandbox.CreateOptions{})
	if got := on.Info().Isolation; got != L2.Describe() {
		t.Errorf("Isolation = %q, want %q", got, L2.Describe())
	}
	res := run(ctx, t, on, fmt.Sprintf(`touch %q 2>/dev/null && echo ESCAPED; cat /root/.bashrc >/dev/null 2>&1 && echo READ; touch "$HOME/in" "$TMPDIR/in" && echo ok`, marker))
	if out := string(res.Stdout); strings.Contains(out, "ESCAPED") || strings.Contains(out, "READ") || !strings.Contains(out, "ok") {
		t.Errorf("L2 file jail: %q %q", res.Stdout, res.Stderr)
	}
	if _, err := exec.LookPath("bash"); err != nil {
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	probe := fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d' 2>/dev/null && echo CONNECTED", ln.Addr().(*net.TCPAddr).Port)
	// L2 cannot isolate a network: by default a sandbox gets none.
	if res := run(ctx, t, on, probe); bytes.Contains(res.Stdout, []byte("CONNECTED")) {
		t.Errorf("network by default at L2: reached the host's loopback")
	}
	if got := on.Info().Detail["network"]; got != "off" {
		t.Errorf("Detail[network] = %q, want off", got)
	}
	host := mustCreate(ctx, t, c, sandbox.CreateOptions{ProviderOptions: map[string]string{"network": "host"}})
	if res := run(ctx, t, host, probe); !bytes.Contains(res.Stdout, []byte("CONNECTED")) {
		t.Errorf("network=host: could not connect: %q", res.Stderr)
	}
	if _, err := c.Create(ctx, sandbox.CreateOptions{ProviderOptions: map[string]string{"network": "isolated"}}); sberrors.CodeOf(err) != sberrors.FailedPrecondition {
		t.Errorf("network=isolated at L2: err = %v, want FailedPrecondition", err)
	}
	off := mustCreate(ctx, t, c, sandbox.CreateOptions{NoNetwork: true})
	if res := run(ctx, t, off, probe); bytes.Contains(res.Stdout, []byte("CONNECTED")) {
		t.Errorf("network off at L2: connected")
	}
}

// TestHundredSandboxesLeaveNothing creates, uses and destroys 100
// sandboxes concurrently (25 unless sandboxtest.FullEnv is 1, as in CI:
// enough at once for their creates, agents and destroys to overlap, in a
// quarter of the time) and checks that no process, mount, cgroup,
// directory or descriptor is left.
func TestHundredSandboxesLeaveNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	ctx := context.Background()
	rt := newRuntime(t)
	c := sandbox.NewClient(rt)
	// Start the spawner first, so its descriptors are not counted as leaks.
	warm := mustCreate(ctx, t, c, sandbox.CreateOptions{})
	if _, err := warm.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	fdsBefore := countFDs(t)
	type trace struct {
		agentPID int
		agentAt  uint64
		procs    []int
		cg       sandboxCgroups
	}
	n := 100
	if os.Getenv(sandboxtest.FullEnv) != "1" {
		n = 25
	}
	traces := make([]trace, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := func() error {
				sb, err := c.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"i": strconv.Itoa(i)}})
				if err != nil {
					return err
				}
				res, err := sb.Exec(ctx, sandbox.Command{Shell: "echo $((1+" + strconv.Itoa(i) + "))"})
				if err != nil {
					return err
				}
				if got := strings.TrimSpace(string(res.Stdout)); got != strconv.Itoa(i+1) {
					return fmt.Errorf("sandbox %d: echo = %q", i, got)
				}
				if err := sb.WriteFile(ctx, "f", []byte("x")); err != nil {
					return err
				}
				if _, err := sb.Start(ctx, sandbox.Command{Shell: "sleep 600 & sleep 600"}); err != nil {
					return err
				}
				m, err := rt.readMeta(sb.ID())
				if err != nil {
					return err
				}
				traces[i] = trace{m.AgentPID, m.AgentAt, m.Cgroups.procs(), m.Cgroups}
				return sb.Destroy(ctx)
			}()
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := warm.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	for i, tr := range traces {
		if procAlive(tr.agentPID, tr.agentAt) {
			t.Errorf("sandbox %d: agent %d still runs", i, tr.agentPID)
		}
		for _, pid := range tr.procs {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil && procAlive(pid, 0) {
				t.Errorf("sandbox %d: process %d still runs", i, pid)
			}
		}
		for _, d := range append(tr.cg.v1Dirs(), tr.cg.V2) {
			if d == "" {
				continue
			}
			if _, err := os.Stat(d); err == nil {
				t.Errorf("sandbox %d: cgroup %s left", i, d)
			}
		}
	}
	ents, err := os.ReadDir(rt.Root())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		// The CRIU check's cache stays by design (see TestWarmPool); it is
		// there when this test is the process's first CRIU probe.
		if e.Name() != criuCacheFile {
			t.Errorf("left in the root: %s", e.Name())
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if bytes.Contains(mounts, []byte(rt.Root())) {
		t.Errorf("a mount under the root is left on the host")
	}
	// Handles whose process died with the sandbox close on their own.
	waitFor(t, func() bool { return countFDs(t) <= fdsBefore })
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestUnwritableRoot(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(WithRoot(filepath.Join(file, "root")), WithIsolation(L1))
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("New on a root under a file = %v, want an error naming it", err)
	}
	if os.Getuid() != 0 {
		ro := t.TempDir()
		_ = os.Chmod(ro, 0o500)
		defer os.Chmod(ro, 0o700)
		_, err := New(WithRoot(ro), WithIsolation(L1))
		if sberrors.CodeOf(err) != sberrors.PermissionDenied {
			t.Errorf("New on a read-only root = %v, want PermissionDenied", err)
		}
	}
}

func TestCorruptMetadata(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := newRuntime(t, WithIsolation(L1))
	good, err := rt.Create(ctx, &driver.CreateRequest{Timeout: time.Minute, Labels: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := rt.Create(ctx, &driver.CreateRequest{Timeout: time.Minute, Labels: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rt.dir(bad.ID), metaFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Another process (a new Runtime on the same root) meets the corruption.
	rt = newRuntime(t, WithIsolation(L1), WithRoot(rt.Root()))
	list, _, err := rt.List(ctx, &driver.ListRequest{Labels: map[string]string{"k": "v"}, PageSize: 10})
	if err != nil {
		t.Fatalf("List with one corrupt sandbox: %v", err)
	}
	if len(list) != 1 || list[0].ID != good.ID {
		t.Errorf("List = %v, want only %s", list, good.ID)
	}
	_, err = rt.Get(ctx, bad.ID)
	if sberrors.CodeOf(err) != sberrors.Internal || !strings.Contains(err.Error(), "corrupt metadata") {
		t.Errorf("Get(corrupt) = %v, want Internal naming the corrupt metadata", err)
	}
	if err := rt.Destroy(ctx, bad.ID); err != nil {
		t.Errorf("Destroy(corrupt): %v", err)
	}
	if _, err := os.Stat(rt.dir(bad.ID)); !os.IsNotExist(err) {
		t.Errorf("corrupt sandbox directory left: %v", err)
	}
	if err := rt.Destroy(ctx, good.ID); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := newRuntime(t, WithIsolation(L1))
	c := sandbox.NewClient(rt)
	for _, id := range []string{"nope", "sbx-00000000000000-00000000", "e2b-abc"} {
		if _, err := rt.Get(ctx, id); !errors.Is(err, sberrors.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", id, err)
		}
		if _, err := c.Attach(ctx, id); sberrors.CodeOf(err) != sberrors.NotFound {
			t.Errorf("Attach(%q) = %v, want NotFound", id, err)
		}
		if _, err := rt.Exec(ctx, id, &driver.Command{Args: []string{"true"}, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Timeout: time.Second}); !errors.Is(err, sberrors.ErrNotFound) {
			t.Errorf("Exec(%q) = %v, want ErrNotFound", id, err)
		}
		if _, err := rt.Stat(ctx, id, "/x"); !errors.Is(err, sberrors.ErrNotFound) {
			t.Errorf("Stat(%q) = %v, want ErrNotFound", id, err)
		}
		if err := rt.Destroy(ctx, id); err != nil {
			t.Errorf("Destroy(%q) = %v, want nil", id, err)
		}
	}
	_, err := rt.Get(ctx, "nope")
	if !strings.Contains(err.Error(), "not a local sandbox id") {
		t.Errorf("Get(nope) = %v, want it to say the id is not local", err)
	}
}

func TestMissingCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, l := range []Level{L1, L4} {
		t.Run(l.String(), func(t *testing.T) {
			t.Parallel()
			opts := []Option{}
			if l == L1 {
				opts = append(opts, WithIsolation(L1))
			}
			sb := mustCreate(ctx, t, sandbox.NewClient(newRuntime(t, opts...)), sandbox.CreateOptions{})
			res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"no-such-command-xyz", "a"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 127 || !bytes.Contains(res.Stderr, []byte("no-such-command-xyz")) {
				t.Errorf("missing command: exit %d, stderr %q; want 127 and a message naming it", res.ExitCode, res.Stderr)
			}
			res, err = sb.Exec(ctx, sandbox.Command{Args: []string{"true"}, Dir: "/no/such/dir"})
			if err == nil {
				t.Errorf("Exec in a missing directory: %+v, want an error", res)
			}
		})
	}
}

func TestIsolationReported(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(t)
	l, _ := rt.Level()
	sb := mustCreate(ctx, t, sandbox.NewClient(rt), sandbox.CreateOptions{})
	in := sb.Info()
	if in.Isolation != l.Describe() || in.Detail["level"] != l.String() {
		t.Errorf("Info.Isolation = %q, Detail = %v; want %s", in.Isolation, in.Detail, l.Describe())
	}
	if l == L4 && (in.Detail["landlock"] == "" || in.Detail["seccomp"] != "on" || in.Detail["cgroup_limits"] == "") {
		t.Errorf("L4 sandbox does not report its mechanisms: %v", in.Detail)
	}
	if got := rt.Capabilities().Isolation; got != l.Describe() {
		t.Errorf("Capabilities.Isolation = %q", got)
	}
	// Demanding more than the host gives is a typed error naming the gap.
	if l < L4 {
		_, err := New(WithRoot(t.TempDir()), WithMinIsolation(L4))
		var ie *IsolationError
		if !errors.As(err, &ie) || ie.Want != L4 || !errors.Is(err, sberrors.ErrFailedPrecondition) {
			t.Errorf("New(WithMinIsolation(L4)) = %v, want *IsolationError", err)
		}
	}
	t.Setenv("SANDBOX_LOCAL_ISOLATION", "l1")
	rt1 := newRuntime(t)
	if got, _ := rt1.Level(); got != L1 {
		t.Errorf("SANDBOX_LOCAL_ISOLATION=l1 gave %s", got)
	}
	sb1 := mustCreate(ctx, t, sandbox.NewClient(rt1), sandbox.CreateOptions{})
	if sb1.Home() != rt1.home(sb1.ID()) {
		t.Errorf("L1 Home = %q, want the host directory %q", sb1.Home(), rt1.home(sb1.ID()))
	}
	t.Setenv("SANDBOX_LOCAL_ISOLATION", "l9")
	if _, err := New(WithRoot(t.TempDir())); sberrors.CodeOf(err) != sberrors.InvalidArgument {
		t.Errorf("SANDBOX_LOCAL_ISOLATION=l9: %v, want InvalidArgument", err)
	}
}

func TestOpenURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	c, err := sandbox.Open(ctx, "local://"+root+"?isolation=l1&lease=1m")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rt := c.Runtime().(*Runtime)
	if rt.Root() != root || c.Capabilities().DefaultLease != time.Minute {
		t.Errorf("root %q lease %v", rt.Root(), c.Capabilities().DefaultLease)
	}
	if l, _ := rt.Level(); l != L1 {
		t.Errorf("level %v", l)
	}
	for _, bad := range []string{"local://host/x", "local:///x?nope=1", "local:///x?isolation=l7"} {
		if _, err := sandbox.Open(ctx, bad); sberrors.CodeOf(err) != sberrors.InvalidArgument {
			t.Errorf("Open(%q) = %v, want InvalidArgument", bad, err)
		}
	}
}

func TestLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := newRuntime(t, WithIsolation(L1), WithReapInterval(50*time.Millisecond))
	c := sandbox.NewClient(rt)
	// Leases long enough for a loaded machine to create the sandboxes and
	// start an agent, then cut short through the Runtime (the portable
	// layer only extends).
	short, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := short.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	extended := mustCreate(ctx, t, c, sandbox.CreateOptions{Timeout: time.Minute})
	if err := extended.SetTimeout(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	auto := mustCreate(ctx, t, c, sandbox.CreateOptions{Timeout: time.Hour, AutoPause: true})
	for _, id := range []string{short.ID(), auto.ID()} {
		if err := rt.SetTimeout(ctx, id, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	m, _ := rt.readMeta(short.ID())
	waitFor(t, func() bool { _, err := os.Stat(rt.dir(short.ID())); return os.IsNotExist(err) })
	// The agent was killed; it may take a moment to be gone from /proc.
	waitFor(t, func() bool { return !procAlive(m.AgentPID, m.AgentAt) })
	if _, err := short.Refresh(ctx); sberrors.CodeOf(err) != sberrors.NotFound {
		t.Errorf("expired sandbox: %v, want NotFound", err)
	}
	waitFor(t, func() bool { in, err := auto.Refresh(ctx); return err == nil && in.State == sandbox.StatePaused })
	if err := auto.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if in := auto.Info(); in.State != sandbox.StateRunning || !in.LeaseEnd.After(time.Now()) {
		t.Errorf("resumed auto-paused sandbox: %+v", in)
	}
	if in, err := extended.Refresh(ctx); err != nil || in.State != sandbox.StateRunning || time.Until(in.LeaseEnd) < 30*time.Minute {
		t.Errorf("extended sandbox: %+v %v", in, err)
	}
}

// TestLeaseEnforcedLazily: a sandbox created by a Runtime that is gone is
// destroyed by the next Get or List of any Runtime once its lease ended.
func TestLeaseEnforcedLazily(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	a, err := New(WithRoot(root), WithIsolation(L1), WithReapInterval(time.Hour), WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	in, err := a.Create(ctx, &driver.CreateRequest{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	b, err := New(WithRoot(root), WithIsolation(L1), WithReapInterval(time.Hour), WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Get(ctx, in.ID); err != nil {
		t.Fatalf("before the lease ends, another Runtime sees the sandbox: %v", err)
	}
	mu.Lock()
	now = now.Add(time.Minute + time.Second)
	mu.Unlock()
	if _, err := b.Get(ctx, in.ID); !errors.Is(err, sberrors.ErrNotFound) {
		t.Errorf("Get after the lease: %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(filepath.Join(root, in.ID)); !os.IsNotExist(err) {
		t.Errorf("directory of the expired sandbox left: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAttachFromAnotherProcess starts a background process here and
// attaches to it from a child OS process with its own Runtime.
func TestAttachFromAnotherProcess(t *testing.T) {
	if os.Getenv("LOCAL_TEST_ATTACH") != "" {
		return // the helper side runs in TestAttachHelper
	}
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	rt, err := New(WithRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	c := sandbox.NewClient(rt)
	sb := mustCreate(ctx, t, c, sandbox.CreateOptions{})
	p, err := sb.Start(ctx, sandbox.Command{Shell: "while [ ! -f go ]; do sleep 0.02; done; echo from-bg; echo to-err >&2; exit 7"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttachHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LOCAL_TEST_ATTACH="+root, "LOCAL_TEST_ID="+sb.ID(), "LOCAL_TEST_PID="+strconv.Itoa(p.PID()))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The helper signals readiness by creating "attached" in the home.
	waitFor(t, func() bool { _, err := sb.Stat(ctx, "attached"); return err == nil })
	if err := sb.WriteFile(ctx, "go", nil); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v\n%s", err, out.String())
	}
	i := bytes.LastIndex(out.Bytes(), []byte("RESULT "))
	if i < 0 {
		t.Fatalf("helper printed no result:\n%s", out.String())
	}
	var got struct {
		Code           int
		Stdout, Stderr string
	}
	line, _, _ := bytes.Cut(out.Bytes()[i+7:], []byte("\n"))
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatal(err)
	}
	if got.Code != 7 || got.Stdout != "from-bg\n" || got.Stderr != "to-err\n" {
		t.Errorf("attached from another process: %+v", got)
	}
	res, err := p.Wait(ctx)
	if err != nil || res.ExitCode != 7 {
		t.Errorf("Wait in the starting process: %+v %v", res, err)
	}
}

func TestAttachHelper(t *testing.T) {
	root := os.Getenv("LOCAL_TEST_ATTACH")
	if root == "" {
		t.Skip("helper for TestAttachFromAnotherProcess")
	}
	ctx := context.Background()
	rt, err := New(WithRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	c := sandbox.NewClient(rt)
	sb, err := c.Attach(ctx, os.Getenv("LOCAL_TEST_ID"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(os.Getenv("LOCAL_TEST_PID"))
	var stdout, stderr bytes.Buffer
	p, err := sb.AttachProcess(ctx, pid, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "attached", nil); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := p.Wait(wctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"Code": res.ExitCode, "Stdout": string(res.Stdout), "Stderr": string(res.Stderr)})
	fmt.Printf("RESULT %s\n", b)
}

func TestWarmPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	rt, err := New(WithRoot(root), WithWarmPool(2))
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := rt.Level(); l < L2 {
		rt.Close()
		t.Skipf("no warm pool below L2 (this host gives %s)", l)
	}
	waitFor(t, func() bool { return len(rt.pool) == 2 })
	c := sandbox.NewClient(rt)
	sb, err := c.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"pooled": "yes"}, Env: map[string]string{"GREETING": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if !idRE.MatchString(sb.ID()) {
		t.Errorf("pooled sandbox id %q", sb.ID())
	}
	res, err := sb.Exec(ctx, sandbox.Command{Shell: "echo $GREETING; pwd"})
	if err != nil || string(res.Stdout) != "hi\n"+sb.Home()+"\n" {
		t.Errorf("exec in a pooled sandbox: %q %v", res.Stdout, err)
	}
	if err := sb.WriteFile(ctx, "f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for in, err := range c.List(ctx, sandbox.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, in.ID)
	}
	if len(ids) != 1 || ids[0] != sb.ID() {
		t.Errorf("List = %v, want only %s (pooled sandboxes are hidden)", ids, sb.ID())
	}
	// A sandbox the pool does not fit is created cold.
	off, err := c.Create(ctx, sandbox.CreateOptions{NoNetwork: true})
	if err != nil {
		t.Fatal(err)
	}
	var pooled []*meta
	waitFor(t, func() bool { return len(rt.pool) == 2 })
	for range 2 {
		m := <-rt.pool
		pooled = append(pooled, m)
		rt.pool <- m
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := off.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if e.Name() == criuCacheFile {
			continue // kept on purpose: the next program's Runtime reuses it
		}
		t.Errorf("left after Close: %s", e.Name())
	}
	for _, m := range pooled {
		if procAlive(m.AgentPID, m.AgentAt) {
			t.Errorf("pooled agent %d still runs after Close", m.AgentPID)
		}
	}
}

func TestSweepLeftovers(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	pool := filepath.Join(root, "pool-"+strings.TrimPrefix(newID(), "sbx-"))
	trash := filepath.Join(root, ".trash-"+newID())
	for _, d := range []string{pool, trash} {
		if err := os.MkdirAll(filepath.Join(d, "home", "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(pool, ownerFile), []byte(fmt.Sprintf("%d 1", dead.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	for _, d := range []string{pool, trash} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	young := filepath.Join(root, ".trash-"+newID())
	if err := os.Mkdir(young, 0o700); err != nil {
		t.Fatal(err)
	}
	newRuntime(t, WithRoot(root), WithIsolation(L1))
	for _, d := range []string{pool, trash} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s not swept: %v", filepath.Base(d), err)
		}
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("a fresh directory (maybe in use by a live Runtime) was swept: %v", err)
	}
}

func TestNoNetworkNeedsL2(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sandbox.NewClient(newRuntime(t, WithIsolation(L1)))
	_, err := c.Create(ctx, sandbox.CreateOptions{NoNetwork: true})
	if sberrors.CodeOf(err) != sberrors.FailedPrecondition || !strings.Contains(err.Error(), "NoNetwork") {
		t.Errorf("NoNetwork at L1 = %v, want FailedPrecondition naming it", err)
	}
}

// TestPauseWithoutCgroups exercises the SIGSTOP fallback, with and
// without a pid namespace.
func TestPauseWithoutCgroups(t *testing.T) {
	t.Parallel()
	for _, l := range []Level{L1, L3} {
		t.Run(l.String(), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rt, err := New(WithRoot(t.TempDir()), WithIsolation(l))
			if err != nil {
				t.Skipf("no %s here: %v", l, err)
			}
			t.Cleanup(func() { _ = rt.Close() })
			rt.cg = cgroupParents{} // as on a host without a writable cgroup
			sb := mustCreate(ctx, t, sandbox.NewClient(rt), sandbox.CreateOptions{})
			p, err := sb.Start(ctx, sandbox.Command{Shell: "i=0; while :; do i=$((i+1)); echo $i > count; sleep 0.01; done"})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			read := func() string { b, _ := sb.ReadFile(ctx, "count"); return string(b) }
			waitFor(t, func() bool { return read() != "" })
			if err := sb.Pause(ctx); err != nil {
				t.Fatal(err)
			}
			if got := sb.Info().State; got != sandbox.StatePaused {
				t.Fatalf("state %q", got)
			}
			if in, _ := sb.Refresh(ctx); in.Detail["paused_by"] != "signal" {
				t.Errorf("paused_by = %q, want signal", in.Detail["paused_by"])
			}
			a := read()
			time.Sleep(200 * time.Millisecond)
			if b := read(); b != a {
				t.Errorf("the process ran while paused: %q then %q", a, b)
			}
			if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}}); !errors.Is(err, sberrors.ErrPaused) {
				t.Errorf("Exec while paused = %v, want ErrPaused", err)
			}
			if err := sb.Resume(ctx); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return read() != a })
		})
	}
}

// TestTimeoutLeavesNoProcess: a timed-out command's whole tree is gone
// when Exec returns, background children included.
func TestTimeoutLeavesNoProcess(t *testing.T) {
	t.Parallel()
	for _, l := range []Level{L1, L4} {
		t.Run(l.String(), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rt := newRuntime(t)
			if l == L1 {
				rt = newRuntime(t, WithIsolation(L1))
			}
			sb := mustCreate(ctx, t, sandbox.NewClient(rt), sandbox.CreateOptions{})
			if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
				t.Fatal(err)
			}
			before, _ := rt.HostPIDs(ctx, sb.ID())
			res, err := sb.Exec(ctx, sandbox.Command{Shell: "sleep 600 & (sleep 700 &) ; sleep 800", Timeout: 300 * time.Millisecond})
			if err != nil || !res.TimedOut {
				t.Fatalf("Exec = %+v, %v; want a timeout", res, err)
			}
			// Cancellation (no deadline, so no command timeout derived from it).
			cctx, cancel := context.WithCancel(ctx)
			stop := time.AfterFunc(300*time.Millisecond, cancel)
			_, err = sb.Exec(cctx, sandbox.Command{Shell: "sleep 600 & sleep 900"})
			stop.Stop()
			cancel()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Exec after cancel = %v, want context.Canceled", err)
			}
			// No process the two commands started is left (one of
			// before's may have ended meanwhile: not the point here).
			var left []int
			deadline := time.Now().Add(10 * time.Second)
			for {
				after, _ := rt.HostPIDs(ctx, sb.ID())
				left = slices.DeleteFunc(after, func(pid int) bool { return slices.Contains(before, pid) })
				if len(left) == 0 {
					break
				}
				if time.Now().After(deadline) {
					var names []string
					for _, pid := range left {
						b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
						names = append(names, fmt.Sprintf("%d %q", pid, b))
					}
					t.Fatalf("10s after the timeout and the cancellation, processes left: %s (before: %v)", strings.Join(names, ", "), before)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// TestAgentEndsAfterItsLease: with no Runtime around to enforce a lease,
// the agent ends the sandbox's processes itself (after a grace period,
// shortened here).
// On a root host the agent of a namespaced sandbox runs as uid 65534 and
// reads the root-owned state record through a descriptor it inherited.
func TestAgentEndsAfterItsLease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"L1", []Option{WithIsolation(L1)}},
		{"best", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rt := newRuntime(t, append(tc.opts, WithReapInterval(time.Hour))...)
			rt.leaseGrace = 0
			c := sandbox.NewClient(rt)
			sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sb.Start(ctx, sandbox.Command{Args: []string{"sleep", "600"}}); err != nil {
				t.Fatal(err)
			}
			pids, _ := rt.HostPIDs(ctx, sb.ID())
			m, _ := rt.readMeta(sb.ID())
			if len(pids) == 0 || m.AgentPID == 0 {
				t.Fatalf("no processes to watch: pids %v, agent %d", pids, m.AgentPID)
			}
			// The lease ends now; no Runtime enforces it (the reaper waits an
			// hour and nothing calls Get), so the agent must, within its
			// 2 s poll once the grace (0 here) is over.
			if err := rt.SetTimeout(ctx, sb.ID(), -time.Second); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			waitFor(t, func() bool { return !procAlive(m.AgentPID, m.AgentAt) })
			for _, pid := range pids {
				waitFor(t, func() bool { return !procAlive(pid, 0) })
			}
			t.Logf("level %s (uid %d): the agent ended the sandbox %v after its lease", m.Achieved, os.Getuid(), time.Since(start).Round(time.Millisecond))
			// The next Get (any Runtime) removes what is left.
			if _, err := rt.Get(ctx, sb.ID()); !errors.Is(err, sberrors.ErrNotFound) {
				t.Errorf("Get after the lease: %v", err)
			}
		})
	}
}
