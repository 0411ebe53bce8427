package local

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// traceEnv, when set to 1 in the environment of the program that creates
// sandboxes, makes every create print where its time went to stderr: one
// line per sandbox, each step with the time since the step before it, in
// the order they ended (the runtime's, the spawner's and the agent's steps
// on one clock). It is a measuring aid: nothing else changes.
const traceEnv = "SANDBOX_LOCAL_TRACE"

// stamp is the moment one step of a create ended, on CLOCK_MONOTONIC,
// which every process of the host shares.
type stamp struct {
	Name string `json:"n"`
	At   int64  `json:"t"`
}

// monoNow returns CLOCK_MONOTONIC in nanoseconds.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// trace collects the stamps of one create; a nil trace collects nothing.
type trace struct{ stamps []stamp }

func (t *trace) mark(name string) {
	if t != nil {
		t.stamps = append(t.stamps, stamp{Name: name, At: monoNow()})
	}
}

func (t *trace) add(prefix string, s []stamp) {
	if t == nil {
		return
	}
	for _, st := range s {
		t.stamps = append(t.stamps, stamp{Name: prefix + st.Name, At: st.At})
	}
}

// print writes the steps of a create, in the order they ended, with the
// time each took since the step before.
func (t *trace) print(id string) {
	if t == nil || len(t.stamps) == 0 {
		return
	}
	s := slices.Clone(t.stamps)
	slices.SortStableFunc(s, func(a, b stamp) int { return int(a.At - b.At) })
	var b strings.Builder
	fmt.Fprintf(&b, "sandbox/local trace: create %s total=%.3fms", id, float64(s[len(s)-1].At-s[0].At)/1e6)
	for i := 1; i < len(s); i++ {
		fmt.Fprintf(&b, " %s=%.3f", s[i].Name, float64(s[i].At-s[i-1].At)/1e6)
	}
	b.WriteByte('\n')
	_, _ = os.Stderr.WriteString(b.String())
}

type traceKey struct{}

// newTrace returns a trace when traceEnv asks for one, else nil.
func newTrace() *trace {
	if os.Getenv(traceEnv) != "1" {
		return nil
	}
	t := &trace{}
	t.mark("start")
	return t
}

func withTrace(ctx context.Context, t *trace) context.Context {
	if t == nil {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, t)
}

func traceFrom(ctx context.Context) *trace {
	t, _ := ctx.Value(traceKey{}).(*trace)
	return t
}
