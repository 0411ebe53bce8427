package sandbox_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// listRecorder records the ListRequests a runtime receives; with blind set
// it hides ExcludeIDs from the runtime below, as a provider that cannot
// filter on ids would.
type listRecorder struct {
	*memory.Runtime
	blind bool
	reqs  []driver.ListRequest
}

func (l *listRecorder) List(ctx context.Context, req *driver.ListRequest) ([]driver.Info, string, error) {
	l.reqs = append(l.reqs, *req)
	if l.blind {
		r := *req
		r.ExcludeIDs = nil
		req = &r
	}
	return l.Runtime.List(ctx, req)
}

// ListOptions.ExcludeIDs reaches the provider, which fills pages with
// other matches; a provider that ignores it is filtered above, and pages
// holding only excluded sandboxes do not end the listing.
func TestListExcludeIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, blind := range []bool{false, true} {
		rec := &listRecorder{Runtime: memory.New(), blind: blind}
		c := sandbox.NewClient(rec)
		var ids []string
		for range 4 {
			sb, err := c.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"g": "x"}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, sb.ID())
		}
		// The three oldest are excluded: with pages of one and a blind
		// provider, the first three pages hold nothing to yield.
		exclude := ids[:3]
		var got []string
		for in, err := range c.List(ctx, sandbox.ListOptions{Labels: map[string]string{"g": "x"}, PageSize: 1, ExcludeIDs: exclude}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, in.ID)
		}
		if !slices.Equal(got, ids[3:]) {
			t.Fatalf("blind=%v: List excluding %v = %v, want %v", blind, exclude, got, ids[3:])
		}
		if !slices.Equal(rec.reqs[0].ExcludeIDs, exclude) {
			t.Fatalf("blind=%v: the provider got ExcludeIDs %v, want %v", blind, rec.reqs[0].ExcludeIDs, exclude)
		}
		// A provider that filters fills its first page with the one
		// other match (and says there is no more after one more call at
		// most); a blind one pages past every excluded sandbox.
		if !blind && len(rec.reqs) > 2 {
			t.Errorf("filtering provider: %d List calls, want at most 2", len(rec.reqs))
		}
		if blind && len(rec.reqs) < 4 {
			t.Errorf("blind provider: %d List calls, want the listing to go on past the excluded pages", len(rec.reqs))
		}
		c.Close()
	}
}
