package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/pathsafe"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Files gives a Handler access to its sandbox's files. Relative paths are
// resolved against the command's working directory, as a real program's are.
type Files struct {
	rt  *Runtime
	id  string
	dir string
}

func (f *Files) abs(p string) (string, error) {
	return pathsafe.Resolve(f.dir, p)
}

// do resolves p and runs fn on the sandbox under the Runtime's lock.
func (f *Files) do(p string, fn func(b *box, abs string) error) error {
	abs, err := f.abs(p)
	if err != nil {
		return err
	}
	f.rt.mu.Lock()
	defer f.rt.mu.Unlock()
	b, err := f.rt.get(f.id, false)
	if err != nil {
		return err
	}
	return fn(b, abs)
}

// ReadFile returns the content of a file.
func (f *Files) ReadFile(p string) (data []byte, err error) {
	err = f.do(p, func(b *box, abs string) error {
		n, err := lookupFile(b, abs)
		if err == nil {
			data = bytes.Clone(n.data)
		}
		return err
	})
	return data, err
}

// WriteFile writes a file, creating its parents.
func (f *Files) WriteFile(p string, data []byte) error {
	return f.do(p, func(b *box, abs string) error { return f.rt.putLocked(b, abs, bytes.Clone(data)) })
}

// ReadDir lists a directory.
func (f *Files) ReadDir(p string) (list []driver.FileInfo, err error) {
	err = f.do(p, func(b *box, abs string) error {
		list, err = readDirLocked(b, abs)
		return err
	})
	return list, err
}

// MkdirAll creates a directory and its parents.
func (f *Files) MkdirAll(p string) error {
	return f.do(p, func(b *box, abs string) error { return f.rt.mkdirAllLocked(b, abs) })
}

// Remove removes a file or directory tree.
func (f *Files) Remove(p string) error {
	return f.do(p, f.rt.removeLocked)
}

// Stat describes a file or directory.
func (f *Files) Stat(p string) (fi driver.FileInfo, err error) {
	err = f.do(p, func(b *box, abs string) error {
		fi, err = statLocked(b, abs)
		return err
	})
	return fi, err
}

// statLocked describes abs as os.Stat does, following symbolic links (a
// dangling one is NotFound, not the link), with the link's target in
// LinkTarget when abs itself is a link.
func statLocked(b *box, abs string) (driver.FileInfo, error) {
	n, err := followLocked(b, "stat", abs)
	if err != nil {
		return driver.FileInfo{}, err
	}
	fi := info(abs, n)
	if l := b.files[physLocked(b, abs, false)]; l != nil && l.isLink() {
		fi.LinkTarget = string(l.data)
	}
	return fi, nil
}

func (r *Runtime) removeLocked(b *box, abs string) error {
	key := physLocked(b, abs, false)
	if _, ok := b.files[key]; !ok {
		return &fs.PathError{Op: "remove", Path: abs, Err: sberrors.ErrNotFound}
	}
	if err := deniedLocked(b, "remove", abs, path.Dir(key)); err != nil {
		return err
	}
	tree := treeLocked(b, key)
	for q := range b.files {
		if q == key || strings.HasPrefix(q, key+"/") {
			delete(b.files, q)
		}
	}
	r.removedLocked(b, tree)
	return nil
}

// deniedLocked refuses to create, replace or remove an entry of the
// directory dir (physical) that the sandbox's user may not write, as in
// ReadOnlyDirs, unless the file methods act as root.
func deniedLocked(b *box, op, p, dir string) error {
	if b.rootFiles {
		return nil
	}
	if d := b.files[dir]; d != nil && d.mode.IsDir() && !canWrite(d) {
		return &fs.PathError{Op: op, Path: p, Err: sberrors.ErrPermission}
	}
	return nil
}

// lookupFile returns the regular file abs names, following symbolic links
// (relative targets against the link's directory, at most maxSymlinks of
// them) as a real sandbox's daemon does when it opens the path: a dangling
// link is NotFound, a link to a directory is a directory, and a loop is
// refused, never the link's target text read back as content.
func lookupFile(b *box, abs string) (*node, error) {
	n, err := followLocked(b, "open", abs)
	if err != nil {
		return nil, err
	}
	if n.mode.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: abs, Err: sberrors.ErrIsDirectory}
	}
	return n, nil
}

// followLocked returns the node abs resolves to with every symbolic link
// followed, the last one included, or an error for op on abs.
func followLocked(b *box, op, abs string) (*node, error) {
	_, n, err := walkLocked(b, abs, true)
	var errno syscall.Errno
	errors.As(err, &errno)
	switch {
	case err == nil && n != nil:
		return n, nil
	case err == nil, errno == syscall.ENOENT:
		return nil, &fs.PathError{Op: op, Path: abs, Err: sberrors.ErrNotFound}
	case errno == syscall.ENOTDIR:
		return nil, &fs.PathError{Op: op, Path: abs, Err: sberrors.ErrNotDirectory}
	case errno == syscall.ELOOP:
		return nil, &fs.PathError{Op: op, Path: abs, Err: sberrors.Errorf(sberrors.InvalidArgument, "too many levels of symbolic links (more than %d)", maxSymlinks)}
	case errno == syscall.ENAMETOOLONG:
		return nil, &fs.PathError{Op: op, Path: iox.Shorten(abs, 64), Err: sberrors.Errorf(sberrors.InvalidArgument, "file name too long")}
	}
	return nil, &fs.PathError{Op: op, Path: abs, Err: sberrors.Errorf(sberrors.InvalidArgument, "%v", err)}
}

// mkdirAllLocked creates abs and its parents.
func (r *Runtime) mkdirAllLocked(b *box, abs string) error {
	key := physLocked(b, abs, true)
	if n, ok := b.files[key]; ok {
		if !n.mode.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: abs, Err: sberrors.ErrNotDirectory}
		}
		return nil
	}
	if abs != "/" {
		if err := r.mkdirAllLocked(b, path.Dir(abs)); err != nil {
			return err
		}
	}
	key = physLocked(b, abs, true)
	if err := deniedLocked(b, "mkdir", abs, path.Dir(key)); err != nil {
		return err
	}
	b.files[key] = dirNode(r.now())
	r.eventLocked(b, key, driver.FileCreated, true)
	return nil
}

func (r *Runtime) putLocked(b *box, abs string, data []byte) error {
	if n, ok := b.files[physLocked(b, abs, true)]; ok && n.mode.IsDir() {
		return &fs.PathError{Op: "write", Path: abs, Err: sberrors.ErrIsDirectory}
	}
	if err := r.mkdirAllLocked(b, path.Dir(abs)); err != nil {
		return err
	}
	key := physLocked(b, abs, true)
	if err := deniedLocked(b, "write", abs, path.Dir(key)); err != nil {
		return err
	}
	_, existed := b.files[key]
	b.files[key] = &node{data: data, mode: 0o644, mtime: r.now()}
	if !existed {
		r.eventLocked(b, key, driver.FileCreated, false)
	}
	if existed || len(data) > 0 {
		r.eventLocked(b, key, driver.FileWritten, false)
	}
	return nil
}

func info(abs string, n *node) driver.FileInfo {
	return driver.FileInfo{Path: abs, Size: int64(len(n.data)), Mode: n.mode, ModTime: n.mtime}
}

func readDirLocked(b *box, abs string) ([]driver.FileInfo, error) {
	key, n, err := walkLocked(b, abs, true)
	if err != nil || n == nil {
		_, ferr := followLocked(b, "readdir", abs)
		return nil, ferr
	}
	if !n.mode.IsDir() {
		return nil, &fs.PathError{Op: "readdir", Path: abs, Err: sberrors.ErrNotDirectory}
	}
	prefix := strings.TrimSuffix(key, "/") + "/"
	var out []driver.FileInfo
	for p, c := range b.files {
		if p != "/" && strings.HasPrefix(p, prefix) && !strings.Contains(p[len(prefix):], "/") {
			out = append(out, info(path.Join(abs, p[len(prefix):]), c))
		}
	}
	slices.SortFunc(out, func(a, b driver.FileInfo) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// Upload stores the bytes of r at path. The fake reads r fully; that is the
// one place it buffers, since the whole file lives in memory anyway.
func (r *Runtime) Upload(ctx context.Context, id, p string, src io.Reader) error {
	if err := r.begin(OpUpload, id, p); err != nil {
		return err
	}
	if err := checkLength(OpUpload, p); err != nil {
		return err
	}
	r.mu.Lock()
	b, err := r.get(id, true)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(readerCtx(ctx, src)); err != nil {
		return fmt.Errorf("memory: upload %s: %w", p, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.boxes[id]; !ok {
		return notFound(id)
	}
	return r.putLocked(b, p, buf.Bytes())
}

// checkLength refuses, as Linux does with ENAMETOOLONG, a path over
// pathsafe.MaxPath bytes or with a name over pathsafe.MaxName bytes, with
// InvalidArgument: the fake refuses what every real provider refuses, so
// a unit test over it catches what production would. The message shows
// the path shortened.
func checkLength(op, p string) error {
	if err := pathsafe.CheckLength(p); err != nil {
		return &fs.PathError{Op: op, Path: iox.Shorten(p, 64), Err: sberrors.Errorf(sberrors.InvalidArgument, "%w", err)}
	}
	return nil
}

// boxOp records op, then runs fn on sandbox id under the Runtime's lock;
// live requires the sandbox to be running (not paused).
func (r *Runtime) boxOp(op, id, p string, live bool, fn func(b *box) error) error {
	if err := r.begin(op, id, p); err != nil {
		return err
	}
	if err := checkLength(op, p); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.get(id, live)
	if err != nil {
		return err
	}
	return fn(b)
}

// Download returns a reader over a copy of the file.
func (r *Runtime) Download(_ context.Context, id, p string) (rc io.ReadCloser, err error) {
	err = r.boxOp(OpDownload, id, p, true, func(b *box) error {
		n, err := lookupFile(b, p)
		if err == nil && !b.rootFiles && userBits(n)&0o400 == 0 {
			// The file methods have the user's rights, as cat does.
			return &fs.PathError{Op: "open", Path: p, Err: sberrors.ErrPermission}
		}
		if err == nil {
			rc = io.NopCloser(bytes.NewReader(bytes.Clone(n.data)))
		}
		return err
	})
	return rc, err
}

// Stat describes a file or directory.
func (r *Runtime) Stat(_ context.Context, id, p string) (fi driver.FileInfo, err error) {
	err = r.boxOp(OpStat, id, p, true, func(b *box) error {
		fi, err = statLocked(b, p)
		return err
	})
	return fi, err
}

// ReadDir lists a directory sorted by name.
func (r *Runtime) ReadDir(_ context.Context, id, p string) (list []driver.FileInfo, err error) {
	err = r.boxOp(OpReadDir, id, p, true, func(b *box) error {
		list, err = readDirLocked(b, p)
		return err
	})
	return list, err
}

// MkdirAll creates a directory and its parents.
func (r *Runtime) MkdirAll(_ context.Context, id, p string) error {
	return r.boxOp(OpMkdir, id, p, true, func(b *box) error { return r.mkdirAllLocked(b, p) })
}

// Remove deletes a file or a directory tree.
func (r *Runtime) Remove(_ context.Context, id, p string) error {
	return r.boxOp(OpRemove, id, p, true, func(b *box) error { return r.removeLocked(b, p) })
}

// Rename moves a file or directory tree, replacing a file at the target.
func (r *Runtime) Rename(_ context.Context, id, from, to string) error {
	return r.boxOp(OpRename, id, from, true, func(b *box) error {
		if err := checkLength(OpRename, to); err != nil {
			return err
		}
		return r.renameLocked(b, from, to)
	})
}

func (r *Runtime) renameLocked(b *box, from, to string) error {
	from, to = physLocked(b, from, false), physLocked(b, to, false)
	src, ok := b.files[from]
	if !ok {
		return &fs.PathError{Op: "rename", Path: from, Err: sberrors.ErrNotFound}
	}
	if dst, ok := b.files[to]; ok && dst.mode.IsDir() {
		return &fs.PathError{Op: "rename", Path: to, Err: sberrors.ErrIsDirectory}
	}
	if src.mode.IsDir() && pathsafe.Within(from, to) {
		return &fs.PathError{Op: "rename", Path: to, Err: sberrors.Errorf(sberrors.InvalidArgument, "cannot move a directory into itself")}
	}
	if err := r.mkdirAllLocked(b, path.Dir(to)); err != nil {
		return err
	}
	if err := deniedLocked(b, "rename", from, path.Dir(from)); err != nil {
		return err
	}
	if err := deniedLocked(b, "rename", to, path.Dir(physLocked(b, to, false))); err != nil {
		return err
	}
	moved := map[string]*node{}
	for q, n := range b.files {
		if q == from || strings.HasPrefix(q, from+"/") {
			moved[to+q[len(from):]] = n
			delete(b.files, q)
		}
	}
	for q, n := range moved {
		b.files[q] = n
	}
	r.eventLocked(b, from, driver.FileRenamed, src.mode.IsDir())
	r.eventLocked(b, to, driver.FileCreated, src.mode.IsDir())
	return nil
}
