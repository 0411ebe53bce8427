package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// The Watch group checks Sandbox.Watch on providers that have a watcher
// (Capabilities.Watch); the ProcessList group checks Sandbox.Processes
// (Capabilities.ProcessList).

func needsWatch(c sandbox.Capabilities) string {
	if !c.Watch {
		return "provider cannot watch directories (Capabilities.Watch=false: not a driver.Watcher)"
	}
	return ""
}

func needsProcessList(c sandbox.Capabilities) string {
	if !c.ProcessList {
		return "provider cannot list processes (Capabilities.ProcessList=false: not a driver.ProcessLister)"
	}
	if !c.Processes {
		return "provider has no background processes to list (Capabilities.Processes=false)"
	}
	return ""
}

// eventWait is how long a subtest waits for one expected event: generous
// for a starved host, plus the provider's declared latency.
func (s *suite) eventWait() time.Duration { return 20*time.Second + 4*s.caps.WatchLatency }

// watcher ranges over a watch in a goroutine and hands the events over
// one by one; stop ends the watch and waits for the goroutine.
type watcher struct {
	ch     chan sandbox.FileEvent
	errc   chan error
	done   chan struct{}
	cancel context.CancelFunc
	seen   []sandbox.FileEvent
}

func (s *suite) watch(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, dir string, opts sandbox.WatchOptions) *watcher {
	t.Helper()
	wctx, cancel := context.WithCancel(ctx)
	seq, err := sb.Watch(wctx, dir, opts)
	if err != nil {
		cancel()
		t.Fatalf("Watch(%q): %v", dir, err)
	}
	w := &watcher{ch: make(chan sandbox.FileEvent), errc: make(chan error, 1), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(w.done)
		for ev, err := range seq {
			if err != nil {
				w.errc <- err
				return
			}
			select {
			case w.ch <- ev:
			case <-wctx.Done():
				return
			}
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *watcher) stop() {
	w.cancel()
	<-w.done
}

// next returns the next event, failing the test after d.
func (w *watcher) next(t *testing.T, d time.Duration, waitingFor string) sandbox.FileEvent {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case ev := <-w.ch:
		w.seen = append(w.seen, ev)
		return ev
	case err := <-w.errc:
		t.Fatalf("watch failed while waiting for %s: %v (events so far: %v)", waitingFor, err, w.seen)
	case <-timer.C:
		t.Fatalf("no event within %v while waiting for %s (events so far: %v)", d, waitingFor, w.seen)
	}
	return sandbox.FileEvent{}
}

// waitFor reads events until one matches, failing on an overflow (none
// can happen with a default buffer and a handful of changes) or after d.
func (w *watcher) waitFor(t *testing.T, d time.Duration, p string, kinds ...sandbox.FileEventKind) sandbox.FileEvent {
	t.Helper()
	end := time.Now().Add(d)
	want := fmt.Sprintf("%v on %s", kinds, p)
	for {
		ev := w.next(t, max(time.Until(end), time.Millisecond), want)
		if ev.Kind == sandbox.FileOverflow {
			t.Fatalf("overflow while waiting for %s (events: %v)", want, w.seen)
		}
		if ev.Path == p && slices.Contains(kinds, ev.Kind) {
			return ev
		}
	}
}

// watchDir makes a fresh directory to watch in sb's home.
func watchDir(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) string {
	t.Helper()
	dir := path.Join(sb.Home(), "watch-"+randHex(4))
	check(t, sb.MkdirAll(ctx, dir))
	return dir
}

var watchTests = []test{
	{name: "Sequence", needs: needsWatch, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		dir := watchDir(ctx, t, sb)
		w := s.watch(ctx, t, sb, dir, sandbox.WatchOptions{})
		a, b := path.Join(dir, "a.txt"), path.Join(dir, "b.txt")
		d := s.eventWait()

		check(t, sb.WriteFile(ctx, a, []byte("one")))
		if ev := w.waitFor(t, d, a, sandbox.FileCreated); ev.IsDir {
			t.Errorf("create of a file reported as a directory: %v", ev)
		}
		// A longer content, so that a provider that polls sizes and mtimes
		// sees the change even within its clock's granularity.
		sh(ctx, t, sb, "printf 'two, longer' >> "+a)
		w.waitFor(t, d, a, sandbox.FileWritten)
		check(t, sb.Rename(ctx, a, b))
		// A provider that polls cannot tell a rename from a remove; it
		// says so by reporting FileRemoved.
		w.waitFor(t, d, a, sandbox.FileRenamed, sandbox.FileRemoved)
		w.waitFor(t, d, b, sandbox.FileCreated)
		check(t, sb.Remove(ctx, b))
		w.waitFor(t, d, b, sandbox.FileRemoved)
		for _, ev := range w.seen {
			if !strings.HasPrefix(ev.Path, dir+"/") && ev.Path != dir {
				t.Errorf("event outside the watched directory: %v", ev)
			}
		}
	}},
	{name: "RelativeDir", needs: needsWatch, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		dir := watchDir(ctx, t, sb)
		w := s.watch(ctx, t, sb, path.Base(dir), sandbox.WatchOptions{})
		check(t, sb.WriteFile(ctx, path.Join(dir, "f"), []byte("x")))
		// The event names the file by its absolute path.
		w.waitFor(t, s.eventWait(), path.Join(dir, "f"), sandbox.FileCreated)
	}},
	{name: "NotRecursive", needs: needsWatch, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		dir := watchDir(ctx, t, sb)
		check(t, sb.MkdirAll(ctx, path.Join(dir, "sub")))
		w := s.watch(ctx, t, sb, dir, sandbox.WatchOptions{})
		check(t, sb.WriteFile(ctx, path.Join(dir, "sub", "inner"), []byte("x")))
		check(t, sb.WriteFile(ctx, path.Join(dir, "outer"), []byte("x")))
		w.waitFor(t, s.eventWait(), path.Join(dir, "outer"), sandbox.FileCreated)
		for _, ev := range w.seen {
			if strings.HasPrefix(ev.Path, path.Join(dir, "sub")+"/") {
				t.Errorf("a watch that is not recursive reported %v", ev)
			}
		}
	}},
	{name: "Recursive", needs: needsWatch, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		dir := watchDir(ctx, t, sb)
		check(t, sb.MkdirAll(ctx, path.Join(dir, "old")))
		w := s.watch(ctx, t, sb, dir, sandbox.WatchOptions{Recursive: true})
		d := s.eventWait()
		check(t, sb.WriteFile(ctx, path.Join(dir, "old", "f"), []byte("x")))
		w.waitFor(t, d, path.Join(dir, "old", "f"), sandbox.FileCreated)
		// Directories made after the watch began, and a file written in
		// them at once, before the provider can have watched them: the
		// file's creation is still reported.
		sh(ctx, t, sb, "cd "+dir+" && mkdir -p new/deeper && echo x > new/deeper/f")
		w.waitFor(t, d, path.Join(dir, "new", "deeper", "f"), sandbox.FileCreated)
		// And a later change in the new directory too.
		sh(ctx, t, sb, "cd "+dir+" && echo later > new/deeper/g")
		w.waitFor(t, d, path.Join(dir, "new", "deeper", "g"), sandbox.FileCreated)
	}},
	{name: "Burst", needs: needsWatch, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		dir := watchDir(ctx, t, sb)
		w := s.watch(ctx, t, sb, dir, sandbox.WatchOptions{})
		const n = 1000
		args := []string{"touch"}
		want := map[string]bool{}
		for i := range n {
			name := fmt.Sprintf("f%04d", i)
			args = append(args, name)
			want[path.Join(dir, name)] = true
		}
		if r := must[*sandbox.Result](t, "touch")(sb.Exec(ctx, sandbox.Command{Args: args, Dir: dir})); r.ExitCode != 0 {
			t.Fatalf("touch: exit %d: %s", r.ExitCode, r.Stderr)
		}
		// Every creation is reported, or the loss is said with an
		// overflow event: never a silent gap.
		end := time.Now().Add(s.eventWait() + time.Minute)
		for len(want) > 0 {
			ev := w.next(t, max(time.Until(end), time.Millisecond), fmt.Sprintf("%d more creations", len(want)))
			if ev.Kind == sandbox.FileOverflow {
				if ev.Path != dir {
					t.Errorf("overflow names %q, want the watched directory %q", ev.Path, dir)
				}
				t.Logf("overflow after %d of %d creations", n-len(want), n)
				return
			}
			if ev.Kind == sandbox.FileCreated {
				delete(want, ev.Path)
			}
		}
	}},
	{name: "SlowConsumerOverflow", needs: needsWatch, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		dir := watchDir(ctx, t, sb)
		const buffer, n = 8, 300
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		seq, err := sb.Watch(wctx, dir, sandbox.WatchOptions{Buffer: buffer})
		check(t, err)
		args := []string{"touch"}
		for i := range n {
			args = append(args, fmt.Sprintf("f%04d", i))
		}
		if r := must[*sandbox.Result](t, "touch")(sb.Exec(ctx, sandbox.Command{Args: args, Dir: dir})); r.ExitCode != 0 {
			t.Fatalf("touch: exit %d: %s", r.ExitCode, r.Stderr)
		}
		// The consumer is late: everything happened before it reads.
		time.Sleep(time.Second + 2*s.caps.WatchLatency)
		got, overflowAt := 0, -1
		timer := time.AfterFunc(s.eventWait(), cancel)
		defer timer.Stop()
		for ev, err := range seq {
			check(t, err)
			if ev.Kind == sandbox.FileOverflow {
				overflowAt = got
				break
			}
			got++
			if got > n {
				break
			}
		}
		if overflowAt < 0 {
			t.Fatalf("a consumer that fell %d events behind a buffer of %d got %d events and no overflow", n, buffer, got)
		}
		if overflowAt > buffer {
			t.Errorf("%d events came before the overflow: more than the buffer of %d was held", overflowAt, buffer)
		}
	}},
	{name: "Errors", needs: needsWatch, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		dir := watchDir(ctx, t, sb)
		_, err := sb.Watch(ctx, path.Join(dir, "missing"), sandbox.WatchOptions{})
		wantCode(t, err, sandbox.NotFound, sandbox.ErrNotFound)
		file := path.Join(dir, "file")
		check(t, sb.WriteFile(ctx, file, []byte("x")))
		_, err = sb.Watch(ctx, file, sandbox.WatchOptions{})
		wantCode(t, err, sandbox.FailedPrecondition, sandbox.ErrNotDirectory)
		_, err = sb.Watch(ctx, dir, sandbox.WatchOptions{Buffer: -1})
		wantCode(t, err, sandbox.InvalidArgument)
		if err != nil && !strings.Contains(err.Error(), "buffer") {
			t.Errorf("error %q does not name the input (buffer)", err)
		}
	}},
	{name: "EndsWithContext", needs: needsWatch, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		dir := watchDir(ctx, t, sb)
		wctx, cancel := context.WithCancel(ctx)
		seq, err := sb.Watch(wctx, dir, sandbox.WatchOptions{})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		ended := make(chan error, 1)
		go func() {
			var last error
			for _, err := range seq {
				last = err
			}
			ended <- last
		}()
		time.Sleep(100 * time.Millisecond)
		cancel()
		select {
		case err := <-ended:
			if err != nil {
				t.Errorf("a watch ended by its ctx yielded %v; want no error", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the watch went on 10s after its ctx was cancelled")
		}
		// Breaking out of the loop ends it too, and a later change is
		// harmless.
		seq, err = sb.Watch(ctx, dir, sandbox.WatchOptions{})
		check(t, err)
		check(t, sb.WriteFile(ctx, path.Join(dir, "x"), []byte("x")))
		for range seq {
			break
		}
		check(t, sb.WriteFile(ctx, path.Join(dir, "y"), []byte("y")))
	}},
	{name: "EndsWhenDestroyed", needs: needsWatch, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		dir := watchDir(ctx, t, sb)
		w := s.watch(ctx, t, sb, dir, sandbox.WatchOptions{})
		check(t, sb.Destroy(ctx))
		// The watch of a sandbox that is gone fails with NotFound: it
		// neither goes on for ever nor ends as if its ctx had.
		d := s.eventWait() + 30*time.Second
		timer := time.NewTimer(d)
		defer timer.Stop()
		for {
			select {
			case ev := <-w.ch:
				w.seen = append(w.seen, ev)
				continue
			case err := <-w.errc:
				wantCode(t, err, sandbox.NotFound, sandbox.ErrNotFound)
				return
			case <-w.done:
				select {
				case err := <-w.errc: // sent before done closed
					wantCode(t, err, sandbox.NotFound, sandbox.ErrNotFound)
					return
				default:
				}
				t.Fatalf("the watch of a destroyed sandbox ended without an error (events: %v)", w.seen)
			case <-timer.C:
				t.Fatalf("the watch of a destroyed sandbox went on for %v", d)
			}
		}
	}},
}

var processListTests = []test{
	{name: "RunningAndFinished", needs: needsProcessList, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		before := time.Now()
		done := must[*sandbox.Process](t, "Start")(sb.Start(ctx, sandbox.Command{Args: []string{"true"}}))
		if r := must[*sandbox.Result](t, "Wait")(done.Wait(ctx)); r.ExitCode != 0 {
			t.Fatalf("true: exit %d", r.ExitCode)
		}
		p := must[*sandbox.Process](t, "Start")(sb.Start(ctx, sandbox.Command{Args: []string{"sleep", "67"}}))
		t.Cleanup(func() { _ = p.Kill(context.WithoutCancel(ctx)) })
		list := must[[]sandbox.ProcessInfo](t, "Processes")(sb.Processes(ctx))
		var found *sandbox.ProcessInfo
		for i, pi := range list {
			if i > 0 && list[i-1].PID >= pi.PID {
				t.Errorf("not sorted by PID: %d before %d", list[i-1].PID, pi.PID)
			}
			if pi.PID == done.PID() {
				t.Errorf("a finished process is listed: %+v", pi)
			}
			if pi.PID == p.PID() {
				found = &list[i]
			}
		}
		if found == nil {
			t.Fatalf("the started process %d is not listed: %+v", p.PID(), list)
		}
		if !found.Handle {
			t.Errorf("the started process is not marked as a handle: %+v", *found)
		}
		if !strings.Contains(strings.Join(found.Args, " "), "sleep") {
			t.Errorf("the started process's command line is %q, want it to name sleep", found.Args)
		}
		if !found.StartedAt.IsZero() && (found.StartedAt.Before(before.Add(-2*time.Minute)) || found.StartedAt.After(time.Now().Add(2*time.Minute))) {
			t.Errorf("start time %v is not around now (%v)", found.StartedAt, before)
		}
		// The listing's PID is one AttachProcess follows.
		a := must[*sandbox.Process](t, "AttachProcess")(sb.AttachProcess(ctx, found.PID, nil, nil))
		check(t, a.Kill(ctx))
		r := must[*sandbox.Result](t, "Wait")(a.Wait(ctx))
		if r.ExitCode == 0 {
			t.Errorf("killed process exited 0")
		}
		_, _ = p.Wait(ctx)
		// Gone from the list once it exited.
		deadline := time.Now().Add(10 * time.Second)
		for {
			list = must[[]sandbox.ProcessInfo](t, "Processes")(sb.Processes(ctx))
			if !slices.ContainsFunc(list, func(pi sandbox.ProcessInfo) bool { return pi.PID == p.PID() }) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("killed process %d still listed: %+v", p.PID(), list)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}},
	{name: "GoneSandbox", needs: needsProcessList, fn: func(ctx context.Context, t *testing.T, s *suite) {
		sb := s.create(ctx, t, nil)
		check(t, sb.Destroy(ctx))
		_, err := sb.Processes(ctx)
		if !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Processes of a destroyed sandbox: %v, want ErrNotFound", err)
		}
	}},
}
