package e2b_test

import (
	"context"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
)

// TestCreateAndConnectUseV2: create and resume go through POST
// /v2/sandboxes and POST /v2/sandboxes/{id}/connect, as E2B's SDKs do
// from 2.51, and never touch the deprecated routes on a server that has
// the new ones. The sandbox is secured (envd refuses a request without
// its access token), with no secure flag sent.
func TestCreateAndConnectUseV2(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := ctxT(t)
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	if err := sb.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sb.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, sandbox.Command{Shell: "true"}); err != nil {
		t.Fatalf("exec after resume: %v", err)
	}
	for key, want := range map[string]int{
		"POST /v2/sandboxes": 1, "POST /v2/sandboxes/{id}/connect": 1,
		"POST /sandboxes": 0, "POST /sandboxes/{id}/connect": 0,
	} {
		if n := e.fake.Count(key); n != want {
			t.Errorf("%s: %d requests, want %d", key, n, want)
		}
	}
}

// TestOlderServerFallsBackOnce: against a server without the v2 create
// and connect routes (an E2B API from before SDK 2.51), the adapter
// creates and resumes through the older routes, and asks each v2 route
// once per Runtime, not on every call.
func TestOlderServerFallsBackOnce(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t, e2bfake.WithoutV2Routes())
	ctx := ctxT(t)
	for range 2 {
		sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
		if err != nil {
			t.Fatalf("create on a server without v2: %v", err)
		}
		defer sb.Destroy(context.Background())
		if err := sb.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		if err := sb.Resume(ctx); err != nil {
			t.Fatalf("resume on a server without v2: %v", err)
		}
		// Secured on the older route too: envd wants the token the
		// create answered with.
		if _, err := sb.Exec(ctx, sandbox.Command{Shell: "true"}); err != nil {
			t.Fatalf("exec: %v", err)
		}
	}
	for key, want := range map[string]int{
		"POST /v2/sandboxes": 1, "POST /v2/sandboxes/{id}/connect": 1,
		"POST /sandboxes": 2, "POST /sandboxes/{id}/connect": 2,
	} {
		if n := e.fake.Count(key); n != want {
			t.Errorf("%s: %d requests, want %d", key, n, want)
		}
	}
}

// TestRefusedCreateDoesNotFallBack: the v2 route's own refusal (an
// unknown template, 404 with E2B's error body) is the answer: the adapter
// does not try the older route, which would refuse it again or, worse,
// create what the server meant to refuse.
func TestRefusedCreateDoesNotFallBack(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	_, err := e.client.Create(ctxT(t), sandbox.CreateOptions{Template: "no-such-template"})
	if sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("create from an unknown template: %v, want NotFound", err)
	}
	if n := e.fake.Count("POST /sandboxes"); n != 0 {
		t.Fatalf("%d creates on the older route after the v2 route refused, want 0", n)
	}
}
