//go:build linux

package local

import (
	"maps"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// states is the process's cache of state records, shared by its Runtimes
// (one inotify instance per process: instances are few per user, and the
// agents' Watch needs them).
var states = sync.OnceValue(newStateCache)

// stateCache keeps the last state record read of each sandbox in memory,
// so that a call on a sandbox (an exec, above all) neither reads nor
// decodes its record while the record is unchanged. An inotify watch on each cached state file
// tells when it changes: every write to a state file (by this process or
// any other), and its unlinking or replacement, queues an event before
// the writing call returns, and every lookup first drains the queue
// without blocking, so an entry still present after the drain is as new
// as the file. Entries are keyed by the state file's path; a caller of get
// still opens that path (and takes its shared lock) before the lookup, so
// a sandbox whose directory was moved away or removed is not found. When
// inotify is unavailable (or its watches run out), the cache holds
// nothing and every read goes to the file, as without it.
//
// An entry may also keep the state file open, with a watch on the
// sandbox's directory beside the file's: any entry made, removed or moved
// in the directory (a freeze record among them), and the directory's own
// move or removal (Destroy moves it away first), drop the entry. Such an
// entry, read when the directory held no freeze record, lets a call on a
// running sandbox skip the path walks (fast): the state's lock is still
// passed, on the kept descriptor. The directories above the sandbox's are
// not watched: moving the root away under a live Runtime is not seen.
type stateCache struct {
	mu      sync.Mutex
	fd      int // inotify descriptor, nonblocking; -1: no cache
	byWD    map[int32]string
	entries map[string]stateEntry
	// gen counts the events seen per path (and gen0 every dropAll), so
	// that a record read while its file changed is not cached.
	gen  map[string]uint64
	gen0 uint64
}

// stateEntry is one cached record.
type stateEntry struct {
	st metaState
	// fd is the state file, open (and unlocked), when the entry's
	// directory is watched too; -1 otherwise.
	fd int
	// noMark: the directory held no freeze record when st was read.
	noMark bool
}

// maxStateEntries bounds the watches (two an entry) the process keeps,
// and so the descriptors it keeps open.
const maxStateEntries = 256

// dirEvents are the events of a sandbox directory's watch.
const dirEvents = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_MOVE_SELF | unix.IN_DELETE_SELF | unix.IN_ONLYDIR

func newStateCache() *stateCache {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		fd = -1
	}
	return &stateCache{fd: fd, byWD: map[int32]string{}, entries: map[string]stateEntry{}, gen: map[string]uint64{}}
}

// drain applies the queued events: an entry whose file changed is
// dropped. Called with mu held.
func (c *stateCache) drain() {
	var buf [4096]byte
	for {
		n, err := unix.Read(c.fd, buf[:])
		if err == unix.EINTR {
			continue
		}
		if n <= 0 || err != nil {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				c.dropAll()
				continue
			}
			path, ok := c.byWD[ev.Wd]
			if !ok {
				continue
			}
			c.gen[path]++
			if ev.Mask&unix.IN_IGNORED != 0 {
				delete(c.byWD, ev.Wd) // the kernel removed the watch
			}
			c.drop(path) // the watch stays for the next record
		}
	}
}

// drop removes path's entry and closes its descriptor. Called with mu
// held.
func (c *stateCache) drop(path string) {
	if e, ok := c.entries[path]; ok && e.fd >= 0 {
		_ = unix.Close(e.fd)
	}
	delete(c.entries, path)
}

func (c *stateCache) dropAll() {
	for wd := range c.byWD {
		_, _ = unix.InotifyRmWatch(c.fd, uint32(wd))
	}
	for path := range c.entries {
		c.drop(path)
	}
	c.byWD = map[int32]string{}
	c.gen = map[string]uint64{}
	c.gen0++
}

// get returns the cached state read from path, if it is as new as the
// file.
func (c *stateCache) get(path string) (metaState, bool) { return c.lookup(path, false) }

// fast returns the cached state read from path when its entry keeps the
// file open and saw no freeze record, once the state's lock, taken shared
// on the kept descriptor and released at once, was free. False (the lock
// held by a writer among others) sends the caller the long way, which
// waits for the lock.
func (c *stateCache) fast(path string) (metaState, bool) { return c.lookup(path, true) }

func (c *stateCache) lookup(path string, fast bool) (metaState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return metaState{}, false
	}
	c.drain()
	e, ok := c.entries[path]
	if !ok {
		return metaState{}, false
	}
	if fast {
		if e.fd < 0 || !e.noMark || unix.Flock(e.fd, unix.LOCK_SH|unix.LOCK_NB) != nil {
			return metaState{}, false
		}
		_ = unix.Flock(e.fd, unix.LOCK_UN)
	}
	st := e.st
	st.Cgroups.V1 = maps.Clone(st.Cgroups.V1)
	return st, true
}

// stateTicket is what watch returns, for put: the watch, and the count
// of events when the file was about to be read.
type stateTicket struct {
	wd        int32
	dirWD     int32 // the directory's watch; -1 if none
	gen, gen0 uint64
}

// watch puts a watch on the state file at path; it is taken before the
// file is read, so a write after the read is seen.
func (c *stateCache) watch(path string) (stateTicket, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return stateTicket{}, false
	}
	c.drain()
	if len(c.byWD) >= maxStateEntries {
		c.dropAll()
	}
	wd, err := unix.InotifyAddWatch(c.fd, path, unix.IN_MODIFY|unix.IN_ATTRIB|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF)
	if err != nil {
		return stateTicket{}, false
	}
	c.byWD[int32(wd)] = path
	t := stateTicket{wd: int32(wd), dirWD: -1, gen: c.gen[path], gen0: c.gen0}
	if dwd, err := unix.InotifyAddWatch(c.fd, filepath.Dir(path), dirEvents); err == nil {
		c.byWD[int32(dwd)] = path
		t.dirWD = int32(dwd)
	}
	return t, true
}

// put caches st, read from path after watch returned t, unless the file
// changed (or the watch went) since. fd, if not -1, is the state file
// opened after watch returned, and noMark whether the directory then held
// no freeze record: put takes fd over (it closes it when it does not
// keep it).
func (c *stateCache) put(path string, t stateTicket, st *metaState, fd int, noMark bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd >= 0 {
		c.drain()
	}
	if c.fd < 0 || c.byWD[t.wd] != path || c.gen[path] != t.gen || c.gen0 != t.gen0 {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
		return
	}
	if fd >= 0 && (t.dirWD < 0 || c.byWD[t.dirWD] != path) {
		_ = unix.Close(fd) // the directory is not watched: keep no descriptor
		fd = -1
	}
	c.drop(path)
	e := stateEntry{st: *st, fd: fd, noMark: noMark && fd >= 0}
	e.st.Cgroups.V1 = maps.Clone(st.Cgroups.V1)
	c.entries[path] = e
}

// forget drops path's entry and watch (the sandbox is destroyed).
func (c *stateCache) forget(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return
	}
	c.drain()
	for wd, p := range c.byWD {
		if p == path {
			_, _ = unix.InotifyRmWatch(c.fd, uint32(wd))
			delete(c.byWD, wd)
		}
	}
	c.drop(path)
	delete(c.gen, path)
}
