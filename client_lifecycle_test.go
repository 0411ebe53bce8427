package sandbox_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// TestGetOrCreateSingleFlight: 200 concurrent callers with one key make
// exactly one sandbox, all get it, and exactly one is told it created it.
func TestGetOrCreateSingleFlight(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	defer c.Close()
	ctx := context.Background()
	opts := sandbox.CreateOptions{Labels: map[string]string{"user": "ada", "job": "7"}}
	const n = 200
	var (
		wg      sync.WaitGroup
		created atomic.Int32
		ids     sync.Map
		start   = make(chan struct{})
	)
	for range n {
		wg.Go(func() {
			<-start
			sb, made, err := c.GetOrCreate(ctx, opts)
			if err != nil {
				t.Error(err)
				return
			}
			if made {
				created.Add(1)
			}
			ids.Store(sb.ID(), true)
		})
	}
	close(start)
	wg.Wait()
	if got := len(rt.CallsOf(memory.OpCreate)); got != 1 {
		t.Errorf("%d creates, want 1", got)
	}
	if got := created.Load(); got != 1 {
		t.Errorf("%d callers told created, want 1", got)
	}
	nids := 0
	ids.Range(func(any, any) bool { nids++; return true })
	if nids != 1 {
		t.Errorf("%d distinct sandboxes returned, want 1", nids)
	}
	// Another template is another key.
	opts.Template = "other"
	if _, made, err := c.GetOrCreate(ctx, opts); err != nil || made {
		// memory lists by labels only, so the labelled sandbox is found.
		t.Fatalf("GetOrCreate(other template) = created %v, %v; want the labelled sandbox found", made, err)
	}
}

// lateCreate is a memory Runtime whose Create makes the sandbox, then does
// not notice its context ending until release is closed: a provider whose
// server acted and whose answer comes late.
type lateCreate struct {
	*memory.Runtime
	entered chan struct{}
	release chan struct{}
}

func (s *lateCreate) Create(ctx context.Context, req *driver.CreateRequest) (driver.Info, error) {
	in, err := s.Runtime.Create(context.WithoutCancel(ctx), req)
	if err != nil {
		return in, err
	}
	close(s.entered)
	<-ctx.Done()
	<-s.release
	return in, ctx.Err()
}

// TestCreateCancelledReturnsPromptly: Create returns as soon as its
// context ends although the provider is still busy; the sandbox the
// provider made is destroyed in the background and Close waits for that.
func TestCreateCancelledReturnsPromptly(t *testing.T) {
	mem := memory.New()
	rt := &lateCreate{Runtime: mem, entered: make(chan struct{}), release: make(chan struct{})}
	c := sandbox.NewClient(rt)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-rt.entered
		cancel()
	}()
	begin := time.Now()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	took := time.Since(begin)
	if err == nil {
		t.Fatalf("Create = %s, want an error", sb.ID())
	}
	if !errors.Is(err, context.Canceled) || sandbox.CodeOf(err) != sandbox.Canceled {
		t.Errorf("Create error %v (code %v), want context.Canceled", err, sandbox.CodeOf(err))
	}
	t.Logf("Create returned %v after it began (cancelled once the provider made the sandbox)", took)
	if took > 5*time.Second {
		t.Errorf("Create took %v to return after cancellation, want well under 5s", took)
	}
	if n := mem.Live(); n != 1 {
		t.Fatalf("%d sandboxes live while the provider is still busy, want 1", n)
	}
	closed := make(chan error)
	go func() { closed <- c.Close() }()
	close(rt.release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if n := mem.Live(); n != 0 {
		t.Errorf("%d sandboxes left once Close returned, want 0", n)
	}
}

// blockCreate is a memory Runtime whose Create waits for its context to
// end (or release) before creating.
type blockCreate struct {
	*memory.Runtime
	entered chan struct{}
	once    sync.Once
}

func (b *blockCreate) Create(ctx context.Context, req *driver.CreateRequest) (driver.Info, error) {
	first := false
	b.once.Do(func() { first = true })
	if first {
		close(b.entered)
		<-ctx.Done()
		return driver.Info{}, ctx.Err()
	}
	return b.Runtime.Create(ctx, req)
}

// TestGetOrCreateWinnerGivesUp: when the caller doing the work for a key
// gives up, it returns at once, and a caller still waiting does the work
// itself instead of inheriting the cancellation.
func TestGetOrCreateWinnerGivesUp(t *testing.T) {
	t.Parallel()
	mem := memory.New()
	rt := &blockCreate{Runtime: mem, entered: make(chan struct{})}
	c := sandbox.NewClient(rt)
	defer c.Close()
	opts := sandbox.CreateOptions{Labels: map[string]string{"k": "v"}}
	ctxA, cancelA := context.WithCancel(context.Background())
	errA := make(chan error, 1)
	go func() {
		_, _, err := c.GetOrCreate(ctxA, opts)
		errA <- err
	}()
	<-rt.entered
	type res struct {
		sb   *sandbox.Sandbox
		made bool
		err  error
	}
	b := make(chan res, 1)
	go func() {
		sb, made, err := c.GetOrCreate(context.Background(), opts)
		b <- res{sb, made, err}
	}()
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled caller got %v, want context.Canceled", err)
	}
	r := <-b
	if r.err != nil || !r.made {
		t.Fatalf("the waiting caller got created=%v, %v; want a sandbox it created", r.made, r.err)
	}
	if n := mem.Live(); n != 1 {
		t.Errorf("%d sandboxes, want 1", n)
	}
}
