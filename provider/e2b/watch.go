package e2b

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/watchq"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/filesystem"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/process"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Watch streams the changes under dir from envd's filesystem watcher
// (Filesystem.WatchDir, inotify inside the sandbox; Capabilities.WatchLatency 0).
// envd ends a watch whose inotify queue overflowed with an error; the
// adapter then reports one FileOverflow event and watches again, so the
// sequence goes on. A rename is reported by envd as a rename of the old
// name and a create of the new one.
func (r *Runtime) Watch(ctx context.Context, id, dir string, req *driver.WatchRequest) (iter.Seq2[driver.FileEvent, error], error) {
	const op = "watch"
	c, err := r.conn(ctx, id)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	stream, err := r.openWatch(wctx, id, c, dir, req.Recursive)
	if err != nil {
		cancel()
		return nil, err
	}
	q := watchq.New(dir, req.Buffer, cancel)
	q.Go(func() {
		defer cancel()
		for {
			err := r.pumpWatch(stream, dir, q)
			if wctx.Err() != nil {
				q.Close()
				return
			}
			if !watchOverflowed(err) {
				if err == nil {
					err = sberrors.Errorf(sberrors.Unavailable, "e2b: %s: envd ended the watch", op)
				} else {
					err = r.scrub(r.envdErr(wctx, op, id, nil, err))
				}
				// A watch ends when its sandbox does: say that, not how
				// envd's end looked.
				if _, gerr := r.Get(wctx, id); gerr != nil && sberrors.CodeOf(gerr) == sberrors.NotFound {
					err = gerr
				}
				q.Fail(err)
				return
			}
			// Events were lost: say so, and watch again.
			q.Push(driver.FileEvent{Path: dir, Kind: driver.FileOverflow, IsDir: true, Time: time.Now()})
			if stream, err = r.openWatch(wctx, id, c, dir, req.Recursive); err != nil {
				if wctx.Err() != nil {
					q.Close()
				} else {
					q.Fail(err)
				}
				return
			}
		}
	})
	return q.Seq(ctx), nil
}

// openWatch opens a WatchDir stream and returns once envd said the watch
// is in place (its start event).
func (r *Runtime) openWatch(ctx context.Context, id string, c *conn, dir string, recursive bool) (*connect.ServerStreamForClient[filesystem.WatchDirResponse], error) {
	const op = "watch"
	req := connect.NewRequest(&filesystem.WatchDirRequest{Path: dir, Recursive: recursive})
	h := req.Header()
	r.setEnvdHeaders(h, id, c)
	h["Keepalive-Ping-Interval"] = keepaliveSeconds
	tctx, a := trace(ctx)
	stream, err := r.clients(r.envdBase(id, c)).fs.WatchDir(tctx, req)
	if err == nil {
		for stream.Receive() {
			if stream.Msg().GetStart() != nil {
				return stream, nil
			}
		}
		err = stream.Err()
		_ = stream.Close()
		if err == nil {
			err = connect.NewError(connect.CodeUnavailable, errors.New("the watch ended before its start event"))
		}
	}
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Code() == connect.CodeInvalidArgument && strings.Contains(ce.Message(), "not a directory") {
		return nil, fmt.Errorf("e2b: %s %s: %w", op, dir, sberrors.ErrNotDirectory)
	}
	return nil, r.scrub(r.envdErr(ctx, op, id, a, err))
}

// pumpWatch moves a stream's events into q until it ends, and returns its
// error (nil for a clean end).
func (r *Runtime) pumpWatch(stream *connect.ServerStreamForClient[filesystem.WatchDirResponse], dir string, q *watchq.Queue) error {
	defer stream.Close()
	for stream.Receive() {
		ev := stream.Msg().GetFilesystem()
		if ev == nil {
			continue // a keepalive
		}
		kind, ok := eventKinds[ev.GetType()]
		if !ok {
			continue
		}
		fe := driver.FileEvent{Path: path.Join(dir, ev.GetName()), Kind: kind, Time: time.Now()}
		if e := ev.GetEntry(); e != nil {
			fe.IsDir = e.GetType() == filesystem.FileType_FILE_TYPE_DIRECTORY
		}
		q.Push(fe)
	}
	return stream.Err()
}

var eventKinds = map[filesystem.EventType]driver.FileEventKind{
	filesystem.EventType_EVENT_TYPE_CREATE: driver.FileCreated,
	filesystem.EventType_EVENT_TYPE_WRITE:  driver.FileWritten,
	filesystem.EventType_EVENT_TYPE_REMOVE: driver.FileRemoved,
	filesystem.EventType_EVENT_TYPE_RENAME: driver.FileRenamed,
	filesystem.EventType_EVENT_TYPE_CHMOD:  driver.FileChmod,
}

// watchOverflowed reports envd's end of a watch whose queue overflowed
// (fsnotify's ErrEventOverflow, sent as an internal "watcher error").
func watchOverflowed(err error) bool {
	var ce *connect.Error
	return errors.As(err, &ce) && ce.Code() == connect.CodeInternal && strings.Contains(ce.Message(), "overflow")
}

// Processes lists the processes envd started (process.Process.List):
// every command this SDK ran, foreground or background, and the
// template's start command. envd can follow each by PID (Attach), so
// each is a handle; their children, which envd did not start, are not
// listed. envd does not say when a process started. A terminal's program
// (StartTerminal) carries its terminal's ID, known by its tag.
func (r *Runtime) Processes(ctx context.Context, id string) ([]driver.ProcessInfo, error) {
	const op = "processes"
	c, err := r.conn(ctx, id)
	if err != nil {
		return nil, err
	}
	req := connect.NewRequest(&process.ListRequest{})
	var list []*process.ProcessInfo
	err = r.fsCall(ctx, op, id, c, req.Header(), func(ctx context.Context) error {
		resp, err := r.clients(r.envdBase(id, c)).proc.List(ctx, req)
		if err == nil {
			list = resp.Msg.GetProcesses()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]driver.ProcessInfo, 0, len(list))
	for _, p := range list {
		cfg := p.GetConfig()
		args := append([]string{cfg.GetCmd()}, cfg.GetArgs()...)
		pi := driver.ProcessInfo{PID: int(p.GetPid()), Args: args, Handle: true}
		if strings.HasPrefix(p.GetTag(), ptyTagPrefix) {
			pi.Terminal = strconv.FormatUint(uint64(p.GetPid()), 10)
		}
		out = append(out, pi)
	}
	slices.SortFunc(out, func(a, b driver.ProcessInfo) int { return a.PID - b.PID })
	return out, nil
}
