package local

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// TestTimerSlack: an agent's threads run with agentTimerSlack (which cuts
// its runtime's wake-ups per exec), and its commands, a started agent's and
// one started ahead, with the application's own slack: a command must not
// find its timers coarser in a sandbox than outside it.
func TestTimerSlack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	own, err := os.ReadFile("/proc/self/timerslack_ns")
	if err != nil {
		t.Skipf("this kernel does not show timer slack: %v", err)
	}
	want := strings.TrimSpace(string(own))
	for _, l := range []Level{L1, L4} {
		t.Run(l.String(), func(t *testing.T) {
			t.Parallel()
			rt := newRuntime(t, WithIsolation(l))
			if got, _ := rt.Level(); got != l {
				t.Skipf("this host gives %s", got.Describe())
			}
			c := sandbox.NewClient(rt)
			// The second create of a kind adopts an agent started ahead.
			for i := range 2 {
				sb := mustCreate(ctx, t, c, sandbox.CreateOptions{})
				res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"cat", "/proc/self/timerslack_ns"}})
				if err != nil || res.ExitCode != 0 {
					t.Fatalf("sandbox %d: %v %+v", i, err, res)
				}
				if got := strings.TrimSpace(string(res.Stdout)); got != want {
					t.Errorf("sandbox %d: a command's timer slack is %s ns, want the application's %s", i, got, want)
				}
				m, err := rt.readMeta(sb.ID())
				if err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile("/proc/" + strconv.Itoa(m.AgentPID) + "/timerslack_ns")
				if errors.Is(err, fs.ErrPermission) {
					t.Skipf("cannot read the agent's timer slack: %v", err)
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.TrimSpace(string(b)); got != strconv.Itoa(agentTimerSlack) {
					t.Errorf("sandbox %d: the agent's timer slack is %s ns, want %d", i, got, agentTimerSlack)
				}
			}
		})
	}
}
