//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/sandboxkit/sandbox/internal/forkwait"
	"golang.org/x/sys/unix"
)

// copier copies a directory tree for snapshots: by reflink (FICLONE),
// where source and destination are on one file system that shares
// extents (XFS, btrfs, bcachefs), else by a copy that keeps holes
// (SEEK_DATA/SEEK_HOLE), so a sparse file stays sparse. Modes, owners
// (mapped from the source sandbox's user to the destination's),
// modification times, symbolic links, hard links (within one tree) and
// FIFOs are kept; sockets and devices are left out (no sandbox can make a
// device, and a socket is nothing without its process). It works relative
// to open directories, so a tree deeper than PATH_MAX (which a sandbox
// can make one mkdir and chdir at a time) is copied whole.
type copier struct {
	// uidFrom and uidTo map the owner of the copied files: a file of
	// uidFrom (uid and gid alike) becomes uidTo's; -1 maps nothing.
	uidFrom, uidTo int
	// reflinked and copied count the regular files copied each way.
	reflinked, copied int
	// links maps a source (dev, inode) of a multiply linked file to its copy.
	links map[[2]uint64]string
	// do runs each change to the destination; nil runs it here. (A
	// destination in a sandbox's user namespace, its /tmp at L3 and L4,
	// takes the sandbox user's file system identity: see asWorker.)
	do func(func() error) error
}

// dst runs f, a change to the destination, through c.do.
func (c *copier) dst(f func() error) error {
	if c.do == nil {
		return f()
	}
	return c.do(f)
}

// asWorker starts a thread with the file system identity cr that runs
// the functions given to its do, one at a time; stop ends it.
func asWorker(cr *creds) (do func(func() error) error, stop func()) {
	ch := make(chan func())
	done := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		defer close(done)
		_ = as(cr, func() error {
			started <- nil
			for f := range ch {
				f()
			}
			return nil
		})
	}()
	select {
	case <-started:
	case <-done:
		return func(func() error) error {
			return fmt.Errorf("local: could not take the sandbox user's identity")
		}, func() {}
	}
	do = func(f func() error) error {
		var err error
		fin := make(chan struct{})
		ch <- func() { err = f(); close(fin) }
		<-fin
		return err
	}
	return do, func() { close(ch); <-done }
}

func newCopier(from, to int) *copier {
	return &copier{uidFrom: from, uidTo: to, links: map[[2]uint64]string{}}
}

func (c *copier) owner(id uint32) int {
	if c.uidFrom >= 0 && int(id) == c.uidFrom {
		return c.uidTo
	}
	return int(id)
}

// keepOpen is how many levels of directories a walk keeps open (the
// copier two descriptors a level). Deeper, a walk closes a directory
// while it is in a subdirectory and reopens it through the
// subdirectory's "..", checking that it is the same directory: a tree
// of any depth is walked with a bounded number of descriptors.
const keepOpen = 64

// openFlags opens a directory for a walk: never through a symbolic link.
const openFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// dirRef is a directory of a walk that may be closed while the walk is
// below it: its descriptor (-1 while closed) and its identity.
type dirRef struct {
	fd       int
	dev, ino uint64
}

// leave closes d for as long as the walk is in a subdirectory of it.
func (d *dirRef) leave() error {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return err
	}
	d.dev, d.ino = uint64(st.Dev), st.Ino
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// back reopens d through child's "..": the same directory, or an error
// (it was moved meanwhile).
func (d *dirRef) back(child int) error {
	fd, err := unix.Openat(child, "..", openFlags, 0)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return err
	}
	if uint64(st.Dev) != d.dev || st.Ino != d.ino {
		unix.Close(fd)
		return fmt.Errorf("a directory moved while it was copied: %w", syscall.ESTALE)
	}
	d.fd = fd
	return nil
}

func (d *dirRef) close() {
	if d.fd >= 0 {
		unix.Close(d.fd)
		d.fd = -1
	}
}

// readNames returns the names in directory fd, sorted.
func readNames(fd int) ([]string, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	slices.Sort(names)
	return names, err
}

// walkPath is where a walk is: the names from its root down, joined into
// a path only for an error (a tree may be far deeper than PATH_MAX).
type walkPath struct {
	root  string
	names []string
}

func (w *walkPath) path(name string) string {
	var b strings.Builder
	b.WriteString(w.root)
	for _, n := range w.names {
		b.WriteByte('/')
		b.WriteString(n)
	}
	if name != "" {
		b.WriteByte('/')
		b.WriteString(name)
	}
	return b.String()
}

// copyWalk is one tree copy under way.
type copyWalk struct {
	src, dst walkPath
}

func (w *copyWalk) srcErr(op, name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return err
	}
	return &fs.PathError{Op: op, Path: w.src.path(name), Err: err}
}

func (w *copyWalk) dstErr(op, name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return err
	}
	return &fs.PathError{Op: op, Path: w.dst.path(name), Err: err}
}

// tree copies the contents of directory src into the existing directory
// dst (dst's own mode and owner are left as they are). It works relative
// to open directories (openat, mkdirat, ...), so a tree deeper than
// PATH_MAX is copied whole.
func (c *copier) tree(ctx context.Context, src, dst string) error {
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: src, Err: err}
	}
	var dfd int
	if err := c.dst(func() (err error) {
		dfd, err = unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	}); err != nil {
		unix.Close(sfd)
		return &fs.PathError{Op: "open", Path: dst, Err: err}
	}
	s, d := &dirRef{fd: sfd}, &dirRef{fd: dfd}
	defer s.close()
	defer d.close()
	w := &copyWalk{src: walkPath{root: src}, dst: walkPath{root: dst}}
	return c.dir(ctx, w, s, d, 0)
}

// dir copies the entries of directory s into directory d. On return s
// and d are open again (unless it failed).
func (c *copier) dir(ctx context.Context, w *copyWalk, s, d *dirRef, depth int) error {
	names, err := readNames(s.fd)
	if err != nil {
		return w.srcErr("readdir", "", err)
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.entry(ctx, w, s, d, name, depth); err != nil {
			return err
		}
	}
	return nil
}

// entry copies one file, link or directory (recursively) named name in
// s to the same name in d.
func (c *copier) entry(ctx context.Context, w *copyWalk, s, d *dirRef, name string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(s.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return w.srcErr("lstat", name, err)
	}
	uid, gid := c.owner(st.Uid), c.owner(st.Gid)
	perm := uint32(st.Mode & 0o7777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if err := c.dst(func() error { return unix.Mkdirat(d.fd, name, 0o700) }); err != nil {
			// An existing directory (lost+found of a disk image) is filled.
			var dst unix.Stat_t
			if err != unix.EEXIST || unix.Fstatat(d.fd, name, &dst, unix.AT_SYMLINK_NOFOLLOW) != nil || dst.Mode&unix.S_IFMT != unix.S_IFDIR {
				return w.dstErr("mkdir", name, err)
			}
		}
		if err := c.subdir(ctx, w, s, d, name, depth); err != nil {
			return err
		}
		// The mode last, so a read-only directory is filled first.
		return c.finish(w, d.fd, name, uid, gid, perm, &st, false)
	case unix.S_IFLNK:
		target, err := readlinkat(s.fd, name)
		if err != nil {
			return w.srcErr("readlink", name, err)
		}
		if err := c.dst(func() error { return unix.Symlinkat(target, d.fd, name) }); err != nil {
			return w.dstErr("symlink", name, err)
		}
		return c.finish(w, d.fd, name, uid, gid, 0, &st, true)
	case unix.S_IFIFO:
		if err := c.dst(func() error { return unix.Mkfifoat(d.fd, name, 0o600) }); err != nil {
			return w.dstErr("mkfifo", name, err)
		}
		return c.finish(w, d.fd, name, uid, gid, perm, &st, false)
	case unix.S_IFREG:
		key := [2]uint64{uint64(st.Dev), st.Ino}
		if st.Nlink > 1 {
			if first, ok := c.links[key]; ok {
				if err := c.dst(func() error { return linkPath(first, d.fd, name) }); err == nil {
					return nil
				}
			}
		}
		if err := c.file(ctx, w, s.fd, d.fd, name, st.Size, perm&0o111 != 0); err != nil {
			return err
		}
		if st.Nlink > 1 {
			c.links[key] = w.dst.path(name)
		}
		return c.finish(w, d.fd, name, uid, gid, perm, &st, false)
	}
	return nil // sockets, devices
}

// subdir copies directory name of s into the directory name of d, which
// exists. Below keepOpen levels s and d stay open meanwhile; deeper, they
// are closed and reopened after.
func (c *copier) subdir(ctx context.Context, w *copyWalk, s, d *dirRef, name string, depth int) error {
	cs := &dirRef{fd: -1}
	cd := &dirRef{fd: -1}
	defer cs.close()
	defer cd.close()
	var err error
	if cs.fd, err = unix.Openat(s.fd, name, openFlags, 0); err != nil {
		return w.srcErr("open", name, err)
	}
	if err := c.dst(func() (err error) { cd.fd, err = unix.Openat(d.fd, name, openFlags, 0); return err }); err != nil {
		return w.dstErr("open", name, err)
	}
	w.src.names, w.dst.names = append(w.src.names, name), append(w.dst.names, name)
	defer func() { w.src.names, w.dst.names = w.src.names[:len(w.src.names)-1], w.dst.names[:len(w.dst.names)-1] }()
	if depth < keepOpen {
		return c.dir(ctx, w, cs, cd, depth+1)
	}
	if err := s.leave(); err != nil {
		return w.srcErr("close", "", err)
	}
	if err := d.leave(); err != nil {
		return w.dstErr("close", "", err)
	}
	werr := c.dir(ctx, w, cs, cd, depth+1)
	if err := s.back(cs.fd); err != nil {
		return errors.Join(werr, w.srcErr("open", "..", err))
	}
	if err := c.dst(func() error { return d.back(cd.fd) }); err != nil {
		return errors.Join(werr, w.dstErr("open", "..", err))
	}
	return werr
}

// readlinkat reads symbolic link name in directory fd.
func readlinkat(fd int, name string) (string, error) {
	for n := 256; ; n *= 2 {
		b := make([]byte, n)
		k, err := unix.Readlinkat(fd, name, b)
		if err != nil {
			return "", err
		}
		if k < n {
			return string(b[:k]), nil
		}
	}
}

// linkPath makes name in directory fd a hard link to the file at path,
// which may be longer than PATH_MAX: then its directory is opened one
// name at a time.
func linkPath(path string, fd int, name string) error {
	if len(path) < unix.PathMax-1 {
		return unix.Linkat(unix.AT_FDCWD, path, fd, name, 0)
	}
	dir, base := filepath.Split(path)
	pfd, err := openDirPath(dir)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return unix.Linkat(pfd, base, fd, name, 0)
}

// openDirPath opens the directory at an absolute path of any length, one
// name at a time.
func openDirPath(path string) (int, error) {
	fd, err := unix.Open("/", openFlags, 0)
	if err != nil {
		return -1, err
	}
	for el := range strings.SplitSeq(path, "/") {
		if el == "" {
			continue
		}
		next, err := unix.Openat(fd, el, openFlags, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// finish sets the owner, mode and times of the copy name in directory dfd.
func (c *copier) finish(w *copyWalk, dfd int, name string, uid, gid int, perm uint32, st *unix.Stat_t, link bool) error {
	return c.dst(func() error {
		if err := unix.Fchownat(dfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil && !errors.Is(err, syscall.EPERM) {
			return w.dstErr("chown", name, err)
		}
		if !link {
			if err := unix.Fchmodat(dfd, name, perm, 0); err != nil {
				return w.dstErr("chmod", name, err)
			}
		}
		ts := []unix.Timespec{st.Atim, st.Mtim}
		_ = unix.UtimesNanoAt(dfd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
		return nil
	})
}

// file copies a regular file's bytes: a reflink where the file system
// allows, else the data ranges only, holes left as holes. A copy of an
// executable (exec) is closed so that it can be run at once, even while
// this program starts other processes (package forkwait).
func (c *copier) file(ctx context.Context, w *copyWalk, sfd, dfd int, name string, size int64, exec bool) error {
	ifd, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return w.srcErr("open", name, err)
	}
	in := os.NewFile(uintptr(ifd), name)
	defer in.Close()
	return c.dst(func() error {
		ofd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return w.dstErr("open", name, err)
		}
		out := os.NewFile(uintptr(ofd), name)
		closeOut := out.Close
		if exec {
			closeOut = func() error { return forkwait.CloseReleased(out, ctx.Done()) }
		}
		if size > 0 && unix.IoctlFileClone(ofd, ifd) == nil {
			c.reflinked++
			return closeOut()
		}
		c.copied++
		if err := copySparse(in, out, size); err != nil {
			out.Close()
			return w.srcErr("copy", name, err)
		}
		return closeOut()
	})
}

// copySparse copies the data ranges of in (found with SEEK_DATA and
// SEEK_HOLE) to the same offsets of out and sets out's size, so holes
// stay holes. Where the file system cannot say, it copies everything.
func copySparse(in, out *os.File, size int64) error {
	ifd := int(in.Fd())
	var off int64
	for off < size {
		data, err := unix.Seek(ifd, off, unix.SEEK_DATA)
		if errors.Is(err, syscall.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			// No SEEK_DATA here: copy it all.
			if _, err := in.Seek(0, io.SeekStart); err != nil {
				return err
			}
			if _, err := io.Copy(out, in); err != nil {
				return err
			}
			return nil
		}
		hole, err := unix.Seek(ifd, data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		if err := copyRange(in, out, data, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return out.Truncate(size)
}

// copyRange copies n bytes at off of in to off of out, in the kernel
// where it can (copy_file_range), else through a buffer.
func copyRange(in, out *os.File, off, n int64) error {
	roff, woff := off, off
	for n > 0 {
		k, err := unix.CopyFileRange(int(in.Fd()), &roff, int(out.Fd()), &woff, int(min(n, 1<<30)), 0)
		if err != nil || k == 0 {
			if err != nil && !errors.Is(err, syscall.EXDEV) && !errors.Is(err, syscall.ENOSYS) && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.EOPNOTSUPP) {
				return err
			}
			if k == 0 && err == nil {
				return nil // the file shrank under us
			}
			w := io.NewOffsetWriter(out, woff)
			_, err := io.Copy(w, io.NewSectionReader(in, roff, n))
			return err
		}
		n -= int64(k)
	}
	return nil
}

// diskUsage sums the blocks the files under dir take (as du does), at
// any depth.
func diskUsage(dir string) int64 {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	d := &dirRef{fd: fd}
	defer d.close()
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return 0
	}
	return st.Blocks*512 + usageIn(d, 0)
}

// usageIn sums the blocks of what directory d holds. On return d is open
// again unless it could not be reopened (then the sum is what it had).
func usageIn(d *dirRef, depth int) int64 {
	names, err := readNames(d.fd)
	if err != nil {
		return 0
	}
	var total int64
	for _, name := range names {
		var st unix.Stat_t
		if unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		total += st.Blocks * 512
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		cfd, err := unix.Openat(d.fd, name, openFlags, 0)
		if err != nil {
			continue
		}
		c := &dirRef{fd: cfd}
		if depth < keepOpen {
			total += usageIn(c, depth+1)
			c.close()
			continue
		}
		if d.leave() != nil {
			c.close()
			return total
		}
		total += usageIn(c, depth+1)
		err = errors.New("closed")
		if c.fd >= 0 {
			err = d.back(c.fd)
		}
		c.close()
		if err != nil {
			return total
		}
	}
	return total
}

// reflinks reports whether dir's file system clones files (FICLONE).
func reflinks(dir string) bool {
	a, err := os.CreateTemp(dir, ".reflink-probe-")
	if err != nil {
		return false
	}
	defer os.Remove(a.Name())
	defer a.Close()
	if _, err := a.WriteString("probe"); err != nil {
		return false
	}
	b, err := os.CreateTemp(dir, ".reflink-probe-")
	if err != nil {
		return false
	}
	defer os.Remove(b.Name())
	defer b.Close()
	return unix.IoctlFileClone(int(b.Fd()), int(a.Fd())) == nil
}
