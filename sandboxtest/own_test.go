package sandboxtest_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// A subtest that arms a fault in its Client (Exec/StallIsAnError) runs
// beside its group, so it must get a Client of its own: were it handed the
// group's, the fault would hit whichever sibling's command came next. The
// Stall hook records the Client it was given and skips the subtest, so
// only the Client's origin is checked here.
func TestOwnSubtestGetsItsOwnClient(t *testing.T) {
	t.Setenv(sandboxtest.FullEnv, "")
	var mu sync.Mutex
	madeFor := map[*sandbox.Client]string{} // the Client -> the test it was made for
	var stalled []*sandbox.Client
	// The group's other subtests are skipped: only the Client the fault is
	// armed in matters here, and they would only add their run time.
	skip := map[string]string{}
	for _, name := range sandboxtest.Subtests("Exec") {
		if name != "StallIsAnError" {
			skip["Exec/"+name] = "not what this test checks"
		}
	}
	sandboxtest.Run(t, sandboxtest.Harness{
		NewClient: func(t *testing.T) *sandbox.Client {
			c := sandbox.NewClient(memory.New())
			mu.Lock()
			madeFor[c] = t.Name()
			mu.Unlock()
			return c
		},
		Groups: []string{"Exec"}, ShortGroups: []string{"Exec"},
		Skip: skip,
		Faults: sandboxtest.FaultHooks{Stall: func(t *testing.T, c *sandbox.Client) {
			mu.Lock()
			stalled = append(stalled, c)
			mu.Unlock()
			t.Skip("the Client was recorded")
		}},
	})
	mu.Lock()
	defer mu.Unlock()
	if len(stalled) != 1 {
		t.Fatalf("the Stall hook was called %d times, want once", len(stalled))
	}
	if got := madeFor[stalled[0]]; !strings.HasSuffix(got, "/Exec/StallIsAnError") {
		t.Errorf("Exec/StallIsAnError armed its fault in the Client made for %q, want one made for itself", got)
	}
}
