package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/sberrors"
)

// The exit codes of fsScript.
const (
	fsOK       = 0
	fsOther    = 1
	fsNotFound = 2
	fsIsDir    = 3
	fsNotDir   = 4
	fsDenied   = 5
	fsInvalid  = 6 // EINVAL (a directory moved into itself), ENAMETOOLONG
)

// fsScript runs one file operation as the sandbox's user, so the file
// methods see the file system with the permissions of its commands. It
// reports the kind of failure through its exit code (see the fs*
// constants) and a message on its output.
const fsScript = `op=$1; shift
anc() { _q=$1; while :; do _q=${_q%/*}; [ -z "$_q" ] && return 0; if [ -e "$_q" ] && [ ! -d "$_q" ]; then return 4; fi; done; }
fail() { echo "$1"; case $1 in *ermission*|*ead-only*|*"ot permitted"*) exit 5;; *"nvalid argument"*|*"too long"*) exit 6;; esac; exit 1; }
mkd() { [ -d "$1" ] && return 0; if [ -e "$1" ]; then exit 4; fi; anc "$1" || exit 4; err=$(mkdir -p -- "$1" 2>&1) || fail "$err"; }
case $op in
mkdir) mkd "$1" ;;
put)
  p=$1 tmp=$2 d=${1%/*}; d=${d:-/}
  if [ -d "$p" ]; then exit 3; fi
  anc "$p" || exit 4
  mkd "$d"
  [ -w "$d" ] || exit 5
  err=$(cat >"$tmp" 2>&1) || { rm -f -- "$tmp"; fail "$err"; } ;;
commit)
  err=$(mv -f -- "$1" "$2" 2>&1) || { rm -f -- "$1"; if [ -d "$2" ]; then exit 3; fi; fail "$err"; } ;;
drop) rm -f -- "$1" ;;
read)
  [ -r "$1" ] && exit 0
  d=${1%/*}; [ -x "${d:-/}" ] || exit 5
  if [ ! -e "$1" ] && [ ! -L "$1" ]; then anc "$1" || exit 4; exit 2; fi
  exit 5 ;;
rm)
  if [ ! -e "$1" ] && [ ! -L "$1" ]; then anc "$1" || exit 4; exit 2; fi
  err=$(rm -rf -- "$1" 2>&1) || fail "$err" ;;
mv)
  a=$1 b=$2 pb=${2%/*}
  if [ ! -e "$a" ] && [ ! -L "$a" ]; then anc "$a" || exit 4; exit 2; fi
  anc "$b" || exit 4
  [ -d "${pb:-/}" ] || exit 2
  if [ -d "$b" ] && [ ! -L "$b" ]; then
    [ -d "$a" ] || exit 3
    rmdir -- "$b" 2>/dev/null
  fi
  err=$(mv -f -- "$a" "$b" 2>&1) || fail "$err" ;;
ls)
  if [ ! -e "$1" ]; then anc "$1" || exit 4; exit 2; fi
  [ -d "$1" ] || exit 4
  cd -- "$1" 2>/dev/null && [ -r . ] || exit 5
  for f in * .*; do
    case $f in .|..) continue ;; esac
    if [ -e "$f" ] || [ -L "$f" ]; then stat -c '%f %s %y' -- "$f" && printf '%s\0' "$f"; fi
  done ;;
*) echo "unknown op $op"; exit 1 ;;
esac
exit 0`

// fsOp runs fsScript's op and maps its exit code onto the sandbox errors.
func (r *Runtime) fsOp(ctx context.Context, id, op string, stdin io.Reader, stdout io.Writer, args ...string) error {
	spec := append([]string{"/bin/sh", "-c", fsScript, "sbx", op}, args...)
	att, execID, done, err := r.startExec(ctx, id, client.ExecCreateOptions{Cmd: spec, AttachStdout: true, AttachStderr: true, AttachStdin: stdin != nil})
	if err != nil {
		return r.wrap(ctx, op, err)
	}
	defer done()
	defer att.Close()
	stop := context.AfterFunc(ctx, func() { att.Conn.Close() })
	defer stop()
	var (
		wg     sync.WaitGroup
		inErr  error // an error of stdin itself, not of the connection
		msg    limitedBuffer
		outErr error
	)
	if stdin != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := &errReader{r: stdin}
			if _, err := io.Copy(att.Conn, src); err != nil {
				if src.err == nil {
					return // the script ended first: its exit code says why
				}
				inErr = src.err
				// Not CloseWrite: the script must not take a short
				// input for the whole; the caller drops the file.
				att.Conn.Close()
				return
			}
			att.CloseWrite()
		}()
	}
	out := stdout
	if out == nil {
		out = &msg
	}
	_, outErr = stdcopy.StdCopy(out, &msg, att.Reader)
	att.Close()
	wg.Wait()
	if ctx.Err() != nil {
		return fmt.Errorf("docker: %s: %w", op, ctx.Err())
	}
	if inErr != nil {
		return fmt.Errorf("docker: %s: reading the content: %w", op, inErr)
	}
	if outErr != nil {
		return fmt.Errorf("docker: %s: %v: %w", op, outErr, sberrors.ErrOutcomeUnknown)
	}
	code, err := r.execExit(ctx, execID)
	if err != nil {
		return err
	}
	detail := strings.TrimSpace(msg.String())
	if detail != "" {
		detail = ": " + detail
	}
	switch code {
	case fsOK:
		return nil
	case fsNotFound:
		return fmt.Errorf("docker: %s %q: no such file or directory: %w", op, args[0], sberrors.ErrNotFound)
	case fsIsDir:
		return fmt.Errorf("docker: %s %q: is a directory: %w", op, args[len(args)-1], sberrors.ErrIsDirectory)
	case fsNotDir:
		return fmt.Errorf("docker: %s %q: not a directory%s: %w", op, args[0], detail, sberrors.ErrNotDirectory)
	case fsDenied:
		return fmt.Errorf("docker: %s %q: permission denied%s: %w", op, args[0], detail, sberrors.ErrPermission)
	case fsInvalid:
		return sberrors.Errorf(sberrors.InvalidArgument, "docker: %s %q%s", op, iox.Shorten(args[0], 64), iox.Shorten(detail, 512))
	}
	return fmt.Errorf("docker: %s %q: exit %d%s", op, args[0], code, detail)
}

// Upload streams r into a temporary file beside path, written by the
// sandbox's user through an exec's stdin, then renames it over path with
// `mv -f` as that user: atomic, and with the permissions of the sandbox's
// commands. (CopyToContainer would need the size before the bytes, as a
// tar header does, and writes as root.)
func (r *Runtime) Upload(ctx context.Context, id, p string, rd io.Reader) error {
	tmp := path.Join(path.Dir(p), ".sandboxkit-upload-"+newToken())
	if err := r.fsOp(ctx, id, "put", rd, nil, p, tmp); err != nil {
		r.dropTemp(id, tmp)
		if errors.Is(err, sberrors.ErrIsDirectory) {
			return fmt.Errorf("docker: upload %q: is a directory: %w", p, sberrors.ErrIsDirectory)
		}
		return err
	}
	if err := r.fsOp(ctx, id, "commit", nil, nil, tmp, p); err != nil {
		r.dropTemp(id, tmp)
		if errors.Is(err, sberrors.ErrIsDirectory) {
			return fmt.Errorf("docker: upload %q: is a directory: %w", p, sberrors.ErrIsDirectory)
		}
		return err
	}
	return nil
}

// dropTemp removes an upload's temporary file after a failure, on its own
// deadline since the caller's ctx may have ended.
func (r *Runtime) dropTemp(id, tmp string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.fsOp(ctx, id, "drop", nil, nil, tmp)
}

// Download streams the file at path out of the container's archive
// endpoint: a tar stream, read entry by entry, never buffered whole.
func (r *Runtime) Download(ctx context.Context, id, p string) (io.ReadCloser, error) {
	fi, err := r.Stat(ctx, id, p)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("docker: download %q: %w", p, sberrors.ErrIsDirectory)
	}
	// The engine's archive endpoint reads as root: ask the sandbox's user
	// first, so a file its commands may not read is PermissionDenied here
	// too (one exec more per download).
	if err := r.fsOp(ctx, id, "read", nil, nil, p); err != nil {
		return nil, err
	}
	res, err := r.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: fi.Path})
	if err != nil {
		return nil, r.wrapPath(ctx, "download", p, err)
	}
	tr := tar.NewReader(res.Content)
	for {
		h, err := tr.Next()
		if err != nil {
			res.Content.Close()
			if err == io.EOF {
				return nil, fmt.Errorf("docker: download %q: the engine's archive held no file: %w", p, sberrors.ErrNotFound)
			}
			return nil, fmt.Errorf("docker: download %q: %v: %w", p, err, sberrors.ErrUnavailable)
		}
		if h.Typeflag == tar.TypeReg {
			return &tarFile{r: tr, c: res.Content}, nil
		}
		if h.Typeflag == tar.TypeDir {
			res.Content.Close()
			return nil, fmt.Errorf("docker: download %q: %w", p, sberrors.ErrIsDirectory)
		}
	}
}

// errReader records the error of its reader (not io.EOF).
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

type tarFile struct {
	r io.Reader
	c io.Closer
}

func (t *tarFile) Read(p []byte) (int, error) { return t.r.Read(p) }
func (t *tarFile) Close() error               { return t.c.Close() }

func (r *Runtime) wrapPath(ctx context.Context, op, p string, err error) error {
	return r.wrap(ctx, fmt.Sprintf("%s %q", op, p), err)
}

// Stat describes path through the engine's archive endpoint, following
// symbolic links (up to 40, as the kernel does).
func (r *Runtime) Stat(ctx context.Context, id, p string) (driver.FileInfo, error) {
	if err := r.owns(ctx, id); err != nil {
		return driver.FileInfo{}, err
	}
	cur := p
	for range 40 {
		res, err := r.cli.ContainerStatPath(ctx, id, client.ContainerStatPathOptions{Path: cur})
		if err != nil {
			return driver.FileInfo{}, r.wrapPath(ctx, "stat", p, err)
		}
		st := res.Stat
		if st.Mode&fs.ModeSymlink == 0 {
			return driver.FileInfo{Path: cur, Size: st.Size, Mode: st.Mode, ModTime: st.Mtime.UTC()}, nil
		}
		next := st.LinkTarget
		if !strings.HasPrefix(next, "/") {
			next = path.Join(path.Dir(cur), next)
		}
		if next == cur {
			break
		}
		cur = next
	}
	return driver.FileInfo{}, fmt.Errorf("docker: stat %q: too many levels of symbolic links: %w", p, sberrors.ErrInvalidArgument)
}

// ReadDir lists a directory as the sandbox's user sees it, in one exec.
func (r *Runtime) ReadDir(ctx context.Context, id, p string) ([]driver.FileInfo, error) {
	var out bytes.Buffer
	if err := r.fsOp(ctx, id, "ls", nil, &out, p); err != nil {
		return nil, err
	}
	var list []driver.FileInfo
	b := out.Bytes()
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			return nil, fmt.Errorf("docker: readdir %q: malformed listing: %w", p, sberrors.ErrInternal)
		}
		fields := strings.Fields(string(b[:nl]))
		b = b[nl+1:]
		nul := bytes.IndexByte(b, 0)
		if nul < 0 || len(fields) != 5 {
			return nil, fmt.Errorf("docker: readdir %q: malformed listing: %w", p, sberrors.ErrInternal)
		}
		name := string(b[:nul])
		b = b[nul+1:]
		raw, _ := strconv.ParseUint(fields[0], 16, 32)
		size, _ := strconv.ParseInt(fields[1], 10, 64)
		mtime, _ := time.Parse("2006-01-02 15:04:05.999999999 -0700", strings.Join(fields[2:], " "))
		list = append(list, driver.FileInfo{Path: path.Join(p, name), Size: size, Mode: iox.UnixMode(uint32(raw)), ModTime: mtime.UTC()})
	}
	slices.SortFunc(list, func(a, b driver.FileInfo) int { return strings.Compare(a.Path, b.Path) })
	return list, nil
}

// MkdirAll creates a directory and its parents as the sandbox's user.
func (r *Runtime) MkdirAll(ctx context.Context, id, p string) error {
	return r.fsOp(ctx, id, "mkdir", nil, nil, p)
}

// Remove removes path (recursively) as the sandbox's user.
func (r *Runtime) Remove(ctx context.Context, id, p string) error {
	return r.fsOp(ctx, id, "rm", nil, nil, p)
}

// Rename moves oldPath to newPath as the sandbox's user, replacing a file
// (or an empty directory, when oldPath is a directory) at newPath.
func (r *Runtime) Rename(ctx context.Context, id, oldPath, newPath string) error {
	return r.fsOp(ctx, id, "mv", nil, nil, oldPath, newPath)
}
