package daytona_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
)

// An attach delivers all the output the command writes after Attach
// returned, however late its follower first reads the logs: here the
// first read of the logs after the attach meets a 502 (read again 250 ms
// later), and meanwhile the command, released by the test, prints its
// last line and exits. The output already written before the attach is
// not delivered again.
func TestAttachSeesOutputWrittenBeforeItsFirstPoll(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	ctx := ctxT(t)
	before := &screen{}
	p, err := sb.Start(ctx, sandbox.Command{Shell: `echo before; while [ ! -e gate ]; do sleep 0.02; done; echo after`, Stdout: before})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(before.String(), "before"); {
		if time.Now().After(deadline) {
			t.Fatal("the command's first line never came")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The starting handle stops following, so that only the attach reads.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	e.fake.FailNext("GET", "/logs", daytonafake.Fault502)
	out := &screen{}
	att, err := sb.AttachProcess(ctx, p.PID(), out, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer att.Close()
	if err := sb.WriteFile(ctx, "gate", nil); err != nil {
		t.Fatal(err)
	}
	r, err := att.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.Stdout); got != "after\n" || out.String() != "after\n" {
		t.Fatalf("the attach saw %q (streamed %q); want the line written after it, %q", got, out.String(), "after\n")
	}
}
