package session_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

// newManager returns a manager over a fresh memory runtime, closed when the
// test ends.
func newManager(t *testing.T, opts session.Options) (*session.Manager, *memory.Runtime) {
	t.Helper()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	m := session.NewManager(c, opts)
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m, rt
}

func mustAcquire(t *testing.T, m *session.Manager, key string) *session.Session {
	t.Helper()
	s, err := m.Acquire(context.Background(), key)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	return s
}

func notFound(what string) error { return fmt.Errorf("memory: %s: %w", what, sandbox.ErrNotFound) }

func TestAcquireConcurrentCreatesOnce(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	const n = 100
	var wg sync.WaitGroup
	ids := make([]string, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s, err := m.Acquire(context.Background(), "conv-1")
			errs[i] = err
			if err == nil {
				ids[i] = s.ID()
			}
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("goroutine %d: %v", i, err)
		}
		if ids[i] != ids[0] {
			t.Fatalf("goroutine %d got sandbox %s, goroutine 0 got %s", i, ids[i], ids[0])
		}
	}
	if got := len(rt.CallsOf(memory.OpCreate)); got != 1 {
		t.Fatalf("creates = %d, want 1", got)
	}
	if rt.Live() != 1 {
		t.Fatalf("live = %d, want 1", rt.Live())
	}
}

func TestAcquireIsLazyAndReuses(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	if len(rt.Calls()) != 0 {
		t.Fatalf("NewManager called the provider: %v", rt.Calls())
	}
	a := mustAcquire(t, m, "k")
	b := mustAcquire(t, m, "k")
	if a != b {
		t.Fatal("second Acquire returned another session")
	}
	c := mustAcquire(t, m, "other")
	if c.ID() == a.ID() {
		t.Fatal("two keys share a sandbox")
	}
	if got := len(rt.CallsOf(memory.OpCreate)); got != 2 {
		t.Fatalf("creates = %d, want 2", got)
	}
	if !a.Owned() || a.Key() != "k" {
		t.Fatalf("Owned=%v Key=%q", a.Owned(), a.Key())
	}
	if got := a.Sandbox().Info().Labels[session.DefaultLabelKey]; got != "k" {
		t.Fatalf("label = %q, want the key", got)
	}
}

func TestAcquireWaiterNotBoundByLeaderContext(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	entered := make(chan struct{})
	var once sync.Once
	rt.Handle("pip", func(ctx context.Context, _ *memory.Call) int {
		once.Do(func() { close(entered) })
		<-ctx.Done()
		return 1
	})
	m := session.NewManager(c, session.Options{Packages: []string{"numpy"}, InstallTimeout: time.Hour})
	defer m.Close(context.Background())

	leaderCtx, cancelLeader := context.WithCancel(context.Background())
	leaderErr := make(chan error, 1)
	go func() {
		_, err := m.Acquire(leaderCtx, "k")
		leaderErr <- err
	}()
	<-entered
	// A waiter joins the flight; then the leader gives up.
	rt.Handle("pip", func(context.Context, *memory.Call) int { return 0 })
	waiterErr := make(chan error, 1)
	go func() {
		_, err := m.Acquire(context.Background(), "k")
		waiterErr <- err
	}()
	cancelLeader()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader: %v, want context.Canceled", err)
	}
	if err := <-waiterErr; err != nil {
		t.Fatalf("waiter failed with the leader's cancellation: %v", err)
	}
	if rt.Live() != 1 {
		t.Fatalf("live = %d, want 1 (the leader's sandbox destroyed, the waiter's kept)", rt.Live())
	}
}

func TestAcquireInvalidKey(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	for _, key := range []string{"", "a b", "../etc", "a/b", "/", "x;rm", "ключ", "k\n", "k\x00", strings.Repeat("a", 129)} {
		_, err := m.Acquire(context.Background(), key)
		if !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("Acquire(%q) = %v, want InvalidArgument", key, err)
			continue
		}
		want := fmt.Sprintf("%q", key)
		if len(key) > 80 {
			want = key[:20]
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name the key %s", err, want)
		}
	}
	if len(rt.Calls()) != 0 {
		t.Fatalf("provider called for invalid keys: %v", rt.Calls())
	}
}

func TestCapReturnsErrLimitBeforeCreate(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{MaxLive: 2})
	mustAcquire(t, m, "a")
	mustAcquire(t, m, "b")
	_, err := m.Acquire(context.Background(), "c")
	if !errors.Is(err, sandbox.ErrLimit) || sandbox.CodeOf(err) != sandbox.ResourceExhausted {
		t.Fatalf("third key: %v, want ErrLimit", err)
	}
	if got := len(rt.CallsOf(memory.OpCreate)); got != 2 {
		t.Fatalf("creates = %d, want 2", got)
	}
	mustAcquire(t, m, "a") // an existing session is still served at the cap
}

func TestReattachAfterRestart(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	// The first process dies without closing its manager.
	m1 := session.NewManager(c, session.Options{ReapInterval: -1})
	s1 := mustAcquire(t, m1, "conv")

	m2 := session.NewManager(c, session.Options{})
	defer m2.Close(context.Background())
	s2 := mustAcquire(t, m2, "conv")
	if s2.ID() != s1.ID() {
		t.Fatalf("reattached to %s, want %s", s2.ID(), s1.ID())
	}
	if !s2.Adopted() || !s2.Owned() {
		t.Fatalf("reattached session: adopted %v, owned %v; want both (adoption makes it owned)", s2.Adopted(), s2.Owned())
	}
	if got := len(rt.CallsOf(memory.OpCreate)); got != 1 {
		t.Fatalf("creates = %d, want 1", got)
	}
	if _, err := s2.Exec(context.Background(), sandbox.Command{Args: []string{"pwd"}}); err != nil {
		t.Fatal(err)
	}
	// Close destroys an adopted sandbox like a created one: nothing leaks.
	if err := m2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rt.Live() != 0 {
		t.Fatalf("live = %d after Close, want 0 (adopted sandboxes are owned)", rt.Live())
	}
}

func TestReattachResumesPaused(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	m1 := session.NewManager(c, session.Options{ReapInterval: -1})
	s1 := mustAcquire(t, m1, "conv")
	if err := s1.Sandbox().Pause(context.Background()); err != nil {
		t.Fatal(err)
	}
	m2 := session.NewManager(c, session.Options{})
	defer m2.Close(context.Background())
	s2 := mustAcquire(t, m2, "conv")
	if s2.ID() != s1.ID() || len(rt.CallsOf(memory.OpCreate)) != 1 {
		t.Fatal("did not reattach to the paused sandbox")
	}
	if len(rt.CallsOf(memory.OpResume)) == 0 {
		t.Fatal("paused sandbox not resumed")
	}
	res, err := s2.Exec(context.Background(), sandbox.Command{Args: []string{"echo", "hi"}})
	if err != nil || string(res.Stdout) != "hi\n" {
		t.Fatalf("Exec after reattach: %v %v", res, err)
	}
}

func TestReattachIgnoresOtherKeysAndLabels(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	ctx := context.Background()
	if _, err := c.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{session.DefaultLabelKey: "conv", "app": "other"}}); err != nil {
		t.Fatal(err)
	}
	m := session.NewManager(c, session.Options{Create: sandbox.CreateOptions{Labels: map[string]string{"app": "mine"}}})
	defer m.Close(ctx)
	s := mustAcquire(t, m, "conv")
	if !s.Owned() || len(rt.CallsOf(memory.OpCreate)) != 2 {
		t.Fatal("reattached to a sandbox of another app")
	}
}

// listThenDelete deletes every sandbox it lists, as if the provider had
// reaped them between the list and their use.
type listThenDelete struct {
	*memory.Runtime
	on bool
}

func (r *listThenDelete) List(ctx context.Context, req *driver.ListRequest) ([]driver.Info, string, error) {
	page, next, err := r.Runtime.List(ctx, req)
	if r.on {
		for _, in := range page {
			_ = r.Runtime.Destroy(ctx, in.ID)
		}
	}
	return page, next, err
}

func TestGoneBetweenListAndUseCreatesFresh(t *testing.T) {
	t.Parallel()
	rt := &listThenDelete{Runtime: memory.New()}
	c := sandbox.NewClient(rt)
	m1 := session.NewManager(c, session.Options{ReapInterval: -1})
	old := mustAcquire(t, m1, "conv")

	rt.on = true
	m2 := session.NewManager(c, session.Options{})
	defer m2.Close(context.Background())
	s := mustAcquire(t, m2, "conv")
	if s.ID() == old.ID() || !s.Owned() {
		t.Fatalf("got %s (owned=%v), want a fresh sandbox", s.ID(), s.Owned())
	}
	if got := len(rt.CallsOf(memory.OpCreate)); got != 2 {
		t.Fatalf("creates = %d, want 2", got)
	}
	if rt.Live() != 1 {
		t.Fatalf("live = %d, want 1", rt.Live())
	}
}

func TestReattachListFailureCreatesNothing(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{ReattachTimeout: 500 * time.Millisecond})
	rt.FailNext(memory.OpList, 1<<20, sandbox.Errorf(sandbox.Unavailable, "memory: list down"))
	if _, err := m.Acquire(context.Background(), "k"); sandbox.CodeOf(err) != sandbox.Unavailable {
		t.Fatalf("Acquire = %v, want Unavailable", err)
	}
	if len(rt.CallsOf(memory.OpCreate)) != 0 {
		t.Fatal("created a sandbox without knowing whether one exists")
	}
	rt.FailNext(memory.OpList, 0, nil)
	mustAcquire(t, m, "k") // the next attempt works
}

func TestRegisterFailureDestroysSandbox(t *testing.T) {
	t.Parallel()
	boom := errors.New("db down")
	m, rt := newManager(t, session.Options{OnCreate: func(context.Context, *session.Session) error { return boom }})
	_, err := m.Acquire(context.Background(), "k")
	if !errors.Is(err, boom) {
		t.Fatalf("Acquire = %v, want the OnCreate error", err)
	}
	if rt.Live() != 0 || len(rt.CallsOf(memory.OpDestroy)) != 1 {
		t.Fatalf("live = %d, destroys = %d: the unregistered sandbox was not destroyed", rt.Live(), len(rt.CallsOf(memory.OpDestroy)))
	}
	if m.Len() != 0 {
		t.Fatal("failed session registered")
	}
}

// cancelAfterCreate ends the caller's context while the provider is
// creating the sandbox, as a slow create that returns after the deadline.
type cancelAfterCreate struct {
	*memory.Runtime
	cancel context.CancelFunc
}

func (r *cancelAfterCreate) Create(ctx context.Context, req *driver.CreateRequest) (driver.Info, error) {
	in, err := r.Runtime.Create(ctx, req)
	r.cancel()
	return in, err
}

func TestCreateReturningAfterContextEndIsDestroyed(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt := &cancelAfterCreate{Runtime: memory.New(), cancel: cancel}
	m := session.NewManager(sandbox.NewClient(rt), session.Options{})
	defer m.Close(context.Background())
	_, err := m.Acquire(ctx, "k")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire = %v, want context.Canceled", err)
	}
	// Acquire returns as soon as its context ends; the create it led
	// destroys the late sandbox in the background (the manager tracks it,
	// and Close waits for it), so wait for that, bounded, and never with
	// Close, whose own clean-up would hide a late sandbox registered as a
	// session.
	for deadline := time.Now().Add(10 * time.Second); rt.Live() != 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if len(rt.CallsOf(memory.OpCreate)) != 1 || rt.Live() != 0 {
		t.Fatalf("creates = %d, live = %d 10 s after Acquire returned: the late sandbox was not destroyed", len(rt.CallsOf(memory.OpCreate)), rt.Live())
	}
	if m.Len() != 0 {
		t.Fatal("the late sandbox was registered as a session")
	}
}

func TestGoneSandboxForgottenThenRecreated(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	ctx := context.Background()
	s := mustAcquire(t, m, "k")
	if err := rt.Destroy(ctx, s.ID()); err != nil { // the provider reaped it
		t.Fatal(err)
	}
	_, err := s.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	if !errors.Is(err, session.ErrGone) || !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Exec on a gone sandbox = %v, want ErrGone and ErrNotFound", err)
	}
	if _, ok := m.Lookup("k"); ok {
		t.Fatal("gone session still registered")
	}
	if _, err := s.Exec(ctx, sandbox.Command{Args: []string{"true"}}); !errors.Is(err, session.ErrEnded) {
		t.Fatalf("Exec on an ended session = %v, want ErrEnded", err)
	}
	s2 := mustAcquire(t, m, "k")
	if s2.ID() == s.ID() || len(rt.CallsOf(memory.OpCreate)) != 2 {
		t.Fatal("next Acquire did not create a fresh sandbox")
	}
}

func TestGoneDuringOperationIsClassified(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{LeaseRefreshInterval: time.Hour})
	ctx := context.Background()
	s := mustAcquire(t, m, "k")
	if _, err := s.Exec(ctx, sandbox.Command{Args: []string{"true"}, Timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	// The lease was refreshed recently, so the next call goes straight to
	// the provider and learns that the sandbox is gone only from the failure.
	_ = rt.Destroy(ctx, s.ID())
	_, err := s.Exec(ctx, sandbox.Command{Args: []string{"true"}, Timeout: time.Second})
	if !errors.Is(err, session.ErrGone) {
		t.Fatalf("Exec = %v, want ErrGone", err)
	}
	if n := len(rt.CallsOf(memory.OpSetTimeout)); n != 1 {
		t.Fatalf("lease extensions = %d, want 1 (the second call must skip it)", n)
	}
}

func TestDegradedSandboxKept(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	ctx := context.Background()
	s := mustAcquire(t, m, "k")
	rt.FailNext(memory.OpExec, 1, sandbox.Errorf(sandbox.Unavailable, "memory: toolbox not answering"))
	_, err := s.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	if err == nil || errors.Is(err, session.ErrGone) || sandbox.CodeOf(err) != sandbox.Unavailable {
		t.Fatalf("Exec = %v, want the Unavailable error, not ErrGone", err)
	}
	if got, ok := m.Lookup("k"); !ok || got != s {
		t.Fatal("degraded session was forgotten")
	}
	if _, err := s.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
		t.Fatalf("next Exec: %v", err)
	}
}

func TestPausedSandboxWokenBeforeOperation(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	ctx := context.Background()
	s := mustAcquire(t, m, "k")
	if err := rt.Pause(ctx, s.ID()); err != nil { // auto-paused by the provider
		t.Fatal(err)
	}
	res, err := s.Exec(ctx, sandbox.Command{Args: []string{"echo", "ok"}})
	if err != nil || string(res.Stdout) != "ok\n" {
		t.Fatalf("Exec on a paused sandbox: %v %v", res, err)
	}
	if len(rt.CallsOf(memory.OpResume)) != 1 {
		t.Fatalf("resumes = %d, want 1", len(rt.CallsOf(memory.OpResume)))
	}
}

func TestPausedSandboxWokenAfterRefusalAndRetriedOnce(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{LeaseRefreshInterval: time.Hour})
	ctx := context.Background()
	s := mustAcquire(t, m, "k")
	if _, err := s.Exec(ctx, sandbox.Command{Args: []string{"true"}, Timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Pause(ctx, s.ID()); err != nil {
		t.Fatal(err)
	}
	res, err := s.Exec(ctx, sandbox.Command{Args: []string{"echo", "ok"}, Timeout: time.Second})
	if err != nil || string(res.Stdout) != "ok\n" {
		t.Fatalf("Exec: %v %v", res, err)
	}
	var execs int
	for _, c := range rt.CallsOf(memory.OpExec) {
		if c.Path == "echo ok" {
			execs++
		}
	}
	if execs != 2 || len(rt.CallsOf(memory.OpResume)) != 1 {
		t.Fatalf("echo execs = %d, resumes = %d; want 2 and 1", execs, len(rt.CallsOf(memory.OpResume)))
	}
}

func TestLeaseRefreshedBeforeEachOperation(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{Create: sandbox.CreateOptions{Timeout: 10 * time.Minute}})
	ctx := context.Background()
	s := mustAcquire(t, m, "k")
	before := len(rt.CallsOf(memory.OpSetTimeout))
	for range 3 {
		if _, err := s.Exec(ctx, sandbox.Command{Args: []string{"true"}, Timeout: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(rt.CallsOf(memory.OpSetTimeout)) - before; got != 3 {
		t.Fatalf("lease extensions = %d, want 3", got)
	}
	// A command longer than the lease gets a lease that outlives it.
	if _, err := s.Exec(ctx, sandbox.Command{Args: []string{"true"}, Timeout: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if end := s.Sandbox().Info().LeaseEnd; time.Until(end) < time.Hour {
		t.Fatalf("lease ends in %v, want more than the command's hour", time.Until(end))
	}
}

func TestPrimeRetriedOnceThenDegraded(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	rt.FailNext(memory.OpMkdir, 1, sandbox.Errorf(sandbox.Unavailable, "memory: hung"))
	s := mustAcquire(t, m, "a")
	if got := len(rt.CallsOf(memory.OpMkdir)); got != 2 {
		t.Fatalf("mkdir calls = %d, want 2 (one retry)", got)
	}
	// Two failures on a live sandbox: kept, and the workspace is made on demand.
	rt.FailNext(memory.OpMkdir, 2, sandbox.Errorf(sandbox.Unavailable, "memory: hung"))
	s2 := mustAcquire(t, m, "b")
	res, err := s2.Exec(context.Background(), sandbox.Command{Args: []string{"pwd"}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != s2.Workspace() {
		t.Fatalf("Exec in a degraded session: %v %v", res, err)
	}
	_ = s
}

func TestPrimeFindsSandboxGoneAndDestroysIt(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	rt.FailNext(memory.OpMkdir, 2, notFound("toolbox: sandbox deleted"))
	rt.FailNext(memory.OpGet, 100, notFound("sandbox"))
	_, err := m.Acquire(context.Background(), "k")
	if !errors.Is(err, session.ErrGone) {
		t.Fatalf("Acquire = %v, want ErrGone", err)
	}
	if rt.Live() != 0 {
		t.Fatalf("live = %d, want 0", rt.Live())
	}
	rt.FailNext(memory.OpGet, 0, nil)
	mustAcquire(t, m, "k") // a retry starts fresh
}

func TestReleaseIsABASafe(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	ctx := context.Background()
	old := mustAcquire(t, m, "k")
	if err := m.Release(ctx, old); err != nil {
		t.Fatal(err)
	}
	fresh := mustAcquire(t, m, "k")
	if fresh.ID() == old.ID() {
		t.Fatal("Acquire after Release returned the released sandbox")
	}
	// A late second Release of the captured old session (an evictor that
	// raced with the re-open) must not touch the newer sandbox.
	if err := m.Release(ctx, old); err != nil {
		t.Fatal(err)
	}
	if got, ok := m.Lookup("k"); !ok || got != fresh {
		t.Fatal("releasing the old session unregistered the new one")
	}
	if _, err := fresh.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
		t.Fatalf("new sandbox broken by a stale release: %v", err)
	}
	if rt.Live() != 1 {
		t.Fatalf("live = %d, want 1", rt.Live())
	}
	if _, err := old.Exec(ctx, sandbox.Command{Args: []string{"true"}}); !errors.Is(err, session.ErrEnded) {
		t.Fatalf("Exec on released session = %v, want ErrEnded", err)
	}
	other, _ := newManager(t, session.Options{})
	if err := other.Release(ctx, fresh); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("Release by another manager = %v, want InvalidArgument", err)
	}
	if err := m.Release(ctx, nil); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("Release(nil) = %v, want InvalidArgument", err)
	}
}

func TestReleaseOfGoneSessionDestroysOnlyItsSandbox(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	ctx := context.Background()
	old := mustAcquire(t, m, "k")
	_ = rt.Destroy(ctx, old.ID())
	if _, err := old.Exec(ctx, sandbox.Command{Args: []string{"true"}}); !errors.Is(err, session.ErrGone) {
		t.Fatal(err)
	}
	fresh := mustAcquire(t, m, "k")
	before := len(rt.CallsOf(memory.OpDestroy))
	if err := m.Release(ctx, old); err != nil {
		t.Fatal(err)
	}
	for _, c := range rt.CallsOf(memory.OpDestroy)[before:] {
		if c.SandboxID == fresh.ID() {
			t.Fatal("release of the old session destroyed the new sandbox")
		}
	}
	if rt.Live() != 1 {
		t.Fatalf("live = %d, want 1", rt.Live())
	}
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestReapIdle(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{now: time.Unix(1e9, 0)}
	rt := memory.New()
	c := sandbox.NewClient(rt)
	ctx := context.Background()
	// An adopted sandbox, left by an earlier process.
	mOld := session.NewManager(c, session.Options{ReapInterval: -1})
	mustAcquire(t, mOld, "adopted")

	m := session.NewManager(c, session.Options{IdleTimeout: time.Minute, ReapInterval: -1, Clock: clk.Now})
	defer m.Close(ctx)
	owned := mustAcquire(t, m, "owned")
	mustAcquire(t, m, "adopted")
	busy := mustAcquire(t, m, "busy")

	entered, release := make(chan struct{}), make(chan struct{})
	rt.Handle("block", func(context.Context, *memory.Call) int {
		close(entered)
		<-release
		return 0
	})
	done := make(chan error, 1)
	go func() {
		_, err := busy.Exec(ctx, sandbox.Command{Args: []string{"block"}})
		done <- err
	}()
	<-entered

	if n := m.ReapIdle(ctx); n != 0 {
		t.Fatalf("reaped %d sessions before they were idle", n)
	}
	clk.Add(2 * time.Minute)
	if n := m.ReapIdle(ctx); n != 2 {
		t.Fatalf("reaped %d, want 2 (the busy one is running a command)", n)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if rt.Live() != 1 {
		t.Fatalf("live = %d, want 1: the created and adopted idle sandboxes destroyed, the busy one kept", rt.Live())
	}
	if _, err := owned.Exec(ctx, sandbox.Command{Args: []string{"true"}}); !errors.Is(err, session.ErrEnded) {
		t.Fatalf("Exec on a reaped session = %v, want ErrEnded", err)
	}
	if _, ok := m.Lookup("busy"); !ok {
		t.Fatal("busy session reaped")
	}
}

func TestReaperGoroutineReapsAndStops(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{IdleTimeout: time.Millisecond, ReapInterval: time.Millisecond})
	mustAcquire(t, m, "k")
	deadline := time.Now().Add(10 * time.Second)
	for rt.Live() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("idle session not reaped by the background reaper")
		}
		time.Sleep(time.Millisecond)
	}
	// Close stops the reaper; goleak checks that it ended.
}

func TestCloseDestroysCreatedAndAdopted(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	ctx := context.Background()
	mOld := session.NewManager(c, session.Options{ReapInterval: -1})
	left := mustAcquire(t, mOld, "old")

	m := session.NewManager(c, session.Options{})
	mustAcquire(t, m, "old")
	owned := mustAcquire(t, m, "new")
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if rt.Live() != 0 {
		t.Fatalf("live = %d, want 0", rt.Live())
	}
	if _, err := rt.Get(ctx, left.ID()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("adopted sandbox survived Close: %v", err)
	}
	if _, err := rt.Get(ctx, owned.ID()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("owned sandbox survived Close: %v", err)
	}
	if _, err := m.Acquire(ctx, "x"); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("Acquire after Close = %v, want ErrClosed", err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestCloseCancelsInFlightCreate(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	entered := make(chan struct{})
	rt.Handle("pip", func(ctx context.Context, _ *memory.Call) int {
		close(entered)
		<-ctx.Done()
		return 1
	})
	m := session.NewManager(c, session.Options{Packages: []string{"numpy"}, InstallTimeout: time.Hour})
	errc := make(chan error, 1)
	go func() {
		_, err := m.Acquire(context.Background(), "k")
		errc <- err
	}()
	<-entered
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err == nil {
		t.Fatal("Acquire succeeded across Close")
	}
	if rt.Live() != 0 {
		t.Fatalf("live = %d after Close, want 0", rt.Live())
	}
}

func TestInvalidOptionsReported(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	for name, o := range map[string]session.Options{
		"label key":  {LabelKey: "bad key"},
		"workspace":  {Workspace: "ws\x00"},
		"policy":     {OnMissingTemplate: 7},
		"label used": {Create: sandbox.CreateOptions{Labels: map[string]string{session.DefaultLabelKey: "x"}}},
		"package":    {Packages: []string{"ok", "bad;rm -rf /"}},
	} {
		m := session.NewManager(c, o)
		_, err := m.Acquire(context.Background(), "k")
		if !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("%s: Acquire = %v, want InvalidArgument", name, err)
		}
		_ = m.Close(context.Background())
	}
	if len(rt.Calls()) != 0 {
		t.Fatalf("provider called with invalid options: %v", rt.Calls())
	}
}

func TestChurnLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	m := session.NewManager(c, session.Options{MaxLive: 3, IdleTimeout: time.Nanosecond, ReapInterval: time.Millisecond})
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("k%d", g%4)
			for i := range 20 {
				s, err := m.Acquire(ctx, key)
				if errors.Is(err, sandbox.ErrLimit) {
					continue
				}
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				_, err = s.Exec(ctx, sandbox.Command{Args: []string{"true"}})
				if err != nil && !errors.Is(err, session.ErrEnded) && !errors.Is(err, session.ErrGone) {
					t.Errorf("Exec: %v", err)
				}
				if i%3 == 0 {
					if err := m.Release(ctx, s); err != nil {
						t.Errorf("Release: %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if rt.Live() != 0 {
		t.Fatalf("live = %d after Close, want 0", rt.Live())
	}
}
