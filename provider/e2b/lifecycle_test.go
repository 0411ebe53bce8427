package e2b_test

import (
	"context"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
)

// TestLostCreateResponseLeavesNoOrphan: the server makes the sandbox but
// its answer is stalled until the caller gives up, or dropped; the
// adapter finds the sandbox by its create token and either adopts it
// (the caller's ctx still lives) or destroys it. Nothing is left that the
// caller does not hold.
func TestLostCreateResponseLeavesNoOrphan(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind e2bfake.FaultKind
		ctx  time.Duration
	}{
		{"stall", e2bfake.StallResponse, time.Second},
		{"drop", e2bfake.DropResponse, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newMemoryEnv(t)
			e.fake.Inject(&e2bfake.Fault{Kind: tc.kind, Path: "POST /sandboxes"})
			ctx, cancel := context.WithTimeout(context.Background(), tc.ctx)
			defer cancel()
			sb, err := e.client.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"k": "v"}})
			if n := e.fake.Count("POST /sandboxes"); n != 1 {
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
		})
	}
}
