package sandboxtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

func init() {
	lifecycleTests = append(lifecycleTests,
		test{name: "GetOrCreateSingleFlight", fn: testGetOrCreateSingleFlight},
		test{name: "CreateCancelledPromptly", fn: testCreateCancelledPromptly},
	)
}

// labelled returns the suite's create options with the run's label and
// extra.
func (s *suite) labelled(extra map[string]string) sandbox.CreateOptions {
	opts := s.h.Create
	opts.Labels = map[string]string{"sandboxtest": s.runID}
	for k, v := range s.h.Create.Labels {
		opts.Labels[k] = v
	}
	for k, v := range extra {
		opts.Labels[k] = v
	}
	return opts
}

// count lists the sandboxes carrying labels.
func (s *suite) count(ctx context.Context, t *testing.T, labels map[string]string) []string {
	t.Helper()
	var ids []string
	for in, err := range s.c.List(ctx, sandbox.ListOptions{Labels: labels}) {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		ids = append(ids, in.ID)
	}
	return ids
}

// GetOrCreateMany makes n concurrent GetOrCreate calls with opts on c,
// released together, and returns how often each sandbox id was returned
// and how many callers were told they created theirs. A failed call is
// reported with t.Errorf. Provider tests use it to check that concurrent
// callers share one sandbox.
func GetOrCreateMany(ctx context.Context, t testing.TB, c *sandbox.Client, opts sandbox.CreateOptions, n int) (ids map[string]int, created int) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		start = make(chan struct{})
	)
	ids = map[string]int{}
	for range n {
		wg.Go(func() {
			<-start
			sb, made, err := c.GetOrCreate(ctx, opts)
			if err != nil {
				t.Errorf("GetOrCreate: %v", err)
				return
			}
			mu.Lock()
			ids[sb.ID()]++
			if made {
				created++
			}
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return ids, created
}

// testGetOrCreateSingleFlight: 200 concurrent GetOrCreate calls with one
// key on one Client make exactly one sandbox, which every caller gets.
func testGetOrCreateSingleFlight(ctx context.Context, t *testing.T, s *suite) {
	opts := s.labelled(map[string]string{"flight": randHex(4)})
	const n = 200
	ids, created := GetOrCreateMany(ctx, t, s.c, opts, n)
	listed := s.count(ctx, t, opts.Labels)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, id := range listed {
			_ = s.c.Destroy(ctx, id)
		}
	})
	if len(ids) != 1 || created != 1 || len(listed) != 1 {
		t.Fatalf("%d callers: %d distinct sandboxes returned, %d told created, %d listed; want 1, 1, 1", n, len(ids), created, len(listed))
	}
}

// testCreateCancelledPromptly: a Create whose context ends 50 ms in
// returns promptly (the goal is 1 s; 5 s is the bound checked), and
// whatever the provider made is destroyed in the background.
func testCreateCancelledPromptly(ctx context.Context, t *testing.T, s *suite) {
	opts := s.labelled(map[string]string{"cancelled": randHex(4)})
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	begin := time.Now()
	sb, err := s.c.Create(cctx, opts)
	took := time.Since(begin)
	if err == nil {
		// The provider was faster than 50 ms: nothing to cancel.
		t.Logf("Create finished in %v, before its context ended", took)
		check(t, sb.Destroy(ctx))
	} else {
		t.Logf("Create cancelled at 50ms returned after %v", took)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Create error %v, want one matching context.DeadlineExceeded", err)
		}
	}
	if took > 5*time.Second {
		t.Errorf("Create took %v with a 50ms context, want at most 5s (goal 1s)", took)
	}
	// The clean-up runs in the background: wait, bounded, for no sandbox
	// to carry the labels.
	deadline := time.Now().Add(time.Minute)
	for {
		ids := s.count(ctx, t, opts.Labels)
		if len(ids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandboxes %v left behind by a cancelled Create", ids)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("sandboxes %v left behind by a cancelled Create: %v", ids, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
