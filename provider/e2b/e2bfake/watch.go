package e2bfake

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/filesystem"
	"github.com/sandboxkit/sandbox/sberrors"
)

// watchBuffer is how many events the fake holds for a slow client before
// it ends the watch as envd does when inotify's queue overflows.
const watchBuffer = 4096

// eventTypes maps the backend's event kinds onto envd's.
var eventTypes = map[driver.FileEventKind]filesystem.EventType{
	driver.FileCreated: filesystem.EventType_EVENT_TYPE_CREATE,
	driver.FileWritten: filesystem.EventType_EVENT_TYPE_WRITE,
	driver.FileRemoved: filesystem.EventType_EVENT_TYPE_REMOVE,
	driver.FileRenamed: filesystem.EventType_EVENT_TYPE_RENAME,
	driver.FileChmod:   filesystem.EventType_EVENT_TYPE_CHMOD,
}

// WatchDir serves envd's directory watch from the backend's watcher, as
// envd does from fsnotify: a missing path is not_found, a file
// invalid_argument ("not a directory"); a start event once the watch is
// in place; then one event per change, with its path relative to the
// watched directory; keepalives after Keepalive-Ping-Interval seconds
// without events; and an overflow ends the stream with an internal
// "watcher error: fsnotify: queue or buffer overflow", as envd's does.
func (f *filesystemService) WatchDir(ctx context.Context, req *connect.Request[filesystem.WatchDirRequest], stream *connect.ServerStream[filesystem.WatchDirResponse]) error {
	if _, err := rpcUser(req.Header()); err != nil {
		return err
	}
	b := boxOf(ctx)
	p := resolve(b.home, req.Msg.GetPath())
	w, ok := f.s.backend.(driver.Watcher)
	if !ok {
		return connect.NewError(connect.CodeUnimplemented, errors.New("the fake's backend cannot watch directories"))
	}
	fi, err := f.s.backend.Stat(ctx, b.backendID, p)
	switch {
	case sberrors.CodeOf(err) == sberrors.NotFound:
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("path %s not found: stat %s: no such file or directory", p, p))
	case err != nil:
		return connect.NewError(connect.CodeInternal, fmt.Errorf("error statting path %s: %w", p, err))
	case !fi.IsDir():
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %s not a directory: %w", p, err))
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seq, err := w.Watch(wctx, b.backendID, p, &driver.WatchRequest{Recursive: req.Msg.GetRecursive(), Buffer: watchBuffer})
	if err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("error adding path %s to watcher: %w", p, err))
	}
	if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Start{Start: &filesystem.WatchDirResponse_StartEvent{}}}); err != nil {
		return connect.NewError(connect.CodeUnknown, fmt.Errorf("error sending start event: %w", err))
	}
	interval := 90 * time.Second
	if n, err := strconv.Atoi(req.Header().Get("Keepalive-Ping-Interval")); err == nil && n > 0 {
		interval = time.Duration(n) * time.Second
	}
	// The backend's sequence is read in a goroutine so that keepalives go
	// out while nothing happens.
	type item struct {
		ev  driver.FileEvent
		err error
	}
	ch := make(chan item)
	go func() {
		defer close(ch)
		for ev, err := range seq {
			select {
			case ch <- item{ev, err}:
			case <-wctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case it, ok := <-ch:
			if !ok {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return connect.NewError(connect.CodeInternal, errors.New("watcher event channel closed"))
			}
			if it.err != nil {
				return connect.NewError(connect.CodeInternal, fmt.Errorf("watcher error: %w", it.err))
			}
			if it.ev.Kind == driver.FileOverflow {
				return connect.NewError(connect.CodeInternal, errors.New("watcher error: fsnotify: queue or buffer overflow"))
			}
			typ, ok := eventTypes[it.ev.Kind]
			if !ok || it.ev.Path == p {
				continue // fsnotify reports nothing on the watched directory itself
			}
			name := strings.TrimPrefix(it.ev.Path, strings.TrimSuffix(p, "/")+"/")
			if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Filesystem{
				Filesystem: &filesystem.FilesystemEvent{Name: name, Type: typ}}}); err != nil {
				return connect.NewError(connect.CodeUnknown, fmt.Errorf("error sending filesystem event: %w", err))
			}
			t.Reset(interval)
		case <-t.C:
			if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Keepalive{Keepalive: &filesystem.WatchDirResponse_KeepAlive{}}}); err != nil {
				return connect.NewError(connect.CodeUnknown, fmt.Errorf("error sending keepalive: %w", err))
			}
			t.Reset(interval)
		case <-ctx.Done():
			return ctx.Err()
		case <-f.s.closing:
			return connect.NewError(connect.CodeUnavailable, errors.New("server closing"))
		}
	}
}
