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
	"syscall"

	"golang.org/x/sys/unix"
)

// copier copies a directory tree for snapshots: by reflink (FICLONE),
// where source and destination are on one file system that shares
// extents (XFS, btrfs, bcachefs), else by a copy that keeps holes
// (SEEK_DATA/SEEK_HOLE), so a sparse file stays sparse. Modes, owners
// (mapped from the source sandbox's user to the destination's),
// modification times, symbolic links, hard links (within one tree) and
// FIFOs are kept; sockets and devices are left out (no sandbox can make a
// device, and a socket is nothing without its process).
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

// tree copies the contents of directory src into the existing directory
// dst (dst's own mode and owner are left as they are).
func (c *copier) tree(ctx context.Context, src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.entry(ctx, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// entry copies one file, link or directory (recursively).
func (c *copier) entry(ctx context.Context, src, dst string) error {
	var st unix.Stat_t
	if err := unix.Lstat(src, &st); err != nil {
		return &fs.PathError{Op: "lstat", Path: src, Err: err}
	}
	uid, gid := c.owner(st.Uid), c.owner(st.Gid)
	perm := uint32(st.Mode & 0o7777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if err := c.dst(func() error { return unix.Mkdir(dst, 0o700) }); err != nil {
			// An existing directory (lost+found of a disk image) is filled.
			if fi, serr := os.Lstat(dst); err != unix.EEXIST || serr != nil || !fi.IsDir() {
				return &fs.PathError{Op: "mkdir", Path: dst, Err: err}
			}
		}
		if err := c.tree(ctx, src, dst); err != nil {
			return err
		}
		// The mode last, so a read-only directory is filled first.
		return c.finish(dst, uid, gid, perm, &st, false)
	case unix.S_IFLNK:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := c.dst(func() error { return unix.Symlink(target, dst) }); err != nil {
			return &fs.PathError{Op: "symlink", Path: dst, Err: err}
		}
		return c.finish(dst, uid, gid, 0, &st, true)
	case unix.S_IFIFO:
		if err := c.dst(func() error { return unix.Mkfifo(dst, 0o600) }); err != nil {
			return &fs.PathError{Op: "mkfifo", Path: dst, Err: err}
		}
		return c.finish(dst, uid, gid, perm, &st, false)
	case unix.S_IFREG:
		key := [2]uint64{uint64(st.Dev), st.Ino}
		if st.Nlink > 1 {
			if first, ok := c.links[key]; ok {
				if err := c.dst(func() error { return os.Link(first, dst) }); err == nil {
					return nil
				}
			}
		}
		if err := c.file(src, dst, st.Size); err != nil {
			return err
		}
		if st.Nlink > 1 {
			c.links[key] = dst
		}
		return c.finish(dst, uid, gid, perm, &st, false)
	}
	return nil // sockets, devices
}

// finish sets the owner, mode and times of a copy.
func (c *copier) finish(dst string, uid, gid int, perm uint32, st *unix.Stat_t, link bool) error {
	return c.dst(func() error { return finish(dst, uid, gid, perm, st, link) })
}

func finish(dst string, uid, gid int, perm uint32, st *unix.Stat_t, link bool) error {
	if err := os.Lchown(dst, uid, gid); err != nil && !errors.Is(err, syscall.EPERM) {
		return err
	}
	if !link {
		if err := unix.Chmod(dst, perm); err != nil {
			return &fs.PathError{Op: "chmod", Path: dst, Err: err}
		}
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	_ = unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW)
	return nil
}

// file copies a regular file's bytes: a reflink where the file system
// allows, else the data ranges only, holes left as holes.
func (c *copier) file(src, dst string, size int64) error {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	return c.dst(func() error {
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return err
		}
		if size > 0 && unix.IoctlFileClone(int(out.Fd()), int(in.Fd())) == nil {
			c.reflinked++
			return out.Close()
		}
		c.copied++
		if err := copySparse(in, out, size); err != nil {
			out.Close()
			return &fs.PathError{Op: "copy", Path: src, Err: err}
		}
		return out.Close()
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

// diskUsage sums the blocks the files under dir take (as du does).
func diskUsage(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			}
		}
		return nil
	})
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
