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
// watched.
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
	if err := fw.writeJSON(frameRequest, &request{Op: "watch", Dir: dir, Recursive: req.Recursive}); err != nil {
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
	go r.readWatch(id, c, q, unhook)
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
	if err := fw.writeJSON(frameRequest, &request{Op: "ps"}); err != nil {
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
// an unlinked file still open reports nothing more.
const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_EXCL_UNLINK | unix.IN_ONLYDIR

// maxWatchDirs bounds the directories one recursive watch adds (the
// kernel's fs.inotify.max_user_watches bounds them all).
const maxWatchDirs = 100000

// inotifyWatch is one watch in the agent.
type inotifyWatch struct {
	a         *agent
	fd        int
	recursive bool
	root      string
	dirs      map[int32]string // wd → directory
	fw        *frameWriter
	batch     []watchEvent
}

// watchFail maps an error of stat or inotify_add_watch to a failure.
func watchFail(dir string, err error) failMsg {
	d := iox.Shorten(dir, 64)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return failMsg{"NotFound", fmt.Sprintf("%s: no such directory", d)}
	case errors.Is(err, syscall.ENOTDIR):
		return failMsg{"NotDirectory", fmt.Sprintf("%s is not a directory", d)}
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return failMsg{"PermissionDenied", fmt.Sprintf("%s: permission denied", d)}
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EMFILE):
		return failMsg{"ResourceExhausted", fmt.Sprintf("%s: inotify limit reached (fs.inotify.max_user_watches or max_user_instances): %v", d, err)}
	}
	return failMsg{"Internal", fmt.Sprintf("%s: %v", d, err)}
}

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
	w := &inotifyWatch{a: a, fd: fd, recursive: req.Recursive, root: dir, dirs: map[int32]string{}, fw: fw}
	// The directory is checked and watched as the sandbox's user, on the
	// confined thread: a watch needs read permission, as listing does.
	var st unix.Stat_t
	a.onForker(func() {
		if err = unix.Stat(dir, &st); err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			err = syscall.ENOTDIR
		}
		if err == nil {
			err = w.add(dir)
		}
		if err == nil && w.recursive {
			err = w.addTree(dir, false)
		}
	})
	if err != nil {
		_ = f.Close()
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

// add watches one directory; call on the forker thread.
func (w *inotifyWatch) add(dir string) error {
	if len(w.dirs) >= maxWatchDirs {
		return syscall.ENOSPC
	}
	wd, err := unix.InotifyAddWatch(w.fd, dir, watchMask)
	if err != nil {
		return err
	}
	w.dirs[int32(wd)] = dir
	return nil
}

// addTree watches the directories below dir; with report, it reports
// every entry found as created (a directory that appeared before its
// watch did). Call on the forker thread. Directories it may not read are
// skipped: only the watched directory itself must be readable.
func (w *inotifyWatch) addTree(dir string, report bool) error {
	entries, err := os.ReadDir(dir)
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
		if err := w.add(p); err != nil {
			if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EMFILE) {
				return err
			}
			continue
		}
		if err := w.addTree(p, report); err != nil {
			return err
		}
	}
	return nil
}

func (w *inotifyWatch) queue(p string, kind driver.FileEventKind, isDir bool) {
	w.batch = append(w.batch, watchEvent{Path: p, Kind: string(kind), IsDir: isDir, Time: time.Now().UnixNano()})
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
		w.batch = w.batch[:0]
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
		if len(w.batch) > 0 {
			if w.fw.writeJSON(frameWatch, w.batch) != nil {
				return
			}
		}
		if cap(w.batch) > 16<<10 {
			w.batch = nil
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
		delete(w.dirs, wd)
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
			delete(w.dirs, wd)
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
			w.a.onForker(func() {
				if w.add(p) == nil {
					if err := w.addTree(p, true); err != nil {
						w.queue(w.root, driver.FileOverflow, true)
					}
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
