package e2b_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// TestLostCreateResponseLeavesNoOrphan: the server makes the sandbox but
// its answer is stalled until the caller gives up, or dropped; the
// adapter finds the sandbox by its create token and either adopts it
// (the caller's ctx still lives) or destroys it. Nothing is left that the
// caller does not hold.
func TestLostCreateResponseLeavesNoOrphan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		kind e2bfake.FaultKind
		ctx  time.Duration
	}{
		{"stall", e2bfake.StallResponse, time.Second},
		{"drop", e2bfake.DropResponse, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newMemoryEnv(t)
			e.fake.Inject(&e2bfake.Fault{Kind: tc.kind, Path: "POST /v2/sandboxes"})
			ctx, cancel := context.WithTimeout(context.Background(), tc.ctx)
			defer cancel()
			sb, err := e.client.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"k": "v"}})
			if n := e.fake.Count("POST /v2/sandboxes"); n != 1 {
				t.Fatalf("%d creates reached the server, want 1", n)
			}
			held := 0
			if err == nil {
				held = 1
				if got := sb.Info().Labels; len(got) != 1 || got["k"] != "v" {
					t.Errorf("adopted sandbox labels %v, want only k=v (the token hidden)", got)
				}
				if _, err := sb.Exec(context.Background(), sandbox.Command{Shell: "true"}); err != nil {
					t.Errorf("exec in the adopted sandbox: %v", err)
				}
			} else {
				t.Logf("create: %v", err)
			}
			if err := e.client.Close(); err != nil {
				t.Fatal(err)
			}
			if got := len(e.fake.Sandboxes()); got != held {
				t.Fatalf("%d sandboxes on the server once Close returned, %d held by the caller: %d orphaned", got, held, got-held)
			}
			e.fake.Close() // and again at cleanup: Close is idempotent
		})
	}
}

// TestGetOrCreateOnce: 200 goroutines on one Client send one create; 4
// Clients (each its own Runtime, as 4 processes would be) × 50 goroutines
// leave one sandbox after the post-create check, and every caller gets it.
func TestGetOrCreateOnce(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := ctxT(t)
	opts := sandbox.CreateOptions{Labels: map[string]string{"user": "ada"}}
	ids, created := sandboxtest.GetOrCreateMany(ctx, t, e.client, opts, 200)
	if n := e.fake.Count("POST /v2/sandboxes"); n != 1 || len(ids) != 1 || created != 1 {
		t.Fatalf("200 callers on one Client: %d creates sent, %d sandboxes returned, %d told created; want 1, 1, 1", n, len(ids), created)
	}

	opts.Labels = map[string]string{"user": "grace"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	all := map[string]int{}
	made := 0
	for range 4 {
		rt, err := e2b.New(e2b.WithAPIKey(e.fake.APIKey()), e2b.WithAPIURL(e.fake.APIURL()), e2b.WithSandboxURL(e.fake.SandboxURL()))
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
	for info, err := range e.client.List(ctx, sandbox.ListOptions{Labels: opts.Labels}) {
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, info.ID)
	}
	t.Logf("4 Clients: %d creates reached the server", e.fake.Count("POST /v2/sandboxes")-1)
	if len(all) != 1 || made != 1 || len(left) != 1 {
		t.Fatalf("4 Clients × 50: sandboxes returned %v, %d told created, %v left; want 1, 1, 1", all, made, left)
	}
}
