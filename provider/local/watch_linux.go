package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/watchq"
	"github.com/sandboxkit/sandbox/sberrors"
)

// The directory watch and the process list run in the agent, inside the
// sandbox's namespaces: the paths a watch reports and the processes a
// list shows are those the sandbox's commands see, and nothing outside.
//
// A watch is one connection: request {op: "watch", dir, recursive}; the
// agent answers OK once the watch is in place (or Fail), then sends
// frameWatch frames, each a JSON array of events, until the client closes
// the connection. A process list is request {op: "ps"} answered by one OK
// frame carrying the list.
const (
	frameWatch = 'N' // agent→client: JSON []watchEvent
)

// watchEvent is one event on the wire.
type watchEvent struct {
	Path  string `json:"p"`
	Kind  string `json:"k"`
	IsDir bool   `json:"d,omitempty"`
	Time  int64  `json:"t"` // unix nanoseconds, when the agent read it
}

// psEntry is one process on the wire.
type psEntry struct {
	PID     int      `json:"pid"`
	Args    []string `json:"args,omitempty"`
	Start   int64    `json:"start,omitempty"` // unix nanoseconds
	Handle  bool     `json:"handle,omitempty"`
	Command string   `json:"comm,omitempty"` // the kernel's name, for a process without a command line
	// Terminal is the ID of the terminal the process is the program of.
	Terminal string `json:"terminal,omitempty"`
}

// Watch reports changes under dir from inotify in the sandbox's agent
// (Capabilities.WatchLatency 0). A recursive watch adds a watch for each
// directory created (or moved in) below dir and then lists it, so that
// files created in a new directory before its watch was added are still
// reported (some then twice). A watch needs read permission on each
// directory, as the sandbox's user; a directory it may not read is not
// watched. Below dir no symbolic link is followed: a directory the
// sandbox replaces by a link to elsewhere is never watched through it.
// The agent's watches are bounded to the sandbox's share of the host's
// inotify watches (see inotifyShare): beyond it a watch fails with
// ResourceExhausted when it starts, or reports a FileOverflow event. A
// burst of events is sent in bounded frames; past the agent's own bound
// on pending events it reports a FileOverflow instead.
func (r *Runtime) Watch(ctx context.Context, id, dir string, req *driver.WatchRequest) (iter.Seq2[driver.FileEvent, error], error) {
	m, err := r.running(ctx, id)
	if err != nil {
		return nil, err
	}
	c, _, err := r.connect(ctx, m)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	fw := &frameWriter{w: c}
	if err := fw.writeRequest(&request{Op: "watch", Dir: dir, Recursive: req.Recursive}); err != nil {
		stop()
		c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errSend(err)
	}
	typ, b, err := readFrame(c, nil)
	if err == nil && typ == frameFail {
		var f failMsg
		_ = json.Unmarshal(b, &f)
		err = f.err()
	} else if err == nil && typ != frameOK {
		err = sberrors.Errorf(sberrors.Internal, "local: the agent answered a watch with frame %q", typ)
	}
	if err != nil {
		stop()
		c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("local: watch %s: %w", iox.Shorten(dir, 64), err)
	}
	if !stop() {
		// ctx ended while the watch was set up.
		c.Close()
		return nil, ctx.Err()
	}
	var once sync.Once
	closeConn := func() { once.Do(func() { _ = c.Close() }) }
	q := watchq.New(dir, req.Buffer, closeConn)
	unhook := context.AfterFunc(ctx, func() { q.Close(); closeConn() })
	q.Go(func() { r.readWatch(id, c, q, unhook) })
	return q.Seq(ctx), nil
}

// readWatch moves the agent's events into q until the connection ends:
// closed by the consumer (q is then done and ignores the error), or by the
// agent (the sandbox was destroyed or its agent died: the watch fails).
func (r *Runtime) readWatch(id string, c net.Conn, q *watchq.Queue, unhook func() bool) {
	defer unhook()
	var buf []byte
	for {
		typ, b, err := readFrame(c, buf)
		buf = b
		if err != nil {
			if _, gerr := r.running(context.Background(), id); gerr != nil {
				q.Fail(gerr)
			} else {
				q.Fail(sberrors.Errorf(sberrors.Unavailable, "local: the sandbox's agent ended the watch: %v", err))
			}
			return
		}
		if typ != frameWatch {
			continue
		}
		var evs []watchEvent
		if err := json.Unmarshal(b, &evs); err != nil {
			q.Fail(sberrors.Errorf(sberrors.Internal, "local: bad watch frame: %v", err))
			return
		}
		for _, e := range evs {
			q.Push(driver.FileEvent{Path: e.Path, Kind: driver.FileEventKind(e.Kind), IsDir: e.IsDir, Time: time.Unix(0, e.Time)})
		}
	}
}

// Processes lists the sandbox's processes as its agent sees them in
// /proc: at L3 and L4 its own pid namespace, at L0 to L2 the agent's
// descendants (every command's process tree, orphans included: the agent
// is their subreaper). The agent itself and zombies are left out; Handle
// marks the processes Start started, which Attach follows.
func (r *Runtime) Processes(ctx context.Context, id string) ([]driver.ProcessInfo, error) {
	m, err := r.running(ctx, id)
	if err != nil {
		return nil, err
	}
	c, _, err := r.connect(ctx, m)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	fw := &frameWriter{w: c}
	if err := fw.writeRequest(&request{Op: "ps"}); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errSend(err)
	}
	typ, b, err := readFrame(c, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("local: processes: %w", err)
	}
	if typ == frameFail {
		var f failMsg
		_ = json.Unmarshal(b, &f)
		return nil, f.err()
	}
	var list []psEntry
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, sberrors.Errorf(sberrors.Internal, "local: bad process list: %v", err)
	}
	out := make([]driver.ProcessInfo, 0, len(list))
	for _, p := range list {
		pi := driver.ProcessInfo{PID: p.PID, Args: p.Args, Handle: p.Handle, Terminal: p.Terminal}
		if len(pi.Args) == 0 && p.Command != "" {
			pi.Args = []string{"[" + p.Command + "]"}
		}
		if p.Start != 0 {
			pi.StartedAt = time.Unix(0, p.Start)
		}
		out = append(out, pi)
	}
	slices.SortFunc(out, func(a, b driver.ProcessInfo) int { return a.PID - b.PID })
	return out, nil
}

// --- the agent's side ---

// watchMask is what a watch asks inotify for: IN_MODIFY, not
// IN_CLOSE_WRITE, so a write is reported as it happens; IN_EXCL_UNLINK so
// an unlinked file still open reports nothing more; IN_ONLYDIR so only a
// directory is ever watched.
const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_EXCL_UNLINK | unix.IN_ONLYDIR

// The sandbox's share of inotify. The kernel counts inotify watches and
// instances per user (fs.inotify.max_user_watches, max_user_instances),
// and the sandboxes of a runtime may all run as one host user: without a
// bound, one sandbox could take every watch and leave none for the
// others' watches. A sandbox therefore gets 1/limitShare of each, like
// its share of processes and open files (see limitShare):
//
//   - At L3 and L4 the agent sets that share as its own user namespace's
//     user.max_inotify_watches and user.max_inotify_instances while it
//     still holds the capability to (setupNamespaces). The kernel counts
//     the namespace's watches against the limit of every enclosing
//     namespace too, so no process of the sandbox can exceed it, not even
//     in a nested user namespace with a higher limit of its own.
//   - At every level the agent itself adds at most that share of watches
//     for all of the sandbox's watches together (at L1 and L2, with no
//     user namespace of its own, this is the only bound on the agent's
//     watches). A recursive watch whose tree needs more than is left
//     fails with ResourceExhausted when it starts; a directory created
//     later that cannot be watched is reported as a FileOverflow event.
const (
	// defaultInotifyWatches and defaultInotifyInstances stand for the
	// host's limits when they cannot be read (the kernel's own defaults
	// on a small host).
	defaultInotifyWatches   = 8192
	defaultInotifyInstances = 128
	// minInotifyWatches and minInotifyInstances floor the share on hosts
	// with very low limits, where a share below them would make watches
	// useless.
	minInotifyWatches   = 256
	minInotifyInstances = 4
)

// inotifyShare returns the inotify watches and instances one sandbox may
// take: 1/limitShare of the host's (see above).
func inotifyShare() (watches, instances uint64) {
	w, err := readProcUint("/proc/sys/fs/inotify/max_user_watches")
	if err != nil || w == 0 {
		w = defaultInotifyWatches
	}
	i, err := readProcUint("/proc/sys/fs/inotify/max_user_instances")
	if err != nil || i == 0 {
		i = defaultInotifyInstances
	}
	return min(w, max(w/limitShare, minInotifyWatches)), min(i, max(i/limitShare, minInotifyInstances))
}

// limitInotify sets the sandbox's share of inotify (with watches of them,
// when not 0) as the limits of the calling process's user namespace. Call
// it only in the sandbox's own user namespace (at L1 and L2 it would lower
// the host's limits), before the capabilities are dropped.
func limitInotify(watches uint64) error {
	w, i := inotifyShare()
	if watches > 0 {
		w = watches
	}
	if err := os.WriteFile("/proc/sys/user/max_inotify_watches", []byte(strconv.FormatUint(w, 10)), 0); err != nil {
		return fmt.Errorf("user.max_inotify_watches: %w", err)
	}
	if err := os.WriteFile("/proc/sys/user/max_inotify_instances", []byte(strconv.FormatUint(i, 10)), 0); err != nil {
		return fmt.Errorf("user.max_inotify_instances: %w", err)
	}
	return nil
}

// agentWatches counts the inotify watches the agent holds for all of its
// sandbox's watches (an agent serves one sandbox); agentWatchLimit is its
// bound.
var (
	agentWatches    atomic.Int64
	agentWatchLimit = sync.OnceValue(func() int64 {
		w, _ := inotifyShare()
		return int64(w)
	})
)

// Bounds of what the agent holds for one watch before it is sent. A burst
// (a tree of many files moved in at once is listed in one go) is sent in
// frames of at most maxFrameEvents events and about maxFrameBytes of JSON,
// well under the protocol's maxFrame; beyond maxPendingEvents the agent
// drops events and reports one FileOverflow instead of growing.
const (
	maxFrameEvents   = 1024
	maxFrameBytes    = 1 << 20
	maxPendingEvents = 16384
)

// inotifyWatch is one watch in the agent.
type inotifyWatch struct {
	a         *agent
	fd        int // the inotify instance
	rootFd    int // the watched directory, open: new directories are opened from it
	recursive bool
	root      string
	dirs      map[int32]string // wd → directory
	fw        *frameWriter
	batch     []watchEvent
	dropped   bool // batch ends with an overflow for events dropped since
}

// watchFail maps an error of opening a directory or of inotify_add_watch
// to a failure.
func watchFail(dir string, err error) failMsg {
	d := iox.Shorten(dir, 64)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return failMsg{"NotFound", fmt.Sprintf("%s: no such directory", d)}
	case errors.Is(err, syscall.ENOTDIR):
		return failMsg{"NotDirectory", fmt.Sprintf("%s is not a directory", d)}
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return failMsg{"PermissionDenied", fmt.Sprintf("%s: permission denied", d)}
	case exhausted(err):
		return failMsg{"ResourceExhausted", fmt.Sprintf("%s: the sandbox's share of inotify watches or instances is used up (fs.inotify.max_user_watches and max_user_instances, divided among sandboxes): %v", d, err)}
	}
	return failMsg{"Internal", fmt.Sprintf("%s: %v", d, err)}
}

// exhausted tells whether err is a limit of watches, instances or open
// files.
func exhausted(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// dirFlags open a directory to watch and list: never through a symbolic
// link at the end of the path (a directory swapped for a link to elsewhere
// is not followed out of the watched tree).
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// serveWatch runs a watch until the client closes the connection.
func (a *agent) serveWatch(in <-chan frameMsg, fw *frameWriter, req *request) {
	dir := path.Clean(req.Dir)
	if !path.IsAbs(dir) {
		_ = fw.writeJSON(frameFail, failMsg{"InvalidArgument", "watch: the directory must be absolute"})
		return
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		_ = fw.writeJSON(frameFail, watchFail(dir, err))
		return
	}
	f := os.NewFile(uintptr(fd), "inotify") // pollable: Close ends a Read
	w := &inotifyWatch{a: a, fd: fd, rootFd: -1, recursive: req.Recursive, root: dir, dirs: map[int32]string{}, fw: fw}
	// release gives the watch's directories back to the agent's count. A
	// refused watch releases them before its failure is sent: a client
	// that retries at once with a smaller watch must find them free.
	release := func() {
		agentWatches.Add(-int64(len(w.dirs)))
		clear(w.dirs)
	}
	defer func() {
		release()
		if w.rootFd >= 0 {
			_ = unix.Close(w.rootFd)
		}
	}()
	// The directory is opened and watched as the sandbox's user, on the
	// confined thread: a watch needs read permission, as listing does.
	// The watched directory itself may be reached through symbolic links
	// (the caller named it); nothing below it is.
	a.onForker(func() {
		var rfd int
		if rfd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			w.rootFd = rfd
			err = w.add(w.rootFd, dir)
		}
		if err == nil && w.recursive {
			var dup int
			if dup, err = unix.FcntlInt(uintptr(w.rootFd), unix.F_DUPFD_CLOEXEC, 0); err == nil {
				err = w.addTree(dup, dir, false)
			}
		}
	})
	if err != nil {
		_ = f.Close()
		release()
		_ = fw.writeJSON(frameFail, watchFail(dir, err))
		return
	}
	if fw.writeJSON(frameOK, struct{}{}) != nil {
		_ = f.Close()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.read(f)
	}()
	// The client sends nothing more: a frame or the end of the connection
	// ends the watch.
	<-in
	_ = f.Close()
	<-done
}

// add watches the directory open as dirfd, named dir; call on the forker
// thread. The watch is added through /proc/self/fd, so it is on the very
// directory opened, whatever dir's path names by now; where /proc is not
// mounted, through dir's path, not following a symbolic link at its end.
func (w *inotifyWatch) add(dirfd int, dir string) error {
	if agentWatches.Add(1) > agentWatchLimit() {
		agentWatches.Add(-1)
		return syscall.ENOSPC
	}
	wd, err := unix.InotifyAddWatch(w.fd, "/proc/self/fd/"+strconv.Itoa(dirfd), watchMask)
	if errors.Is(err, syscall.ENOENT) {
		wd, err = unix.InotifyAddWatch(w.fd, dir, watchMask|unix.IN_DONT_FOLLOW)
	}
	if err != nil {
		agentWatches.Add(-1)
		return err
	}
	if _, again := w.dirs[int32(wd)]; again {
		agentWatches.Add(-1) // the same directory: inotify counts one watch
	}
	w.dirs[int32(wd)] = dir
	return nil
}

// forget drops the watch wd from the count; the kernel has removed it or
// is removing it.
func (w *inotifyWatch) forget(wd int32) {
	if _, ok := w.dirs[wd]; ok {
		delete(w.dirs, wd)
		agentWatches.Add(-1)
	}
}

// addTree watches the directories below the directory open as fd (which
// it closes), named dir; with report, it reports every entry found as
// created (a directory that appeared before its watch did). Call on the
// forker thread. Entries are listed from the open directory and each
// subdirectory is opened from it without following a symbolic link, so a
// directory swapped for a link meanwhile is not followed. Directories it
// may not read are skipped: only the watched directory itself must be
// readable. It fails only when the watches or open files ran out.
func (w *inotifyWatch) addTree(fd int, dir string, report bool) error {
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		isDir := e.Type().IsDir()
		if report {
			w.queue(p, driver.FileCreated, isDir)
		}
		if !isDir {
			continue
		}
		cfd, err := unix.Openat(fd, e.Name(), dirFlags, 0)
		if err != nil {
			if exhausted(err) {
				return err
			}
			continue // gone, unreadable, or no longer a directory
		}
		if err := w.add(cfd, p); err != nil {
			_ = unix.Close(cfd)
			if exhausted(err) {
				return err
			}
			continue
		}
		if err := w.addTree(cfd, p, report); err != nil {
			return err
		}
	}
	return nil
}

// openBelow opens the directory p below the watched one, one path element
// at a time from the watched directory, never following a symbolic link.
func (w *inotifyWatch) openBelow(p string) (int, error) {
	rel := strings.TrimPrefix(strings.TrimPrefix(p, w.root), "/")
	cur := w.rootFd
	for name := range strings.SplitSeq(rel, "/") {
		next, err := unix.Openat(cur, name, dirFlags, 0)
		if cur != w.rootFd {
			_ = unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

// queue adds an event to the batch; past maxPendingEvents it drops it and
// ends the batch with one overflow event.
func (w *inotifyWatch) queue(p string, kind driver.FileEventKind, isDir bool) {
	if w.dropped {
		return
	}
	if len(w.batch) >= maxPendingEvents {
		w.dropped = true
		p, kind, isDir = w.root, driver.FileOverflow, true
	}
	w.batch = append(w.batch, watchEvent{Path: p, Kind: string(kind), IsDir: isDir, Time: time.Now().UnixNano()})
}

// flush sends the batch in frames of at most maxFrameEvents events and
// about maxFrameBytes bytes (a path's JSON is at most six times its
// length: \u escapes).
func (w *inotifyWatch) flush() error {
	rest := w.batch
	for len(rest) > 0 {
		n, size := 0, 0
		for n < len(rest) && n < maxFrameEvents {
			est := 6*len(rest[n].Path) + 64
			if n > 0 && size+est > maxFrameBytes {
				break
			}
			size += est
			n++
		}
		if err := w.fw.writeJSON(frameWatch, rest[:n]); err != nil {
			return err
		}
		rest = rest[n:]
	}
	w.batch, w.dropped = w.batch[:0], false
	if cap(w.batch) > 16<<10 {
		w.batch = nil
	}
	return nil
}

// read turns inotify's events into frames until f is closed or the client
// is gone. The client always reads (into its bounded queue), so a write
// blocks only briefly; if the agent falls behind, inotify's own queue
// overflows, which is reported.
func (w *inotifyWatch) read(f *os.File) {
	defer func() { _ = f.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := f.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameLen := int(ev.Len)
			name := ""
			if nameLen > 0 {
				raw := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+nameLen]
				name = string(bytes.TrimRight(raw, "\x00"))
			}
			off += unix.SizeofInotifyEvent + nameLen
			w.event(ev.Wd, ev.Mask, name)
		}
		if w.flush() != nil {
			return
		}
	}
}

// event handles one inotify event.
func (w *inotifyWatch) event(wd int32, mask uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		w.queue(w.root, driver.FileOverflow, true)
		return
	}
	dir, ok := w.dirs[wd]
	if !ok {
		return
	}
	if mask&unix.IN_IGNORED != 0 {
		w.forget(wd)
		return
	}
	isDir := mask&unix.IN_ISDIR != 0
	if name == "" {
		// An event on a watched directory itself. Below the root, its
		// parent's watch reported it already; a directory moved away is
		// no longer watched under its old name.
		if dir == w.root && mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
			kind := driver.FileRemoved
			if mask&unix.IN_MOVE_SELF != 0 {
				kind = driver.FileRenamed
			}
			w.queue(dir, kind, true)
		}
		if dir != w.root && mask&unix.IN_MOVE_SELF != 0 {
			w.a.onForker(func() { _, _ = unix.InotifyRmWatch(w.fd, uint32(wd)) })
			w.forget(wd)
		}
		return
	}
	p := path.Join(dir, name)
	switch {
	case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		w.queue(p, driver.FileCreated, isDir)
		if isDir && w.recursive {
			// Watch the new directory, then list it: what was created in
			// it before the watch was added is reported from the listing.
			// It is opened without following a symbolic link (it may have
			// been replaced by one since), then watched and listed by
			// that open file.
			w.a.onForker(func() {
				fd, err := w.openBelow(p)
				if err == nil {
					if err = w.add(fd, p); err != nil {
						_ = unix.Close(fd)
					} else {
						err = w.addTree(fd, p, true)
					}
				}
				if err != nil && exhausted(err) {
					w.queue(w.root, driver.FileOverflow, true)
				}
			})
		}
	case mask&unix.IN_MODIFY != 0:
		w.queue(p, driver.FileWritten, isDir)
	case mask&unix.IN_DELETE != 0:
		w.queue(p, driver.FileRemoved, isDir)
	case mask&unix.IN_MOVED_FROM != 0:
		w.queue(p, driver.FileRenamed, isDir)
	case mask&unix.IN_ATTRIB != 0:
		w.queue(p, driver.FileChmod, isDir)
	}
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's start time: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// listProcs answers a process list from /proc as the agent sees it.
func (a *agent) listProcs(fw *frameWriter) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		_ = fw.writeJSON(frameFail, failMsg{"Internal", "reading /proc: " + err.Error()})
		return
	}
	boot := bootTime()
	type stat struct {
		ppid  int
		state byte
		start uint64
		comm  string
	}
	stats := map[int]stat{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		s := string(b)
		open, i := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || i < open {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 20 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		start, _ := strconv.ParseUint(fields[19], 10, 64)
		stats[pid] = stat{ppid: ppid, state: fields[0][0], start: start, comm: s[open+1 : i]}
	}
	// The sandbox's processes are the agent's descendants (at L3 and L4,
	// PID 1's: every process of the namespace).
	self := os.Getpid()
	children := map[int][]int{}
	for pid, s := range stats {
		children[s.ppid] = append(children[s.ppid], pid)
	}
	a.procMu.Lock()
	live := map[int]bool{}
	for pid, p := range a.procs {
		select {
		case <-p.reaped:
		default:
			live[pid] = true
		}
	}
	a.procMu.Unlock()
	// A terminal's program is a handle too (StartTerminal).
	onTerm := map[int]string{}
	a.terms.mu.Lock()
	for id, tm := range a.terms.byID {
		if tm.p == nil {
			continue
		}
		select {
		case <-tm.p.done:
		default:
			onTerm[tm.p.pid] = id
		}
	}
	a.terms.mu.Unlock()
	var out []psEntry
	queue := []int{self}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		queue = append(queue, children[pid]...)
		if pid == self {
			continue
		}
		s := stats[pid]
		if s.state == 'Z' || s.state == 'X' {
			continue
		}
		e := psEntry{PID: pid, Handle: live[pid], Command: s.comm, Terminal: onTerm[pid]}
		if e.Terminal != "" {
			e.Handle = true
		}
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil && len(b) > 0 {
			e.Args = strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		}
		if !boot.IsZero() {
			e.Start = boot.Add(time.Duration(s.start) * time.Second / clockTicks).UnixNano()
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(x, y psEntry) int { return x.PID - y.PID })
	if out == nil {
		out = []psEntry{}
	}
	_ = fw.writeJSON(frameOK, out)
}

// bootTime reads the boot time from /proc/stat (btime); zero if unknown.
func bootTime() time.Time {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			if s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return time.Unix(s, 0)
			}
		}
	}
	return time.Time{}
}
