package daytona

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/pathsafe"
	"github.com/sandboxkit/sandbox/internal/wire"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/toolbox"
	"github.com/sandboxkit/sandbox/sberrors"
)

func asHTTP(err error, he **HTTPError) bool { return errors.As(err, he) }

// tbFunc is one toolbox request.
type tbFunc func(ctx context.Context, c *toolbox.Client) (*http.Response, error)

// toolboxCall runs f against the sandbox's toolbox and returns the
// response when its status is in ok. When the toolbox says the sandbox is
// not running, it asks the API why: a deleted sandbox is NotFound (and
// forgotten); one stopped behind the Runtime's back (auto-stop) is started
// and f runs once more, if again (when non-nil) allows; one paused through
// this Runtime fails with sberrors.ErrPaused.
func (r *Runtime) toolboxCall(ctx context.Context, id, op string, mutating bool, again func() bool, f tbFunc, ok ...int) (*http.Response, error) {
	op = "toolbox " + op
	for try := 0; ; try++ {
		c, err := r.toolboxClient(ctx, id)
		if err != nil {
			return nil, err
		}
		tctx, a := wire.Trace(ctx)
		resp, err := f(tctx, c)
		if err != nil {
			return nil, r.transportError(ctx, op, a, mutating, err)
		}
		if slices.Contains(ok, resp.StatusCode) {
			return resp, nil
		}
		he := r.responseError(op, resp)
		lower := strings.ToLower(he.Message)
		sandboxLevel := errors.Is(he, sberrors.ErrPaused) ||
			(he.Status == http.StatusNotFound && he.Code != "" && strings.Contains(lower, "sandbox")) ||
			(he.Status == http.StatusBadGateway && he.Message == "")
		if !sandboxLevel || try > 0 {
			return nil, he
		}
		sb, gerr := r.getDTO(ctx, id)
		if gerr != nil {
			if sberrors.CodeOf(gerr) == sberrors.NotFound {
				return nil, gerr
			}
			return nil, he
		}
		raw := str((*string)(sb.State))
		st, _ := state(raw)
		r.mu.Lock()
		pausedHere := r.paused[id]
		r.mu.Unlock()
		switch {
		case st == driver.StateRunning && he.Status == http.StatusBadGateway && mutating:
			return nil, he // the daemon is down while the sandbox says started
		case st == driver.StateRunning && he.Status == http.StatusBadGateway:
			// A read: the proxy's 502s are brief (a state change, a
			// restarting daemon), so wait a moment and read once more.
			t := time.NewTimer(250 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, fmt.Errorf("daytona: %s: %w", op, ctx.Err())
			case <-t.C:
			}
		case st == driver.StateRunning:
			// It was started meanwhile: run once more.
		case st == driver.StateError:
			return nil, sberrors.Errorf(sberrors.FailedPrecondition, "daytona: sandbox %s is in state %s: %s", id, raw, r.redact(str(sb.ErrorReason)))
		case st == driver.StatePaused && (pausedHere || r.noWake):
			return nil, &HTTPError{Op: op, Status: he.Status, Code: he.Code, Message: "sandbox " + id + " is " + raw, kind: sberrors.ErrPaused}
		case st == driver.StatePaused:
			if again != nil && !again() {
				return nil, &HTTPError{Op: op, Status: he.Status, Code: he.Code, Message: "sandbox " + id + " is " + raw + " (auto-stopped); not retried", kind: sberrors.ErrPaused}
			}
			if err := r.start(ctx, id); err != nil {
				return nil, err
			}
		default:
			if _, err := r.waitStarted(ctx, sb); err != nil {
				return nil, err
			}
		}
		if again != nil && !again() {
			return nil, he
		}
	}
}

// Upload streams src to path as the multipart field "file" of
// POST /files/upload: the body is produced through an io.Pipe while it is
// sent, so no copy of the content is held. The daemon writes in place, so
// the bytes go to a temporary name next to path (pathsafe.TempSibling),
// which `mv -f`, run as the sandbox's user, puts over path after the last
// byte: the daemon's own move answers 409 when the destination exists.
// On any failure the temporary file is removed and path is left as it was.
func (r *Runtime) Upload(ctx context.Context, id, p string, src io.Reader) error {
	// A source that fails, or a ctx that ends, ends the body (see
	// iox.CutReader and wire.CutOnCancel): the daemon writes what came
	// and answers before the temporary file is removed.
	cut := &iox.CutReader{R: src}
	cr := &iox.CountingReader{R: cut}
	tmp := pathsafe.TempSibling(p)
	err := r.uploadCut(ctx, id, tmp, cr, cut, func() bool { return cr.N == 0 })
	if ctx.Err() != nil {
		// The caller gave up: whatever the daemon answered, the upload
		// is not completed.
		if !errors.Is(err, sberrors.ErrStaleTransport) {
			r.removeTemp(ctx, id, tmp)
		}
		return fmt.Errorf("daytona: upload %s: %w", p, ctx.Err())
	}
	if srcErr := cut.Failure(); srcErr != nil {
		r.removeTemp(ctx, id, tmp)
		return fmt.Errorf("daytona: upload %s: reading the source: %w", p, srcErr)
	}
	if err == nil {
		if err = r.replace(ctx, id, tmp, p); err != nil {
			r.removeTemp(ctx, id, tmp)
		}
		return err
	}
	var he *HTTPError
	if asHTTP(err, &he) && he.Status == http.StatusBadRequest && !errors.Is(err, sberrors.ErrPaused) {
		// The daemon answers 400 with an empty body for a file where a
		// parent should be, a place it may not write, and other failures.
		return r.classifyRefusal(ctx, id, "upload", p, path.Dir(p), err)
	}
	if !errors.Is(err, sberrors.ErrStaleTransport) && sberrors.CodeOf(err) != sberrors.NotFound && !errors.Is(err, sberrors.ErrPaused) {
		r.removeTemp(ctx, id, tmp)
	}
	return r.clean(err)
}

// replaceScript renames $1 over $2 unless $2 is a directory (mv would move
// the file into it): exit 21 then, the file removed.
const replaceScript = `if [ -d "$2" ]; then rm -f -- "$1"; exit 21; fi; exec mv -f -- "$1" "$2"`

// replace puts the uploaded temporary file tmp at p with `mv -f` run by the
// daemon as the sandbox's user, so p is replaced atomically and with that
// user's permissions.
func (r *Runtime) replace(ctx context.Context, id, tmp, p string) error {
	script := "{ sh -c " + shellQuote(replaceScript) + " sh " + shellQuote(tmp) + " " + shellQuote(p) + "; } </dev/null 2>&1"
	res := r.execute(ctx, id, script, "", 60)
	if res.err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("daytona: upload: %w", ctx.Err())
		}
		return r.clean(res.err)
	}
	code := -1
	if res.resp.ExitCode != nil {
		code = *res.resp.ExitCode
	} else if res.resp.Code != nil {
		code = *res.resp.Code
	}
	out := strings.TrimSpace(str(res.resp.Result))
	if len(out) > 300 {
		out = out[:300]
	}
	out = r.redact(out)
	switch {
	case code == 0:
		return nil
	case code == 21:
		return fmt.Errorf("daytona: upload %q: %w", p, sberrors.ErrIsDirectory)
	case strings.Contains(out, "Permission denied") || strings.Contains(out, "Read-only file system") || strings.Contains(out, "Operation not permitted"):
		return sberrors.Errorf(sberrors.PermissionDenied, "daytona: upload %q: %s", p, out)
	case strings.Contains(out, "Not a directory"):
		return fmt.Errorf("daytona: upload %q: %s: %w", p, out, sberrors.ErrNotDirectory)
	}
	return sberrors.Errorf(sberrors.Internal, "daytona: upload %q: mv exited %d: %s", p, code, out)
}

// notWritableScript exits 0 when the nearest existing directory at or
// above $1 is one the user running it cannot write.
// The walk stops (unknown: exit 2) when dirname makes no progress, so a
// shell whose dirname misbehaves cannot keep it looping until its timeout.
const notWritableScript = `d=$1; while [ ! -e "$d" ]; do n=$(dirname -- "$d") || exit 2; [ -n "$n" ] && [ "$n" != "$d" ] || exit 2; d=$n; done; [ -d "$d" ] && [ ! -w "$d" ]`

// notWritable reports whether the sandbox's user cannot create entries in
// dir or, where dir is missing, in its nearest existing parent (run by the
// daemon as that user); false when that is unknown.
func (r *Runtime) notWritable(ctx context.Context, id, dir string) bool {
	res := r.execute(ctx, id, "sh -c "+shellQuote(notWritableScript)+" sh "+shellQuote(dir)+" </dev/null", "", 30)
	if res.err != nil {
		return false
	}
	return res.resp.ExitCode != nil && *res.resp.ExitCode == 0
}

// removeTemp removes an abandoned temporary file, even when ctx has ended,
// within a bounded time; errors are ignored.
func (r *Runtime) removeTemp(ctx context.Context, id, tmp string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	resp, err := r.toolboxCall(rctx, id, "remove", true, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		return c.DeleteFile(ctx, &toolbox.DeleteFileParams{Path: tmp})
	}, http.StatusNoContent, http.StatusOK)
	if err == nil {
		resp.Body.Close()
	}
}

func (r *Runtime) upload(ctx context.Context, id, p string, src io.Reader, again func() bool) error {
	return r.uploadCut(ctx, id, p, src, nil, again)
}

// uploadCut is upload of a body that reads through cut, when not nil: when
// ctx ends, the body is ended rather than the request aborted (see
// wire.CutOnCancel), and the call returns once the daemon answered.
func (r *Runtime) uploadCut(ctx context.Context, id, p string, src io.Reader, cut *iox.CutReader, again func() bool) error {
	release := func() {}
	defer func() { release() }()
	resp, err := r.toolboxCall(ctx, id, "upload", true, again, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		release()
		rctx := ctx
		if cut != nil {
			rctx, release = wire.CutOnCancel(ctx, cut, wire.UploadGrace)
		}
		body, ctype, stop := wire.MultipartFile(src, "file", path.Base(p))
		resp, err := c.UploadFileWithBody(rctx, &toolbox.UploadFileParams{Path: p}, ctype, body)
		stop()
		return resp, err
	}, http.StatusOK, http.StatusCreated, http.StatusNoContent)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return nil
}

// Download streams the file at path. The daemon answers a directory (and
// a missing path) with 400 and an empty body: that is ErrIsDirectory.
func (r *Runtime) Download(ctx context.Context, id, p string) (io.ReadCloser, error) {
	resp, err := r.toolboxCall(ctx, id, "download", false, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		return c.DownloadFile(ctx, &toolbox.DownloadFileParams{Path: p})
	}, http.StatusOK)
	if err != nil {
		var he *HTTPError
		if asHTTP(err, &he) && he.Status == http.StatusBadRequest && !errors.Is(err, sberrors.ErrPaused) {
			return nil, fmt.Errorf("daytona: download %q: %w", p, sberrors.ErrIsDirectory)
		}
		return nil, r.clean(err)
	}
	return resp.Body, nil
}

// fileInfo converts the toolbox's FileInfo.
func fileInfo(dir string, fi *toolbox.FileInfo) driver.FileInfo {
	mode := parseMode(fi.Mode)
	if fi.IsDir {
		mode |= fs.ModeDir
	}
	out := driver.FileInfo{Path: path.Join(dir, fi.Name), Size: fi.Size, Mode: mode}
	if t, err := time.Parse(time.RFC3339Nano, str(fi.ModifiedAt)); err == nil {
		out.ModTime = t
	} else if s := str(fi.ModTime); s != "" {
		if i := strings.Index(s, " m="); i > 0 {
			s = s[:i]
		}
		if t, err := time.Parse("2006-01-02 15:04:05.999999999 -0700 MST", s); err == nil {
			out.ModTime = t
		}
	}
	return out
}

// parseMode reads Go's FileMode.String() form, e.g. "-rw-r--r--",
// "drwxr-xr-x" or "Lrwxrwxrwx".
func parseMode(s string) fs.FileMode {
	if len(s) < 10 {
		return 0
	}
	var m fs.FileMode
	perm, kinds := s[len(s)-9:], s[:len(s)-9]
	for i, c := range perm {
		if c != '-' {
			m |= 1 << (8 - i)
		}
	}
	const letters = "dalTLDpSugct?"
	for _, c := range kinds {
		if i := strings.IndexRune(letters, c); i >= 0 {
			m |= 1 << (31 - i)
		}
	}
	return m
}

// Stat describes path (GET /files/info).
func (r *Runtime) Stat(ctx context.Context, id, p string) (driver.FileInfo, error) {
	resp, err := r.toolboxCall(ctx, id, "stat", false, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		return c.GetFileInfo(ctx, &toolbox.GetFileInfoParams{Path: p})
	}, http.StatusOK)
	if err != nil {
		return driver.FileInfo{}, r.clean(err)
	}
	var fi toolbox.FileInfo
	if err := decode("toolbox stat", resp, &fi); err != nil {
		return driver.FileInfo{}, err
	}
	out := fileInfo(path.Dir(p), &fi)
	out.Path = p
	return out, nil
}

// ReadDir lists a directory (GET /files), sorted by name.
func (r *Runtime) ReadDir(ctx context.Context, id, p string) ([]driver.FileInfo, error) {
	resp, err := r.toolboxCall(ctx, id, "readdir", false, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		return c.ListFiles(ctx, &toolbox.ListFilesParams{Path: &p})
	}, http.StatusOK)
	if err != nil {
		var he *HTTPError
		if asHTTP(err, &he) && he.Status == http.StatusBadRequest && !errors.Is(err, sberrors.ErrPaused) {
			if fi, serr := r.Stat(ctx, id, p); serr == nil && !fi.IsDir() {
				return nil, fmt.Errorf("daytona: readdir %q: %w", p, sberrors.ErrNotDirectory)
			}
		}
		return nil, r.clean(err)
	}
	var list []toolbox.FileInfo
	if err := decode("toolbox readdir", resp, &list); err != nil {
		return nil, err
	}
	out := make([]driver.FileInfo, 0, len(list))
	for i := range list {
		out = append(out, fileInfo(p, &list[i]))
	}
	slices.SortFunc(out, func(a, b driver.FileInfo) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// MkdirAll creates path and its parents (POST /files/folder, which is
// idempotent). The daemon answers 400 with an empty body for every
// failure, so the adapter looks: a file in the way is ErrNotDirectory, a
// place the sandbox's user may not write is PermissionDenied.
func (r *Runtime) MkdirAll(ctx context.Context, id, p string) error {
	mode := "0755"
	resp, err := r.toolboxCall(ctx, id, "mkdir", true, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		return c.CreateFolder(ctx, &toolbox.CreateFolderParams{Path: p, Mode: &mode})
	}, http.StatusCreated, http.StatusOK)
	if err != nil {
		var he *HTTPError
		if asHTTP(err, &he) && he.Status == http.StatusBadRequest && !errors.Is(err, sberrors.ErrPaused) {
			return r.classifyRefusal(ctx, id, "mkdir", p, p, err)
		}
		return r.clean(err)
	}
	resp.Body.Close()
	return nil
}

// classifyRefusal tells apart what the daemon's 400 with an empty body
// (err) leaves unsaid for an operation creating p: a non-directory at
// from or at one of its parents is ErrNotDirectory; else a nearest
// existing directory the sandbox's user may not write is
// PermissionDenied; else err as it is.
func (r *Runtime) classifyRefusal(ctx context.Context, id, op, p, from string, err error) error {
	for dir := from; dir != "/" && dir != "." && dir != ""; dir = path.Dir(dir) {
		fi, serr := r.Stat(ctx, id, dir)
		if serr != nil {
			continue
		}
		if !fi.IsDir() {
			return fmt.Errorf("daytona: %s %q: %s is not a directory: %w", op, p, dir, sberrors.ErrNotDirectory)
		}
		break
	}
	if r.notWritable(ctx, id, from) {
		return sberrors.Errorf(sberrors.PermissionDenied, "daytona: %s %q: the user may not write its nearest existing directory", op, p)
	}
	return r.clean(err)
}

// Remove deletes path, recursively (DELETE /files?recursive=true).
func (r *Runtime) Remove(ctx context.Context, id, p string) error {
	rec := true
	resp, err := r.toolboxCall(ctx, id, "remove", true, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		return c.DeleteFile(ctx, &toolbox.DeleteFileParams{Path: p, Recursive: &rec})
	}, http.StatusNoContent, http.StatusOK)
	if err != nil {
		return r.clean(err)
	}
	resp.Body.Close()
	return nil
}

// Rename moves oldPath to newPath (POST /files/move). The move endpoint
// refuses an existing destination with 409; a file there is then replaced
// by rename(2) in the sandbox (mv through the execute endpoint), which is
// atomic: a reader sees the old file or the new one, never neither. A
// directory at newPath is refused (FailedPrecondition), as is a file that
// becomes a directory between the check and the mv, which moves oldPath
// into it instead (the window is one shell test wide).
func (r *Runtime) Rename(ctx context.Context, id, oldPath, newPath string) error {
	resp, err := r.toolboxCall(ctx, id, "rename", true, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		return c.MoveFile(ctx, &toolbox.MoveFileParams{Source: oldPath, Destination: newPath})
	}, http.StatusOK, http.StatusNoContent)
	if err == nil {
		resp.Body.Close()
		return nil
	}
	var he *HTTPError
	if !asHTTP(err, &he) || he.Status != http.StatusConflict {
		return r.clean(err)
	}
	script := fmt.Sprintf("{ if [ -d %[2]s ]; then exit 3; fi; mv -f -- %[1]s %[2]s 2>&1; } </dev/null", shellQuote(oldPath), shellQuote(newPath))
	res := r.execute(ctx, id, script, "", 30)
	if res.err != nil {
		return r.clean(fmt.Errorf("daytona: rename %q to %q: replacing the destination: %w", oldPath, newPath, res.err))
	}
	code := -1
	if res.resp.ExitCode != nil {
		code = *res.resp.ExitCode
	} else if res.resp.Code != nil {
		code = *res.resp.Code
	}
	switch out := strings.TrimSpace(str(res.resp.Result)); {
	case code == 0:
		return nil
	case code == 3:
		return fmt.Errorf("daytona: rename %q to %q: the destination is a directory: %w", oldPath, newPath, sberrors.ErrIsDirectory)
	case strings.Contains(out, "No such file"):
		return fmt.Errorf("daytona: rename %q to %q: %w", oldPath, newPath, sberrors.ErrNotFound)
	case strings.Contains(out, "Permission denied"):
		return fmt.Errorf("daytona: rename %q to %q: %w", oldPath, newPath, sberrors.ErrPermission)
	default:
		if len(out) > 200 {
			out = out[:200]
		}
		return fmt.Errorf("daytona: rename %q to %q: mv exited %d (%s): %w", oldPath, newPath, code, out, sberrors.ErrInternal)
	}
}

// readAllLimited reads at most n bytes of rc and closes it.
func readAllLimited(rc io.ReadCloser, n int64) ([]byte, error) {
	defer rc.Close()
	var b bytes.Buffer
	_, err := io.Copy(&b, io.LimitReader(rc, n))
	return b.Bytes(), err
}
