//go:build linux

// Command fshelper performs fsbackend's file operations inside a sandbox,
// resolving every path in the kernel relative to the pinned workspace
// directory: it is the race-free counterpart of the shell program in
// fsbackend/script.go, with the same inputs (SBX_* environment variables),
// the same outputs (data on stdout, NUL-terminated key=value records on
// stderr) and the same exit codes, so the backend parses both alike.
//
// # Resolution
//
// The workspace is opened once (O_PATH) and its device and inode compared
// with the pin before anything else; every later step is relative to a
// descriptor the helper holds, never to a path string resolved again. A
// path is walked one element at a time with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) and O_NOFOLLOW (openat with
// O_NOFOLLOW where the kernel has no openat2: one element without a slash
// and other than ".." cannot leave its directory either way). A symbolic
// link met on the way is read (readlinkat on the link itself) and its
// target walked the same way from the directories already held: ".." pops
// a held directory and never climbs above the workspace, an absolute
// target must name a place under the workspace's physical path and is
// re-rooted at the held workspace descriptor. So a directory swapped for a
// link while the helper runs leads nowhere: the kernel never follows a link
// for it.
//
// A file is first opened O_PATH (which opens no device and never blocks on
// a FIFO), checked (type, links, size), then opened for reading or writing
// by name relative to the same parent with O_NOFOLLOW|O_NONBLOCK and
// accepted only if it is the same inode.
//
// This program is built by fsbackend's go generate step (see
// fsbackend/helper.go) and embedded compressed; keep it small (no fmt).
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Exit codes, as in fsbackend/script.go.
const (
	exitNotFound   = 100
	exitIsDir      = 101
	exitNotDir     = 102
	exitEscape     = 103
	exitDenied     = 104
	exitBinary     = 105
	exitReplaced   = 106
	exitNotRegular = 107
	exitHardLink   = 108
	exitTooLarge   = 109
	exitWrite      = 110
	exitInternal   = 70
	exitArchive    = 74
	exitUsage      = 64
)

// version is reported in the helper= record.
const version = "1"

// indexCap bounds the marks reported, as fsbackend reads at most that much.
const indexCap = 1 << 20

var (
	stdout = bufio.NewWriterSize(os.Stdout, 64<<10)
	stderr = bufio.NewWriterSize(os.Stderr, 16<<10)
)

// rec writes one key=value record.
func rec(k, v string) {
	stderr.WriteString(k)
	stderr.WriteByte('=')
	stderr.WriteString(v)
	stderr.WriteByte(0)
}

type exitError struct {
	code int
	msg  string
}

// die ends the program with code after an error record.
func die(code int, msg string) {
	panic(exitError{code, msg})
}

func main() {
	code := 0
	func() {
		defer func() {
			if v := recover(); v != nil {
				e, ok := v.(exitError)
				if !ok {
					panic(v)
				}
				rec("error", e.msg)
				code = e.code
			}
		}()
		run()
	}()
	stdout.Flush()
	stderr.Flush()
	os.Exit(code)
}

// ident is a file's identity.
type ident struct{ dev, ino uint64 }

func identOf(st *unix.Stat_t) ident { return ident{st.Dev, st.Ino} }

func (i ident) String() string {
	return strconv.FormatUint(i.dev, 10) + "-" + strconv.FormatUint(i.ino, 10)
}

// key is a file's entry name in the binary index, as find -printf
// '%D-%i-%s-%T@' writes it: %T@ has ten fraction digits, the last 0.
func key(st *unix.Stat_t) string {
	ns := strconv.FormatInt(st.Mtim.Nsec, 10)
	ns = strings.Repeat("0", 9-len(ns)) + ns
	return identOf(st).String() + "-" + strconv.FormatInt(st.Size, 10) + "-" + strconv.FormatInt(st.Mtim.Sec, 10) + "." + ns + "0"
}

// state is what every operation shares.
type state struct {
	root    int    // the workspace, O_PATH
	rootID  ident  //
	pbase   string // the workspace's physical path
	meta    string // the metadata directory's name
	metaID  ident  // its identity, zero when absent
	lim     int64
	noOpen2 bool
}

var st state

func env(k string) string { return os.Getenv(k) }

func run() {
	rec("helper", version)
	st.meta = env("SBX_META")
	if st.meta == "" || strings.ContainsAny(st.meta, "/\x00") || st.meta == "." || st.meta == ".." {
		die(exitUsage, "bad metadata directory name")
	}
	st.lim = 33554432
	if v := env("SBX_LIMIT"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			die(exitUsage, "bad limit")
		}
		st.lim = n
	}
	openWorkspace()
	if s, err := fstatat(st.root, st.meta, unix.AT_SYMLINK_NOFOLLOW); err == nil && s.Mode&unix.S_IFMT == unix.S_IFDIR {
		st.metaID = identOf(&s)
	}
	switch op := env("SBX_OP"); op {
	case "pin":
	case "read":
		opRead()
	case "write":
		opWrite()
	case "ls", "walk":
		opList(op == "walk")
	case "grep":
		opGrep()
	case "tar":
		opTar()
	default:
		die(exitUsage, "unknown operation")
	}
}

func fstatat(dir int, name string, flags int) (unix.Stat_t, error) {
	var s unix.Stat_t
	err := ignoringEINTR(func() error { return unix.Fstatat(dir, name, &s, flags) })
	return s, err
}

func fstat(fd int) unix.Stat_t {
	var s unix.Stat_t
	if err := unix.Fstat(fd, &s); err != nil {
		die(exitInternal, "fstat: "+err.Error())
	}
	return s
}

func ignoringEINTR(f func() error) error {
	for {
		if err := f(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// openWorkspace opens the workspace, creating it at first contact, and
// checks it against the pin.
func openWorkspace() {
	base := env("SBX_BASE")
	if !strings.HasPrefix(base, "/") {
		die(exitUsage, "the workspace is not absolute")
	}
	pin, pinFile := env("SBX_PIN"), env("SBX_PINFILE")
	fd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		_, lerr := fstatat(unix.AT_FDCWD, pinFile, unix.AT_SYMLINK_NOFOLLOW)
		if pin != "" || (pinFile != "" && lerr == nil) {
			die(exitReplaced, "the workspace directory is gone")
		}
		_ = os.MkdirAll(base, 0o777)
		if fd, err = unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			die(exitInternal, "workspace directory is unusable")
		}
	}
	s := fstat(fd)
	st.root, st.rootID = fd, identOf(&s)
	id := st.rootID.String()
	// The physical path, from the kernel (getcwd, not $PWD).
	if err := unix.Fchdir(fd); err != nil {
		die(exitInternal, "cannot enter the workspace directory")
	}
	wd, err := unix.Getwd()
	if err != nil || !strings.HasPrefix(wd, "/") {
		die(exitInternal, "cannot name the workspace directory")
	}
	st.pbase = wd
	pinPath := env("SBX_PINPATH")
	if pin == "" && pinFile != "" {
		ps, err := fstatat(unix.AT_FDCWD, pinFile, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case err == nil && ps.Mode&unix.S_IFMT != unix.S_IFREG:
			die(exitReplaced, "the workspace pin is not a regular file")
		case err == nil:
			pin, pinPath = readPin(pinFile)
		default:
			pin = id
			if !writePin(pinFile, id, wd, false) {
				rec("warning", "cannot persist the workspace pin")
			}
		}
	}
	if pin != "" && pin != id {
		repin(base, pinFile, pinPath, &s)
	}
	rec("pin", id)
	rec("pbase", wd)
}

// repin accepts a workspace recreated since it was pinned (its identity
// differs from the pin) when it is a plain directory, not a symbolic link,
// owned by the sandbox user, at the physical path the pin was taken at
// (base itself when the pin does not say), and pins it anew; otherwise it
// dies. The checks are made on the directory held open (s, st.pbase), so a
// swap after them changes nothing: the helper works on what it checked.
func repin(base, pinFile, pinPath string, s *unix.Stat_t) {
	const why = "the workspace directory was replaced"
	if ls, err := fstatat(unix.AT_FDCWD, base, unix.AT_SYMLINK_NOFOLLOW); err == nil && ls.Mode&unix.S_IFMT == unix.S_IFLNK {
		die(exitReplaced, why+" by a symbolic link")
	}
	if s.Mode&unix.S_IFMT != unix.S_IFDIR || int(s.Uid) != unix.Geteuid() {
		die(exitReplaced, why+" by a directory the sandbox user does not own")
	}
	if pinPath == "" {
		pinPath = base
	}
	if st.pbase != pinPath {
		die(exitReplaced, why+" by a directory elsewhere")
	}
	id := st.rootID.String()
	if pinFile != "" && !writePin(pinFile, id, st.pbase, true) {
		rec("warning", "cannot persist the workspace pin")
	}
	rec("repin", id)
}

// readPin reads the pin file: the workspace's identity, and the physical
// path it was pinned at ("" in a pin file that does not say).
func readPin(name string) (pin, pinPath string) {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		die(exitReplaced, "the workspace pin is corrupt")
	}
	defer unix.Close(fd)
	buf := make([]byte, 8192)
	n, _ := unix.Read(fd, buf)
	line, rest, _ := bytes.Cut(buf[:max(n, 0)], []byte{'\n'})
	pin = string(line)
	if pin == "" || strings.Trim(pin, "0123456789-") != "" {
		die(exitReplaced, "the workspace pin is corrupt")
	}
	if p, _, ok := bytes.Cut(rest, []byte{'\n'}); ok && bytes.HasPrefix(p, []byte{'/'}) {
		pinPath = string(p)
	}
	return pin, pinPath
}

// writePin writes the pin file: exclusively at first contact, so that
// concurrent first calls keep the first pin; aside and renamed over the
// old one when replace is set (a re-pin).
func writePin(name, id, pbase string, replace bool) bool {
	tmp := name
	if replace {
		tmp = name + "." + strconv.Itoa(os.Getpid())
	}
	fd, err := unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o666)
	if err != nil {
		return false
	}
	_, err = unix.Write(fd, []byte(id+"\n"+pbase+"\n"))
	unix.Close(fd)
	if err == nil && replace {
		err = unix.Rename(tmp, name)
	}
	if err != nil && replace {
		_ = unix.Unlink(tmp)
	}
	return err == nil
}

// openIn opens one element (no slash, not "..") of a held directory
// without following a link: openat2 with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS, or openat with O_NOFOLLOW where openat2 is missing.
func openIn(dir int, name string, flags int) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	mode := uint32(0)
	if flags&unix.O_CREAT != 0 {
		mode = 0o666
	}
	if !st.noOpen2 {
		var fd int
		err := ignoringEINTR(func() error {
			var e error
			fd, e = unix.Openat2(dir, name, &unix.OpenHow{Flags: uint64(flags), Mode: uint64(mode),
				Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
			return e
		})
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
			if errors.Is(err, unix.EXDEV) {
				err = unix.ELOOP // a way out, refused by the kernel
			}
			return fd, err
		}
		st.noOpen2 = true
	}
	var fd int
	err := ignoringEINTR(func() error {
		var e error
		fd, e = unix.Openat(dir, name, flags, mode)
		return e
	})
	return fd, err
}

// where is a place reached by resolve: the held directories from the
// workspace down, and the last element's name in the last of them ("."
// when the place is that directory), with its identity when it exists.
type where struct {
	opened []int // descriptors resolve opened, for release
	dirs   []int
	name   string
	fd     int // O_PATH of the last element, -1 when it does not exist
	stat   unix.Stat_t
	exists bool
}

func (w *where) dir() int { return w.dirs[len(w.dirs)-1] }

// release closes the descriptors resolve opened.
func (w *where) release() {
	for _, fd := range w.opened {
		unix.Close(fd)
	}
	w.opened = nil
}

func (w *where) atRoot() bool { return len(w.dirs) == 1 }

func splitPath(p string) []string {
	var out []string
	for c := range strings.SplitSeq(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// resolve walks rel from the held directories dirs (the workspace first).
// Directories missing on the way are created when create is set. The last
// element, when it is a link, is followed like the others. It returns an
// exit code on failure.
func resolve(dirs []int, rel string, create bool) (*where, int) {
	w := &where{dirs: dirs, name: ".", fd: -1}
	todo := splitPath(rel)
	hops := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		if c == ".." {
			if w.atRoot() {
				w.release()
				return nil, exitEscape
			}
			w.dirs = w.dirs[:len(w.dirs)-1]
			continue
		}
		if w.atRoot() && c == st.meta {
			w.release()
			return nil, exitEscape
		}
		fd, err := openIn(w.dir(), c, unix.O_PATH)
		if errors.Is(err, unix.ENOENT) && create && len(todo) > 0 {
			// Another writer may create it meanwhile: EEXIST is fine.
			_ = unix.Mkdirat(w.dir(), c, 0o777)
			fd, err = openIn(w.dir(), c, unix.O_PATH)
		}
		if err == nil {
			w.opened = append(w.opened, fd)
		}
		if err != nil {
			if errors.Is(err, unix.ENOENT) && len(todo) == 0 {
				w.name = c
				return w, 0
			}
			w.release()
			switch {
			case errors.Is(err, unix.ENOENT):
				return nil, exitNotFound
			case errors.Is(err, unix.ENOTDIR):
				return nil, exitNotDir
			case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
				return nil, exitDenied
			case errors.Is(err, unix.ENAMETOOLONG):
				return nil, exitEscape
			}
			return nil, exitEscape
		}
		s := fstat(fd)
		if st.metaID != (ident{}) && identOf(&s) == st.metaID {
			w.release()
			return nil, exitEscape
		}
		switch s.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			hops++
			if hops > 40 {
				w.release()
				return nil, exitEscape
			}
			target, err := readlinkFd(fd)
			if err != nil || target == "" {
				w.release()
				return nil, exitNotFound
			}
			if strings.HasPrefix(target, "/") {
				switch {
				case st.pbase == "/":
				case target == st.pbase || strings.HasPrefix(target, st.pbase+"/"):
					target = strings.TrimPrefix(target, st.pbase)
				default:
					w.release()
					return nil, exitEscape
				}
				w.dirs = w.dirs[:1]
			}
			todo = append(splitPath(target), todo...)
			if len(todo) == 0 {
				w.name = "."
			}
		case unix.S_IFDIR:
			w.dirs = append(w.dirs[:len(w.dirs):len(w.dirs)], fd)
			if len(todo) == 0 {
				w.name = "."
				w.fd, w.stat, w.exists = fd, s, true
			}
		default:
			if len(todo) > 0 {
				w.release()
				return nil, exitNotDir
			}
			w.name, w.fd, w.stat, w.exists = c, fd, s, true
		}
	}
	if w.name == "." {
		w.fd, w.exists = w.dir(), true
		w.stat = fstat(w.fd)
	}
	return w, 0
}

func readlinkFd(fd int) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// mustResolve resolves SBX_PATH or dies.
func mustResolve(create bool) *where {
	w, code := resolve([]int{st.root}, env("SBX_PATH"), create)
	if code != 0 {
		die(code, "cannot be reached")
	}
	return w
}

// regular checks that the place is an existing regular file.
func (w *where) regular() {
	switch {
	case w.name == ".":
		die(exitIsDir, "is a directory")
	case !w.exists:
		die(exitNotFound, "not found")
	case w.stat.Mode&unix.S_IFMT == unix.S_IFDIR:
		die(exitIsDir, "is a directory")
	case w.stat.Mode&unix.S_IFMT != unix.S_IFREG:
		die(exitNotRegular, "not a regular file")
	}
}

// reopen opens the checked file for I/O by name in its held parent and
// requires the same inode.
func (w *where) reopen(flags int) *os.File {
	fd, err := openIn(w.dir(), w.name, flags|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		switch {
		case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EROFS):
			die(exitDenied, "permission denied")
		case errors.Is(err, unix.EISDIR):
			die(exitIsDir, "is a directory")
		}
		die(exitEscape, "changed while it was being opened")
	}
	s := fstat(fd)
	if s.Mode&unix.S_IFMT != unix.S_IFREG || (w.exists && identOf(&s) != identOf(&w.stat)) {
		die(exitEscape, "changed while it was being opened")
	}
	w.stat = s
	return os.NewFile(uintptr(fd), w.name)
}

// prove reports whether all links of the file are regular files under the
// workspace, outside the metadata directory.
func prove(s *unix.Stat_t) bool {
	want, n := identOf(s), uint64(0)
	walkTree(st.root, "", func(dir int, name, rel string, es *unix.Stat_t) bool {
		if es.Mode&unix.S_IFMT == unix.S_IFREG && identOf(es) == want {
			n++
		}
		return true
	}, nil)
	return n == uint64(s.Nlink)
}

// walkTree visits every entry under the directory dir (rel is its path
// prefix, "" for the place itself) in depth-first order without following
// links, passing over the metadata directory; visit returns false to stop.
// It reports whether the walk ran to the end. denied (if not nil) is
// told of each entry the walk could not read: a directory it could not
// open or list (rel "" for dir itself), an entry it could not stat.
func walkTree(dir int, rel string, visit func(dir int, name, rel string, s *unix.Stat_t) bool, denied func(rel string, isDir bool)) bool {
	if denied == nil {
		denied = func(string, bool) {}
	}
	fd, err := openIn(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		if !errors.Is(err, unix.ENOENT) {
			denied(rel, true)
		}
		return true
	}
	f := os.NewFile(uintptr(fd), "dir")
	defer f.Close()
	ds := fstat(fd)
	names, err := f.Readdirnames(-1)
	if err != nil {
		denied(rel, true)
	}
	for _, name := range names {
		if identOf(&ds) == st.rootID && name == st.meta {
			continue
		}
		s, err := fstatat(fd, name, unix.AT_SYMLINK_NOFOLLOW)
		if err != nil {
			if !errors.Is(err, unix.ENOENT) {
				p := name
				if rel != "" {
					p = rel + "/" + name
				}
				denied(p, false)
			}
			continue
		}
		if s.Mode&unix.S_IFMT == unix.S_IFDIR && st.metaID != (ident{}) && identOf(&s) == st.metaID {
			continue
		}
		p := name
		if rel != "" {
			p = rel + "/" + name
		}
		if !visit(fd, name, p, &s) {
			return false
		}
		if s.Mode&unix.S_IFMT == unix.S_IFDIR {
			sub, err := openIn(fd, name, unix.O_PATH|unix.O_DIRECTORY)
			if err != nil {
				if !errors.Is(err, unix.ENOENT) {
					denied(p, true)
				}
				continue
			}
			ok := walkTree(sub, p, visit, denied)
			unix.Close(sub)
			if !ok {
				return false
			}
		}
	}
	return true
}

// metaDir opens the metadata directory's subdirectory sub without
// following links (-1 when absent).
func metaDir(sub string) int {
	m, err := openIn(st.root, st.meta, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1
	}
	defer unix.Close(m)
	d, err := openIn(m, sub, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1
	}
	return d
}

// marked reports whether k is in the binary index.
func marked(k string) bool {
	d := metaDir("binary")
	if d < 0 {
		return false
	}
	defer unix.Close(d)
	s, err := fstatat(d, k, unix.AT_SYMLINK_NOFOLLOW)
	return err == nil && s.Mode&unix.S_IFMT == unix.S_IFREG
}

// marks reports the index's entries, one mark= record each, at most
// indexCap bytes of them, and returns them.
func marks() map[string]bool {
	set := map[string]bool{}
	d := metaDir("binary")
	if d < 0 {
		return set
	}
	defer unix.Close(d)
	total := 0
	walkDir(d, func(dir int, name string, s *unix.Stat_t) bool {
		if s.Mode&unix.S_IFMT != unix.S_IFREG {
			return true
		}
		rec("mark", name)
		set[name] = true
		total += len("mark=") + len(name) + 1
		return total < indexCap
	})
	return set
}

// walkDir visits the entries of one directory.
func walkDir(dir int, visit func(dir int, name string, s *unix.Stat_t) bool) {
	fd, err := openIn(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "dir")
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	for _, name := range names {
		s, err := fstatat(fd, name, unix.AT_SYMLINK_NOFOLLOW)
		if err == nil && !visit(fd, name, &s) {
			return
		}
	}
}

// index opens (creating or repairing it) the metadata subdirectory sub,
// for writing; -1 when it cannot.
func index(sub string) int {
	dir := st.root
	for i, name := range []string{st.meta, sub} {
		s, err := fstatat(dir, name, unix.AT_SYMLINK_NOFOLLOW)
		if err == nil && s.Mode&unix.S_IFMT != unix.S_IFDIR {
			_ = unix.Unlinkat(dir, name, 0)
		}
		if err != nil || s.Mode&unix.S_IFMT != unix.S_IFDIR {
			_ = unix.Mkdirat(dir, name, 0o777)
			s, err = fstatat(dir, name, unix.AT_SYMLINK_NOFOLLOW)
		}
		if err == nil && s.Mode&unix.S_IFMT == unix.S_IFDIR && s.Mode&0o700 != 0o700 {
			_ = unix.Fchmodat(dir, name, (s.Mode&0o7777)|0o700, 0)
		}
		fd, err := openIn(dir, name, unix.O_RDONLY|unix.O_DIRECTORY)
		if i > 0 {
			unix.Close(dir)
		}
		if err != nil {
			return -1
		}
		dir = fd
	}
	return dir
}

func opRead() {
	w := mustResolve(false)
	w.regular()
	f := w.reopen(unix.O_RDONLY)
	if w.stat.Nlink > 1 && !prove(&w.stat) {
		die(exitHardLink, "has other hard links")
	}
	window := false
	if w.stat.Size > st.lim {
		if env("SBX_LINES") != "1" {
			die(exitTooLarge, "too large")
		}
		window = true
	}
	if marked(key(&w.stat)) {
		if env("SBX_TEXT") == "1" {
			die(exitBinary, "binary")
		}
		rec("binary", "1")
	}
	if window {
		readWindow(f)
		return
	}
	if _, err := io.Copy(stdout, io.LimitReader(f, st.lim+1)); err != nil {
		die(exitDenied, "read: "+errText(err))
	}
}

// readWindow streams a file larger than the cap: it writes the lines
// SBX_FROM (1-based) to SBX_FROM+SBX_COUNT-1, at most the cap and a byte
// of them, and records window=1 and lines=<the file's line count>.
func readWindow(f *os.File) {
	num := func(k string, def int64) int64 {
		n, err := strconv.ParseInt(env(k), 10, 64)
		if err != nil || n < 1 {
			return def
		}
		return n
	}
	from, count := num("SBX_FROM", 1), num("SBX_COUNT", 2000)
	r := bufio.NewReaderSize(f, 256<<10)
	var total, written int64
	ended := true // the last byte read was a newline (or none was read)
	for {
		chunk, err := r.ReadSlice('\n')
		if len(chunk) > 0 {
			if line := total + 1; line >= from && line-from < count && written <= st.lim {
				part := chunk[:min(int64(len(chunk)), st.lim+1-written)]
				stdout.Write(part)
				written += int64(len(part))
			}
			ended = chunk[len(chunk)-1] == '\n'
			if ended {
				total++
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			die(exitDenied, "read: "+errText(err))
		}
	}
	if !ended {
		total++
	}
	rec("window", "1")
	rec("lines", strconv.FormatInt(total, 10))
}

func errText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return err.Error()
}

func opWrite() {
	w := mustResolve(true)
	if w.name == "." {
		die(exitIsDir, "is a directory")
	}
	var f *os.File
	if w.exists {
		w.regular()
	} else {
		// A new file is created exclusively (O_EXCL follows no link) and
		// written through the descriptor that created it.
		fd, err := openIn(w.dir(), w.name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NONBLOCK)
		switch {
		case err == nil:
			f = os.NewFile(uintptr(fd), w.name)
			w.stat, w.exists = fstat(fd), true
		case errors.Is(err, unix.EEXIST):
			// Made meanwhile: the checks after the open decide.
		case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EROFS):
			die(exitDenied, "permission denied")
		default:
			die(exitWrite, errText(err))
		}
	}
	if f == nil {
		f = w.reopen(unix.O_RDWR)
	}
	if w.stat.Nlink > 1 && !prove(&w.stat) {
		die(exitHardLink, "has other hard links")
	}
	old := key(&w.stat)
	if err := f.Truncate(0); err != nil {
		die(exitWrite, errText(err))
	}
	if _, err := io.Copy(f, os.Stdin); err != nil {
		die(exitWrite, errText(err))
	}
	now := fstat(int(f.Fd()))
	if env("SBX_BINARY") == "1" {
		d := index("binary")
		ok := d >= 0
		if ok {
			k := key(&now)
			if s, err := fstatat(d, k, unix.AT_SYMLINK_NOFOLLOW); err == nil && s.Mode&unix.S_IFMT != unix.S_IFREG {
				removeAll(d, k)
			}
			fd, err := openIn(d, k, unix.O_WRONLY|unix.O_CREAT|unix.O_NONBLOCK)
			ok = err == nil
			if ok {
				unix.Close(fd)
			}
		}
		if !ok {
			rec("warning", "cannot record the binary mark")
		}
	}
	if old != key(&now) && marked(old) {
		if d := metaDir("binary"); d >= 0 {
			_ = unix.Unlinkat(d, old, 0)
			unix.Close(d)
		}
	}
}

// removeAll removes name in dir, a directory tree included, without
// following links.
func removeAll(dir int, name string) {
	if unix.Unlinkat(dir, name, 0) == nil {
		return
	}
	if sub, err := openIn(dir, name, unix.O_PATH|unix.O_DIRECTORY); err == nil {
		walkDir(sub, func(d int, n string, s *unix.Stat_t) bool {
			if s.Mode&unix.S_IFMT == unix.S_IFDIR {
				removeAll(d, n)
			} else {
				_ = unix.Unlinkat(d, n, 0)
			}
			return true
		})
		unix.Close(sub)
	}
	_ = unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
}

// intoDir makes a place a directory's or dies.
func (w *where) intoDir() {
	if w.name == "." {
		return
	}
	if !w.exists {
		die(exitNotFound, "not found")
	}
	if w.stat.Mode&unix.S_IFMT != unix.S_IFDIR {
		die(exitNotDir, "not a directory")
	}
}

// limited is stdout bounded at lim+1 bytes: past that the backend only
// learns that the output was cut.
type limited struct{ n int64 }

func (l *limited) write(b []byte) bool {
	if l.n > st.lim {
		return false
	}
	stdout.Write(b)
	l.n += int64(len(b))
	return l.n <= st.lim
}

func typeLetter(m uint32) byte {
	switch m & unix.S_IFMT {
	case unix.S_IFREG:
		return 'f'
	case unix.S_IFDIR:
		return 'd'
	case unix.S_IFLNK:
		return 'l'
	case unix.S_IFIFO:
		return 'p'
	case unix.S_IFSOCK:
		return 's'
	case unix.S_IFCHR:
		return 'c'
	case unix.S_IFBLK:
		return 'b'
	}
	return 'U'
}

func mtime(s *unix.Stat_t) string {
	ns := strconv.FormatInt(s.Mtim.Nsec, 10)
	return strconv.FormatInt(s.Mtim.Sec, 10) + "." + strings.Repeat("0", 9-len(ns)) + ns + "0"
}

func opList(recursive bool) {
	w := mustResolve(false)
	w.intoDir()
	if fd, err := openIn(w.dir(), ".", unix.O_RDONLY|unix.O_DIRECTORY); err != nil {
		die(exitDenied, "permission denied")
	} else {
		unix.Close(fd)
	}
	var out limited
	var line []byte
	emit := func(dir int, name, rel string, s *unix.Stat_t) bool {
		y := typeLetter(s.Mode)
		yy := y
		if y == 'l' {
			yy = 'N'
			// The link's target type, resolved inside the workspace only.
			held := append([]int(nil), w.dirs...)
			if t, code := resolve(held, rel, false); code == 0 {
				if t.exists {
					yy = typeLetter(t.stat.Mode)
				}
				t.release()
			}
		}
		line = append(line[:0], y, yy, ' ')
		line = strconv.AppendInt(line, s.Size, 10)
		line = append(line, ' ')
		line = append(line, mtime(s)...)
		line = append(line, " ./"...)
		line = append(line, rel...)
		line = append(line, 0)
		return out.write(line)
	}
	if recursive {
		// A directory that cannot be opened is marked with a "!d"
		// entry, as the shell path does.
		walkTree(w.dir(), "", emit, func(rel string, isDir bool) {
			if rel == "" || !isDir {
				return
			}
			line = append(line[:0], "!d 0 0 ./"...)
			line = append(line, rel...)
			line = append(line, 0)
			out.write(line)
		})
		return
	}
	ds := fstat(w.dir())
	walkDir(w.dir(), func(dir int, name string, s *unix.Stat_t) bool {
		if identOf(&ds) == st.rootID && name == st.meta {
			return true
		}
		return emit(dir, name, name, s)
	})
}

// fileRec writes the f= record of a regular file.
func fileRec(s *unix.Stat_t, rel string) {
	rec("f", strconv.FormatUint(uint64(s.Nlink), 10)+" "+strconv.FormatInt(s.Size, 10)+" "+key(s)+" ./"+rel)
}

// contentOf reads a regular file met in a walk, by name in its held
// directory, if it is still the same inode, has one link and fits the
// limit; ok is false otherwise, and unreadable is true when it could not
// be opened or read (for lack of permission, or an I/O error).
func contentOf(dir int, name string, s *unix.Stat_t) (data []byte, ok, unreadable bool) {
	if s.Nlink > 1 || s.Size > st.lim {
		return nil, false, false
	}
	fd, err := openIn(dir, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, false, !errors.Is(err, unix.ENOENT)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	now := fstat(fd)
	if now.Mode&unix.S_IFMT != unix.S_IFREG || identOf(&now) != identOf(s) || now.Nlink > 1 {
		return nil, false, false
	}
	data, err = io.ReadAll(io.LimitReader(f, st.lim+1))
	if err != nil {
		return nil, false, true
	}
	if int64(len(data)) > st.lim {
		return nil, false, false
	}
	return data, true, false
}

// grepOpts are the search's options: the line matcher, the cap on
// matches per file (0: none) and the context lines.
type grepOpts struct {
	match         func([]byte) bool
	max           int
	before, after int
}

// grepOptions reads the search's options: SBX_PATTERN, a literal unless
// SBX_REGEX=1 (Go's regexp, RE2 syntax), SBX_ICASE=1 to ignore case,
// SBX_MAX, SBX_BEFORE and SBX_AFTER.
func grepOptions() grepOpts {
	num := func(k string) int {
		n, _ := strconv.Atoi(env(k))
		return max(n, 0)
	}
	o := grepOpts{max: num("SBX_MAX"), before: num("SBX_BEFORE"), after: num("SBX_AFTER")}
	pattern := env("SBX_PATTERN")
	regex, icase := env("SBX_REGEX") == "1", env("SBX_ICASE") == "1"
	if !regex && !icase {
		p := []byte(pattern)
		o.match = func(l []byte) bool { return bytes.Contains(l, p) }
		return o
	}
	if !regex {
		pattern = regexp.QuoteMeta(pattern)
	}
	if icase {
		pattern = "(?i)" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		die(exitUsage, "invalid regular expression: "+err.Error())
	}
	o.match = re.Match
	return o
}

// grepData writes the lines of data that match, as grep -H -n --null
// does, at most o.max of them (0: all), with o.before and o.after lines
// of context ("<name>\0<n>-<text>", each line once, no group separators);
// it skips data holding a NUL byte, as grep -I does. It returns false
// when the output is full.
func grepData(out *limited, name string, data []byte, o grepOpts) bool {
	if bytes.IndexByte(data, 0) >= 0 {
		return true
	}
	n, found, pendingAfter := 0, 0, 0
	var line []byte
	var prev [][]byte // the lines just before this one not yet written, at most o.before
	emit := func(num int, l []byte, mark byte) bool {
		line = append(line[:0], name...)
		line = append(line, 0)
		line = strconv.AppendInt(line, int64(num), 10)
		line = append(line, mark)
		line = append(line, l...)
		line = append(line, '\n')
		return out.write(line)
	}
	for len(data) > 0 {
		l, rest, _ := bytes.Cut(data, []byte{'\n'})
		data = rest
		n++
		if o.max > 0 && found >= o.max {
			// The trailing context of the last match is still written.
			if pendingAfter > 0 && !o.match(l) {
				pendingAfter--
				if !emit(n, l, '-') {
					return false
				}
				continue
			}
			return true
		}
		if !o.match(l) {
			switch {
			case pendingAfter > 0:
				pendingAfter--
				if !emit(n, l, '-') {
					return false
				}
			case o.before > 0:
				if len(prev) == o.before {
					prev = prev[1:]
				}
				prev = append(prev, l)
			}
			continue
		}
		for i, pl := range prev {
			if !emit(n-len(prev)+i, pl, '-') {
				return false
			}
		}
		prev = prev[:0]
		if !emit(n, l, ':') {
			return false
		}
		found++
		pendingAfter = o.after
	}
	return true
}

func opGrep() {
	w := mustResolve(false)
	o := grepOptions()
	var out limited
	if w.name != "." && w.exists && w.stat.Mode&unix.S_IFMT != unix.S_IFDIR {
		rec("kind", "file")
		w.regular()
		set := marks()
		f := w.reopen(unix.O_RDONLY)
		fileRec(&w.stat, w.name)
		if set[key(&w.stat)] || w.stat.Nlink > 1 || w.stat.Size > st.lim {
			return
		}
		data, err := io.ReadAll(io.LimitReader(f, st.lim+1))
		if err == nil && int64(len(data)) <= st.lim {
			grepData(&out, "./"+w.name, data, o)
		}
		return
	}
	w.intoDir()
	if fd, err := openIn(w.dir(), ".", unix.O_RDONLY|unix.O_DIRECTORY); err != nil {
		die(exitDenied, "permission denied")
	} else {
		unix.Close(fd)
	}
	rec("kind", "dir")
	set := marks()
	full := false
	// What cannot be read is reported (u=d, u=f), never silently left out.
	denied := func(rel string, isDir bool) {
		if rel == "" {
			rel = "."
		}
		kind := "f "
		if isDir {
			kind = "d "
		}
		rec("u", kind+"./"+rel)
	}
	walkTree(w.dir(), "", func(dir int, name, rel string, s *unix.Stat_t) bool {
		if s.Mode&unix.S_IFMT != unix.S_IFREG {
			return true
		}
		fileRec(s, rel)
		if full || set[key(s)] {
			return true
		}
		data, ok, unreadable := contentOf(dir, name, s)
		if ok {
			full = !grepData(&out, "./"+rel, data, o)
		} else if unreadable {
			denied(rel, false)
		}
		return true
	}, denied)
}

func opTar() {
	tmp := index("tmp")
	if tmp < 0 {
		die(exitArchive, "cannot create the archive directory")
	}
	name, f := "", (*os.File)(nil)
	for range 100 {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
		for i := range b {
			b[i] = letters[int(b[i])%len(letters)]
		}
		name = "snapshot." + string(b)
		fd, err := openIn(tmp, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL)
		if err == nil {
			f = os.NewFile(uintptr(fd), name)
			break
		}
		if !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	if f == nil {
		die(exitArchive, "cannot create the archive file")
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	tw := tar.NewWriter(bw)
	var werr error
	walkTree(st.root, "", func(dir int, n, rel string, s *unix.Stat_t) bool {
		if s.Mode&unix.S_IFMT != unix.S_IFREG {
			return true
		}
		data, ok, _ := contentOf(dir, n, s)
		if !ok {
			fileRec(s, rel) // passed over: the backend says so
			return true
		}
		fileRec(s, rel)
		werr = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Size: int64(len(data)), Mode: 0o644, Format: tar.FormatPAX})
		if werr == nil {
			_, werr = tw.Write(data)
		}
		return werr == nil
	}, nil)
	if werr == nil {
		werr = tw.Close()
	}
	if werr == nil {
		werr = bw.Flush()
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		_ = unix.Unlinkat(tmp, name, 0)
		die(exitArchive, "cannot write the archive: "+errText(werr))
	}
	marks()
	p := st.pbase + "/" + st.meta + "/tmp/" + name
	if st.pbase == "/" {
		p = "/" + st.meta + "/tmp/" + name
	}
	rec("tar", p)
}
