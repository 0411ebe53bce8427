package sandbox

import (
	"context"
	"iter"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

// DefaultWatchBuffer is the number of events Sandbox.Watch holds for a
// slow consumer when WatchOptions.Buffer is 0.
const DefaultWatchBuffer = 4096

// MaxWatchBuffer is the largest WatchOptions.Buffer accepted: a watch's
// memory is bounded by its buffer, and a larger one would make that bound
// meaningless.
const MaxWatchBuffer = 1 << 20

// WatchOptions configures Sandbox.Watch. The zero value watches one
// directory (not its subdirectories) with DefaultWatchBuffer.
type WatchOptions struct {
	// Recursive watches every directory below the watched one too,
	// including directories created after the watch began (files created
	// in a new directory before the provider watches it are still
	// reported).
	Recursive bool
	// Buffer is the most events held for a consumer that reads slower
	// than changes happen; when it is full, the held events are replaced
	// by one FileOverflow event (the consumer should rescan the
	// directory). 0 means DefaultWatchBuffer; negative or above
	// MaxWatchBuffer is InvalidArgument.
	Buffer int
}

// FileEventKind is what happened to a path under a watched directory.
type FileEventKind string

// The file event kinds.
const (
	// FileCreated: Path was created (also the new name of a rename).
	FileCreated FileEventKind = FileEventKind(driver.FileCreated)
	// FileWritten: Path's contents changed.
	FileWritten FileEventKind = FileEventKind(driver.FileWritten)
	// FileRemoved: Path was removed.
	FileRemoved FileEventKind = FileEventKind(driver.FileRemoved)
	// FileRenamed: Path was renamed away; the new name, when it stays
	// under the watched directory, comes as a FileCreated event.
	FileRenamed FileEventKind = FileEventKind(driver.FileRenamed)
	// FileChmod: Path's permissions or other metadata changed.
	FileChmod FileEventKind = FileEventKind(driver.FileChmod)
	// FileOverflow: events were lost (the consumer was too slow, or the
	// provider's own queue overflowed); Path is the watched directory.
	// The consumer should rescan it.
	FileOverflow FileEventKind = FileEventKind(driver.FileOverflow)
)

// FileEvent is one change under a watched directory (Sandbox.Watch).
type FileEvent struct {
	// Path is the absolute path in the sandbox.
	Path string
	// Kind is what happened.
	Kind FileEventKind
	// IsDir is true when Path is a directory, where the provider says.
	IsDir bool
	// Time is when the provider saw the event; zero when it does not say.
	Time time.Time
}

// String renders the event as "kind path" (with a trailing "/" for a
// directory), the form the CLI prints.
func (e FileEvent) String() string {
	p := e.Path
	if e.IsDir && p != "/" {
		p += "/"
	}
	return string(e.Kind) + " " + p
}

// fileEventOf converts a driver's FileEvent.
func fileEventOf(e driver.FileEvent) FileEvent {
	return FileEvent{Path: e.Path, Kind: FileEventKind(e.Kind), IsDir: e.IsDir, Time: e.Time}
}

// Watch reports changes under the directory dir (relative paths are
// resolved against the home directory) until ctx ends. It returns once
// the watch is in place: a change made after Watch returned is reported.
// A dir that does not exist is an error matching ErrNotFound, a file one
// matching ErrNotDirectory. Providers without a watcher
// (Capabilities.Watch false) return an error matching ErrUnimplemented.
//
// The sequence yields events in the order the provider saw them; it ends
// without an error when ctx ends, and with one (then stops) when the
// watch fails; breaking out of the loop ends the watch. Range over it
// once. Memory is bounded by opts.Buffer whatever the consumer does: a
// consumer that falls behind gets one FileOverflow event in place of the
// events it missed. Capabilities.WatchLatency says how late an event may
// come on providers that poll.
func (s *Sandbox) Watch(ctx context.Context, dir string, opts WatchOptions) (_ iter.Seq2[FileEvent, error], err error) {
	const op = "watch"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	if opts.Buffer < 0 || opts.Buffer > MaxWatchBuffer {
		return nil, invalid(op, s.c.rt.Name(), s.id, "buffer", "%d is outside 0..%d", opts.Buffer, MaxWatchBuffer)
	}
	if opts.Buffer == 0 {
		opts.Buffer = DefaultWatchBuffer
	}
	abs, err := s.path(op, "dir", dir)
	if err != nil {
		return nil, err
	}
	w, ok := s.c.rt.(driver.Watcher)
	if !ok {
		return nil, s.wrap(op, abs, ErrUnimplemented)
	}
	if err := ctx.Err(); err != nil {
		return nil, s.wrap(op, abs, err)
	}
	var seq iter.Seq2[driver.FileEvent, error]
	err = s.c.retry(ctx, op, true, nil, func() error {
		var err error
		seq, err = w.Watch(ctx, s.id, abs, &driver.WatchRequest{Recursive: opts.Recursive, Buffer: opts.Buffer})
		return err
	})
	if err != nil {
		return nil, s.wrap(op, abs, err)
	}
	return func(yield func(FileEvent, error) bool) {
		for ev, err := range seq {
			if ctx.Err() != nil {
				return // the watch ends with ctx, whatever the driver had queued
			}
			if err != nil {
				yield(FileEvent{}, s.wrap(op, abs, err))
				return
			}
			if !yield(fileEventOf(ev), nil) {
				return
			}
		}
	}, nil
}
