// Package pollwatch emulates a directory watch (driver.Watcher) for
// providers whose sandboxes have no watch of their own to reach (Daytona's
// toolbox, the docker engine): it lists the directory every interval
// through the provider's own ReadDir and reports the differences. It
// cannot see a change undone before the next poll, nor tell a rename from
// a remove and a create (a rename is reported as FileRemoved of the old
// name and FileCreated of the new), and a write is seen through the size
// or the modification time changing. A recursive watch lists at most
// MaxDirs directories per poll; beyond them it reports one FileOverflow.
package pollwatch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/watchq"
	"github.com/sandboxkit/sandbox/sberrors"
)

// MaxDirs bounds the directories a recursive watch lists per poll.
const MaxDirs = 256

// maxFailures is how many polls in a row may fail (a transient error of
// the provider) before the watch fails with the last error.
const maxFailures = 10

// Lister is what the poller needs of a provider.
type Lister interface {
	Stat(ctx context.Context, id, path string) (driver.FileInfo, error)
	ReadDir(ctx context.Context, id, path string) ([]driver.FileInfo, error)
}

type entry struct {
	size  int64
	mtime time.Time
	mode  fs.FileMode
}

// Watch checks that dir is a directory, takes the first listing (so a
// change made after Watch returns is reported) and polls every interval
// until ctx ends or the sequence's consumer stops.
func Watch(ctx context.Context, l Lister, id, dir string, req *driver.WatchRequest, interval time.Duration) (iter.Seq2[driver.FileEvent, error], error) {
	fi, err := l.Stat(ctx, id, dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("watch %s: %w", dir, sberrors.ErrNotDirectory)
	}
	w := &poller{l: l, id: id, dir: dir, recursive: req.Recursive}
	prev, _, err := w.list(ctx)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	q := watchq.New(dir, req.Buffer, cancel)
	q.Go(func() {
		defer cancel()
		t := time.NewTicker(interval)
		defer t.Stop()
		failures := 0
		for {
			select {
			case <-wctx.Done():
				q.Close()
				return
			case <-t.C:
			}
			cur, truncated, err := w.list(wctx)
			if err != nil {
				if wctx.Err() != nil {
					q.Close()
					return
				}
				if sberrors.CodeOf(err) == sberrors.NotFound {
					// The watched directory is gone (or the sandbox): a
					// directory is reported removed; a sandbox ends the watch.
					if _, gerr := l.Stat(wctx, id, "/"); gerr != nil && sberrors.CodeOf(gerr) == sberrors.NotFound {
						q.Fail(gerr)
						return
					}
					cur = map[string]entry{}
				} else {
					if failures++; failures >= maxFailures {
						q.Fail(err)
						return
					}
					continue
				}
			}
			failures = 0
			now := time.Now()
			for _, ev := range diff(prev, cur) {
				ev.Time = now
				q.Push(ev)
			}
			if truncated {
				q.Push(driver.FileEvent{Path: dir, Kind: driver.FileOverflow, IsDir: true, Time: now})
			}
			prev = cur
		}
	})
	return q.Seq(ctx), nil
}

type poller struct {
	l         Lister
	id, dir   string
	recursive bool
}

// list returns the entries under the watched directory by path; truncated
// reports a recursive listing cut at MaxDirs.
func (w *poller) list(ctx context.Context) (map[string]entry, bool, error) {
	out := map[string]entry{}
	queue := []string{w.dir}
	for n := 0; len(queue) > 0; n++ {
		if n >= MaxDirs {
			return out, true, nil
		}
		d := queue[0]
		queue = queue[1:]
		list, err := w.l.ReadDir(ctx, w.id, d)
		if err != nil {
			if d != w.dir && (sberrors.CodeOf(err) == sberrors.NotFound || errors.Is(err, sberrors.ErrNotDirectory) ||
				sberrors.CodeOf(err) == sberrors.PermissionDenied) {
				continue // gone between two listings, or not ours to read
			}
			return nil, false, err
		}
		for _, fi := range list {
			p := path.Join(d, fi.Name())
			out[p] = entry{size: fi.Size, mtime: fi.ModTime, mode: fi.Mode}
			if w.recursive && fi.Mode.IsDir() {
				queue = append(queue, p)
			}
		}
	}
	return out, false, nil
}

// diff returns the events that take prev to cur: removals first (entries
// before their directories), then creations (directories before their
// entries), then writes and mode changes, each group by path.
func diff(prev, cur map[string]entry) []driver.FileEvent {
	var removed, created, changed []driver.FileEvent
	for p, e := range prev {
		if _, ok := cur[p]; !ok {
			removed = append(removed, driver.FileEvent{Path: p, Kind: driver.FileRemoved, IsDir: e.mode.IsDir()})
		}
	}
	for p, e := range cur {
		old, ok := prev[p]
		switch {
		case !ok:
			created = append(created, driver.FileEvent{Path: p, Kind: driver.FileCreated, IsDir: e.mode.IsDir()})
		case old.mode.Type() != e.mode.Type():
			// Replaced by another kind of file.
			removed = append(removed, driver.FileEvent{Path: p, Kind: driver.FileRemoved, IsDir: old.mode.IsDir()})
			created = append(created, driver.FileEvent{Path: p, Kind: driver.FileCreated, IsDir: e.mode.IsDir()})
		case !e.mode.IsDir() && (old.size != e.size || !old.mtime.Equal(e.mtime)):
			changed = append(changed, driver.FileEvent{Path: p, Kind: driver.FileWritten})
		case old.mode != e.mode:
			changed = append(changed, driver.FileEvent{Path: p, Kind: driver.FileChmod, IsDir: e.mode.IsDir()})
		}
	}
	depth := func(p string) int { return strings.Count(p, "/") }
	slices.SortFunc(removed, func(a, b driver.FileEvent) int {
		if d := depth(b.Path) - depth(a.Path); d != 0 {
			return d
		}
		return strings.Compare(a.Path, b.Path)
	})
	slices.SortFunc(created, func(a, b driver.FileEvent) int {
		if d := depth(a.Path) - depth(b.Path); d != 0 {
			return d
		}
		return strings.Compare(a.Path, b.Path)
	})
	slices.SortFunc(changed, func(a, b driver.FileEvent) int { return strings.Compare(a.Path, b.Path) })
	return slices.Concat(removed, created, changed)
}
