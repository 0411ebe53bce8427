package memory

import (
	"bytes"
	"hash/fnv"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/pathsafe"
)

// The shell and its utilities see the sandbox's files the way a program
// sees a POSIX file system: symbolic links are followed element by
// element, ".." is physical, every file has a stable inode number and a
// link count of 1, and permission bits are honoured for the sandbox's user,
// who owns every file. These functions run under the Runtime's lock.

// maxSymlinks bounds the links followed while resolving one path, like
// Linux's ELOOP limit.
const maxSymlinks = 40

// inoSeq numbers nodes the first time something asks for their inode, so a
// node keeps its number for its whole life, across writes and renames.
var inoSeq atomic.Uint64

func (n *node) inode() uint64 {
	if n.ino == 0 {
		n.ino = inoSeq.Add(1)
	}
	return n.ino
}

func (n *node) isLink() bool { return n.mode&fs.ModeSymlink != 0 }

// walkLocked resolves p (absolute) physically: symbolic links in every
// element are followed, and in the last one too when follow is set. It
// returns the physical path and its node; when only the last element is
// missing it returns that would-be path with a nil node and a nil error,
// so a caller can create it.
func walkLocked(b *box, p string, follow bool) (string, *node, error) {
	if !strings.HasPrefix(p, "/") {
		return "", nil, syscall.EINVAL
	}
	if len(p) > pathsafe.MaxPath {
		return "", nil, syscall.ENAMETOOLONG // as the kernel refuses the string
	}
	cur := "/"
	rest := splitPath(p)
	hops := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		if len(c) > pathsafe.MaxName {
			return "", nil, syscall.ENAMETOOLONG // in the path or a link's target
		}
		next := path.Join(cur, c)
		n, ok := b.files[next]
		if !ok {
			if allDots(rest) {
				if len(rest) > 0 {
					return "", nil, syscall.ENOENT // "missing/." or "missing/.."
				}
				return next, nil, nil
			}
			return "", nil, syscall.ENOENT
		}
		if n.isLink() && (len(rest) > 0 || follow) {
			if hops++; hops > maxSymlinks {
				return "", nil, syscall.ELOOP
			}
			target := string(n.data)
			if strings.HasPrefix(target, "/") {
				cur = "/"
			}
			rest = append(splitPath(target), rest...)
			continue
		}
		if len(rest) > 0 && !n.mode.IsDir() {
			return "", nil, syscall.ENOTDIR // "file/x", and "file/." too
		}
		cur = next
	}
	return cur, b.files[cur], nil
}

// physLocked returns where p resolves physically (following a final
// symbolic link when follow is set), or p itself when it does not resolve,
// so that the file API reports errors on the path it was given.
func physLocked(b *box, p string, follow bool) string {
	phys, _, err := walkLocked(b, p, follow)
	if err != nil || phys == "" {
		return p
	}
	return phys
}

func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// allDots reports whether every element left is "" or "." (so the path
// ends here for creation purposes). ".." is not: "missing/.." needs the
// missing directory.
func allDots(rest []string) bool {
	for _, c := range rest {
		if c != "" && c != "." {
			return false
		}
	}
	return true
}

// sandbox-user permission checks: the user owns every file but those of
// ReadOnlyDirs, for which the "other" bits apply.
func canRead(n *node) bool  { return userBits(n)&0o400 != 0 }
func canWrite(n *node) bool { return userBits(n)&0o200 != 0 }
func canExec(n *node) bool  { return userBits(n)&0o100 != 0 }

// userBits returns the permission bits that apply to the sandbox's user,
// as owner bits.
func userBits(n *node) fs.FileMode {
	if n.root {
		return (n.mode.Perm() & 0o007) << 6
	}
	return n.mode.Perm() & 0o700
}

// uidOf returns the owner of a node as stat reports it.
func uidOf(root bool) (uid int, name string) {
	if root {
		return 0, "root"
	}
	return os.Getuid(), "user"
}

// statInfo is the fs.FileInfo of a node as the shell sees it. Sys returns
// a *syscall.Stat_t with the node's inode, a link count of 1 and the
// sandbox's device number, so tools that compare identities work.
type statInfo struct {
	name string
	size int64
	mode fs.FileMode
	mt   time.Time
	ino  uint64
	dev  uint64
	root bool
}

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.size }
func (s *statInfo) Mode() fs.FileMode  { return s.mode }
func (s *statInfo) ModTime() time.Time { return s.mt }
func (s *statInfo) IsDir() bool        { return s.mode.IsDir() }

// Sys returns the node's *syscall.Stat_t where the platform has one
// (see statSys in vfs_sys_*.go).
func (s *statInfo) Sys() any { return s.statSys() }

// unixMode converts a Go file mode to st_mode bits (the values are the
// same on every Unix: S_IFREG, S_IFDIR, S_IFLNK).
func unixMode(m fs.FileMode) uint32 {
	t := uint32(0o100000)
	switch {
	case m.IsDir():
		t = 0o040000
	case m&fs.ModeSymlink != 0:
		t = 0o120000
	}
	return t | uint32(m.Perm())
}

// devOf is the device number of a sandbox's file system.
func devOf(id string) uint64 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return uint64(h.Sum32()&0xffff) | 0x100
}

func statOf(id, p string, n *node) *statInfo {
	size := int64(len(n.data))
	if n.mode.IsDir() {
		size = 4096
	}
	name := path.Base(p)
	return &statInfo{name: name, size: size, mode: n.mode, mt: n.mtime, ino: n.inode(), dev: devOf(id), root: n.root}
}

// vfs is the shell's view of one sandbox's files; dir is the working
// directory relative paths start from.
type vfs struct {
	rt  *Runtime
	id  string
	dir string
}

// abs joins a relative p to the working directory without cleaning it:
// ".." is resolved physically by walkLocked.
func (v *vfs) abs(p string) string {
	if strings.HasPrefix(p, "/") {
		return p
	}
	if v.dir == "/" {
		return "/" + p
	}
	return v.dir + "/" + p
}

// with runs fn on the sandbox under the Runtime's lock.
func (v *vfs) with(fn func(b *box) error) error {
	v.rt.mu.Lock()
	defer v.rt.mu.Unlock()
	b, ok := v.rt.boxes[v.id]
	if !ok {
		return syscall.ESTALE
	}
	return fn(b)
}

func pe(op, p string, err error) error { return &fs.PathError{Op: op, Path: p, Err: err} }

// stat describes p, following a final symbolic link when follow is set.
func (v *vfs) stat(p string, follow bool) (fi *statInfo, err error) {
	err = v.with(func(b *box) error {
		phys, n, err := walkLocked(b, v.abs(p), follow)
		if err != nil {
			return err
		}
		if n == nil {
			return syscall.ENOENT
		}
		fi = statOf(v.id, phys, n)
		fi.name = path.Base(p)
		return nil
	})
	if err != nil {
		return nil, pe("stat", p, err)
	}
	return fi, nil
}

// resolve returns the physical path of p, which must exist when must is set.
func (v *vfs) resolve(p string, follow, must bool) (phys string, err error) {
	err = v.with(func(b *box) error {
		var n *node
		phys, n, err = walkLocked(b, v.abs(p), follow)
		if err == nil && n == nil && must {
			err = syscall.ENOENT
		}
		return err
	})
	if err != nil {
		return "", pe("stat", p, err)
	}
	return phys, nil
}

// readFile returns a copy of a regular file's content.
func (v *vfs) readFile(p string) (data []byte, err error) {
	err = v.with(func(b *box) error {
		_, n, err := walkLocked(b, v.abs(p), true)
		switch {
		case err != nil:
			return err
		case n == nil:
			return syscall.ENOENT
		case n.mode.IsDir():
			return syscall.EISDIR
		case !canRead(n):
			return syscall.EACCES
		}
		data = bytes.Clone(n.data)
		return nil
	})
	if err != nil {
		return nil, pe("open", p, err)
	}
	return data, nil
}

// entry is one directory entry as readDir returns it.
type entry struct {
	name string
	path string // physical
	info *statInfo
}

// readDir lists a directory (following links to it), sorted by name.
func (v *vfs) readDir(p string) (list []entry, err error) {
	err = v.with(func(b *box) error {
		phys, n, err := walkLocked(b, v.abs(p), true)
		switch {
		case err != nil:
			return err
		case n == nil:
			return syscall.ENOENT
		case !n.mode.IsDir():
			return syscall.ENOTDIR
		case !canRead(n):
			return syscall.EACCES
		}
		prefix := strings.TrimSuffix(phys, "/") + "/"
		for q, c := range b.files {
			if q != "/" && strings.HasPrefix(q, prefix) && !strings.Contains(q[len(prefix):], "/") {
				list = append(list, entry{name: q[len(prefix):], path: q, info: statOf(v.id, q, c)})
			}
		}
		return nil
	})
	if err != nil {
		return nil, pe("open", p, err)
	}
	slices.SortFunc(list, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	return list, nil
}

// parentOK checks that the directory that will hold phys exists, is a
// directory and is writable.
func parentOK(b *box, phys string) error {
	d, ok := b.files[path.Dir(phys)]
	switch {
	case !ok:
		return syscall.ENOENT
	case !d.mode.IsDir():
		return syscall.ENOTDIR
	case !canWrite(d):
		return syscall.EACCES
	}
	return nil
}

// openWrite opens p for writing with os.OpenFile's flags and returns the
// node written to; a missing file is created with perm when O_CREATE is
// set.
func (v *vfs) openWrite(p string, flag int, perm fs.FileMode) (n *node, err error) {
	err = v.with(func(b *box) error {
		phys, nn, err := walkLocked(b, v.abs(p), true)
		if err != nil {
			return err
		}
		if nn == nil {
			if flag&os.O_CREATE == 0 {
				return syscall.ENOENT
			}
			if err := parentOK(b, phys); err != nil {
				return err
			}
			nn = &node{mode: perm.Perm() &^ 0o022, mtime: v.rt.now()}
			b.files[phys] = nn
			v.rt.eventLocked(b, phys, driver.FileCreated, false)
		} else {
			switch {
			case nn.mode.IsDir():
				return syscall.EISDIR
			case flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
				return syscall.EEXIST
			case !canWrite(nn):
				return syscall.EACCES
			}
			if flag&os.O_TRUNC != 0 {
				nn.data = nil
				nn.mtime = v.rt.now()
				v.rt.eventLocked(b, phys, driver.FileWritten, false)
			}
		}
		n = nn
		return nil
	})
	if err != nil {
		return nil, pe("open", p, err)
	}
	return n, nil
}

// readFileNode returns the node of a readable regular file, for a
// descriptor that reads it later.
func (v *vfs) readFileNode(p string) (n *node, err error) {
	err = v.with(func(b *box) error {
		_, nn, err := walkLocked(b, v.abs(p), true)
		switch {
		case err != nil:
			return err
		case nn == nil:
			return syscall.ENOENT
		case nn.mode.IsDir():
			return syscall.EISDIR
		case !canRead(nn):
			return syscall.EACCES
		}
		n = nn
		return nil
	})
	if err != nil {
		return nil, pe("open", p, err)
	}
	return n, nil
}

// size returns a node's size.
func (v *vfs) size(n *node) int {
	v.rt.mu.Lock()
	defer v.rt.mu.Unlock()
	return len(n.data)
}

// dataFrom returns a copy of a node's bytes from off.
func (v *vfs) dataFrom(n *node, off int) []byte {
	v.rt.mu.Lock()
	defer v.rt.mu.Unlock()
	return bytes.Clone(n.data[min(off, len(n.data)):])
}

// writeAt writes data into a node at *off (extending it) and advances *off.
func (v *vfs) writeAt(n *node, off *int, data []byte) {
	v.rt.mu.Lock()
	defer v.rt.mu.Unlock()
	end := *off + len(data)
	if end > len(n.data) {
		n.data = append(n.data, make([]byte, end-len(n.data))...)
	}
	copy(n.data[*off:], data)
	*off = end
	n.mtime = v.rt.now()
	v.rt.nodeWrittenLocked(v.rt.boxes[v.id], n)
}

// appendTo appends data to a node opened by openWrite.
func (v *vfs) appendTo(n *node, data []byte) {
	v.rt.mu.Lock()
	defer v.rt.mu.Unlock()
	n.data = append(n.data, data...)
	n.mtime = v.rt.now()
	v.rt.nodeWrittenLocked(v.rt.boxes[v.id], n)
}

// mkdir creates one directory.
func (v *vfs) mkdir(p string, perm fs.FileMode) error {
	err := v.with(func(b *box) error {
		phys, n, err := walkLocked(b, v.abs(p), false)
		if err != nil {
			return err
		}
		if n != nil {
			return syscall.EEXIST
		}
		if err := parentOK(b, phys); err != nil {
			return err
		}
		b.files[phys] = &node{mode: fs.ModeDir | perm.Perm()&^0o022, mtime: v.rt.now()}
		v.rt.eventLocked(b, phys, driver.FileCreated, true)
		return nil
	})
	if err != nil {
		return pe("mkdir", p, err)
	}
	return nil
}

// symlink creates a symbolic link at p pointing to target. A target over
// PATH_MAX is refused as symlink(2) refuses it (ENAMETOOLONG).
func (v *vfs) symlink(target, p string) error {
	err := v.with(func(b *box) error {
		if len(target) > pathsafe.MaxPath {
			return syscall.ENAMETOOLONG
		}
		phys, n, err := walkLocked(b, v.abs(p), false)
		if err != nil {
			return err
		}
		if n != nil {
			return syscall.EEXIST
		}
		if err := parentOK(b, phys); err != nil {
			return err
		}
		b.files[phys] = &node{data: []byte(target), mode: fs.ModeSymlink | 0o777, mtime: v.rt.now()}
		v.rt.eventLocked(b, phys, driver.FileCreated, false)
		return nil
	})
	if err != nil {
		return pe("symlink", p, err)
	}
	return nil
}

// readlink returns the target of a symbolic link.
func (v *vfs) readlink(p string) (target string, err error) {
	err = v.with(func(b *box) error {
		_, n, err := walkLocked(b, v.abs(p), false)
		switch {
		case err != nil:
			return err
		case n == nil:
			return syscall.ENOENT
		case !n.isLink():
			return syscall.EINVAL
		}
		target = string(n.data)
		return nil
	})
	if err != nil {
		return "", pe("readlink", p, err)
	}
	return target, nil
}

// remove unlinks p (a link itself, never its target); a directory needs
// recursive or must be empty when dirOK is set.
func (v *vfs) remove(p string, recursive, dirOK bool) error {
	err := v.with(func(b *box) error {
		phys, n, err := walkLocked(b, v.abs(p), false)
		if err != nil {
			return err
		}
		if n == nil {
			return syscall.ENOENT
		}
		if phys == "/" {
			return syscall.EBUSY
		}
		if d := b.files[path.Dir(phys)]; d != nil && !canWrite(d) {
			return syscall.EACCES
		}
		if n.mode.IsDir() {
			if !recursive && !dirOK {
				return syscall.EISDIR
			}
			if !recursive {
				for q := range b.files {
					if strings.HasPrefix(q, phys+"/") {
						return syscall.ENOTEMPTY
					}
				}
			}
		}
		tree := treeLocked(b, phys)
		err = removeTreeLocked(b, phys)
		v.rt.removedLocked(b, goneLocked(b, tree))
		return err
	})
	if err != nil {
		return pe("remove", p, err)
	}
	return nil
}

// removeTreeLocked removes phys and what is below it as rm -r does with
// the user's rights: an entry whose directory the user may not write
// stays, and so do the directories above it (not empty); the rest goes.
// It answers EACCES when anything stayed.
func removeTreeLocked(b *box, phys string) error {
	var tree []string
	for q := range b.files {
		if q == phys || strings.HasPrefix(q, phys+"/") {
			tree = append(tree, q)
		}
	}
	// Deepest first, so a directory is decided after its entries.
	sort.Slice(tree, func(i, j int) bool { return strings.Count(tree[i], "/") > strings.Count(tree[j], "/") })
	kept := map[string]bool{}
	var err error
	for _, q := range tree {
		d := path.Dir(q)
		if kept[q] || (q != phys && !canWrite(b.files[d])) {
			kept[d] = true
			err = syscall.EACCES
			continue
		}
		delete(b.files, q)
	}
	return err
}

// rename moves from to to, as rename(2): a file replaces a file, a
// directory replaces an empty directory.
func (v *vfs) rename(from, to string) error {
	err := v.with(func(b *box) error {
		src, sn, err := walkLocked(b, v.abs(from), false)
		if err != nil {
			return err
		}
		if sn == nil {
			return syscall.ENOENT
		}
		dst, dn, err := walkLocked(b, v.abs(to), false)
		if err != nil {
			return err
		}
		if src == dst {
			return nil
		}
		if d := b.files[path.Dir(src)]; d != nil && !canWrite(d) {
			return syscall.EACCES
		}
		if err := parentOK(b, dst); err != nil {
			return err
		}
		if sn.mode.IsDir() && strings.HasPrefix(dst, src+"/") {
			return syscall.EINVAL
		}
		if dn != nil {
			switch {
			case dn.mode.IsDir() && !sn.mode.IsDir():
				return syscall.EISDIR
			case !dn.mode.IsDir() && sn.mode.IsDir():
				return syscall.ENOTDIR
			}
			for q := range b.files {
				if strings.HasPrefix(q, dst+"/") {
					return syscall.ENOTEMPTY
				}
			}
			delete(b.files, dst)
		}
		moved := map[string]*node{}
		for q, n := range b.files {
			if q == src || strings.HasPrefix(q, src+"/") {
				moved[dst+q[len(src):]] = n
				delete(b.files, q)
			}
		}
		for q, n := range moved {
			b.files[q] = n
		}
		v.rt.eventLocked(b, src, driver.FileRenamed, sn.mode.IsDir())
		v.rt.eventLocked(b, dst, driver.FileCreated, sn.mode.IsDir())
		return nil
	})
	if err != nil {
		return pe("rename", from, err)
	}
	return nil
}

// chmod sets the permission bits of p (following links).
func (v *vfs) chmod(p string, perm fs.FileMode) error {
	err := v.with(func(b *box) error {
		_, n, err := walkLocked(b, v.abs(p), true)
		if err != nil {
			return err
		}
		if n == nil {
			return syscall.ENOENT
		}
		if n.root {
			return syscall.EPERM
		}
		n.mode = n.mode&^fs.ModePerm | perm.Perm()
		v.rt.eventLocked(b, physLocked(b, v.abs(p), true), driver.FileChmod, n.mode.IsDir())
		return nil
	})
	if err != nil {
		return pe("chmod", p, err)
	}
	return nil
}

// touch creates p empty if missing, else updates its time.
func (v *vfs) touch(p string) error {
	err := v.with(func(b *box) error {
		phys, n, err := walkLocked(b, v.abs(p), true)
		if err != nil {
			return err
		}
		if n != nil {
			n.mtime = v.rt.now()
			v.rt.eventLocked(b, phys, driver.FileChmod, n.mode.IsDir())
			return nil
		}
		if err := parentOK(b, phys); err != nil {
			return err
		}
		b.files[phys] = &node{mode: 0o644, mtime: v.rt.now()}
		v.rt.eventLocked(b, phys, driver.FileCreated, false)
		return nil
	})
	if err != nil {
		return pe("touch", p, err)
	}
	return nil
}

// access checks the sandbox user's rights on p.
func (v *vfs) access(p string, read, write, exec bool) error {
	err := v.with(func(b *box) error {
		_, n, err := walkLocked(b, v.abs(p), true)
		switch {
		case err != nil:
			return err
		case n == nil:
			return syscall.ENOENT
		case read && !canRead(n), write && !canWrite(n), exec && !canExec(n):
			return syscall.EACCES
		}
		return nil
	})
	if err != nil {
		return pe("access", p, err)
	}
	return nil
}
