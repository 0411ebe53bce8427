package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

type termOut struct {
	mu sync.Mutex
	b  strings.Builder
}

func (o *termOut) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *termOut) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// A terminal's program is confined exactly as Exec's commands are: same
// user and groups, cgroup, seccomp mode, no-new-privileges and
// capabilities, and the same file system allow-list.
func TestTerminalConfinedAsExec(t *testing.T) {
	t.Parallel()
	for _, l := range []Level{L4, L1} {
		t.Run(l.String(), func(t *testing.T) {
			t.Parallel()
			rt := levelRuntime(t, l)
			c := sandbox.NewClient(rt)
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sb, err := c.Create(ctx, sandbox.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Destroy(ctx)
			outside := filepath.Join(t.TempDir(), "escape")
			probe := fmt.Sprintf(`echo "id=$(id)"; echo "cg=$(cat /proc/self/cgroup)"; grep -E '^(Seccomp|NoNewPrivs|CapEff|CapBnd):' /proc/self/status | tr -s '\t ' ' '; touch %q 2>/dev/null && echo ESCAPED; echo probe-end`, outside)
			want, err := sb.Output(ctx, sandbox.Command{Shell: probe})
			if err != nil {
				t.Fatal(err)
			}
			var out termOut
			term, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"sh", "-c", probe}, Output: &out})
			if err != nil {
				t.Fatal(err)
			}
			defer term.Close()
			if _, err := term.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			got := strings.ReplaceAll(out.String(), "\r\n", "\n")
			if got != string(want) {
				t.Errorf("the terminal's program is confined otherwise than Exec's commands:\nterminal:\n%s\nexec:\n%s", got, want)
			}
			if strings.Contains(got, "ESCAPED") {
				t.Errorf("the terminal's program wrote outside the sandbox")
			}
			if _, err := os.Stat(outside); err == nil {
				t.Errorf("%s exists", outside)
			}
		})
	}
}
