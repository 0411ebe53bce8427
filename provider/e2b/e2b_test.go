package e2b_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"net/http/httptrace"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// ctxT bounds a test's calls, so that a hang fails it: a minute, as in
// provider/daytona's tests, since the tests run in parallel and a loaded
// machine's creates over provider/local take seconds each.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// mustCreateAsync is mustCreate for another goroutine than the test's: a
// failure marks the test failed and returns "" (the caller then stops).
func mustCreateAsync(t *testing.T, c *sandbox.Client, opts sandbox.CreateOptions) string {
	t.Helper()
	sb, err := c.Create(ctxT(t), opts)
	if err != nil {
		t.Errorf("Create: %v", err)
		return ""
	}
	return sb.ID()
}

func mustCreate(t *testing.T, c *sandbox.Client, opts sandbox.CreateOptions) *sandbox.Sandbox {
	t.Helper()
	sb, err := c.Create(ctxT(t), opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return sb
}

func wantCode(t *testing.T, err error, code sandbox.Code) {
	t.Helper()
	if got := sandbox.CodeOf(err); got != code {
		t.Fatalf("error %v: code %v, want %v", err, got, code)
	}
}

func noSecret(t *testing.T, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Fatalf("error leaks a secret: %v", err)
		}
	}
}

func TestNewConfiguration(t *testing.T) {
	t.Setenv("E2B_API_KEY", "")
	t.Setenv("E2B_API_URL", "")
	t.Setenv("E2B_SANDBOX_URL", "")
	t.Setenv("E2B_DOMAIN", "")
	_, err := e2b.New()
	wantCode(t, err, sandbox.PermissionDenied)

	const bad = "e2b_NOT-HEX-secretvalue"
	_, err = e2b.New(e2b.WithAPIKey(bad))
	wantCode(t, err, sandbox.InvalidArgument)
	noSecret(t, err, bad)

	// The environment configures everything; a fake proves it is used.
	f := e2bfake.New(memory.New())
	defer f.Close()
	t.Setenv("E2B_API_KEY", f.APIKey())
	t.Setenv("E2B_API_URL", f.APIURL())
	t.Setenv("E2B_SANDBOX_URL", f.SandboxURL())
	c, err := sandbox.Open(ctxT(t), "e2b://?template=base")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sb := mustCreate(t, c, sandbox.CreateOptions{})
	if got := f.Sandboxes(); len(got) != 1 || got[0] != sb.ID() {
		t.Fatalf("fake holds %v, want [%s]", got, sb.ID())
	}
}

func TestOpenURLRefusesKeys(t *testing.T) {
	const key = "e2b_0123456789abcdef"
	for _, u := range []string{"e2b://?api_key=" + key, "e2b://" + key + "@host/", "e2b://?nope=1"} {
		_, err := sandbox.Open(context.Background(), u)
		if err == nil {
			t.Fatalf("Open(%q) succeeded", redact(u))
		}
		noSecret(t, err, key)
	}
	t.Setenv("MY_E2B_KEY", key)
	t.Setenv("E2B_API_KEY", "")
	c, err := sandbox.Open(context.Background(), "e2b://?api_key_env=MY_E2B_KEY")
	if err != nil {
		t.Fatalf("api_key_env: %v", err)
	}
	_ = c.Close()
}

func redact(u string) string { return strings.ReplaceAll(u, "0123456789abcdef", "…") }

func TestCreateDefaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	before := time.Now()
	sb := mustCreate(t, e.client, sandbox.CreateOptions{
		Labels: map[string]string{"team": "a b&c=d%", "k.v/x": "1"}, Env: map[string]string{"GREETING": "hello"},
	})
	// The lease is always sent: the fake's default would be 15 s.
	end, ok := e.fake.Lease(sb.ID())
	if !ok || end.Before(before.Add(299*time.Second)) {
		t.Fatalf("lease ends %v, want about 300 s from create", end)
	}
	in, err := sb.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if in.Template != "base" || in.Labels["team"] != "a b&c=d%" || in.Labels["k.v/x"] != "1" {
		t.Fatalf("info %+v", in)
	}
	res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"printenv", "GREETING"}})
	if err != nil || string(res.Stdout) != "hello\n" {
		t.Fatalf("printenv: %v %+v", err, res)
	}
	_, err = e.client.Create(ctx, sandbox.CreateOptions{Template: "no-such-template"})
	wantCode(t, err, sandbox.NotFound)
	_, err = e.client.Create(ctx, sandbox.CreateOptions{ProviderOptions: map[string]string{"bogus": "1"}})
	wantCode(t, err, sandbox.InvalidArgument)
}

func TestLeaseExpiry(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := newEnv(t, e2bfake.WithClock(clock))
	ctx := ctxT(t)
	keep := mustCreate(t, e.client, sandbox.CreateOptions{AutoPause: true, Timeout: time.Minute})
	gone := mustCreate(t, e.client, sandbox.CreateOptions{Timeout: time.Minute})
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	in, err := keep.Refresh(ctx)
	if err != nil || in.State != sandbox.StatePaused {
		t.Fatalf("auto-pause sandbox: %v %+v", err, in)
	}
	_, err = gone.Refresh(ctx)
	wantCode(t, err, sandbox.NotFound)
	_, err = keep.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	if !errors.Is(err, sandbox.ErrPaused) {
		t.Fatalf("exec on paused: %v, want ErrPaused", err)
	}
}

func TestListPaginationAndFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	label := map[string]string{"group": "x&y=z 100%"}
	// The sandboxes are made at once: each create waits on its backend,
	// and what is listed does not depend on their order.
	ids := make([]string, 5)
	var other string
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() { ids[i] = mustCreateAsync(t, e.client, sandbox.CreateOptions{Labels: label}) })
	}
	wg.Go(func() {
		other = mustCreateAsync(t, e.client, sandbox.CreateOptions{Labels: map[string]string{"group": "x"}})
	})
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	got := map[string]bool{}
	for in, err := range e.client.List(ctx, sandbox.ListOptions{Labels: label, PageSize: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		got[in.ID] = true
	}
	if len(got) != 5 || got[other] {
		t.Fatalf("listed %v, want %v", got, ids)
	}
	if n := e.fake.Count("GET /v2/sandboxes"); n != 3 {
		t.Fatalf("%d list requests, want 3 pages of 2", n)
	}
	paused, err := e.client.AttachWith(ctx, ids[0], sandbox.AttachOptions{Own: true}) // pausing takes the owner
	if err != nil {
		t.Fatal(err)
	}
	if err := paused.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	var states []string
	for in, err := range e.client.List(ctx, sandbox.ListOptions{States: []sandbox.State{sandbox.StatePaused}}) {
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, in.ID)
	}
	if len(states) != 1 || states[0] != ids[0] {
		t.Fatalf("paused list %v, want [%s]", states, ids[0])
	}
}

func TestSetTimeoutExtends(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{Timeout: time.Minute})
	if err := sb.SetTimeout(ctxT(t), 20*time.Minute); err != nil {
		t.Fatal(err)
	}
	end, _ := e.fake.Lease(sb.ID())
	if time.Until(end) < 19*time.Minute {
		t.Fatalf("lease ends in %v, want about 20m", time.Until(end))
	}
	// A shorter value never cuts the lease.
	if err := sb.SetTimeout(ctxT(t), time.Minute); err != nil {
		t.Fatal(err)
	}
	if end2, _ := e.fake.Lease(sb.ID()); end2.Before(end) {
		t.Fatalf("lease shortened from %v to %v", end, end2)
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	if err := sb.WriteFile(ctx, "kept.txt", []byte("data")); err != nil {
		t.Fatal(err)
	}
	if err := sb.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sb.Pause(ctx); err != nil {
		t.Fatalf("second pause: %v", err)
	}
	_, err := sb.ReadFile(ctx, "kept.txt")
	if !errors.Is(err, sandbox.ErrPaused) {
		t.Fatalf("read while paused: %v, want ErrPaused", err)
	}
	if err := e.rt.SetTimeout(ctx, sb.ID(), time.Hour); !errors.Is(err, sandbox.ErrPaused) {
		t.Fatalf("set timeout while paused: %v, want ErrPaused", err)
	}
	if err := sb.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if sb.Info().State != sandbox.StateRunning {
		t.Fatalf("state %v after resume", sb.Info().State)
	}
	// The access token changes on resume; the adapter must use the new one.
	b, err := sb.ReadFile(ctx, "kept.txt")
	if err != nil || string(b) != "data" {
		t.Fatalf("read after resume: %q %v", b, err)
	}
	if err := sb.Resume(ctx); err != nil {
		t.Fatalf("resume of a running sandbox: %v", err)
	}
	if n := e.fake.Count("POST /v2/sandboxes/{id}/connect"); n != 1 {
		t.Fatalf("%d connect calls, want 1 (a running sandbox is not resumed)", n)
	}
}

func TestExecBehaviour(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})

	// argv goes to envd as cmd+args: no shell re-splits or expands it.
	res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"echo", "a  b", "$HOME", "'q'"}})
	if err != nil || string(res.Stdout) != "a  b $HOME 'q'\n" || res.ExitCode != 0 {
		t.Fatalf("argv: %v %q", err, res.Stdout)
	}
	res, err = sb.Exec(ctx, sandbox.Command{Shell: "echo out; echo err >&2; exit 7"})
	if err != nil || res.ExitCode != 7 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("shell: %v %+v", err, res)
	}
	// stdin is closed unless given.
	res, err = sb.Exec(ctx, sandbox.Command{Args: []string{"cat"}, Timeout: 10 * time.Second})
	if err != nil || res.TimedOut || len(res.Stdout) != 0 {
		t.Fatalf("cat without stdin: %v %+v", err, res)
	}
	in := bytes.Repeat([]byte("0123456789"), 10000)
	res, err = sb.Exec(ctx, sandbox.Command{Args: []string{"cat"}, Stdin: bytes.NewReader(in)})
	if err != nil || !bytes.Equal(res.Stdout, in) {
		t.Fatalf("cat with stdin: %v, %d bytes back", err, len(res.Stdout))
	}
	res, err = sb.Exec(ctx, sandbox.Command{Args: []string{"no-such-program"}})
	if err != nil || res.ExitCode != 127 {
		t.Fatalf("missing program: %v %+v", err, res)
	}
}

func TestExecTimeout(t *testing.T) {
	t.Parallel()
	// The fake kills commands that arrive without a timeout after 200 ms:
	// a 2 s command passes only because the adapter always sends one.
	e := newEnv(t, e2bfake.WithDefaultCommandTimeout(200*time.Millisecond))
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	res, err := sb.Exec(ctx, sandbox.Command{Shell: "sleep 0.5; echo done", Timeout: 5 * time.Second})
	if err != nil || string(res.Stdout) != "done\n" {
		t.Fatalf("command outlived by the fake default: %v %+v", err, res)
	}
	var live bytes.Buffer
	res, err = sb.Exec(ctx, sandbox.Command{Shell: "echo before; sleep 10; echo after", Timeout: 2 * time.Second, Stdout: &live})
	if err != nil {
		t.Fatalf("timeout must not be an error: %v", err)
	}
	if !res.TimedOut || res.TimeoutBy != sandbox.TimeoutCommand || string(res.Stdout) != "before\n" || live.String() != "before\n" {
		t.Fatalf("timeout result %+v live %q", res, live.String())
	}
	// A context deadline is the caller's: an error, with the partial output.
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err = sb.Exec(dctx, sandbox.Command{Shell: "echo early; sleep 10"})
	wantCode(t, err, sandbox.DeadlineExceeded)
	if res == nil || !res.TimedOut || string(res.Stdout) != "early\n" {
		t.Fatalf("deadline result %+v", res)
	}
	// Background processes also carry a lifetime, so the fake default
	// does not kill them.
	p, err := sb.Start(ctx, sandbox.Command{Shell: "sleep 0.5; echo bg"})
	if err != nil {
		t.Fatal(err)
	}
	res, err = p.Wait(ctx)
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "bg\n" {
		t.Fatalf("background: %v %+v", err, res)
	}
}

func TestExecCancelKillsRemote(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Cancel once the command is surely running: at its first output.
	onOut := writerFunc(func(p []byte) (int, error) { cancel(); return len(p), nil })
	_, err := sb.Exec(cctx, sandbox.Command{Shell: "echo go; sleep 30", Timeout: time.Minute, Stdout: onOut})
	wantCode(t, err, sandbox.Canceled)
	// Nothing is left running in the sandbox.
	procs := listProcs(t, e, sb)
	if procs != 0 {
		t.Fatalf("%d processes still running after cancel", procs)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestExecCancelBeforeStartEvent: the process started but its start event
// never reached the client; cancelling still ends it (found by its tag).
func TestExecCancelBeforeStartEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.StallResponse, Path: "POST /process.Process/Start"})
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		// Cancel once the process runs in the sandbox.
		for e.fake.Running(sb.ID()) == 0 && cctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	_, err := sb.Exec(cctx, sandbox.Command{Shell: "sleep 30", Timeout: time.Minute})
	cancel()
	wantCode(t, err, sandbox.Canceled)
	if n := listProcs(t, e, sb); n != 0 {
		t.Fatalf("%d processes still running after cancel", n)
	}
}

func TestBackgroundProcesses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	p, err := sb.Start(ctx, sandbox.Command{Shell: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	pid := p.PID()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// Another Runtime (another process) attaches by pid.
	rt2, err := e2b.New(e2b.WithAPIKey(e.fake.APIKey()), e2b.WithAPIURL(e.fake.APIURL()), e2b.WithSandboxURL(e.fake.SandboxURL()))
	if err != nil {
		t.Fatal(err)
	}
	c2 := sandbox.NewClient(rt2)
	defer c2.Close()
	sb2, err := c2.Attach(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	p2, err := sb2.AttachProcess(ctx, pid, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Signal(ctx, syscall.SIGHUP); !errors.Is(err, sandbox.ErrUnimplemented) {
		t.Fatalf("SIGHUP: %v, want ErrUnimplemented", err)
	}
	if err := p2.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := p2.Wait(ctx)
	if err != nil || res.ExitCode != -1 {
		t.Fatalf("wait after kill: %v %+v", err, res)
	}
	_, err = sb2.AttachProcess(ctx, 999999, nil, nil)
	wantCode(t, err, sandbox.NotFound)
}

func TestFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	data := make([]byte, 3<<20)
	_, _ = rand.Read(data)
	if err := sb.Upload(ctx, "a/b/blob", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	got, err := sb.ReadFile(ctx, "a/b/blob")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("round trip: %v, %d bytes", err, len(got))
	}
	_, err = sb.ReadFile(ctx, "missing")
	wantCode(t, err, sandbox.NotFound)
	_, err = sb.ReadFile(ctx, "a")
	if !errors.Is(err, sandbox.ErrIsDirectory) {
		t.Fatalf("download of a directory: %v", err)
	}
	if err := sb.Upload(ctx, "a", strings.NewReader("x")); !errors.Is(err, sandbox.ErrIsDirectory) {
		t.Fatalf("upload onto a directory: %v", err)
	}
	if err := sb.Remove(ctx, "missing"); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("remove missing: %v", err)
	}
	if err := sb.MkdirAll(ctx, "a/b"); err != nil {
		t.Fatalf("mkdir existing: %v", err)
	}
	if err := sb.MkdirAll(ctx, "a/b/blob"); !errors.Is(err, sandbox.ErrNotDirectory) {
		t.Fatalf("mkdir onto file: %v", err)
	}
	if err := sb.Rename(ctx, "a/b/blob", "c/moved"); err != nil {
		t.Fatal(err)
	}
	fi, err := sb.Stat(ctx, "c/moved")
	if err != nil || fi.Size != int64(len(data)) || fi.Mode.IsDir() {
		t.Fatalf("stat: %v %+v", err, fi)
	}
}

// TestUploadMultipartForOldEnvd: envd before 0.5.7 takes only multipart
// uploads (the fake refuses octet-stream for it), so the adapter streams a
// multipart body through a pipe.
func TestUploadMultipartForOldEnvd(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t, e2bfake.WithEnvdVersion("0.5.0"))
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	data := bytes.Repeat([]byte{0, 1, 2, 0xff}, 1<<18)
	if err := sb.Upload(ctx, "dir/multi", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	got, err := sb.ReadFile(ctx, "dir/multi")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("round trip: %v, %d bytes", err, len(got))
	}
}

// TestUser: the user travels as Basic auth; envd refuses unknown users.
func TestUser(t *testing.T) {
	t.Parallel()
	f := e2bfake.New(memory.New())
	defer f.Close()
	for user, ok := range map[string]bool{"root": true, "nobody": false} {
		rt, err := e2b.New(e2b.WithAPIKey(f.APIKey()), e2b.WithAPIURL(f.APIURL()), e2b.WithSandboxURL(f.SandboxURL()), e2b.WithUser(user))
		if err != nil {
			t.Fatal(err)
		}
		c := sandbox.NewClient(rt)
		sb, err := c.Create(ctxT(t), sandbox.CreateOptions{})
		switch {
		case ok && err != nil:
			t.Fatalf("%s: %v", user, err)
		case ok:
			_ = sb.Destroy(ctxT(t))
		default:
			wantCode(t, err, sandbox.PermissionDenied)
		}
		_ = c.Close()
	}
}

func TestErrorsCarryNoSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	wrong, err := e2b.New(e2b.WithAPIKey("e2b_deadbeefdeadbeef"), e2b.WithAPIURL(e.fake.APIURL()), e2b.WithSandboxURL(e.fake.SandboxURL()))
	if err != nil {
		t.Fatal(err)
	}
	c := sandbox.NewClient(wrong)
	defer c.Close()
	_, err = c.Create(ctx, sandbox.CreateOptions{})
	wantCode(t, err, sandbox.PermissionDenied)
	noSecret(t, err, "e2b_deadbeefdeadbeef", e.fake.APIKey())

	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	_, err = sb.ReadFile(ctx, "/nope")
	noSecret(t, err, e.fake.APIKey())
	_, err = c.Attach(ctx, sb.ID())
	wantCode(t, err, sandbox.PermissionDenied)
	_, err = e.client.Attach(ctx, "inotthereatall0000000")
	wantCode(t, err, sandbox.NotFound)
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, e2bfake.WithMaxSandboxes(1))
	ctx := ctxT(t)
	mustCreate(t, e.client, sandbox.CreateOptions{})
	// The adapter itself does not retry; the portable layer's create
	// retry (tested in the root package) is turned off here.
	noRetry := sandbox.NewClient(e.client.Runtime(), sandbox.WithCallTimeouts(sandbox.CallTimeouts{CreateRetry: -1}))
	_, err := noRetry.Create(ctx, sandbox.CreateOptions{})
	wantCode(t, err, sandbox.ResourceExhausted)
	if n := e.fake.Count("POST /v2/sandboxes"); n != 2 {
		t.Fatalf("%d create requests, want 2 (no retries)", n)
	}
}

// ---------------------------------------------------------------------------
// Faults

func TestFaultResetBeforeAdmissionRetriesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{}) // leaves a pooled envd connection
	f := e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.ResetBeforeAdmission, Path: "POST /process.Process/Start"})
	res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"echo", "once"}})
	if err != nil || string(res.Stdout) != "once\n" {
		t.Fatalf("exec after a dead pooled connection: %v %+v", err, res)
	}
	if f.Hits() < 1 || e.fake.Count("POST /process.Process/Start") != 1 {
		t.Fatalf("connections reset %d, starts %d; want at least 1 and exactly 1", f.Hits(), e.fake.Count("POST /process.Process/Start"))
	}
	// The control plane too, including a create (nothing was created). The
	// retry above reset the transport: make a pooled connection first.
	if _, err := sb.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	f = injectReset(e, "GET /sandboxes/")
	if _, err := sb.Refresh(ctx); err != nil || f.Hits() < 1 {
		t.Fatalf("refresh: %v (fault hits %d)", err, f.Hits())
	}
	f = injectReset(e, "POST /v2/sandboxes")
	if _, err := e.client.Create(ctx, sandbox.CreateOptions{}); err != nil || f.Hits() < 1 {
		t.Fatalf("create: %v (fault hits %d)", err, f.Hits())
	}
	if n := len(e.fake.Sandboxes()); n != 2 {
		t.Fatalf("%d sandboxes, want 2", n)
	}
	// Reads retry the same way.
	if err := sb.WriteFile(ctx, "f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	f = e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.ResetBeforeAdmission, Path: "GET /files"})
	if b, err := sb.ReadFile(ctx, "f"); err != nil || string(b) != "x" || f.Hits() < 1 {
		t.Fatalf("download: %q %v", b, err)
	}
}

func injectReset(e *env, path string) *e2bfake.Fault {
	return e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.ResetBeforeAdmission, Path: path})
}

func TestFaultResetAfterAdmissionIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.ResetAfterAdmission, Path: "POST /process.Process/Start"})
	_, err := sb.Exec(ctx, sandbox.Command{Args: []string{"echo", "x"}})
	if !errors.Is(err, sandbox.ErrOutcomeUnknown) {
		t.Fatalf("exec: %v, want ErrOutcomeUnknown", err)
	}
	if n := e.fake.Count("POST /process.Process/Start"); n != 1 {
		t.Fatalf("%d starts, want exactly 1 (never re-sent)", n)
	}
}

// TestFaultResetMidDownload: a connection cut in the middle of a download
// is an error, never a silently short file.
func TestFaultResetMidDownload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	if err := sb.WriteFile(ctx, "big", data); err != nil {
		t.Fatal(err)
	}
	e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.ResetAfterAdmission, Path: "GET /files"})
	got, err := sb.ReadFile(ctx, "big")
	if err == nil {
		t.Fatalf("short download of %d/%d bytes reported as success", len(got), len(data))
	}
}

func TestFaultHangIsBoundedByContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	for _, path := range []string{"POST /process.Process/Start", "POST /filesystem.Filesystem/Stat", "GET /sandboxes/"} {
		e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.Hang, Path: path})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		var err error
		switch {
		case strings.Contains(path, "Start"):
			_, err = sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
		case strings.Contains(path, "Stat"):
			_, err = sb.Stat(ctx, "/tmp")
		default:
			_, err = sb.Refresh(ctx)
		}
		cancel()
		wantCode(t, err, sandbox.DeadlineExceeded)
	}
}

func TestFaultKilledBetweenListAndExec(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	mustCreate(t, e.client, sandbox.CreateOptions{Labels: map[string]string{"job": "1"}})
	var found *sandbox.Sandbox
	for in, err := range e.client.List(ctx, sandbox.ListOptions{Labels: map[string]string{"job": "1"}}) {
		if err != nil {
			t.Fatal(err)
		}
		found, err = e.client.Attach(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
	}
	e.fake.Kill(found.ID())
	_, err := found.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	wantCode(t, err, sandbox.NotFound)
}

func TestFaultProxy502AndRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{})
	e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.ProxyBadGateway, Path: "POST /filesystem.Filesystem/Stat"})
	_, err := sb.Stat(ctx, "/tmp")
	wantCode(t, err, sandbox.Unavailable) // running, but the proxy could not reach envd
	f := e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.TooManyRequests, Path: "POST /process.Process/Start"})
	_, err = sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	wantCode(t, err, sandbox.ResourceExhausted)
	if f.Hits() != 1 || e.fake.Count("POST /process.Process/Start") != 0 {
		t.Fatalf("429 was retried: hits %d, starts %d", f.Hits(), e.fake.Count("POST /process.Process/Start"))
	}
}

func listProcs(t *testing.T, e *env, sb *sandbox.Sandbox) int {
	t.Helper()
	// Give the fake a moment to reap a killed process.
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := e.fake.Running(sb.ID())
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Execs one after another share one pooled connection: each process
// stream is read to its end, so the connection goes back to the pool.
func TestExecsReuseTheConnection(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	sb, err := e.client.Create(ctxT(t), sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	var mu sync.Mutex
	fresh := 0
	ctx := httptrace.WithClientTrace(ctxT(t), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		mu.Lock()
		defer mu.Unlock()
		if !i.Reused {
			fresh++
		}
	}})
	for range 20 {
		if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"echo", "hi"}}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if fresh > 1 {
		t.Errorf("20 execs dialled %d connections, want at most 1", fresh)
	}
}

// A sandbox comes back from a pause with the lease it was given, not
// with E2B's 5-minute default; one another Runtime created gets the
// default.
func TestResumeKeepsTheLease(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{Timeout: 40 * time.Minute})
	if err := sb.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sb.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if left := time.Until(sb.Info().LeaseEnd); left < 35*time.Minute {
		t.Errorf("lease after resume ends in %v, want about 40m", left)
	}
	if err := sb.SetTimeout(ctx, 50*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := sb.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sb.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if left := time.Until(sb.Info().LeaseEnd); left < 45*time.Minute {
		t.Errorf("lease after SetTimeout and resume ends in %v, want about 50m", left)
	}
	// Another process: a fresh Runtime that has not seen the sandbox.
	other, err := e2b.New(e2b.WithAPIKey(e.fake.APIKey()), e2b.WithAPIURL(e.fake.APIURL()), e2b.WithSandboxURL(e.fake.SandboxURL()))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := sb.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	in, err := other.Resume(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(in.LeaseEnd); left > 6*time.Minute || left < 4*time.Minute {
		t.Errorf("lease after a resume by another Runtime ends in %v, want E2B's 5m", left)
	}
}

// Resume leaves a running sandbox's lease alone, and a lease above the
// plan's maximum (which SetTimeout clamps silently) still resumes.
func TestResumeRunningAndOverLongLease(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	e := newMemoryEnv(t, e2bfake.WithClock(clock))
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{Timeout: 50 * time.Minute})
	mu.Lock()
	now = now.Add(45 * time.Minute)
	mu.Unlock()
	if err := sb.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if left := sb.Info().LeaseEnd.Sub(clock()); left > 6*time.Minute {
		t.Errorf("resume of a running sandbox renewed its lease: %v left, want about 5m", left)
	}
	if err := sb.SetTimeout(ctx, 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := sb.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sb.Resume(ctx); err != nil {
		t.Fatalf("resume after a lease above the plan's 1 h: %v", err)
	}
	if left := sb.Info().LeaseEnd.Sub(clock()); left < 55*time.Minute || left > 61*time.Minute {
		t.Errorf("lease after resume: %v left, want the plan's 1 h", left)
	}
}
