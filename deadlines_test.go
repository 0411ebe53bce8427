package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// hangRuntime is a memory runtime whose chosen operations never answer
// (they wait for their ctx), and which records the deadline each
// operation's ctx carried.
type hangRuntime struct {
	*memory.Runtime
	mu        sync.Mutex
	hang      map[string]bool
	deadlines map[string]time.Duration // op -> deadline minus call time; -1: none
	every     time.Duration            // the gap between a download-body trickle's bytes
}

func newHangRuntime() *hangRuntime {
	return &hangRuntime{Runtime: memory.New(), hang: map[string]bool{}, deadlines: map[string]time.Duration{}, every: 250 * time.Millisecond}
}

func (h *hangRuntime) enter(ctx context.Context, op string) bool {
	h.mu.Lock()
	d := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		d = time.Until(dl)
	}
	h.deadlines[op] = d
	hang := h.hang[op]
	h.mu.Unlock()
	if hang {
		<-ctx.Done()
	}
	return hang
}

func (h *hangRuntime) deadline(op string) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deadlines[op]
}

func (h *hangRuntime) Create(ctx context.Context, req *driver.CreateRequest) (driver.Info, error) {
	if h.enter(ctx, "create") {
		return driver.Info{}, ctx.Err()
	}
	return h.Runtime.Create(ctx, req)
}

func (h *hangRuntime) Get(ctx context.Context, id string) (driver.Info, error) {
	if h.enter(ctx, "get") {
		return driver.Info{}, ctx.Err()
	}
	return h.Runtime.Get(ctx, id)
}

func (h *hangRuntime) List(ctx context.Context, req *driver.ListRequest) ([]driver.Info, string, error) {
	if h.enter(ctx, "list") {
		return nil, "", ctx.Err()
	}
	return h.Runtime.List(ctx, req)
}

func (h *hangRuntime) Destroy(ctx context.Context, id string) error {
	if h.enter(ctx, "destroy") {
		return ctx.Err()
	}
	return h.Runtime.Destroy(ctx, id)
}

func (h *hangRuntime) SetTimeout(ctx context.Context, id string, d time.Duration) error {
	if h.enter(ctx, "set-timeout") {
		return ctx.Err()
	}
	return h.Runtime.SetTimeout(ctx, id, d)
}

func (h *hangRuntime) Pause(ctx context.Context, id string) error {
	if h.enter(ctx, "pause") {
		return ctx.Err()
	}
	return h.Runtime.Pause(ctx, id)
}

func (h *hangRuntime) Resume(ctx context.Context, id string) (driver.Info, error) {
	if h.enter(ctx, "resume") {
		return driver.Info{}, ctx.Err()
	}
	return h.Runtime.Resume(ctx, id)
}

func (h *hangRuntime) Exec(ctx context.Context, id string, cmd *driver.Command) (driver.ExitStatus, error) {
	if h.enter(ctx, "exec") {
		return driver.ExitStatus{}, ctx.Err()
	}
	return h.Runtime.Exec(ctx, id, cmd)
}

func (h *hangRuntime) Download(ctx context.Context, id, p string) (io.ReadCloser, error) {
	if h.enter(ctx, "download") {
		return nil, ctx.Err()
	}
	if h.hang["download-body"] {
		return &trickle{ctx: ctx, every: h.every, left: 25, stall: h.hang["download-stall"]}, nil
	}
	return h.Runtime.Download(ctx, id, p)
}

// trickle yields one byte every `every`, left times, then EOF; with stall
// it yields one byte and then never another until ctx ends.
type trickle struct {
	ctx   context.Context
	every time.Duration
	left  int
	stall bool
	sent  bool
}

func (t *trickle) Read(p []byte) (int, error) {
	if t.stall && t.sent {
		<-t.ctx.Done()
		return 0, t.ctx.Err()
	}
	if t.left == 0 {
		return 0, io.EOF
	}
	select {
	case <-t.ctx.Done():
		return 0, t.ctx.Err()
	case <-time.After(t.every):
	}
	t.left--
	t.sent = true
	p[0] = 'x'
	return 1, nil
}

func (t *trickle) Close() error { return nil }

// within runs f and fails the test if it has not returned after limit
// (the old code hung forever on a provider that never answers).
func within(t *testing.T, limit time.Duration, what string, f func()) time.Duration {
	t.Helper()
	done := make(chan struct{})
	start := time.Now()
	go func() { defer close(done); f() }()
	select {
	case <-done:
		return time.Since(start)
	case <-time.After(limit):
		t.Fatalf("%s did not return within %v: the provider's silence hangs the caller", what, limit)
		return 0
	}
}

func wantBound(t *testing.T, what string, err error) {
	t.Helper()
	if sandbox.CodeOf(err) != sandbox.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "WithCallTimeouts") {
		t.Fatalf("%s: %v (code %v), want DeadlineExceeded naming the default bound", what, err, sandbox.CodeOf(err))
	}
	var se *sandbox.Error
	if !errors.As(err, &se) {
		t.Fatalf("%s: %T is not a *sandbox.Error", what, err)
	}
}

func TestDefaultDeadlinesApplied(t *testing.T) {
	t.Parallel()
	rt := newHangRuntime()
	c := sandbox.NewClient(rt)
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Attach(ctx, sb.ID()); err != nil {
		t.Fatal(err)
	}
	for range c.List(ctx, sandbox.ListOptions{}) {
	}
	if err := sb.SetTimeout(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := sb.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sb.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}, Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	d := sandbox.DefaultCallTimeouts()
	for op, want := range map[string]time.Duration{
		"create": d.Create, "get": d.Lookup, "list": d.Lookup, "set-timeout": d.Lease,
		"pause": d.Pause, "resume": d.Resume, "destroy": d.Destroy, "exec": time.Minute + d.ExecGrace,
	} {
		// The deadline is the default from the call's start: at most
		// want, and not much less (5 s of slack for a starved machine).
		if got := rt.deadline(op); got <= 0 || got > want || got < want-5*time.Second {
			t.Errorf("%s ran with a deadline %v ahead, want the default %v", op, got, want)
		}
	}
	if d.Create != 2*time.Minute || d.Lookup != 10*time.Second || d.Destroy != time.Minute || d.Idle != 2*time.Minute {
		t.Errorf("defaults changed without the docs: %+v", d)
	}

	// A caller's own deadline is kept, even a longer one.
	long, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	if _, err := c.Attach(long, sb.ID()); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatal(err)
	}
	if got := rt.deadline("get"); got < 55*time.Minute {
		t.Errorf("a caller's 1h deadline became %v", got)
	}

	// Negative turns a bound off.
	off := sandbox.NewClient(rt, sandbox.WithCallTimeouts(sandbox.CallTimeouts{Lookup: -1}))
	_, _ = off.Attach(ctx, sb.ID())
	if got := rt.deadline("get"); got != -1 {
		t.Errorf("Lookup -1: get ran with a deadline %v ahead", got)
	}
}

func TestDefaultDeadlinesEndSilentProvider(t *testing.T) {
	t.Parallel()
	rt := newHangRuntime()
	short := 300 * time.Millisecond
	c := sandbox.NewClient(rt, sandbox.WithCallTimeouts(sandbox.CallTimeouts{
		Create: short, Lookup: short, Destroy: short, Lease: short, Pause: short, Resume: short, ExecGrace: short, Idle: short,
	}))
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "f", []byte("data")); err != nil {
		t.Fatal(err)
	}
	rt.mu.Lock()
	for _, op := range []string{"create", "get", "list", "destroy", "set-timeout", "pause", "resume", "exec"} {
		rt.hang[op] = true
	}
	rt.mu.Unlock()
	const limit = 30 * time.Second
	var took time.Duration
	took = within(t, limit, "Create", func() {
		_, err := c.Create(ctx, sandbox.CreateOptions{})
		wantBound(t, "Create", err)
	})
	t.Logf("Create on a silent provider returned after %v (bound %v)", took, short)
	within(t, limit, "Attach", func() { _, err := c.Attach(ctx, sb.ID()); wantBound(t, "Attach", err) })
	within(t, limit, "List", func() {
		for _, err := range c.List(ctx, sandbox.ListOptions{}) {
			wantBound(t, "List", err)
		}
	})
	within(t, limit, "Refresh", func() { _, err := sb.Refresh(ctx); wantBound(t, "Refresh", err) })
	within(t, limit, "Destroy", func() { wantBound(t, "Destroy", sb.Destroy(ctx)) })
	within(t, limit, "Pause", func() { wantBound(t, "Pause", sb.Pause(ctx)) })
	within(t, limit, "Resume", func() { wantBound(t, "Resume", sb.Resume(ctx)) })
	within(t, limit, "Exec", func() {
		res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}, Timeout: short})
		wantBound(t, "Exec", err)
		if res == nil || !res.TimedOut || res.TimeoutBy != sandbox.TimeoutProvider {
			t.Errorf("Exec result on a silent provider: %+v", res)
		}
	})

	// A stream that stops moving ends after Idle.
	rt.mu.Lock()
	rt.hang["download-body"], rt.hang["download-stall"] = true, true
	rt.mu.Unlock()
	within(t, limit, "Download of a stalled stream", func() {
		rc, err := sb.Download(ctx, "f")
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		_, err = io.ReadAll(rc)
		wantBound(t, "stalled Download", err)
	})
}

func TestDownloadBoundByProgressNotTotal(t *testing.T) {
	// Beside the package's other tests, which mostly wait: a byte every
	// 100 ms under a real 2 s idle bound leaves 20 times the gap.
	t.Parallel()
	rt := newHangRuntime()
	// 25 bytes, one every 100 ms: about 2.5 s in all, longer than the 2 s
	// idle bound, but never 2 s without a byte.
	rt.every = 100 * time.Millisecond
	c := sandbox.NewClient(rt, sandbox.WithCallTimeouts(sandbox.CallTimeouts{Idle: 2 * time.Second}))
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rt.mu.Lock()
	rt.hang["download-body"] = true
	rt.mu.Unlock()
	start := time.Now()
	rc, err := sb.Download(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var b bytes.Buffer
	if _, err := io.Copy(&b, rc); err != nil || b.Len() != 25 {
		t.Fatalf("slow but moving stream: %d bytes, %v after %v", b.Len(), err, time.Since(start))
	}
	took := time.Since(start)
	if took < 2*time.Second {
		t.Fatalf("the trickle took %v, under the 2 s idle bound: the check proves nothing", took)
	}
	t.Logf("a 25-byte trickle took %v under a 2s idle bound", took)
}
