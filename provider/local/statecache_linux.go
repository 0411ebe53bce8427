//go:build linux

package local

import (
	"maps"
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
// as the file. Entries are keyed by the state file's path; the caller
// still opens that path (and takes its shared lock) before a lookup, so a
// sandbox whose directory was moved away or removed is not found. When
// inotify is unavailable (or its watches run out), the cache holds
// nothing and every read goes to the file, as without it.
type stateCache struct {
	mu      sync.Mutex
	fd      int // inotify descriptor, nonblocking; -1: no cache
	byWD    map[int32]string
	entries map[string]metaState
	// gen counts the events seen per path (and gen0 every dropAll), so
	// that a record read while its file changed is not cached.
	gen  map[string]uint64
	gen0 uint64
}

// maxStateEntries bounds the watches (and entries) the process keeps.
const maxStateEntries = 256

func newStateCache() *stateCache {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		fd = -1
	}
	return &stateCache{fd: fd, byWD: map[int32]string{}, entries: map[string]metaState{}, gen: map[string]uint64{}}
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
			delete(c.entries, path) // the watch stays for the next record
		}
	}
}

func (c *stateCache) dropAll() {
	for wd := range c.byWD {
		_, _ = unix.InotifyRmWatch(c.fd, uint32(wd))
	}
	c.byWD = map[int32]string{}
	c.entries = map[string]metaState{}
	c.gen = map[string]uint64{}
	c.gen0++
}

// get returns the cached state read from path, if it is as new as the
// file.
func (c *stateCache) get(path string) (metaState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return metaState{}, false
	}
	c.drain()
	st, ok := c.entries[path]
	if !ok {
		return metaState{}, false
	}
	st.Cgroups.V1 = maps.Clone(st.Cgroups.V1)
	return st, true
}

// stateTicket is what watch returns, for put: the watch, and the count
// of events when the file was about to be read.
type stateTicket struct {
	wd        int32
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
	return stateTicket{wd: int32(wd), gen: c.gen[path], gen0: c.gen0}, true
}

// put caches st, read from path after watch returned t, unless the file
// changed (or the watch went) since.
func (c *stateCache) put(path string, t stateTicket, st *metaState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return
	}
	c.drain()
	if c.byWD[t.wd] != path || c.gen[path] != t.gen || c.gen0 != t.gen0 {
		return
	}
	e := *st
	e.Cgroups.V1 = maps.Clone(st.Cgroups.V1)
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
	delete(c.entries, path)
	delete(c.gen, path)
}
