package daytona_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/daytona"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) create(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	sb, err := e.c.Create(ctxT(t), sandbox.CreateOptions{Labels: map[string]string{"t": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	return sb
}

func TestExecByteExactSplit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	ctx := ctxT(t)
	r, err := sb.Exec(ctx, sandbox.Command{Shell: `printf 'a\377\000b'; printf '\376\000' >&2; exit 5`})
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Stdout) != "a\xff\x00b" || string(r.Stderr) != "\xfe\x00" || r.ExitCode != 5 {
		t.Errorf("stdout %q stderr %q exit %d", r.Stdout, r.Stderr, r.ExitCode)
	}
	// Arguments and env values that are not UTF-8 cannot travel in the
	// JSON request: they still reach the command unchanged.
	r, err = sb.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `printf '%s|%s' "$1" "$V"`, "sh", "\xff'\n$x"}, Env: map[string]string{"V": "\xfe"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Stdout) != "\xff'\n$x|\xfe" {
		t.Errorf("non-UTF-8 argv: %q (stderr %q)", r.Stdout, r.Stderr)
	}
	// A short command is one execute round trip.
	before := e.fake.Count("POST", "/process/execute")
	sh(t, sb, "true")
	if n := e.fake.Count("POST", "/process/execute") - before; n != 1 {
		t.Errorf("a short exec took %d execute calls, want 1", n)
	}
}

func sh(t *testing.T, sb *sandbox.Sandbox, line string) *sandbox.Result {
	t.Helper()
	r, err := sb.Exec(ctxT(t), sandbox.Command{Shell: line})
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return r
}

func TestExecLargeOutputStreamsPastTheCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	var live bytes.Buffer
	const n = 3 << 20
	r, err := sb.Exec(ctxT(t), sandbox.Command{Shell: "head -c 3145728 /dev/zero; echo err >&2", MaxOutput: 1000, Stdout: &live})
	if err != nil {
		t.Fatal(err)
	}
	if live.Len() != n || len(r.Stdout) != 1000 || !r.StdoutTruncated || string(r.Stderr) != "err\n" {
		t.Errorf("live %d bytes, captured %d truncated %v, stderr %q", live.Len(), len(r.Stdout), r.StdoutTruncated, r.Stderr)
	}
}

func TestExecMissingDir(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	_, err := sb.Exec(ctxT(t), sandbox.Command{Args: []string{"true"}, Dir: "/no/such/dir"})
	if sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("missing Dir: %v, want NotFound", err)
	}
}

func TestCancelKillsRemoteCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	// A cancel, not a deadline: a deadline would also bound the command's
	// timeout sent to the daemon, which would end it without killExec.
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	time.AfterFunc(500*time.Millisecond, cancel)
	// The command outlasts by far the adapter's bound on the kill (half
	// of ExecGrace after the cancel), so a loaded host's slower kill is
	// not taken for none: a CI run beside other tests took 4.1 s, within
	// the bound, where the command used to end after 2 s.
	_, err := sb.Exec(ctx, sandbox.Command{Shell: "echo $$ > pid; sleep 30; echo survived > flag"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	// Wait (bounded) for the command's shell to be gone, rather than for
	// a guessed time: once it is, it can no longer write the flag.
	wctx := ctxT(t)
	begin := time.Now()
	for {
		r := sh(t, sb, "kill -0 $(cat pid) 2>/dev/null && echo alive || echo gone")
		if string(r.Stdout) == "gone\n" {
			break
		}
		select {
		case <-wctx.Done():
			t.Fatal("the command's shell is still running")
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Logf("the command's shell was gone %v after Exec returned", time.Since(begin))
	if _, err := sb.Stat(ctxT(t), "flag"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("the command outlived its context: %v", err)
	}
}

// A sandbox auto-stopped between two calls is woken and the call succeeds.
func TestAutoStoppedIsWoken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	ctx := ctxT(t)
	if err := sb.WriteFile(ctx, "f", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	e.fake.Advance(16 * time.Minute) // past the 15-minute auto-stop
	if st := e.fake.State(sb.ID()); st != "stopped" {
		t.Fatalf("fake state %q, want stopped", st)
	}
	if r := sh(t, sb, "cat f"); string(r.Stdout) != "kept" {
		t.Errorf("after wake: %q", r.Stdout)
	}
	if n := e.fake.Count("POST", "/start"); n != 1 {
		t.Errorf("%d starts, want 1", n)
	}
	if _, err := sb.Refresh(ctx); err != nil || sb.Info().State != sandbox.StateRunning {
		t.Errorf("after the wake: %v %q", err, sb.Info().State)
	}
	// Archived (stopped long enough) comes back the same way.
	e.fake.Stop(sb.ID())
	e.fake.Archive(sb.ID())
	if r := sh(t, sb, "cat f"); string(r.Stdout) != "kept" {
		t.Errorf("after archive: %q", r.Stdout)
	}
	// Files too, with the stop injected right before the call.
	e.fake.FailNext("GET", "/files/download", daytonafake.FaultStop)
	if b, err := sb.ReadFile(ctx, "f"); err != nil || string(b) != "kept" {
		t.Errorf("ReadFile after stop: %q %v", b, err)
	}
}

func TestWithoutAutoWakeIsPaused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, daytona.WithoutAutoWake())
	sb := e.create(t)
	e.fake.Stop(sb.ID())
	_, err := sb.Exec(ctxT(t), sandbox.Command{Args: []string{"true"}})
	if !errors.Is(err, sandbox.ErrPaused) {
		t.Errorf("exec on stopped: %v, want ErrPaused", err)
	}
}

// A sandbox deleted between list and use is NotFound, and Get agrees.
func TestDeletedBetweenListAndUse(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	ctx := ctxT(t)
	var found *sandbox.Sandbox
	for in, err := range e.c.List(ctx, sandbox.ListOptions{Labels: map[string]string{"t": "x"}}) {
		if err != nil {
			t.Fatal(err)
		}
		if in.ID == sb.ID() {
			found, _ = e.c.Attach(ctx, in.ID)
		}
	}
	if found == nil {
		t.Fatal("not listed")
	}
	e.fake.Delete(sb.ID())
	_, err := found.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	if sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("exec after delete: %v, want NotFound", err)
	}
	if _, err := found.ReadFile(ctx, "x"); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("read after delete: %v, want NotFound", err)
	}
	if _, err := e.c.Attach(ctx, sb.ID()); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("attach after delete: %v", err)
	}
	if err := found.Destroy(ctx); err != nil {
		t.Errorf("destroy of a deleted sandbox: %v", err)
	}
	// Deleted while a request is on its way.
	sb2 := e.create(t)
	e.fake.FailNext("POST", "/process/execute", daytonafake.FaultDelete)
	if _, err := sb2.Exec(ctx, sandbox.Command{Args: []string{"true"}}); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("exec on a sandbox deleted in flight: %v", err)
	}
}

func TestCreateWaitsAndFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []daytonafake.Option{daytonafake.WithCreatePolls(3)})
	ctx := ctxT(t)
	sb, err := e.c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Info().State != sandbox.StateRunning || e.fake.Count("GET", "/sandbox/"+sb.ID()) < 3 {
		t.Errorf("state %q after %d polls", sb.Info().State, e.fake.Count("GET", "/sandbox/"+sb.ID()))
	}
	_ = sb.Destroy(ctx)
	// A failure after the sandbox exists returns its id with the error.
	e.fake.FailNextCreate("build_failed", "pip install failed")
	in, err := e.rt.Create(ctx, &driver.CreateRequest{Timeout: time.Minute})
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), "pip install failed") || in.ID == "" {
		t.Fatalf("failed create: %+v %v", in, err)
	}
	// Through the portable layer, that sandbox is destroyed.
	e.fake.FailNextCreate("error", "no capacity")
	if _, err := e.c.Create(ctx, sandbox.CreateOptions{}); err == nil {
		t.Fatal("create succeeded")
	}
	for in, err := range e.c.List(ctx, sandbox.ListOptions{States: []sandbox.State{sandbox.StateError}}) {
		if err != nil {
			t.Fatal(err)
		}
		if in.Detail["daytona.errorReason"] == "no capacity" {
			t.Errorf("the failed sandbox %s was left behind", in.ID)
		}
	}
}

// A sandbox that fails while the server waits for it (400 "Sandbox failed
// to start", no id in the answer) is still found and destroyed.
func TestCreateFailedToStartIsNotOrphaned(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := ctxT(t)
	e.fake.FailNextCreate("error", "out of capacity")
	in, err := e.rt.Create(ctx, &driver.CreateRequest{Timeout: time.Minute})
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), "out of capacity") || in.ID == "" {
		t.Fatalf("failed create: %+v %v, want its id and FailedPrecondition", in, err)
	}
	e.fake.FailNextCreate("error", "out of capacity")
	if _, err := e.c.Create(ctx, sandbox.CreateOptions{}); err == nil {
		t.Fatal("create succeeded")
	}
	n := 0
	for _, err := range e.c.List(ctx, sandbox.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Errorf("%d sandboxes left, want 1 (the one created through the Runtime)", n)
	}
}

func TestCreateOptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := ctxT(t)
	_, err := e.c.Create(ctx, sandbox.CreateOptions{Resources: sandbox.Resources{CPUs: 2}})
	if sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("resources with a snapshot: %v", err)
	}
	_, err = e.c.Create(ctx, sandbox.CreateOptions{ProviderOptions: map[string]string{"nope": "1"}})
	if sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown option: %v", err)
	}
	sb, err := e.c.Create(ctx, sandbox.CreateOptions{ProviderOptions: map[string]string{"name": "my-box"}, Timeout: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	if sb.Info().Detail["daytona.name"] != "my-box" || time.Until(sb.Info().LeaseEnd) < 29*time.Minute {
		t.Errorf("info %+v", sb.Info())
	}
	_, err = e.c.Create(ctx, sandbox.CreateOptions{ProviderOptions: map[string]string{"name": "my-box"}})
	if sandbox.CodeOf(err) != sandbox.AlreadyExists {
		t.Errorf("duplicate name: %v", err)
	}
}

func TestOlderServers(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]struct {
		fake []daytonafake.Option
		opts []daytona.Option
	}{
		"legacy list":         {fake: []daytonafake.Option{daytonafake.WithLegacyList()}},
		"no toolboxProxyUrl":  {fake: []daytonafake.Option{daytonafake.WithoutToolboxProxyURL()}},
		"legacy toolbox path": {opts: []daytona.Option{daytona.WithLegacyToolbox()}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, o.fake, o.opts...)
			sb := e.create(t)
			if r := sh(t, sb, "echo ok"); string(r.Stdout) != "ok\n" {
				t.Errorf("exec: %q", r.Stdout)
			}
			n := 0
			for _, err := range e.c.List(ctxT(t), sandbox.ListOptions{Labels: map[string]string{"t": "x"}, PageSize: 1}) {
				if err != nil {
					t.Fatal(err)
				}
				n++
			}
			if n != 1 {
				t.Errorf("listed %d", n)
			}
		})
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	ctx := ctxT(t)

	e.fake.FailNext("", "/sandbox", daytonafake.Fault429)
	noRetry := sandbox.NewClient(e.rt, sandbox.WithCallTimeouts(sandbox.CallTimeouts{CreateRetry: -1}))
	_, err := noRetry.Create(ctx, sandbox.CreateOptions{})
	var he *daytona.HTTPError
	if !errors.Is(err, sandbox.ErrLimit) || sandbox.CodeOf(err) != sandbox.ResourceExhausted || !errors.As(err, &he) || he.RetryAfter != time.Second {
		t.Errorf("429: %v (%+v)", err, he)
	}

	// A read that meets one brief 502 is read again; two in a row fail.
	if err := sb.WriteFile(ctx, "r", []byte("x")); err != nil {
		t.Fatal(err)
	}
	e.fake.FailNext("GET", "/files/info", daytonafake.Fault502)
	if _, err := sb.Stat(ctx, "r"); err != nil {
		t.Errorf("stat after one 502: %v", err)
	}
	e.fake.FailNext("GET", "/files/info", daytonafake.Fault502)
	e.fake.FailNext("GET", "/files/info", daytonafake.Fault502)
	if _, err := sb.Stat(ctx, "r"); sandbox.CodeOf(err) != sandbox.Unavailable {
		t.Errorf("stat after two 502s: %v, want Unavailable", err)
	}

	e.fake.FailNext("POST", "/process/execute", daytonafake.Fault502)
	_, err = sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	if sandbox.CodeOf(err) != sandbox.Unavailable {
		t.Errorf("502 on a started sandbox: %v, want Unavailable", err)
	}

	// The command ran, but the response was cut: its outcome is unknown
	// and it is not retried.
	e.fake.FailNext("POST", "/process/execute", daytonafake.FaultResetMidBody)
	_, err = sb.Exec(ctx, sandbox.Command{Shell: "echo x >> ran"})
	if !errors.Is(err, sandbox.ErrOutcomeUnknown) {
		t.Errorf("reset mid-body: %v, want ErrOutcomeUnknown", err)
	}
	if b, _ := sb.ReadFile(ctx, "ran"); string(b) != "x\n" {
		t.Errorf("the command ran %q times, want once", b)
	}

	// A request that never answers is bounded by the context.
	e.fake.FailNext("GET", "/files/info", daytonafake.FaultHang)
	hctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = sb.Stat(hctx, "x")
	if sandbox.CodeOf(err) != sandbox.DeadlineExceeded {
		t.Errorf("hang: %v, want DeadlineExceeded", err)
	}

	// A mid-body reset on a read is retried by nobody but reported.
	e.fake.FailNext("GET", "/sandbox/"+sb.ID(), daytonafake.FaultResetMidBody)
	if _, err := sb.Refresh(ctx); err == nil || sandbox.CodeOf(err) != sandbox.Unavailable {
		t.Errorf("reset on get: %v, want Unavailable", err)
	}
}

func TestStaleTransport(t *testing.T) {
	t.Parallel()
	fake := daytonafake.New(nil)
	url, key := fake.URL(), fake.APIKey()
	fake.Close() // nothing listens any more: no request can be admitted
	rt, err := daytona.New(daytona.WithAPIKey(key), daytona.WithAPIURL(url))
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Create(ctxT(t), &driver.CreateRequest{Timeout: time.Minute})
	if !errors.Is(err, sandbox.ErrStaleTransport) || errors.Is(err, sandbox.ErrOutcomeUnknown) {
		t.Errorf("create on a dead transport: %v, want ErrStaleTransport", err)
	}
	if err := rt.ResetTransport(); err != nil {
		t.Error(err)
	}
}

// No error carries the API key, even from a server that echoes it.
func TestNoKeyInErrors(t *testing.T) {
	t.Parallel()
	const key = "dtn_do-not-leak-0123456789abcdef"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"statusCode":401,"message":"bad token `+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")+`","error":"Unauthorized"}`)
	}))
	defer echo.Close()
	rt, err := daytona.New(daytona.WithAPIKey(key), daytona.WithAPIURL(echo.URL+"/api"))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.ResetTransport()
	ctx := ctxT(t)
	var errs []error
	_, err = rt.Create(ctx, &driver.CreateRequest{Timeout: time.Minute})
	errs = append(errs, err)
	_, err = rt.Get(ctx, "x")
	errs = append(errs, err)
	_, _, err = rt.List(ctx, &driver.ListRequest{PageSize: 1})
	errs = append(errs, err)
	_, err = rt.Exec(ctx, "x", &driver.Command{Args: []string{"true"}, Timeout: time.Second, Stdout: io.Discard, Stderr: io.Discard})
	errs = append(errs, err)
	errs = append(errs, rt.Destroy(ctx, "x"), rt.Upload(ctx, "x", "/f", strings.NewReader("x")))
	for i, err := range errs {
		if err == nil {
			t.Errorf("call %d succeeded", i)
			continue
		}
		if strings.Contains(err.Error(), key) {
			t.Errorf("call %d: key in error %q", i, err)
		}
		if sandbox.CodeOf(err) != sandbox.PermissionDenied {
			t.Errorf("call %d: %v, want PermissionDenied", i, err)
		}
	}
	// A wrong key against the fake: 401 → PermissionDenied.
	e := newEnv(t, nil)
	bad, _ := daytona.New(daytona.WithAPIKey("dtn_wrong-key-secret"), daytona.WithAPIURL(e.fake.URL()))
	defer bad.ResetTransport()
	_, err = bad.Get(ctx, "x")
	if sandbox.CodeOf(err) != sandbox.PermissionDenied || strings.Contains(err.Error(), "dtn_wrong-key-secret") {
		t.Errorf("wrong key: %v", err)
	}
	if _, err := daytona.New(daytona.WithAPIKey(""), daytona.WithAPIURL(e.fake.URL())); sandbox.CodeOf(err) != sandbox.PermissionDenied {
		t.Errorf("no key: %v", err)
	}
}

func TestRenameReplacesAndSetTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	ctx := ctxT(t)
	for p, d := range map[string]string{"a": "new", "b": "old"} {
		if err := sb.WriteFile(ctx, p, []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	if err := sb.Rename(ctx, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if b, _ := sb.ReadFile(ctx, "b"); string(b) != "new" {
		t.Errorf("b = %q", b)
	}
	if err := e.rt.SetTimeout(ctx, sb.ID(), 90*time.Second); err != nil {
		t.Fatal(err)
	}
	in, err := e.rt.Get(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	// 90 s rounds up to 2 minutes of auto-stop from now.
	if d := time.Until(in.LeaseEnd); d < 110*time.Second || d > 125*time.Second {
		t.Errorf("lease ends in %v, want about 2m", d)
	}
}

func TestOpenURL(t *testing.T) {
	e := newEnv(t, nil)
	t.Setenv("DAYTONA_API_KEY", e.fake.APIKey())
	c, err := sandbox.Open(ctxT(t), "daytona://?api_url="+e.fake.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Provider() != "daytona" {
		t.Errorf("provider %q", c.Provider())
	}
	if _, err := sandbox.Open(ctxT(t), "daytona://?bogus=1"); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("bogus parameter: %v", err)
	}
}

// Finished commands' files are removed in batches, not left to pile up.
func TestExecFilesAreSwept(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	for range 40 {
		sh(t, sb, "echo x")
	}
	// Its minute starts after the execs (each has its own): on a loaded
	// host the forty took most of a minute made before them.
	ctx := ctxT(t)
	scratch := sb.Home() + "/.sandboxkit"
	var n int
	for range 50 {
		list, err := sb.ReadDir(ctx, scratch)
		if err != nil {
			t.Fatal(err)
		}
		if n = len(list); n <= 2*8 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("%d files left in %s after 40 execs, want at most %d", n, scratch, 2*8)
}

// A create the caller abandoned that the server acts on only after the
// caller left is still found by its token and destroyed: the look-up
// waits for it (bounded) instead of trusting one early empty answer.
func TestCreateAbandonedThenAdmittedIsNotOrphaned(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := ctxT(t)
	e.fake.FailNext("POST", "/api/sandbox", daytonafake.FaultLateAdmission)
	label := map[string]string{"abandoned": "late"}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := e.c.Create(cctx, sandbox.CreateOptions{Labels: label}); sandbox.CodeOf(err) != sandbox.DeadlineExceeded {
		t.Fatalf("abandoned create: %v, want DeadlineExceeded", err)
	}
	// Close waits for the abandoned create and its clean-up.
	if err := e.c.Close(); err != nil {
		t.Fatal(err)
	}
	// The server acts on the request 300 ms after the caller left; give
	// it time to, so that what it made would be seen.
	time.Sleep(2 * time.Second)
	if left := e.fake.Sandboxes(); len(left) != 0 {
		t.Fatalf("sandboxes %v left by an abandoned create the server acted on late", left)
	}
}

// A create whose response is lost still hands back the sandbox's id, so
// the portable layer destroys it instead of leaving it running unseen.
func TestCreateLostResponseIsNotOrphaned(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := ctxT(t)
	e.fake.FailNext("POST", "/api/sandbox", daytonafake.FaultResetMidBody)
	in, err := e.rt.Create(ctx, &driver.CreateRequest{Timeout: time.Minute, Labels: map[string]string{"k": "v"}})
	if !errors.Is(err, sandbox.ErrOutcomeUnknown) || in.ID == "" {
		t.Fatalf("lost create response: %+v %v, want the id and ErrOutcomeUnknown", in, err)
	}
	e.fake.FailNext("POST", "/api/sandbox", daytonafake.FaultResetMidBody)
	if _, err := e.c.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"k": "v"}}); err == nil {
		t.Fatal("create succeeded")
	}
	n := 0
	for info, err := range e.c.List(ctx, sandbox.ListOptions{Labels: map[string]string{"k": "v"}}) {
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := info.Labels["sandboxkit.create-token"]; ok {
			t.Errorf("internal label shown: %v", info.Labels)
		}
		n++
	}
	if n != 1 {
		t.Errorf("%d sandboxes left, want 1 (the first, not destroyed by anyone)", n)
	}
}

// A connection the server dropped before handling the request is a stale
// transport: the portable layer resets it and retries once, and the
// command runs exactly once.
func TestResetBeforeAdmissionRetriesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	ctx := ctxT(t)
	sh(t, sb, "true") // leaves a pooled connection
	// The server counts a connection idle once its handler has returned
	// and it waits for the next request, which on a loaded host can come
	// after the client already has its answer: look again for a while.
	n := 0
	for deadline := time.Now().Add(10 * time.Second); n < 1 && time.Now().Before(deadline); {
		if n = e.fake.ResetIdleConnections(); n < 1 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if n < 1 {
		t.Fatalf("%d pooled connections reset in 10 s, want at least 1", n)
	}
	r, err := sb.Exec(ctx, sandbox.Command{Shell: "echo x >> once; cat once"})
	if err != nil || string(r.Stdout) != "x\n" {
		t.Fatalf("exec after a dropped connection: %v %+v", err, r)
	}
	e.fake.FailNext("GET", "/files/download", daytonafake.FaultResetBeforeAdmission)
	if b, err := sb.ReadFile(ctx, "once"); err != nil || string(b) != "x\n" {
		t.Fatalf("read after a dropped connection: %q %v", b, err)
	}
}

// headerRecorder records the headers of every request it carries.
type headerRecorder struct {
	mu   sync.Mutex
	seen []http.Header
	next http.RoundTripper
}

func (h *headerRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.seen = append(h.seen, r.Header.Clone())
	h.mu.Unlock()
	return h.next.RoundTrip(r)
}

func TestEnvironmentAndHeaders(t *testing.T) {
	e := newEnv(t, nil)
	t.Setenv("DAYTONA_API_KEY", e.fake.APIKey())
	t.Setenv("DAYTONA_API_URL", e.fake.URL())
	t.Setenv("DAYTONA_TARGET", "eu")
	t.Setenv("DAYTONA_ORGANIZATION_ID", "org-1")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	rec := &headerRecorder{next: tr}
	rt, err := daytona.New(daytona.WithTransport(rec), daytona.WithScratchDir("~/.sandboxkit"))
	if err != nil {
		t.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	defer c.Close()
	ctx := ctxT(t)
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	if got := sb.Info().Detail["daytona.target"]; got != "eu" {
		t.Errorf("target %q, want eu from DAYTONA_TARGET", got)
	}
	sh(t, sb, "true")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.seen) < 3 {
		t.Fatalf("%d requests seen", len(rec.seen))
	}
	for _, h := range rec.seen {
		if h.Get("Authorization") != "Bearer "+e.fake.APIKey() || h.Get("X-Daytona-Organization-ID") != "org-1" || h.Get("X-Daytona-SDK-Version") == "" {
			t.Errorf("headers %v", h)
		}
	}
}

// A shell line as long as one argument may be runs, although the adapter
// wraps it in a longer line of its own; a longer one is refused before
// anything runs, as on every provider (where `sh -c` would get E2BIG).
func TestExecLongShellLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	tail := "; printf %s \"$v\" | wc -c"
	long := strings.Repeat("x", 128<<10-1-len("v=")-len(tail))
	r := sh(t, sb, "v="+long+tail)
	if strings.TrimSpace(string(r.Stdout)) != fmt.Sprint(len(long)) {
		t.Errorf("long line: %q (stderr %.200q)", r.Stdout, r.Stderr)
	}
	_, err := sb.Exec(ctxT(t), sandbox.Command{Shell: "v=x" + long + tail})
	if sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "Shell is") || len(err.Error()) > 1024 {
		t.Errorf("a shell line one byte over the limit: %.300v", err)
	}
}

func TestStartLongQuotedLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	ctx := ctxT(t)
	quotes := strings.Repeat("'", 20<<10)
	p, err := sb.Start(ctx, sandbox.Command{Args: []string{"printf", "%s", quotes}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Wait(ctx)
	if err != nil || string(r.Stdout) != quotes {
		t.Errorf("background printf of %d quotes: %d bytes back, %v (stderr %.200q)", len(quotes), len(r.Stdout), err, r.Stderr)
	}
}

// The wrapper's own shell variables never reach the command: a command
// sees the environment it was given, whatever the names.
func TestExecEnvNamesTheWrapperUses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	env := map[string]string{"d": "dee", "r": "arr", "v": "vee", "p": "pee"}
	r, err := sb.Exec(ctxT(t), sandbox.Command{Shell: `printf '%s %s %s %s' "$d" "$r" "$v" "$p"`, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.Stdout); got != "dee arr vee pee" {
		t.Errorf("the command saw %q, want %q", got, "dee arr vee pee")
	}
}

// An unwritable scratch directory is reported as such, and the command
// does not run.
func TestExecUnwritableScratchDir(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	// A file where the scratch directory should be.
	if err := sb.WriteFile(ctxT(t), ".sandboxkit", []byte("in the way")); err != nil {
		t.Fatal(err)
	}
	_, err := sb.Exec(ctxT(t), sandbox.Command{Shell: "echo ran > flag"})
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), "could not be created") {
		t.Fatalf("err %v, want FailedPrecondition naming the output files", err)
	}
	if _, err := sb.Stat(ctxT(t), "flag"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("the command ran: %v", err)
	}
}

// homeRewriter answers the toolbox's home directory request with dir.
type homeRewriter struct {
	next http.RoundTripper
	dir  string
}

func (h homeRewriter) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/user-home-dir") {
		body := fmt.Sprintf(`{"dir":%q}`, h.dir)
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
	}
	return h.next.RoundTrip(r)
}

// A home directory the wrapper script could not use unquoted (as the
// scratch directory's parent) is refused before any command runs.
func TestScratchUnderAnOddHome(t *testing.T) {
	t.Parallel()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	e := newEnv(t, nil, daytona.WithTransport(homeRewriter{next: tr, dir: "/home/a b;touch pwned"}))
	sb := e.create(t)
	_, err := sb.Exec(ctxT(t), sandbox.Command{Args: []string{"true"}})
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), "WithScratchDir") {
		t.Fatalf("err %v, want FailedPrecondition pointing at WithScratchDir", err)
	}
}

// A command's environment is the command's alone: a PATH without the
// wrapper's tools, or shell options, do not change how the wrapper runs.
func TestExecEnvDoesNotReachTheWrapper(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	r, err := sb.Exec(ctxT(t), sandbox.Command{Args: []string{"/bin/sh", "-c", `printf '%s|' "$PATH"; echo out; echo err >&2`}, Env: map[string]string{"PATH": "/nowhere"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Stdout) != "/nowhere|out\n" || string(r.Stderr) != "err\n" {
		t.Errorf("stdout %q stderr %q, want %q and %q", r.Stdout, r.Stderr, "/nowhere|out\n", "err\n")
	}
	r, err = sb.Exec(ctxT(t), sandbox.Command{Shell: "echo before; exit 101", Env: map[string]string{"SHELLOPTS": "errexit", "BASH_ENV": "/nowhere"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 101 || string(r.Stdout) != "before\n" {
		t.Errorf("exit %d stdout %q, want 101 and %q", r.ExitCode, r.Stdout, "before\n")
	}
}

// A command too long to go inline is staged as a file, with its
// environment: the file is gone once the command has started, so secret
// values do not stay on the sandbox's disk.
func TestStagedCommandLeavesNoSecretOnDisk(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	ctx := ctxT(t)
	const secret = "s3cr3t-value-0451"
	long := strings.Repeat("x", 40<<10)
	r, err := sb.Exec(ctx, sandbox.Command{Shell: ": " + long + "; echo ok", SecretEnv: map[string]string{"TOKEN": secret}})
	if err != nil || string(r.Stdout) != "ok\n" {
		t.Fatalf("exec: %q %v", r.Stdout, err)
	}
	scratch := sb.Home() + "/.sandboxkit"
	list, err := sb.ReadDir(ctx, scratch)
	if err != nil {
		t.Fatal(err)
	}
	for _, fi := range list {
		b, err := sb.ReadFile(ctx, scratch+"/"+fi.Name())
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret) || strings.HasSuffix(fi.Name(), ".cmd") {
			t.Errorf("%s is left in the scratch directory, holding the command's environment", fi.Name())
		}
	}
}

// A Kill or Signal on a command already seen to exit asks the sandbox
// nothing and returns nil at once (the sandbox's own answer came after
// waiting 5 s for a pid no ended command writes).
func TestSignalAfterExitAsksNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	ctx := ctxT(t)
	p, err := sb.Start(ctx, sandbox.Command{Args: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if r, err := p.Wait(ctx); err != nil || r.ExitCode != 0 {
		t.Fatalf("Wait: %+v %v", r, err)
	}
	before := e.fake.Count("POST", "/process/execute")
	for _, send := range []func() error{
		func() error { return p.Kill(ctx) },
		func() error { return p.Signal(ctx, syscall.SIGTERM) },
	} {
		if err := send(); err != nil {
			t.Errorf("signal after the exit: %v, want nil", err)
		}
	}
	if n := e.fake.Count("POST", "/process/execute") - before; n != 0 {
		t.Errorf("signals after the exit made %d execute requests, want none", n)
	}
}
