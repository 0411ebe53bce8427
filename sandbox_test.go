package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
	"go.uber.org/goleak"

	"github.com/sandboxkit/sandbox/internal/testpar"
)

// TestMain runs more tests at once than go test's default of one per CPU:
// many wait on leases, sleeps and timeouts far more than they compute
// (the package's tests use about a tenth of a CPU: 16 at once on 2 CPUs
// ended them in 6.2 s, 8 at once in 7.9 s).
func TestMain(m *testing.M) {
	testpar.Widen(8)
	goleak.VerifyTestMain(m)
}

func newSandbox(t *testing.T, opts sandbox.CreateOptions) (*sandbox.Sandbox, *memory.Runtime) {
	t.Helper()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	sb, err := c.Create(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return sb, rt
}

func TestStaleTransportRetriedOnceWithReset(t *testing.T) {
	t.Parallel()
	sb, rt := newSandbox(t, sandbox.CreateOptions{})
	var resets atomic.Int32
	unregister := sb.Client().OnTransportReset(func() { resets.Add(1) })
	defer unregister()

	rt.FailNext(memory.OpExec, 1, fmt.Errorf("dial: %w", sandbox.ErrStaleTransport))
	r, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"echo", "hi"}})
	if err != nil || string(r.Stdout) != "hi\n" {
		t.Fatalf("exec after one stale failure: %v %v", r, err)
	}
	if resets.Load() != 1 || len(rt.CallsOf(memory.OpExec)) != 2 {
		t.Fatalf("resets %d, exec calls %d; want 1 and 2", resets.Load(), len(rt.CallsOf(memory.OpExec)))
	}

	// Two stale failures in a row: the second is surfaced, not swallowed.
	rt.FailNext(memory.OpExec, 2, sandbox.ErrStaleTransport)
	_, err = sb.Exec(context.Background(), sandbox.Command{Args: []string{"true"}})
	if !errors.Is(err, sandbox.ErrStaleTransport) || sandbox.CodeOf(err) != sandbox.Unavailable {
		t.Fatalf("second stale failure: %v", err)
	}
	if got := len(rt.CallsOf(memory.OpExec)); got != 4 {
		t.Fatalf("exec calls %d, want 4 (exactly one retry)", got)
	}
}

func TestOutcomeUnknownNeverRetried(t *testing.T) {
	t.Parallel()
	sb, rt := newSandbox(t, sandbox.CreateOptions{})
	rt.FailNext(memory.OpExec, 1, fmt.Errorf("reset mid-stream: %w", sandbox.ErrOutcomeUnknown))
	_, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"true"}})
	if !errors.Is(err, sandbox.ErrOutcomeUnknown) {
		t.Fatalf("err %v", err)
	}
	if got := len(rt.CallsOf(memory.OpExec)); got != 1 {
		t.Fatalf("exec sent %d times, want 1", got)
	}
}

// A connection already closed on this side (net.ErrClosed, a fact, not a
// message) is retried for an idempotent call only; text that merely reads
// like it is not evidence.
func TestClosedTransportRetriedOnlyForIdempotentCalls(t *testing.T) {
	t.Parallel()
	sb, rt := newSandbox(t, sandbox.CreateOptions{})
	closed := &net.OpError{Op: "write", Net: "tcp", Err: net.ErrClosed}
	rt.FailNext(memory.OpStat, 1, closed)
	if _, err := sb.Stat(context.Background(), "."); err != nil {
		t.Fatalf("idempotent Stat not retried: %v", err)
	}
	rt.FailNext(memory.OpExec, 1, closed)
	if _, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"true"}}); err == nil {
		t.Fatal("exec retried on an unclassified transport error: the command might have run")
	}
	rt.FailNext(memory.OpStat, 1, errors.New("TCPTransport closed=True: handler is closed"))
	if _, err := sb.Stat(context.Background(), "."); err == nil {
		t.Fatal("Stat retried on an error whose text only reads like a closed transport")
	}
}

func TestUploadNotRetriedAfterReaderConsumed(t *testing.T) {
	t.Parallel()
	sb, rt := newSandbox(t, sandbox.CreateOptions{})
	rt.FailNext(memory.OpUpload, 1, sandbox.ErrStaleTransport)
	if err := sb.WriteFile(context.Background(), "a", []byte("x")); err != nil {
		t.Fatalf("upload not retried before reading: %v", err)
	}
	// A stale error after the driver consumed the reader cannot be retried.
	stale := &consumingRuntime{Runtime: rt}
	c := sandbox.NewClient(stale)
	sb2, err := c.Attach(context.Background(), sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	err = sb2.Upload(context.Background(), "b", strings.NewReader("data"))
	if !errors.Is(err, sandbox.ErrStaleTransport) || stale.uploads != 1 {
		t.Fatalf("err %v after %d uploads; want the stale error and no retry", err, stale.uploads)
	}
}

type consumingRuntime struct {
	*memory.Runtime
	uploads int
}

func (c *consumingRuntime) Upload(_ context.Context, _, _ string, r io.Reader) error {
	c.uploads++
	_, _ = io.ReadAll(r)
	return sandbox.ErrStaleTransport
}

// slowCreate creates the sandbox, then returns after the caller's ctx ended.
type slowCreate struct{ *memory.Runtime }

func (s slowCreate) Create(ctx context.Context, req *driver.CreateRequest) (driver.Info, error) {
	in, err := s.Runtime.Create(context.Background(), req)
	<-ctx.Done()
	return in, err
}

func TestCreateAfterContextEndDestroysOrphan(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(slowCreate{rt})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if sb != nil || sandbox.CodeOf(err) != sandbox.DeadlineExceeded {
		t.Fatalf("Create = %v, %v; want nil and DeadlineExceeded", sb, err)
	}
	// The clean-up may run in the background; Close waits for it.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if rt.Live() != 0 {
		t.Fatalf("%d sandbox orphaned", rt.Live())
	}
}

func TestErrorShape(t *testing.T) {
	t.Parallel()
	sb, _ := newSandbox(t, sandbox.CreateOptions{})
	_, err := sb.ReadFile(context.Background(), "missing.txt")
	var se *sandbox.Error
	if !errors.As(err, &se) {
		t.Fatalf("%T is not *sandbox.Error", err)
	}
	if se.Op != "download" || se.Provider != "memory" || se.SandboxID != sb.ID() || se.Path != "/home/user/missing.txt" || se.Code != sandbox.NotFound {
		t.Fatalf("fields %+v", se)
	}
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, sandbox.ErrNotFound) || errors.Is(err, sandbox.ErrPaused) {
		t.Fatal("sentinel matching wrong")
	}
	// The cause names the path, so the prefix does not repeat it.
	want := `sandbox: download (memory) sandbox ` + sb.ID() + `: stat /home/user/missing.txt: not found`
	if err.Error() != want {
		t.Fatalf("message %q", err)
	}
	if sandbox.CodeOf(context.Canceled) != sandbox.Canceled || sandbox.CodeOf(nil) != sandbox.OK || sandbox.CodeOf(errors.New("x")) != sandbox.Unknown {
		t.Fatal("CodeOf on plain errors")
	}
	e := sandbox.Errorf(sandbox.ResourceExhausted, "quota %d", 3)
	if !errors.Is(e, sandbox.ErrLimit) || e.Error() != "quota 3" {
		t.Fatalf("Errorf: %v", e)
	}
}

func TestSecretsNeverInErrorsOrOutput(t *testing.T) {
	t.Parallel()
	secret := "sk-" + strings.Repeat("q", 20)
	rt := memory.New()
	c := sandbox.NewClient(rt)
	sb, err := c.Create(context.Background(), sandbox.CreateOptions{SecretEnv: map[string]string{"API_KEY": secret}})
	if err != nil {
		t.Fatal(err)
	}
	rt.FailNext(memory.OpExec, 1, fmt.Errorf("server said: bad key %s", secret))
	_, err = sb.Exec(context.Background(), sandbox.Command{Args: []string{"true"}})
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("secret in error: %v", err)
	}
	// Split across writes, the secret is still caught in live output.
	rt.Handle("leak", func(_ context.Context, c *sandbox_memoryCall) int {
		for i := 0; i < len(secret); i += 3 {
			io.WriteString(c.Stdout, secret[i:min(i+3, len(secret))])
		}
		io.WriteString(c.Stdout, "\n")
		return 0
	})
	var live bytes.Buffer
	r, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"leak"}, Stdout: &live})
	if err != nil {
		t.Fatal(err)
	}
	if live.String() != "[REDACTED]\n" || string(r.Stdout) != "[REDACTED]\n" {
		t.Fatalf("live %q captured %q", live.String(), r.Stdout)
	}
}

type sandbox_memoryCall = memory.Call

func TestOpen(t *testing.T) {
	ctx := context.Background()
	c, err := sandbox.Open(ctx, "memory://")
	if err != nil || c.Provider() != "memory" {
		t.Fatalf("Open memory: %v", err)
	}
	c.Close()
	for _, u := range []string{"nope://x", "://", "no-scheme", "memory://x?bad=1", "local\x00://"} {
		_, err := sandbox.Open(ctx, u)
		if sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("Open(%q) = %v, want InvalidArgument", u, err)
		}
	}
	_, err = sandbox.Open(ctx, "nope://user:hunter2@host/?token=abc")
	if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "abc") {
		t.Errorf("credential in error: %v", err)
	}
	t.Setenv("SANDBOX_URL", "memory://")
	if c, err := sandbox.Open(ctx, ""); err != nil || c.Provider() != "memory" {
		t.Errorf("SANDBOX_URL fallback: %v", err)
	}
}

func TestClosedClient(t *testing.T) {
	t.Parallel()
	c := sandbox.NewClient(memory.New())
	c.Close()
	if _, err := c.Create(context.Background(), sandbox.CreateOptions{}); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("create on closed client: %v", err)
	}
}

func TestLeaseExpiry(t *testing.T) {
	t.Parallel()
	now := time.Now()
	clock := func() time.Time { return now }
	c := sandbox.NewClient(memory.New(memory.WithClock(clock)))
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	paused, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Minute, AutoPause: true})
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := sb.Refresh(ctx); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("expired sandbox: %v", err)
	}
	if in, err := paused.Refresh(ctx); err != nil || in.State != sandbox.StatePaused {
		t.Fatalf("auto-pause: %+v %v", in, err)
	}
}

func FuzzOpenAndPaths(f *testing.F) {
	for _, s := range []string{"memory://", "local:///tmp/x", "e2b://?k=v", "%", "a:b", "x\x00", "../../etc", "~/a", "a/../../b"} {
		f.Add(s)
	}
	c := sandbox.NewClient(memory.New())
	sb, err := c.Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ctx := context.Background()
		if cl, err := sandbox.Open(ctx, s); err == nil {
			cl.Close()
		} else if _, ok := errors.AsType[*sandbox.Error](err); !ok {
			t.Fatalf("Open(%q) error %T", s, err)
		}
		_, err := sb.Stat(ctx, s)
		if err != nil {
			if _, ok := errors.AsType[*sandbox.Error](err); !ok {
				t.Fatalf("Stat(%q) error %T", s, err)
			}
		}
		_, _ = c.Attach(ctx, s)
		_, _ = sb.Exec(ctx, sandbox.Command{Shell: s, Timeout: time.Second})
	})
}

func TestCodeOfErrorf(t *testing.T) {
	t.Parallel()
	for _, code := range []sandbox.Code{sandbox.DeadlineExceeded, sandbox.Canceled, sandbox.NotFound, sandbox.Internal} {
		if got := sandbox.CodeOf(fmt.Errorf("wrapped: %w", sandbox.Errorf(code, "x"))); got != code {
			t.Errorf("CodeOf(Errorf(%v)) = %v", code, got)
		}
	}
}

func TestAttachWithSecrets(t *testing.T) {
	t.Parallel()
	secret := "attach-secret-value"
	c := sandbox.NewClient(memory.New())
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{SecretEnv: map[string]string{"K": secret}})
	if err != nil {
		t.Fatal(err)
	}
	att, err := c.AttachWith(ctx, sb.ID(), sandbox.AttachOptions{SecretEnv: map[string]string{"K": secret}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := att.Exec(ctx, sandbox.Command{Shell: "echo $K"})
	if err != nil || string(r.Stdout) != "[REDACTED]\n" {
		t.Fatalf("attached handle output %q %v", r.Stdout, err)
	}
}

// secretRuntime answers every exec with output written in small pieces, and
// can fail with an error quoting what it was given.
type secretRuntime struct {
	*memory.Runtime
	chunks []string
	block  chan struct{} // when non-nil, Exec blocks until it is closed
	errMsg string
}

func (s *secretRuntime) Exec(ctx context.Context, id string, cmd *driver.Command) (driver.ExitStatus, error) {
	if s.errMsg != "" {
		return driver.ExitStatus{}, errors.New(s.errMsg)
	}
	for _, c := range s.chunks {
		io.WriteString(cmd.Stdout, c)
	}
	if s.block != nil {
		select {
		case <-s.block:
		case <-ctx.Done():
			return driver.ExitStatus{}, ctx.Err()
		}
	}
	return driver.ExitStatus{}, nil
}

func TestRedactionOfNestedSecretsSplitAcrossWrites(t *testing.T) {
	t.Parallel()
	rt := &secretRuntime{Runtime: memory.New(), chunks: []string{"url=postgres://admin:hun", "ter2@db:5432/prod", " pw=hunter2\n"}}
	c := sandbox.NewClient(rt)
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{SecretEnv: map[string]string{"PW": "hunter2", "DB_URL": "postgres://admin:hunter2@db:5432/prod"}})
	if err != nil {
		t.Fatal(err)
	}
	var live bytes.Buffer
	r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"x"}, Stdout: &live})
	if err != nil {
		t.Fatal(err)
	}
	want := "url=[REDACTED] pw=[REDACTED]\n"
	if string(r.Stdout) != want || live.String() != want {
		t.Fatalf("captured %q live %q, want %q", r.Stdout, live.String(), want)
	}
}

func TestRedactionDoesNotHoldBackLiveOutput(t *testing.T) {
	t.Parallel()
	rt := &secretRuntime{Runtime: memory.New(), chunks: []string{"listening on :8080\n"}, block: make(chan struct{})}
	c := sandbox.NewClient(rt)
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{SecretEnv: map[string]string{"KEY": strings.Repeat("k", 40)}})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan struct{})
	w := writerFunc(func(p []byte) (int, error) {
		if strings.Contains(string(p), "listening") {
			close(seen)
		}
		return len(p), nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := sb.Exec(ctx, sandbox.Command{Args: []string{"server"}, Stdout: w})
		done <- err
	}()
	select {
	case <-seen:
	case <-time.After(10 * time.Second):
		t.Error("output with no secret in it was held back while the command ran")
	}
	close(rt.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestSecretsRedactedFromErrors(t *testing.T) {
	t.Parallel()
	rt := &secretRuntime{Runtime: memory.New()}
	c := sandbox.NewClient(rt)
	ctx := context.Background()
	createSecret := `Tr0ub"4dor\&3`
	sb, err := c.Create(ctx, sandbox.CreateOptions{SecretEnv: map[string]string{"A": createSecret}})
	if err != nil {
		t.Fatal(err)
	}
	cmdSecret := "cmd-secret-42"
	rt.errMsg = fmt.Sprintf("unexpected output %q and %q", "TOKEN="+cmdSecret, createSecret)
	_, err = sb.Exec(ctx, sandbox.Command{Args: []string{"x"}, SecretEnv: map[string]string{"TOKEN": cmdSecret}})
	if err == nil || strings.Contains(err.Error(), cmdSecret) || strings.Contains(err.Error(), "4dor") {
		t.Fatalf("secret in error: %v", err)
	}
}

func TestOpenURLErrorsHideCredentials(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"memory://user:TOPSECRET@host:badport", "memory://host/%zz?api_key=TOPSECRET"} {
		_, err := sandbox.Open(context.Background(), u)
		if sandbox.CodeOf(err) != sandbox.InvalidArgument || strings.Contains(err.Error(), "TOPSECRET") {
			t.Errorf("Open(%q): %v", u, err)
		}
	}
}

func TestSandboxCallsAfterCloseFail(t *testing.T) {
	t.Parallel()
	c := sandbox.NewClient(memory.New())
	sb, err := c.Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("exec after Close: %v", err)
	}
}

func TestConcurrentWait(t *testing.T) {
	t.Parallel()
	c := sandbox.NewClient(memory.New())
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{SecretEnv: map[string]string{"S": "secret-value"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := sb.Start(ctx, sandbox.Command{Shell: "echo out; echo secret-val"})
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan string, 4)
	for range 4 {
		go func() {
			r, err := p.Wait(ctx)
			if err != nil {
				results <- err.Error()
				return
			}
			results <- string(r.Stdout)
		}()
	}
	for range 4 {
		if got := <-results; got != "out\nsecret-val\n" {
			t.Errorf("Wait: %q", got)
		}
	}
}

func TestSetTimeoutAsksTheProvider(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// Another handle shortens the lease (as a resume elsewhere can).
	if err := rt.SetTimeout(ctx, sb.ID(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := sb.SetTimeout(ctx, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	in, err := sb.Refresh(ctx)
	if err != nil || time.Until(in.LeaseEnd) < 25*time.Minute {
		t.Fatalf("lease ends in %v after SetTimeout(30m) (%v)", time.Until(in.LeaseEnd), err)
	}
}

// ExecUnredacted hands back the raw output and the redaction to apply;
// with a live writer it is refused, so nothing unredacted ever reaches a
// caller's writer, and Exec itself still redacts.
func TestExecUnredactedForParsers(t *testing.T) {
	t.Parallel()
	rt := &secretRuntime{Runtime: memory.New(), chunks: []string{"pid=4141 pw=hunter2\n"}}
	c := sandbox.NewClient(rt)
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{SecretEnv: map[string]string{"PW": "hunter2", "N": "41"}})
	if err != nil {
		t.Fatal(err)
	}
	r, redact, err := sb.ExecUnredacted(ctx, sandbox.Command{Args: []string{"x"}, SecretEnv: map[string]string{"K": "4141"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Stdout) != "pid=4141 pw=hunter2\n" || redact == nil {
		t.Fatalf("captured %q (redact set: %v), want the raw output", r.Stdout, redact != nil)
	}
	if got := string(redact(r.Stdout)); got != "pid=[REDACTED] pw=[REDACTED]\n" {
		t.Fatalf("redacted %q", got)
	}
	var live bytes.Buffer
	_, _, err = sb.ExecUnredacted(ctx, sandbox.Command{Args: []string{"x"}, Stdout: &live})
	if sandbox.CodeOf(err) != sandbox.InvalidArgument || live.Len() != 0 {
		t.Fatalf("with a live writer: err %v, live %q; want InvalidArgument and nothing written", err, live.String())
	}
	r, err = sb.Exec(ctx, sandbox.Command{Args: []string{"x"}})
	if err != nil || string(r.Stdout) != "pid=[REDACTED][REDACTED] pw=[REDACTED]\n" {
		t.Fatalf("Exec after ExecUnredacted: %q %v, want redacted", r.Stdout, err)
	}
}
