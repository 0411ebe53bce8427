package fsbackend_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/fsbackend"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// probeRecorder records the deadline the $HOME probe's Exec ran with.
type probeRecorder struct {
	*memory.Runtime
	ahead time.Duration
}

func (p *probeRecorder) Exec(ctx context.Context, id string, cmd *driver.Command) (driver.ExitStatus, error) {
	if len(cmd.Args) == 3 && strings.Contains(cmd.Args[2], "$HOME") {
		p.ahead = -1
		if dl, ok := ctx.Deadline(); ok {
			p.ahead = time.Until(dl)
		}
	}
	return p.Runtime.Exec(ctx, id, cmd)
}

// The $HOME probe is bounded at ProbeTimeout even when ctx allows much
// longer (issue 22 item 14).
func TestHomeProbeBounded(t *testing.T) {
	t.Parallel()
	rec := &probeRecorder{Runtime: memory.New()}
	c := sandbox.NewClient(rec)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := fsbackend.New(sb, fsbackend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.BaseDir(ctx); err != nil {
		t.Fatal(err)
	}
	if fsbackend.ProbeTimeout != 10*time.Second || rec.ahead <= 0 || rec.ahead > fsbackend.ProbeTimeout {
		t.Fatalf("the probe ran with a deadline %v ahead, want at most %v", rec.ahead, fsbackend.ProbeTimeout)
	}
}
