package sandbox

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/pathsafe"
)

// FS returns a read-only io/fs view of the sandbox rooted at its home
// directory. Every call made through it uses ctx, so a canceled ctx ends
// them. It implements fs.StatFS, fs.ReadDirFS, fs.ReadFileFS and fs.SubFS.
func (s *Sandbox) FS(ctx context.Context) fs.FS {
	return &sandboxFS{ctx: ctx, sb: s, root: s.Home()}
}

type sandboxFS struct {
	ctx  context.Context
	sb   *Sandbox
	root string
}

func (f *sandboxFS) abs(op, name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", pathErr(op, name, fs.ErrInvalid)
	}
	if err := pathsafe.CheckLength(name); err != nil {
		return "", pathErr(op, name, invalid(op, f.sb.c.rt.Name(), f.sb.id, "name", "%v", err))
	}
	return path.Join(f.root, name), nil
}

// pathErr is the error of an fs.FS method about name. A name over 256
// bytes is shown shortened in it (see iox.Shorten), so that no error
// message grows with the caller's input.
func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: iox.Shorten(name, 256), Err: err}
}

// Open opens the named file or directory for reading.
func (f *sandboxFS) Open(name string) (fs.File, error) {
	abs, err := f.abs("open", name)
	if err != nil {
		return nil, err
	}
	fi, err := f.sb.Stat(f.ctx, abs)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	info := fi
	info.Path = displayPath(name, fi.Path)
	if fi.IsDir() {
		return &fsDir{fs: f, name: name, abs: abs, info: info}, nil
	}
	return &fsFile{fs: f, name: name, abs: abs, info: info}, nil
}

// displayPath keeps the name the caller used, so Stat().Name() is the
// base of the opened name even through symlinks.
func displayPath(name, abs string) string {
	if name == "." {
		return abs
	}
	return "/" + name
}

// Stat describes the named file.
func (f *sandboxFS) Stat(name string) (fs.FileInfo, error) {
	abs, err := f.abs("stat", name)
	if err != nil {
		return nil, err
	}
	fi, err := f.sb.Stat(f.ctx, abs)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	fi.Path = displayPath(name, fi.Path)
	return fi.FS(), nil
}

// ReadFile reads the named file in one stream.
func (f *sandboxFS) ReadFile(name string) ([]byte, error) {
	abs, err := f.abs("readfile", name)
	if err != nil {
		return nil, err
	}
	b, err := f.sb.ReadFile(f.ctx, abs)
	if err != nil {
		return nil, pathErr("readfile", name, err)
	}
	return b, nil
}

// ReadDir lists the named directory, sorted by name.
func (f *sandboxFS) ReadDir(name string) ([]fs.DirEntry, error) {
	abs, err := f.abs("readdir", name)
	if err != nil {
		return nil, err
	}
	list, err := f.sb.ReadDir(f.ctx, abs)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	out := make([]fs.DirEntry, len(list))
	for i, fi := range list {
		out[i] = fs.FileInfoToDirEntry(fi.FS())
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// Sub returns the view rooted at dir.
func (f *sandboxFS) Sub(dir string) (fs.FS, error) {
	abs, err := f.abs("sub", dir)
	if err != nil {
		return nil, err
	}
	return &sandboxFS{ctx: f.ctx, sb: f.sb, root: abs}, nil
}

type fsFile struct {
	fs   *sandboxFS
	name string
	abs  string
	info FileInfo
	rc   io.ReadCloser
	done bool
}

func (f *fsFile) Stat() (fs.FileInfo, error) { return f.info.FS(), nil }

func (f *fsFile) Read(p []byte) (int, error) {
	if f.done {
		return 0, pathErr("read", f.name, fs.ErrClosed)
	}
	if f.rc == nil {
		rc, err := f.fs.sb.Download(f.fs.ctx, f.abs)
		if err != nil {
			return 0, pathErr("read", f.name, err)
		}
		f.rc = rc
	}
	return f.rc.Read(p)
}

func (f *fsFile) Close() error {
	if f.done {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	f.done = true
	if f.rc != nil {
		return f.rc.Close()
	}
	return nil
}

type fsDir struct {
	fs      *sandboxFS
	name    string
	abs     string
	info    FileInfo
	entries []fs.DirEntry
	read    bool
	closed  bool
}

func (d *fsDir) Stat() (fs.FileInfo, error) { return d.info.FS(), nil }

func (d *fsDir) Read([]byte) (int, error) {
	return 0, pathErr("read", d.name, errors.New("is a directory"))
}

func (d *fsDir) Close() error {
	if d.closed {
		return pathErr("close", d.name, fs.ErrClosed)
	}
	d.closed = true
	return nil
}

// ReadDir follows the fs.ReadDirFile contract.
func (d *fsDir) ReadDir(n int) ([]fs.DirEntry, error) {
	if !d.read {
		list, err := d.fs.ReadDir(d.name)
		if err != nil {
			return nil, err
		}
		d.entries, d.read = list, true
	}
	if n <= 0 {
		out := d.entries
		d.entries = nil
		return out, nil
	}
	if len(d.entries) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(d.entries))
	out := d.entries[:n:n]
	d.entries = d.entries[n:]
	return out, nil
}
