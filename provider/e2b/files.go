package e2b

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/pathsafe"
	"github.com/sandboxkit/sandbox/internal/wire"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/filesystem"
	"github.com/sandboxkit/sandbox/sberrors"
)

// filesURL returns envd's /files URL for p.
func (r *Runtime) filesURL(id string, c *conn, p string) string {
	q := url.Values{"path": {p}}
	if r.cfg.user != "" {
		q.Set("username", r.cfg.user)
	}
	return r.envdBase(id, c) + "/files?" + q.Encode()
}

// filesErr classifies a /files error response or transport failure.
func (r *Runtime) filesErr(ctx context.Context, op, id, p string, a *wire.Attempt, err error) error {
	var se *statusError
	if errors.As(err, &se) && se.Status != http.StatusBadGateway {
		return r.statusErr(op, p, se.Status, se.Message)
	}
	return r.envdErr(ctx, op, id, a, err)
}

func (r *Runtime) statusErr(op, p string, status int, msg string) error {
	switch {
	case status == http.StatusBadRequest && strings.Contains(msg, "is a directory"):
		return fmt.Errorf("e2b: %s %s: %s: %w", op, p, msg, sberrors.ErrIsDirectory)
	case strings.Contains(msg, "path is a file") || strings.Contains(msg, "not a directory"):
		return fmt.Errorf("e2b: %s %s: %s: %w", op, p, msg, sberrors.ErrNotDirectory)
	case status == http.StatusInternalServerError && deniedMsg(msg):
		// envd's open or mkdir failed with EACCES, EPERM or EROFS.
		return sberrors.Errorf(sberrors.PermissionDenied, "e2b: %s %s: %s", op, p, msg)
	}
	return sberrors.Errorf(codeForStatus(status), "e2b: %s %s: HTTP %d: %s", op, p, status, msg)
}

func readErrBody(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Message string `json:"message"`
	}
	if decode("", b, &e) == nil && e.Message != "" {
		return e.Message
	}
	return strings.TrimSpace(string(b))
}

// Upload streams src to p and replaces p atomically: envd writes a file
// in place, so the bytes go to a temporary name next to p (see
// pathsafe.TempSibling) and the filesystem Move RPC, a rename(2) that
// replaces an existing file, puts them at p after the last byte. On any
// failure the temporary file is removed (best effort, bounded) and p is
// left as it was.
func (r *Runtime) Upload(ctx context.Context, id, p string, src io.Reader) error {
	c, err := r.conn(ctx, id)
	if err != nil {
		return err
	}
	if err := r.mayCreate(ctx, id, c, "upload", p, path.Dir(p), p, false); err != nil {
		return err
	}
	tmp := pathsafe.TempSibling(p)
	err = r.put(ctx, id, c, p, tmp, src)
	if err == nil {
		err = r.replace(ctx, id, c, tmp, p)
	}
	if err != nil && mayHaveWritten(err) {
		r.removeTemp(ctx, id, c, tmp)
	}
	return err
}

// mayHaveWritten reports whether an upload that failed with err may have
// left its temporary file behind: not when the request never reached envd
// or envd refused it before opening the file.
func mayHaveWritten(err error) bool {
	return !errors.Is(err, sberrors.ErrStaleTransport) && !errors.Is(err, sberrors.ErrNotDirectory) &&
		!errors.Is(err, sberrors.ErrPaused) && sberrors.CodeOf(err) != sberrors.NotFound &&
		sberrors.CodeOf(err) != sberrors.PermissionDenied
}

// replace renames the uploaded temporary file tmp over p with envd's Move,
// which replaces a file (os.Rename) but not a directory: Go's os.Rename
// answers EEXIST ("file exists") when p is one.
func (r *Runtime) replace(ctx context.Context, id string, c *conn, tmp, p string) error {
	const op = "upload"
	req := connect.NewRequest(&filesystem.MoveRequest{Source: tmp, Destination: p})
	r.setEnvdHeaders(req.Header(), id, c)
	tctx, a := trace(ctx)
	_, err := r.clients(r.envdBase(id, c)).fs.Move(tctx, req)
	var ce *connect.Error
	if errors.As(err, &ce) && ctx.Err() == nil && strings.Contains(ce.Message(), "file exists") {
		return fmt.Errorf("e2b: %s %s: %w", op, p, sberrors.ErrIsDirectory)
	}
	return r.scrub(r.envdErr(ctx, op, id, a, err))
}

// removeTemp removes an abandoned temporary file, even when ctx has ended,
// within a bounded time; errors are ignored (envd's Remove of a missing
// path succeeds).
func (r *Runtime) removeTemp(ctx context.Context, id string, c *conn, tmp string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	req := connect.NewRequest(&filesystem.RemoveRequest{Path: tmp})
	r.setEnvdHeaders(req.Header(), id, c)
	_, _ = r.clients(r.envdBase(id, c)).fs.Remove(rctx, req)
}

// put streams src to the file at (p is the path the caller named, for
// errors) without holding it in memory: as a raw application/octet-stream
// body where envd supports it (0.5.7 and later), else as one multipart
// part produced through a pipe while it is sent.
func (r *Runtime) put(ctx context.Context, id string, c *conn, p, at string, src io.Reader) error {
	const op = "upload"
	// A source that fails, or a ctx that ends, ends the body as if it
	// were complete, so envd finishes writing the temporary file and
	// answers before Upload removes it. Aborting the request instead
	// leaves a handler that envd had not yet started (the body's first
	// bytes still queued on the connection under load) to create the
	// file after the removal, and envd does not remove a file whose
	// upload failed. A ctx that ended aborts the request only when no
	// answer came within wire.UploadGrace.
	cut := &iox.CutReader{R: src}
	in := &guardedReader{r: cut}
	defer in.Close()
	var body io.Reader = in
	ctype, stop := "application/octet-stream", func() {}
	if !versionAtLeast(c.version, 0, 5, 7) {
		body, ctype, stop = wire.MultipartFile(in, "file", at)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.filesURL(id, c, at), body)
	if err != nil {
		in.Close()
		stop()
		return sberrors.Errorf(sberrors.Internal, "e2b: %s: %v", op, err)
	}
	req.Header.Set("Content-Type", ctype)
	r.setEnvdHeaders(req.Header, id, c)
	tctx, a := trace(ctx)
	rctx, release := wire.CutOnCancel(tctx, cut, wire.UploadGrace)
	defer release()
	resp, err := r.hc.Do(req.WithContext(rctx))
	// The transport may still be reading the body: stop reading src before
	// it is handed back to the caller.
	in.Close()
	stop()
	if ctx.Err() != nil {
		// The caller gave up: whatever envd answered, the upload is not
		// completed, and Upload removes what was written.
		if err == nil {
			_ = resp.Body.Close()
		}
		return fmt.Errorf("e2b: %s %s: %w", op, p, ctx.Err())
	}
	if srcErr := cut.Failure(); srcErr != nil {
		if err == nil {
			_ = resp.Body.Close()
		}
		return fmt.Errorf("e2b: %s %s: reading the source: %w", op, p, srcErr)
	}
	if err != nil {
		return r.scrub(r.filesErr(ctx, op, id, p, a, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r.scrub(r.statusErr(op, p, resp.StatusCode, readErrBody(resp)))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return nil
}

// guardedReader stops reading its source once closed; Close waits for a
// Read in progress.
type guardedReader struct {
	mu     sync.Mutex
	r      io.Reader
	closed bool
}

func (g *guardedReader) Read(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return 0, wire.ErrBodyDone
	}
	return g.r.Read(p)
}

func (g *guardedReader) Close() error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	return nil
}

// versionAtLeast reports whether the semantic version v (such as "0.6.13"
// or "v1.0.0") is at least major.minor.patch; an unknown version is not.
func versionAtLeast(v string, major, minor, patch int) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) != 3 {
		return false
	}
	var n [3]int
	for i, s := range parts {
		s, _, _ = strings.Cut(s, "-")
		x, err := strconv.Atoi(s)
		if err != nil {
			return false
		}
		n[i] = x
	}
	want := [3]int{major, minor, patch}
	for i := range n {
		if n[i] != want[i] {
			return n[i] > want[i]
		}
	}
	return true
}

// Download opens p for streaming. Compression is never requested, so the
// bytes arrive as stored. envd reads as root; a file the sandbox's user
// may not read, or whose directory it may not search, is PermissionDenied
// (see the package doc's Files).
func (r *Runtime) Download(ctx context.Context, id, p string) (io.ReadCloser, error) {
	const op = "download"
	c, err := r.conn(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := r.mayRead(ctx, id, c, op, p); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.filesURL(id, c, p), nil)
	if err != nil {
		return nil, sberrors.Errorf(sberrors.Internal, "e2b: %s: %v", op, err)
	}
	r.setEnvdHeaders(req.Header, id, c)
	tctx, a := trace(ctx)
	resp, err := r.hc.Do(req.WithContext(tctx))
	if err != nil {
		return nil, r.scrub(r.filesErr(ctx, op, id, p, a, err))
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, r.scrub(r.statusErr(op, p, resp.StatusCode, readErrBody(resp)))
	}
	if enc := resp.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
		_ = resp.Body.Close()
		return nil, sberrors.Errorf(sberrors.Internal, "e2b: %s %s: unexpected Content-Encoding %q", op, p, enc)
	}
	return resp.Body, nil
}

func fileInfo(e *filesystem.EntryInfo) driver.FileInfo {
	fi := driver.FileInfo{Path: e.GetPath(), Size: e.GetSize(), Mode: fs.FileMode(e.GetMode()).Perm(),
		LinkTarget: e.GetSymlinkTarget()}
	if t := e.GetModifiedTime(); t != nil {
		fi.ModTime = t.AsTime()
	}
	switch e.GetType() {
	case filesystem.FileType_FILE_TYPE_DIRECTORY:
		fi.Mode |= fs.ModeDir
	case filesystem.FileType_FILE_TYPE_SYMLINK:
		fi.Mode |= fs.ModeSymlink
	}
	return fi
}

func (r *Runtime) fsCall(ctx context.Context, op, id string, c *conn, h http.Header, call func(context.Context) error) error {
	r.setEnvdHeaders(h, id, c)
	tctx, a := trace(ctx)
	if err := call(tctx); err != nil {
		return r.scrub(r.envdErr(ctx, op, id, a, err))
	}
	return nil
}

// stat is envd's Stat (lstat semantics).
func (r *Runtime) stat(ctx context.Context, id string, c *conn, p string) (driver.FileInfo, error) {
	e, err := r.statEntry(ctx, id, c, p)
	if err != nil {
		return driver.FileInfo{}, err
	}
	return fileInfo(e), nil
}

// statEntry is envd's Stat, with the entry as envd gives it.
func (r *Runtime) statEntry(ctx context.Context, id string, c *conn, p string) (*filesystem.EntryInfo, error) {
	req := connect.NewRequest(&filesystem.StatRequest{Path: p})
	var e *filesystem.EntryInfo
	err := r.fsCall(ctx, "stat", id, c, req.Header(), func(ctx context.Context) error {
		resp, err := r.clients(r.envdBase(id, c)).fs.Stat(ctx, req)
		if err == nil {
			e = resp.Msg.GetEntry()
		}
		return err
	})
	if err == nil && e == nil {
		e = &filesystem.EntryInfo{}
	}
	return e, err
}

// Stat describes p, following symbolic links.
func (r *Runtime) Stat(ctx context.Context, id, p string) (driver.FileInfo, error) {
	c, err := r.conn(ctx, id)
	if err != nil {
		return driver.FileInfo{}, err
	}
	fi, err := r.stat(ctx, id, c, p)
	for hops := 0; err == nil && fi.Mode&fs.ModeSymlink != 0 && fi.LinkTarget != "" && hops < 40; hops++ {
		target := fi.LinkTarget
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(fi.Path), target)
		}
		var t driver.FileInfo
		t, err = r.stat(ctx, id, c, target)
		t.Path = p
		fi = t
	}
	return fi, err
}

// ReadDir lists p, sorted by name.
func (r *Runtime) ReadDir(ctx context.Context, id, p string) ([]driver.FileInfo, error) {
	const op = "readdir"
	c, err := r.conn(ctx, id)
	if err != nil {
		return nil, err
	}
	req := connect.NewRequest(&filesystem.ListDirRequest{Path: p, Depth: 1})
	var out []driver.FileInfo
	err = r.fsCall(ctx, op, id, c, req.Header(), func(ctx context.Context) error {
		resp, err := r.clients(r.envdBase(id, c)).fs.ListDir(ctx, req)
		if err != nil {
			return err
		}
		for _, e := range resp.Msg.GetEntries() {
			if e.GetType() == filesystem.FileType_FILE_TYPE_UNSPECIFIED {
				continue
			}
			out = append(out, fileInfo(e))
		}
		return nil
	})
	if sberrors.CodeOf(err) == sberrors.InvalidArgument {
		return nil, fmt.Errorf("%v: %w", err, sberrors.ErrNotDirectory)
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b driver.FileInfo) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// MkdirAll creates p and its parents; an existing directory is fine. A
// missing directory whose nearest existing parent the sandbox's user may
// not write is PermissionDenied (see the package doc's Files).
func (r *Runtime) MkdirAll(ctx context.Context, id, p string) error {
	const op = "mkdir"
	c, err := r.conn(ctx, id)
	if err != nil {
		return err
	}
	if err := r.mayCreate(ctx, id, c, op, p, p, "", true); err != nil {
		return err
	}
	req := connect.NewRequest(&filesystem.MakeDirRequest{Path: p})
	err = r.fsCall(ctx, op, id, c, req.Header(), func(ctx context.Context) error {
		_, err := r.clients(r.envdBase(id, c)).fs.MakeDir(ctx, req)
		return err
	})
	switch sberrors.CodeOf(err) {
	case sberrors.AlreadyExists:
		return nil
	case sberrors.InvalidArgument:
		return fmt.Errorf("%v: %w", err, sberrors.ErrNotDirectory)
	}
	return err
}

// Remove removes p and everything below it. envd treats a missing path as
// success, so the adapter checks first: a missing path is NotFound. An
// entry the sandbox's user may not remove (its directory is not writable
// by the user, or sticky and neither is the user's) is PermissionDenied.
// envd removes a directory tree as root, whatever is below it; unless the
// adapter has root's file rights, a directory is removed by "rm -rf" run
// as the sandbox's user instead, so an entry below it that the user may
// not remove is PermissionDenied, as for the user's own rm (what rm
// removed before it met that entry stays removed).
func (r *Runtime) Remove(ctx context.Context, id, p string) error {
	const op = "remove"
	c, err := r.conn(ctx, id)
	if err != nil {
		return err
	}
	e, err := r.statEntry(ctx, id, c, p)
	if err != nil {
		return err
	}
	if err := r.mayRemove(ctx, id, c, op, p, e); err != nil {
		return err
	}
	if e.GetType() == filesystem.FileType_FILE_TYPE_DIRECTORY && !r.cfg.rootFiles {
		u, err := r.identity(ctx, id, c)
		if err != nil {
			return err
		}
		if !u.root {
			return r.removeTree(ctx, id, c, op, p, u)
		}
	}
	req := connect.NewRequest(&filesystem.RemoveRequest{Path: p})
	return r.fsCall(ctx, op, id, c, req.Header(), func(ctx context.Context) error {
		_, err := r.clients(r.envdBase(id, c)).fs.Remove(ctx, req)
		return err
	})
}

// Rename moves from to to, replacing a file at to, when the sandbox's user
// may (see Remove; envd creates missing parents of to, so the nearest
// existing one must be writable); else PermissionDenied.
func (r *Runtime) Rename(ctx context.Context, id, from, to string) error {
	const op = "rename"
	c, err := r.conn(ctx, id)
	if err != nil {
		return err
	}
	if err := r.mayRename(ctx, id, c, op, from, to); err != nil {
		return err
	}
	req := connect.NewRequest(&filesystem.MoveRequest{Source: from, Destination: to})
	return r.fsCall(ctx, op, id, c, req.Header(), func(ctx context.Context) error {
		_, err := r.clients(r.envdBase(id, c)).fs.Move(ctx, req)
		return err
	})
}
