package sandbox_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/sberrors"
)

func TestWatchAndProcessesUnimplemented(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sandbox.NewClient(bareRuntime{memory.New()})
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Watch(ctx, ".", sandbox.WatchOptions{}); !errors.Is(err, sandbox.ErrUnimplemented) {
		t.Errorf("Watch without a driver.Watcher: %v, want ErrUnimplemented", err)
	}
	if _, err := sb.Processes(ctx); !errors.Is(err, sandbox.ErrUnimplemented) {
		t.Errorf("Processes without a driver.ProcessLister: %v, want ErrUnimplemented", err)
	}
}

func TestWatchBadBuffer(t *testing.T) {
	t.Parallel()
	sb, _ := newSandbox(t, sandbox.CreateOptions{})
	for _, n := range []int{-1, sandbox.MaxWatchBuffer + 1} {
		_, err := sb.Watch(context.Background(), ".", sandbox.WatchOptions{Buffer: n})
		if sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "buffer") {
			t.Errorf("Buffer %d: %v, want InvalidArgument naming buffer", n, err)
		}
	}
}

// stubWatcher is a runtime whose watch is scripted.
type stubWatcher struct {
	*memory.Runtime
	seq     iter.Seq2[driver.FileEvent, error]
	gotDir  string
	gotReq  driver.WatchRequest
	procErr error
}

func (s *stubWatcher) Watch(_ context.Context, _, dir string, req *driver.WatchRequest) (iter.Seq2[driver.FileEvent, error], error) {
	s.gotDir, s.gotReq = dir, *req
	return s.seq, nil
}

func (s *stubWatcher) Processes(context.Context, string) ([]driver.ProcessInfo, error) {
	return []driver.ProcessInfo{{PID: 9, Args: []string{"b"}}, {PID: 3, Args: []string{"a"}, Handle: true}}, s.procErr
}

func stubSandbox(t *testing.T, st *stubWatcher) *sandbox.Sandbox {
	t.Helper()
	st.Runtime = memory.New()
	c := sandbox.NewClient(st)
	t.Cleanup(func() { _ = c.Close() })
	sb, err := c.Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// The portable layer resolves a relative dir against home, applies the
// default buffer, and wraps a driver's failure with the op and the path.
func TestWatchDefaultsAndWrapping(t *testing.T) {
	t.Parallel()
	boom := sberrors.Errorf(sberrors.Unavailable, "agent went away")
	st := &stubWatcher{seq: func(yield func(driver.FileEvent, error) bool) {
		if yield(driver.FileEvent{Path: "/home/user/w/a", Kind: driver.FileCreated}, nil) {
			yield(driver.FileEvent{}, boom)
		}
	}}
	sb := stubSandbox(t, st)
	seq, err := sb.Watch(context.Background(), "w", sandbox.WatchOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := sb.Home() + "/w"; st.gotDir != want {
		t.Errorf("driver got dir %q, want %q", st.gotDir, want)
	}
	if st.gotReq.Buffer != sandbox.DefaultWatchBuffer || !st.gotReq.Recursive {
		t.Errorf("driver got %+v, want the default buffer and Recursive", st.gotReq)
	}
	var evs []sandbox.FileEvent
	var last error
	for ev, err := range seq {
		if err != nil {
			last = err
			continue
		}
		evs = append(evs, ev)
	}
	if len(evs) != 1 || evs[0].Kind != sandbox.FileCreated || evs[0].String() != "create /home/user/w/a" {
		t.Errorf("events %v", evs)
	}
	var se *sandbox.Error
	if !errors.As(last, &se) || se.Op != "watch" || se.Path != st.gotDir || !errors.Is(last, boom) || sandbox.CodeOf(last) != sandbox.Unavailable {
		t.Errorf("driver failure came as %#v", last)
	}
}

// A driver that goes on yielding after ctx ended does not keep the
// caller's loop running: the sequence ends with ctx.
func TestWatchEndsWithContextWhateverTheDriver(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	st := &stubWatcher{seq: func(yield func(driver.FileEvent, error) bool) {
		for {
			if !yield(driver.FileEvent{Path: "/x", Kind: driver.FileWritten}, nil) {
				return
			}
		}
	}}
	sb := stubSandbox(t, st)
	seq, err := sb.Watch(ctx, "/", sandbox.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range seq {
			if n++; n == 10 {
				cancel()
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch went on after its ctx was cancelled")
	}
	if n != 10 {
		t.Errorf("%d events after the cancel at the 10th", n-10)
	}
}

func TestProcessesSortedAndConverted(t *testing.T) {
	t.Parallel()
	st := &stubWatcher{}
	sb := stubSandbox(t, st)
	list, err := sb.Processes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].PID != 3 || !list[0].Handle || list[1].PID != 9 || list[1].Args[0] != "b" {
		t.Errorf("list %+v", list)
	}
	st.procErr = sberrors.ErrNotFound
	if _, err := sb.Processes(context.Background()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("error %v", err)
	}
	var se *sandbox.Error
	if _, err := sb.Processes(context.Background()); !errors.As(err, &se) || se.Op != "processes" {
		t.Errorf("error %#v not wrapped with op processes", err)
	}
}

// A secret of the handle that a command was given on its command line is
// redacted from the process list, as from output.
func TestProcessesRedactSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{SecretEnv: map[string]string{"TOKEN": "tok-5ecr3t-value"}})
	if err != nil {
		t.Fatal(err)
	}
	// The secret is the shell's $0, so the command keeps running (a sleep
	// given it as an operand would fail at once and leave the list).
	p, err := sb.Start(ctx, sandbox.Command{Args: []string{"sh", "-c", "sleep 30", "--token=tok-5ecr3t-value"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Kill(ctx); _, _ = p.Wait(ctx) }()
	list, err := sb.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("list %+v", list)
	}
	if got := strings.Join(list[0].Args, " "); strings.Contains(got, "5ecr3t") || !strings.Contains(got, "--token=") {
		t.Errorf("args %q: the secret is not redacted (or the rest is lost)", got)
	}
}
