package daytonafake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/toolbox"
	"github.com/sandboxkit/sandbox/sberrors"
)

// notStarted is the message the proxy gives for a stopped sandbox.
const notStarted = "bad request: failed to resolve container IP after 3 attempts: no IP address found. Is the Sandbox started?"

var envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// toolbox serves /toolbox/{id}/{rest...} (and the older
// /api/toolbox/{id}/toolbox/{rest...}).
func (s *Server) toolbox(w http.ResponseWriter, r *http.Request) {
	if !s.bearer(r) {
		ginError(w, r, http.StatusUnauthorized, "UNAUTHORIZED", "unauthorized: invalid API key")
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	b := s.lookupLocked(id)
	var state string
	if b != nil {
		state = b.stored
		if state == stateStarted {
			b.activity = s.now()
		}
	}
	s.mu.Unlock()
	switch {
	case b == nil || b.id != id:
		ginError(w, r, http.StatusNotFound, "NOT_FOUND", "failed to get sandbox: sandbox "+id+" not found")
		return
	case state == stateStopped:
		ginError(w, r, http.StatusBadRequest, "BAD_REQUEST", notStarted)
		return
	case state == stateArchived:
		ginError(w, r, http.StatusNotFound, "NOT_FOUND", "not found: sandbox container not found: "+id)
		return
	case state != stateStarted:
		emptyError(w, http.StatusBadGateway)
		return
	}
	rest := "/" + r.PathValue("rest")
	t := &tb{s: s, b: b, w: w, r: r, route: rest}
	switch r.Method + " " + rest {
	case "GET /version":
		writeJSON(w, 200, map[string]string{"version": "v0.190.0-fake"})
	case "GET /system/metrics":
		t.metrics()
	case "GET /user-home-dir", "GET /project-dir", "GET /work-dir":
		writeJSON(w, 200, toolbox.Dir{Dir: b.home})
	case "GET /files", "GET /files/":
		t.list()
	case "GET /files/info":
		t.info()
	case "GET /files/download":
		t.download()
	case "POST /files/upload":
		t.upload()
	case "POST /files/folder":
		t.folder()
	case "DELETE /files", "DELETE /files/":
		t.delete()
	case "POST /files/move":
		t.move()
	case "POST /process/execute":
		t.execute()
	case "POST /process/session":
		t.createSession()
	case "POST /process/pty", "GET /process/pty":
		t.ptyOp(nil)
	default:
		if strings.HasPrefix(rest, "/process/pty/") {
			t.ptyOp(strings.Split(strings.TrimPrefix(rest, "/process/pty/"), "/"))
			return
		}
		if strings.HasPrefix(rest, "/process/session/") {
			t.sessionOp(strings.Split(strings.TrimPrefix(rest, "/process/session/"), "/"))
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "404 page not found")
	}
}

// tb is one toolbox request.
type tb struct {
	s *Server
	b *sbx
	w http.ResponseWriter
	r *http.Request
	// route is the path the daemon itself sees (the proxy strips
	// /toolbox/{id}), which its error bodies name.
	route string
}

// ginError writes the daemon's error body, naming the daemon's route.
func (t *tb) ginError(status int, code, msg string) {
	writeJSON(t.w, status, map[string]any{
		"statusCode": status, "message": msg, "code": code,
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "path": t.route, "method": t.r.Method,
	})
}

// internalError writes the body of an error the daemon's handlers do not
// type (its middleware's default): 500 with no code, a zero timestamp and
// an empty path.
func (t *tb) internalError(msg string) {
	writeJSON(t.w, http.StatusInternalServerError, map[string]any{
		"statusCode": http.StatusInternalServerError, "message": msg,
		"timestamp": "0001-01-01T00:00:00Z", "path": "",
	})
}

func (t *tb) ctx() context.Context { return t.r.Context() }

// writeKey names the absolute path p of the request's sandbox for
// Server.writes.
func (t *tb) writeKey(p string) string { return t.b.backendID + "\x00" + p }

// abs resolves p against the daemon's working directory (the home).
func (t *tb) abs(p string) string {
	if p == "" {
		p = "."
	}
	if !strings.HasPrefix(p, "/") {
		p = path.Join(t.b.home, p)
	}
	return path.Clean(p)
}

// fileStatus maps a backend error to the daemon's status code.
func fileStatus(err error) int {
	switch {
	case sberrors.CodeOf(err) == sberrors.NotFound:
		return http.StatusNotFound
	case sberrors.CodeOf(err) == sberrors.PermissionDenied:
		return http.StatusForbidden
	default:
		return http.StatusBadRequest
	}
}

func fileInfo(fi driver.FileInfo) toolbox.FileInfo {
	perm := fmt.Sprintf("%04o", fi.Mode.Perm())
	owner, mod, modAt := "1001", fi.ModTime.String(), fi.ModTime.UTC().Format(time.RFC3339)
	return toolbox.FileInfo{
		Name: fi.Name(), Size: fi.Size, Mode: fi.Mode.String(), Permissions: &perm,
		IsDir: fi.IsDir(), Owner: &owner, Group: &owner, ModTime: &mod, ModifiedAt: &modAt,
	}
}

func (t *tb) list() {
	fis, err := t.s.backend.ReadDir(t.ctx(), t.b.backendID, t.abs(t.r.URL.Query().Get("path")))
	if err != nil {
		emptyError(t.w, fileStatus(err))
		return
	}
	out := make([]toolbox.FileInfo, 0, len(fis))
	for _, fi := range fis {
		out = append(out, fileInfo(fi))
	}
	writeJSON(t.w, 200, out)
}

func (t *tb) info() {
	p := t.r.URL.Query().Get("path")
	if p == "" {
		emptyError(t.w, 400)
		return
	}
	fi, err := t.s.backend.Stat(t.ctx(), t.b.backendID, t.abs(p))
	if refused(err) {
		t.infoInside(t.abs(p))
		return
	}
	if err != nil {
		emptyError(t.w, fileStatus(err))
		return
	}
	writeJSON(t.w, 200, fileInfo(fi))
}

// download serves the file, honouring a "bytes=N-" Range as the daemon's
// http.ServeContent does.
func (t *tb) download() {
	p := t.r.URL.Query().Get("path")
	if p == "" {
		emptyError(t.w, 400)
		return
	}
	abs := t.abs(p)
	fi, err := t.s.backend.Stat(t.ctx(), t.b.backendID, abs)
	if refused(err) {
		t.downloadInside(abs)
		return
	}
	if err != nil {
		emptyError(t.w, fileStatus(err))
		return
	}
	if fi.IsDir() {
		emptyError(t.w, 400)
		return
	}
	var from int64
	if rg := t.r.Header.Get("Range"); strings.HasPrefix(rg, "bytes=") && strings.HasSuffix(rg, "-") {
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"), 10, 64)
		if err == nil {
			if n >= fi.Size {
				t.w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", fi.Size))
				emptyError(t.w, http.StatusRequestedRangeNotSatisfiable)
				return
			}
			from = n
		}
	}
	rc, err := t.s.backend.Download(t.ctx(), t.b.backendID, abs)
	if err != nil {
		emptyError(t.w, fileStatus(err))
		return
	}
	defer rc.Close()
	if from > 0 {
		if _, err := io.CopyN(io.Discard, rc, from); err != nil {
			emptyError(t.w, 500)
			return
		}
	}
	h := t.w.Header()
	name := path.Base(abs)
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	h.Set("Content-Length", strconv.FormatInt(fi.Size-from, 10))
	status := http.StatusOK
	if from > 0 {
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, fi.Size-1, fi.Size))
		status = http.StatusPartialContent
	}
	t.w.WriteHeader(status)
	_, _ = io.CopyN(t.w, rc, fi.Size-from)
}

// upload writes the multipart field "file" into the backend. As the
// daemon does (it parses the whole form before it creates the
// destination), the body is read to its end first, into a file outside
// the sandbox: a body that ends early (the client's source failed or it
// gave up) writes nothing at the path, whenever this handler runs.
func (t *tb) upload() {
	p := t.r.URL.Query().Get("path")
	mr, err := t.r.MultipartReader()
	if p == "" || err != nil {
		emptyError(t.w, 400)
		return
	}
	t.mkParents(t.abs(p))
	spool, err := os.CreateTemp("", "daytonafake-upload-")
	if err != nil {
		emptyError(t.w, http.StatusInternalServerError)
		return
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	found := false
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			emptyError(t.w, 400)
			return
		}
		dst := io.Discard
		if part.FormName() == "file" && !found {
			found, dst = true, spool
		}
		if _, err := io.Copy(dst, part); err != nil {
			emptyError(t.w, 400)
			return
		}
	}
	if !found {
		emptyError(t.w, 400)
		return
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		emptyError(t.w, http.StatusInternalServerError)
		return
	}
	// Wait for another upload of the path to stop, and record this one,
	// so that a delete or move of it waits in turn.
	key := t.writeKey(t.abs(p))
	if err := t.s.writes.Wait(t.ctx(), key); err != nil {
		emptyError(t.w, 400)
		return
	}
	end := t.s.writes.Begin(key)
	defer end()
	cr := &countReader{r: spool}
	err = t.s.backend.Upload(t.ctx(), t.b.backendID, t.abs(p), cr)
	if refused(err) && cr.n == 0 {
		t.uploadInside(t.abs(p), spool)
		return
	}
	if err != nil {
		emptyError(t.w, 400)
		return
	}
	t.w.WriteHeader(200)
}

// uploadDirMode is the mode the daemon's upload gives the parent
// directories it creates (its bulk upload uses 0755).
const uploadDirMode = "0750"

// mkParents creates the missing parent directories of abs with the mode
// the daemon's upload gives them (research/daemons.md: 0750), topmost
// first. A failure is left for the upload itself to report.
func (t *tb) mkParents(abs string) {
	var missing []string
	for dir := path.Dir(abs); dir != "/" && dir != "." && dir != t.b.home; dir = path.Dir(dir) {
		_, err := t.s.backend.Stat(t.ctx(), t.b.backendID, dir)
		if sberrors.CodeOf(err) != sberrors.NotFound {
			break
		}
		missing = append([]string{dir}, missing...)
	}
	if len(missing) == 0 {
		return
	}
	_, _ = t.s.backend.Exec(t.ctx(), t.b.backendID, &driver.Command{
		Args: append([]string{"mkdir", "-m", uploadDirMode, "--"}, missing...), Dir: t.b.home,
		Stdout: io.Discard, Stderr: io.Discard, Timeout: time.Minute,
	})
}

func (t *tb) folder() {
	q := t.r.URL.Query()
	if q.Get("path") == "" {
		emptyError(t.w, 400)
		return
	}
	if m := q.Get("mode"); m != "" {
		if _, err := strconv.ParseUint(m, 8, 32); err != nil {
			t.ginError(400, "BAD_REQUEST", "invalid mode format")
			return
		}
	}
	if err := t.s.backend.MkdirAll(t.ctx(), t.b.backendID, t.abs(q.Get("path"))); err != nil {
		// The daemon answers 400 with an empty body for every failure
		// here: a file in the way and a place its user may not write
		// alike (research/daemons.md).
		emptyError(t.w, http.StatusBadRequest)
		return
	}
	t.w.WriteHeader(http.StatusCreated)
}

func (t *tb) delete() {
	q := t.r.URL.Query()
	if q.Get("path") == "" {
		emptyError(t.w, 400)
		return
	}
	abs := t.abs(q.Get("path"))
	if err := t.s.writes.Wait(t.ctx(), t.writeKey(abs)); err != nil {
		emptyError(t.w, 400)
		return
	}
	fi, err := t.s.backend.Stat(t.ctx(), t.b.backendID, abs)
	if err != nil {
		emptyError(t.w, fileStatus(err))
		return
	}
	if fi.IsDir() && q.Get("recursive") != "true" {
		if list, err := t.s.backend.ReadDir(t.ctx(), t.b.backendID, abs); err != nil || len(list) > 0 {
			// The daemon's os.Remove fails (ENOTEMPTY): 400, empty body.
			emptyError(t.w, http.StatusBadRequest)
			return
		}
	}
	if err := t.s.backend.Remove(t.ctx(), t.b.backendID, abs); err != nil {
		emptyError(t.w, fileStatus(err))
		return
	}
	t.w.WriteHeader(http.StatusNoContent)
}

func (t *tb) move() {
	q := t.r.URL.Query()
	src, dst := q.Get("source"), q.Get("destination")
	if src == "" || dst == "" {
		emptyError(t.w, 400)
		return
	}
	src, dst = t.abs(src), t.abs(dst)
	for _, p := range []string{src, dst} {
		if err := t.s.writes.Wait(t.ctx(), t.writeKey(p)); err != nil {
			emptyError(t.w, 400)
			return
		}
	}
	if _, err := t.s.backend.Stat(t.ctx(), t.b.backendID, src); err != nil {
		emptyError(t.w, fileStatus(err))
		return
	}
	if _, err := t.s.backend.Stat(t.ctx(), t.b.backendID, dst); err == nil {
		emptyError(t.w, http.StatusConflict)
		return
	}
	if !t.isDir(path.Dir(dst)) {
		emptyError(t.w, http.StatusNotFound)
		return
	}
	if err := t.s.backend.Rename(t.ctx(), t.b.backendID, src, dst); err != nil {
		emptyError(t.w, fileStatus(err))
		return
	}
	t.w.WriteHeader(200)
}

// isDir reports whether dir is a directory. The home is one without
// asking: some backends cannot Stat their file root itself.
func (t *tb) isDir(dir string) bool {
	if dir == t.b.home {
		return true
	}
	fi, err := t.s.backend.Stat(t.ctx(), t.b.backendID, dir)
	return err == nil && fi.IsDir()
}

// lockedBuffer merges writes from two streams.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// daemonShell starts the shell the daemon would pick (bash when there is
// one, else sh) reading the command from stdin. bash reads a script on a
// pipe one byte at a time, so a command that reads stdin swallows the rest
// of the script, as with the real daemon. Its stderr is its stdout: the
// daemon gives the command one pipe for both, so the merged result keeps
// the order the command wrote in.
const daemonShell = "exec 2>&1; if command -v bash >/dev/null 2>&1; then exec bash; else exec sh; fi"

// execute runs the command as the daemon does: fed to sh on stdin, output
// merged, a timeout answered 408 with the output dropped. The command is
// not tied to the request: a client that disconnects leaves it running,
// as the daemon does.
func (t *tb) execute() {
	var req toolbox.ExecuteRequest
	if err := json.NewDecoder(t.r.Body).Decode(&req); err != nil {
		t.ginError(400, "INVALID_REQUEST_BODY", "invalid request body: "+err.Error())
		return
	}
	if strings.TrimSpace(req.Command) == "" {
		t.ginError(400, "BAD_REQUEST", "bad request: command cannot be empty or whitespace-only")
		return
	}
	env := map[string]string{}
	if req.Envs != nil {
		for k, v := range *req.Envs {
			if !envKeyRE.MatchString(k) {
				t.ginError(400, "BAD_REQUEST", fmt.Sprintf("bad request: invalid environment variable name: '%s'", k))
				return
			}
			env[k] = v
		}
	}
	dir := t.b.home
	if req.Cwd != nil && *req.Cwd != "" {
		dir = t.abs(*req.Cwd)
		if !t.isDir(dir) {
			// The daemon's exec.Cmd fails to start: a missing directory
			// and a file (ENOTDIR in the child's chdir) read differently.
			msg := "fork/exec /usr/bin/bash: no such file or directory"
			if _, err := t.s.backend.Stat(t.ctx(), t.b.backendID, dir); err == nil {
				msg = "fork/exec /usr/bin/bash: not a directory"
			}
			writeJSON(t.w, 200, toolbox.ExecuteResponse{ExitCode: ptr(-1), Result: ptr(msg)})
			return
		}
	}
	timeout := 24 * time.Hour
	if req.Timeout != nil && *req.Timeout > 0 {
		timeout = time.Duration(*req.Timeout) * time.Second
	}
	var out lockedBuffer
	t.s.wg.Add(1)
	defer t.s.wg.Done()
	st, err := t.s.backend.Exec(t.s.baseCtx, t.b.backendID, &driver.Command{
		Args: []string{"sh", "-c", daemonShell}, Stdin: strings.NewReader(req.Command), Dir: dir, Env: env,
		Stdout: &out, Stderr: &out, Timeout: timeout,
	})
	switch {
	case err != nil:
		writeJSON(t.w, 200, toolbox.ExecuteResponse{ExitCode: ptr(-1), Result: ptr(err.Error())})
	case st.TimedOut:
		t.ginError(http.StatusRequestTimeout, "REQUEST_TIMEOUT", "request timeout: command execution timeout")
	default:
		// json.Marshal turns invalid UTF-8 into U+FFFD, as the daemon's
		// encoder does.
		writeJSON(t.w, 200, toolbox.ExecuteResponse{ExitCode: ptr(st.ExitCode), Result: ptr(out.buf.String())})
	}
}

func ptr[T any](v T) *T { return &v }
