//go:build linux

package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/forkwait"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/pathsafe"
	"github.com/sandboxkit/sandbox/sberrors"
)

// fsTarget is a resolved file request (see view_linux.go for what is
// served).
type fsTarget struct {
	m     *meta
	root  *os.Root
	home  string // the sandbox path root stands for: "/" or the home
	rel   string // path relative to root; "." for the root itself
	path  string // the path as the caller gave it (sandbox terms)
	creds *creds // the identity the request acts with; nil: the process's
}

func (r *Runtime) target(id, p string, write bool) (*fsTarget, error) {
	if err := checkLength(p); err != nil {
		return nil, err
	}
	m, err := r.readMeta(id)
	if err != nil {
		return nil, err
	}
	if write && m.State == driver.StatePaused {
		return nil, errPaused(id)
	}
	if err := r.ensureDisk(m); err != nil {
		return nil, sberrors.Errorf(sberrors.Internal, "local: sandbox %s: mounting its disk: %w", id, err)
	}
	root, top, rel, err := r.openView(m, p)
	if err != nil {
		return nil, err
	}
	return &fsTarget{m: m, root: root, home: top, rel: rel, path: p, creds: r.fileCreds(m)}, nil
}

// isEscape reports whether os.Root refused err's path because of a
// symbolic link: one leading out of the root, or any absolute one.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// errLinkEscape is a symbolic link that leads out of the home.
var errLinkEscape = fmt.Errorf("a symbolic link leads outside the home: %w", sberrors.ErrPathEscape)

// maxLinks bounds the symbolic links resolveLinks follows, as the kernel does.
const maxLinks = 40

// resolveLinks returns rel with its symbolic links resolved within the
// home (the last element's only with followLast). os.Root refuses every
// absolute link, but code in the sandbox writes links in its own terms
// (/home/user/a -> /home/user/b): an absolute target within the home is
// taken relative to the home; any other, and a relative one climbing
// above it, is errLinkEscape. Missing elements are kept as they are.
// The result is a plain path for os.Root, which still checks every
// element when it is used, should the sandbox change a link meanwhile.
func resolveLinks(root *os.Root, home, rel string, followLast bool) (string, error) {
	todo := strings.Split(rel, "/")
	var done []string
	links := 0
	for len(todo) > 0 {
		e := todo[0]
		todo = todo[1:]
		switch e {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 && home == "/" {
				continue // ".." at the root is the root, as the kernel has it
			}
			if len(done) == 0 {
				return "", errLinkEscape
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(path.Join(done...), e)
		if len(todo) == 0 && !followLast {
			done = append(done, e)
			break
		}
		fi, err := root.Lstat(cur)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, e)
			continue
		}
		if links++; links > maxLinks {
			return "", syscall.ELOOP
		}
		target, err := root.Readlink(cur)
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			target = path.Clean(target)
			if !pathsafe.Within(home, target) {
				return "", errLinkEscape
			}
			done, target = nil, strings.TrimPrefix(target, home)
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return path.Join(done...), nil
}

// do runs op on t.rel and, should os.Root refuse a symbolic link on the
// way, once more with t.rel's links resolved by resolveLinks (which then
// replaces t.rel).
func (t *fsTarget) do(followLast bool, op func(rel string) error) error {
	err := op(t.rel)
	if !isEscape(err) {
		return err
	}
	rel, rerr := resolveLinks(t.root, t.home, t.rel, followLast)
	if rerr != nil {
		return rerr
	}
	if rel == t.rel {
		return err
	}
	t.rel = rel
	return op(rel)
}

// homeRel returns p, a clean absolute path within home, relative to home.
func homeRel(home, p string) (string, error) {
	rest := strings.TrimPrefix(p, home)
	if rest == "" || rest == "/" {
		return ".", nil
	}
	return pathsafe.Rel(rest)
}

// checkLength refuses a path over the Linux limits (pathsafe.MaxPath
// bytes, pathsafe.MaxName bytes per name) with InvalidArgument, as a
// system call in the sandbox would with ENAMETOOLONG: os.Root walks a path
// one name at a time, so without this a path longer than PATH_MAX would
// be served here and nowhere else.
func checkLength(p string) error {
	if err := pathsafe.CheckLength(p); err != nil {
		return sberrors.Errorf(sberrors.InvalidArgument, "local: %s: %w", short(p), err)
	}
	return nil
}

// short bounds a path for a message: its first 64 bytes and its length.
func short(p string) string { return iox.Shorten(p, 64) }

// fsErr maps a file system error about p onto the sandbox sentinels. The
// message shows p shortened, and the errno rather than the os error (which
// would repeat the whole host path).
func fsErr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	p = short(p)
	var errno syscall.Errno
	errors.As(err, &errno)
	switch {
	case isEscape(err), errors.Is(err, sberrors.ErrPathEscape):
		return fmt.Errorf("local: %s %s: a symbolic link leads outside the home: %w", op, p, sberrors.ErrPathEscape)
	case errors.Is(err, fs.ErrNotExist):
		return sberrors.Errorf(sberrors.NotFound, "local: %s %s: no such file or directory: %w", op, p, sberrors.ErrNotFound)
	case errno == syscall.EISDIR:
		return fmt.Errorf("local: %s %s: %w", op, p, sberrors.ErrIsDirectory)
	case errno == syscall.ENOTDIR:
		return fmt.Errorf("local: %s %s: %w", op, p, sberrors.ErrNotDirectory)
	case errno == syscall.ELOOP:
		return sberrors.Errorf(sberrors.InvalidArgument, "local: %s %s: too many levels of symbolic links", op, p)
	case errno == syscall.ENAMETOOLONG:
		return sberrors.Errorf(sberrors.InvalidArgument, "local: %s %s: file name too long", op, p)
	case errno == syscall.EINVAL && op == "rename":
		return sberrors.Errorf(sberrors.InvalidArgument, "local: %s %s: a directory cannot be moved into itself", op, p)
	case errors.Is(err, fs.ErrExist), errno == syscall.ENOTEMPTY:
		return sberrors.Errorf(sberrors.AlreadyExists, "local: %s %s: %v", op, p, errnoOr(errno, err))
	case errors.Is(err, fs.ErrPermission), errno == syscall.EROFS:
		return sberrors.Errorf(sberrors.PermissionDenied, "local: %s %s: permission denied", op, p)
	case errno == syscall.ENOSPC, errno == syscall.EDQUOT, errno == syscall.EFBIG:
		return sberrors.Errorf(sberrors.ResourceExhausted, "local: %s %s: %v", op, p, errno)
	}
	return sberrors.Errorf(sberrors.Internal, "local: %s %s: %v", op, p, errnoOr(errno, err))
}

func errnoOr(errno syscall.Errno, err error) error {
	if errno != 0 {
		return errno
	}
	return err
}

// chownNeeded reports whether files the host creates in the home must be
// handed to the sandbox user (a root host with namespaces, or whose L1
// and L2 commands run as the unprivileged user).
func (r *Runtime) chownNeeded(m *meta) bool {
	return (m.Achieved >= L3 || m.RunAs != 0) && os.Getuid() == 0
}

// chownPath hands rel and its parents below the home to the sandbox user.
func (r *Runtime) chownPath(t *fsTarget, rel string) {
	if t.creds != nil || !r.chownNeeded(t.m) {
		// Files made with the sandbox user's identity are its already.
		return
	}
	for p := rel; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		_ = t.root.Lchown(p, r.uid, r.gid)
	}
}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// ctxWriter fails writes once ctx ends.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// Upload streams r into path, creating parents, and replaces the file
// atomically: the bytes go to a temporary file in the target's directory,
// renamed over the target after the last byte. On any failure the
// temporary file is removed and the target is left as it was. A symbolic
// link at path is written through (its target is replaced), as a plain
// open would.
func (r *Runtime) Upload(ctx context.Context, id, p string, src io.Reader) error {
	t, err := r.target(id, p, true)
	if err != nil {
		return err
	}
	defer t.root.Close()
	return as(t.creds, func() error { return r.uploadIn(ctx, t, id, p, src) })
}

func (r *Runtime) uploadIn(ctx context.Context, t *fsTarget, id, p string, src io.Reader) error {
	if t.rel == "." {
		return fmt.Errorf("local: upload %s: %w", p, sberrors.ErrIsDirectory)
	}
	if dir := path.Dir(t.rel); dir != "." {
		err := t.do(false, func(rel string) error { return t.root.MkdirAll(path.Dir(rel), 0o755) })
		if err != nil {
			if errors.Is(err, fs.ErrExist) {
				// os.Root.MkdirAll met a file where a parent should be.
				return fmt.Errorf("local: upload %s: a parent is a file: %w", p, sberrors.ErrNotDirectory)
			}
			return fsErr("upload", p, err)
		}
		r.chownPath(t, path.Dir(t.rel))
	}
	// Write through a link at the last element: the file it names is the
	// one replaced.
	final, err := resolveLinks(t.root, t.home, t.rel, true)
	if err != nil {
		return fsErr("upload", p, err)
	}
	perm := fs.FileMode(0o644)
	if fi, err := t.root.Lstat(final); err == nil {
		if !fi.Mode().IsRegular() {
			return notRegular("upload", p, fi.Mode())
		}
		perm = fi.Mode().Perm()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fsErr("upload", p, err)
	}
	tmp, f, err := createTemp(t.root, final, perm)
	if err != nil {
		return fsErr("upload", p, err)
	}
	if t.creds == nil && r.chownNeeded(t.m) {
		_ = f.Chown(r.uid, r.gid)
	}
	if ctx.Done() == nil {
		_, err = io.Copy(f, src)
	} else {
		bp := copyBufs.Get().(*[]byte)
		_, err = io.CopyBuffer(ctxWriter{ctx, f}, src, *bp)
		copyBufs.Put(bp)
	}
	// A process this program was starting as the file was open holds it
	// open for writing until it execs: running the file would fail with
	// "Text file busy" until then (package forkwait).
	if err == nil {
		err = forkwait.CloseReleased(f, ctx.Done())
	} else {
		f.Close()
	}
	if err == nil {
		err = t.root.Rename(tmp, final)
	}
	if err != nil {
		_ = t.root.Remove(tmp)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var pe *fs.PathError
		var le *os.LinkError
		if errors.As(err, &pe) || errors.As(err, &le) {
			return fsErr("upload", p, err)
		}
		return fmt.Errorf("local: upload %s: %w", p, err)
	}
	return nil
}

// createTemp creates a new, empty temporary file next to rel (in the same
// directory, so a rename replaces rel atomically) with mode perm.
func createTemp(root *os.Root, rel string, perm fs.FileMode) (string, *os.File, error) {
	dir, base := path.Split(rel)
	if len(base) > 200 {
		base = base[:200]
	}
	for range 100 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		tmp := path.Join(dir, "."+base+".sbx-"+hex.EncodeToString(b[:])+".tmp")
		f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", nil, err
		}
		// The umask may have narrowed perm.
		_ = f.Chmod(perm)
		return tmp, f, nil
	}
	return "", nil, fmt.Errorf("local: no free temporary name next to %s", rel)
}

// download is the reader Download returns: reads fail once ctx ends, and
// WriteTo keeps the kernel's copy fast paths when ctx cannot end.
type download struct {
	ctx context.Context
	f   *os.File
}

func (d *download) Read(p []byte) (int, error) {
	if err := d.ctx.Err(); err != nil {
		return 0, err
	}
	return d.f.Read(p)
}

func (d *download) WriteTo(w io.Writer) (int64, error) {
	if d.ctx.Done() == nil {
		return io.Copy(w, d.f)
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	return io.CopyBuffer(ctxWriter{d.ctx, w}, struct{ io.Reader }{d.f}, *bp)
}

func (d *download) Close() error { return d.f.Close() }

// Download opens path for streaming.
func (r *Runtime) Download(ctx context.Context, id, p string) (io.ReadCloser, error) {
	t, err := r.target(id, p, false)
	if err != nil {
		return nil, err
	}
	defer t.root.Close()
	var out io.ReadCloser
	err = as(t.creds, func() (err error) { out, err = r.downloadIn(ctx, t, id, p); return err })
	return out, err
}

func (r *Runtime) downloadIn(ctx context.Context, t *fsTarget, id, p string) (io.ReadCloser, error) {
	f, err := openRegular(t, "download", os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	return &download{ctx: ctx, f: f}, nil
}

// openRegular opens t's file for Upload or Download (op) and refuses
// anything but a regular file, without blocking: code in the sandbox can
// plant a FIFO or a device node, whose open or read would block the host
// for as long as it likes, whatever the caller's ctx. A directory is
// ErrIsDirectory, any other kind FailedPrecondition.
func openRegular(t *fsTarget, op string, flag int, perm fs.FileMode) (*os.File, error) {
	var fi fs.FileInfo
	if err := t.do(true, func(rel string) (err error) { fi, err = t.root.Stat(rel); return err }); err == nil && !fi.Mode().IsRegular() {
		// Most cases end here, before any open (a device's open may act).
		return nil, notRegular(op, t.path, fi.Mode())
	}
	// The file may be swapped after the check: open without blocking (a
	// FIFO opens at once, or fails with ENXIO when written without a
	// reader) and check what was opened.
	var f *os.File
	err := t.do(true, func(rel string) (err error) {
		f, err = t.root.OpenFile(rel, flag|syscall.O_NONBLOCK|syscall.O_NOCTTY, perm)
		return err
	})
	if err != nil {
		if errors.Is(err, syscall.ENXIO) {
			if fi, serr := t.root.Stat(t.rel); serr == nil && !fi.Mode().IsRegular() {
				return nil, notRegular(op, t.path, fi.Mode())
			}
		}
		return nil, fsErr(op, t.path, err)
	}
	fi, err = f.Stat()
	if err != nil {
		f.Close()
		return nil, fsErr(op, t.path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, notRegular(op, t.path, fi.Mode())
	}
	// Regular files ignore O_NONBLOCK; clear it all the same.
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = syscall.SetNonblock(int(fd), false) })
	}
	return f, nil
}

// notRegular is the error for a file op refuses because of its type.
func notRegular(op, p string, mode fs.FileMode) error {
	if mode.IsDir() {
		return fmt.Errorf("local: %s %s: %w", op, p, sberrors.ErrIsDirectory)
	}
	kind := "special file"
	switch {
	case mode&fs.ModeNamedPipe != 0:
		kind = "named pipe (FIFO)"
	case mode&fs.ModeSocket != 0:
		kind = "socket"
	case mode&fs.ModeDevice != 0:
		kind = "device"
	}
	return sberrors.Errorf(sberrors.FailedPrecondition, "local: %s %s: it is a %s, not a regular file", op, p, kind)
}

func fileInfo(p string, fi fs.FileInfo) driver.FileInfo {
	return driver.FileInfo{Path: p, Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}
}

// Stat describes path, following symbolic links inside the home.
func (r *Runtime) Stat(ctx context.Context, id, p string) (driver.FileInfo, error) {
	t, err := r.target(id, p, false)
	if err != nil {
		return driver.FileInfo{}, err
	}
	defer t.root.Close()
	var out driver.FileInfo
	err = as(t.creds, func() (err error) { out, err = r.statIn(ctx, t, id, p); return err })
	return out, err
}

func (r *Runtime) statIn(ctx context.Context, t *fsTarget, id, p string) (driver.FileInfo, error) {
	var lfi, fi fs.FileInfo
	if err := t.do(false, func(rel string) (err error) { lfi, err = t.root.Lstat(rel); return err }); err != nil {
		return driver.FileInfo{}, fsErr("stat", p, err)
	}
	var target string
	if lfi.Mode()&fs.ModeSymlink != 0 {
		target, _ = t.root.Readlink(t.rel)
	}
	if err := t.do(true, func(rel string) (err error) { fi, err = t.root.Stat(rel); return err }); err != nil {
		return driver.FileInfo{}, fsErr("stat", p, err)
	}
	out := fileInfo(p, fi)
	out.LinkTarget = target
	return out, nil
}

// ReadDir lists a directory without following links, sorted by name.
func (r *Runtime) ReadDir(ctx context.Context, id, p string) ([]driver.FileInfo, error) {
	t, err := r.target(id, p, false)
	if err != nil {
		return nil, err
	}
	defer t.root.Close()
	var out []driver.FileInfo
	err = as(t.creds, func() (err error) { out, err = r.readDirIn(ctx, t, id, p); return err })
	return out, err
}

func (r *Runtime) readDirIn(ctx context.Context, t *fsTarget, id, p string) ([]driver.FileInfo, error) {
	var f *os.File
	if err := t.do(true, func(rel string) (err error) { f, err = t.root.Open(rel); return err }); err != nil {
		return nil, fsErr("readdir", p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fsErr("readdir", p, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("local: readdir %s: %w", p, sberrors.ErrNotDirectory)
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fsErr("readdir", p, err)
	}
	slices.Sort(names)
	out := make([]driver.FileInfo, 0, len(names))
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rel := path.Join(t.rel, n)
		lfi, err := t.root.Lstat(rel)
		if err != nil {
			continue // removed meanwhile
		}
		e := fileInfo(path.Join(p, n), lfi)
		if lfi.Mode()&fs.ModeSymlink != 0 {
			e.LinkTarget, _ = t.root.Readlink(rel)
		}
		out = append(out, e)
	}
	return out, nil
}

// MkdirAll creates path and its parents.
func (r *Runtime) MkdirAll(ctx context.Context, id, p string) error {
	t, err := r.target(id, p, true)
	if err != nil {
		return err
	}
	defer t.root.Close()
	return as(t.creds, func() error { return r.mkdirAllIn(ctx, t, id, p) })
}

func (r *Runtime) mkdirAllIn(ctx context.Context, t *fsTarget, id, p string) error {
	if t.rel == "." {
		return nil
	}
	if err := t.do(true, func(rel string) error { return t.root.MkdirAll(rel, 0o755) }); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("local: mkdir %s: %w", p, sberrors.ErrNotDirectory)
		}
		return fsErr("mkdir", p, err)
	}
	r.chownPath(t, t.rel)
	return nil
}

// Remove removes path and, for a directory, everything below it. A link
// is removed, not followed.
func (r *Runtime) Remove(ctx context.Context, id, p string) error {
	t, err := r.target(id, p, true)
	if err != nil {
		return err
	}
	defer t.root.Close()
	return as(t.creds, func() error { return r.removeIn(ctx, t, id, p) })
}

func (r *Runtime) removeIn(ctx context.Context, t *fsTarget, id, p string) error {
	if t.rel == "." {
		return sberrors.Errorf(sberrors.InvalidArgument, "local: refusing to remove the home %s", p)
	}
	if err := t.do(false, func(rel string) error { _, err := t.root.Lstat(rel); return err }); err != nil {
		return fsErr("remove", p, err)
	}
	return fsErr("remove", p, t.root.RemoveAll(t.rel))
}

// Rename moves oldPath to newPath within one view: the sandbox's root at
// L3 and L4; below, the home, the private temporary directory or the rest
// of the host's root (see view_linux.go).
func (r *Runtime) Rename(ctx context.Context, id, oldPath, newPath string) error {
	t, err := r.target(id, oldPath, true)
	if err != nil {
		return err
	}
	defer t.root.Close()
	return as(t.creds, func() error { return r.renameIn(ctx, t, id, oldPath, newPath) })
}

func (r *Runtime) renameIn(ctx context.Context, t *fsTarget, id, oldPath, newPath string) error {
	if err := checkLength(newPath); err != nil {
		return err
	}
	if newPath != oldPath && pathsafe.Within(oldPath, newPath) {
		return sberrors.Errorf(sberrors.InvalidArgument, "local: rename %s to %s: a directory cannot be moved into itself", short(oldPath), short(newPath))
	}
	home := t.home
	if !pathsafe.Within(home, newPath) {
		return sberrors.Errorf(sberrors.PermissionDenied, "local: rename %s to %s: the local provider renames within %s only here (copy, then remove)", oldPath, newPath, home)
	}
	if home == "/" {
		for _, k := range kernelDirs {
			if pathsafe.Within(k, newPath) {
				return sberrors.Errorf(sberrors.PermissionDenied, "local: %s: the file methods do not serve %s (kernel interfaces, not files)", newPath, k)
			}
		}
	}
	newRel, err := homeRel(home, newPath)
	if err != nil || newRel == "." || t.rel == "." {
		return sberrors.Errorf(sberrors.InvalidArgument, "local: rename %s to %s: cannot move %s", oldPath, newPath, home)
	}
	if err := t.do(false, func(rel string) error { _, err := t.root.Lstat(rel); return err }); err != nil {
		return fsErr("rename", oldPath, err)
	}
	err = t.root.Rename(t.rel, newRel)
	if isEscape(err) {
		// A link among newPath's parents: resolve them as t.do would.
		if rel, rerr := resolveLinks(t.root, home, newRel, false); rerr != nil {
			err = rerr
		} else if rel != newRel {
			err = t.root.Rename(t.rel, rel)
		}
	}
	return fsErr("rename", newPath, err)
}
