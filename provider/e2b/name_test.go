package e2b_test

import (
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b"
)

// A name is kept as the "name" metadata label, as seed 003 names its E2B
// sandboxes: it comes back from the server and List finds the sandbox by
// it.
func TestCreateName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	sb := mustCreate(t, e.client, sandbox.CreateOptions{
		Labels: map[string]string{"team": "a"}, ProviderOptions: map[string]string{e2b.OptName: "  report-builder "},
	})
	if got := sb.Info().Labels[e2b.NameLabel]; got != "report-builder" {
		t.Fatalf("Create's labels %v, want name=report-builder", sb.Info().Labels)
	}
	in, err := sb.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if in.Labels[e2b.NameLabel] != "report-builder" || in.Labels["team"] != "a" {
		t.Fatalf("labels from the server %v", in.Labels)
	}
	var found []string
	for in, err := range e.client.List(ctx, sandbox.ListOptions{Labels: map[string]string{e2b.NameLabel: "report-builder"}}) {
		if err != nil {
			t.Fatal(err)
		}
		found = append(found, in.ID)
	}
	if len(found) != 1 || found[0] != sb.ID() {
		t.Fatalf("List by name: %v, want [%s]", found, sb.ID())
	}
	// A name that disagrees with a "name" label is refused before any call.
	_, err = e.client.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"name": "x"}, ProviderOptions: map[string]string{e2b.OptName: "y"}})
	wantCode(t, err, sandbox.InvalidArgument)
	// No name, no label.
	plain := mustCreate(t, e.client, sandbox.CreateOptions{})
	if _, ok := plain.Info().Labels[e2b.NameLabel]; ok {
		t.Fatalf("unnamed sandbox has labels %v", plain.Info().Labels)
	}
}
