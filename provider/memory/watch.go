package memory

import (
	"context"
	"io/fs"
	"iter"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/watchq"
	"github.com/sandboxkit/sandbox/sberrors"
)

// The operations of the watch and process list, for FailNext and Calls.
const (
	OpWatch     = "watch"
	OpProcesses = "processes"
)

// watch is one Watch on a sandbox: the VFS's write, remove and rename
// paths report to it (with the Runtime's lock held) as they change a file,
// so events come in the order the changes happened and none is missed.
type watch struct {
	dir       string
	recursive bool
	q         *watchq.Queue
}

// covers reports whether an event on p belongs to the watch: p is the
// watched directory itself or an entry of it (any depth when recursive).
func (w *watch) covers(p string) bool {
	if p == w.dir {
		return true
	}
	if w.recursive {
		return strings.HasPrefix(p, strings.TrimSuffix(w.dir, "/")+"/")
	}
	return path.Dir(p) == w.dir
}

// eventLocked reports a change of the physical path p of sandbox b to its
// watches. It is cheap when nothing watches.
func (r *Runtime) eventLocked(b *box, p string, kind driver.FileEventKind, isDir bool) {
	if len(b.watches) == 0 {
		return
	}
	ev := driver.FileEvent{Path: p, Kind: kind, IsDir: isDir, Time: r.now()}
	for w := range b.watches {
		if w.covers(p) {
			w.q.Push(ev)
		}
	}
}

// nodeWrittenLocked reports a write through a descriptor, which knows its
// node, not its path: the path is looked up only while something watches.
func (r *Runtime) nodeWrittenLocked(b *box, n *node) {
	if b == nil || len(b.watches) == 0 {
		return
	}
	for p, nn := range b.files {
		if nn == n {
			r.eventLocked(b, p, driver.FileWritten, false)
			return
		}
	}
}

// removedLocked reports the removal of the paths in gone (entries before
// their directories, as inotify reports them).
func (r *Runtime) removedLocked(b *box, gone map[string]bool) {
	if len(b.watches) == 0 || len(gone) == 0 {
		return
	}
	list := make([]string, 0, len(gone))
	for p := range gone {
		list = append(list, p)
	}
	sort.Slice(list, func(i, j int) bool {
		if di, dj := strings.Count(list[i], "/"), strings.Count(list[j], "/"); di != dj {
			return di > dj
		}
		return list[i] < list[j]
	})
	for _, p := range list {
		r.eventLocked(b, p, driver.FileRemoved, gone[p])
	}
}

// treeLocked returns the paths at and below p, each with whether it is a
// directory.
func treeLocked(b *box, p string) map[string]bool {
	if len(b.watches) == 0 {
		return nil
	}
	out := map[string]bool{}
	for q, n := range b.files {
		if q == p || strings.HasPrefix(q, p+"/") {
			out[q] = n.mode.IsDir()
		}
	}
	return out
}

// goneLocked keeps the entries of before that are no longer in b.
func goneLocked(b *box, before map[string]bool) map[string]bool {
	for q := range before {
		if _, ok := b.files[q]; ok {
			delete(before, q)
		}
	}
	return before
}

// endWatchesLocked ends the watches of a sandbox that is gone with err.
func endWatchesLocked(b *box, err error) {
	for w := range b.watches {
		w.q.Fail(err)
		delete(b.watches, w)
	}
}

// Watch reports the changes the sandbox's file methods and its shell make
// under dir, as they happen (Capabilities.WatchLatency 0): the VFS tells
// the watch under the same lock it changes the file with.
func (r *Runtime) Watch(ctx context.Context, id, dir string, req *driver.WatchRequest) (iter.Seq2[driver.FileEvent, error], error) {
	if err := r.begin(OpWatch, id, dir); err != nil {
		return nil, err
	}
	if err := checkLength(OpWatch, dir); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.get(id, true)
	if err != nil {
		return nil, err
	}
	n, err := followLocked(b, "watch", dir)
	if err != nil {
		return nil, err
	}
	if !n.mode.IsDir() {
		return nil, &fs.PathError{Op: "watch", Path: dir, Err: sberrors.ErrNotDirectory}
	}
	w := &watch{dir: physLocked(b, dir, true), recursive: req.Recursive}
	remove := func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if bb, ok := r.boxes[id]; ok {
			delete(bb.watches, w)
		}
	}
	// A watch nobody ranges over still ends with its ctx.
	unhook := context.AfterFunc(ctx, func() { w.q.Close(); remove() })
	w.q = watchq.New(w.dir, req.Buffer, func() { unhook(); remove() })
	if b.watches == nil {
		b.watches = map[*watch]struct{}{}
	}
	b.watches[w] = struct{}{}
	return w.q.Seq(ctx), nil
}

// Processes lists the sandbox's running background processes (Start):
// the fake has no others, so every one is a handle.
func (r *Runtime) Processes(_ context.Context, id string) ([]driver.ProcessInfo, error) {
	if err := r.begin(OpProcesses, id, ""); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.get(id, true)
	if err != nil {
		return nil, err
	}
	out := make([]driver.ProcessInfo, 0, len(b.procs))
	for _, p := range b.procs {
		select {
		case <-p.done:
			continue
		default:
		}
		out = append(out, driver.ProcessInfo{PID: p.pid, Args: slices.Clone(p.args), StartedAt: p.started, Handle: true})
	}
	slices.SortFunc(out, func(a, b driver.ProcessInfo) int { return a.PID - b.PID })
	return out, nil
}

// procArgs is the command line Processes shows for cmd: its argv, or the
// shell line as sh runs it.
func procArgs(cmd *driver.Command) []string {
	if cmd.Shell != "" {
		return []string{"sh", "-c", cmd.Shell}
	}
	return slices.Clone(cmd.Args)
}
