package daytonafake

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/sberrors"
)

// The real daemon runs inside the sandbox and serves every path the
// sandbox sees (research/daemons.md): the adapter keeps its per-command
// files in /tmp/.sandboxkit. A backend's file API may serve less:
// provider/local serves the home only (PermissionDenied elsewhere), and
// its /tmp is private to the sandbox, so the host cannot reach it at all.
// For a path the backend refuses, the fake does what the daemon would see
// from inside: it reaches the file with a command run in the sandbox.
// Downloads (with a "bytes=N-" Range), uploads and file info go this way;
// the other file handlers keep the backend's answer.

// refused reports a backend error that means "not served here" rather
// than a fact about the file.
func refused(err error) bool { return sberrors.CodeOf(err) == sberrors.PermissionDenied }

// insideTimeout bounds one command that reaches a file from inside.
const insideTimeout = 10 * time.Minute

// Exit codes of the inside scripts.
const (
	insideMissing = 3
	insideIsDir   = 4
	insideDenied  = 5
)

// insideStatus maps an inside script's exit code to the daemon's status.
func insideStatus(code int) int {
	switch code {
	case insideMissing:
		return http.StatusNotFound
	case insideIsDir:
		return http.StatusBadRequest
	case insideDenied:
		return http.StatusForbidden
	}
	return http.StatusBadRequest
}

// downloadScript prints the file's size on one line, then its bytes from
// offset $2 on, at most size-$2 of them (the file may grow meanwhile).
const downloadScript = `f=$1
[ -e "$f" ] || exit 3
[ -d "$f" ] && exit 4
[ -r "$f" ] || exit 5
n=$(wc -c <"$f") || exit 5
printf '%s\n' $n
[ "$2" -lt "$n" ] || exit 0
tail -c +$(($2 + 1)) "$f" | head -c $((n - $2))
`

// downloadInside serves abs as download does, reading it from inside the
// sandbox.
func (t *tb) downloadInside(abs string) {
	var from int64
	if rg := t.r.Header.Get("Range"); strings.HasPrefix(rg, "bytes=") && strings.HasSuffix(rg, "-") {
		if n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"), 10, 64); err == nil && n > 0 {
			from = n
		}
	}
	hw := &headWriter{t: t, abs: abs, from: from}
	st, err := t.s.backend.Exec(t.ctx(), t.b.backendID, &driver.Command{
		Args: []string{"sh", "-c", downloadScript, "sh", abs, strconv.FormatInt(from, 10)}, Dir: t.b.home,
		Stdout: hw, Stderr: io.Discard, Timeout: insideTimeout,
	})
	switch {
	case !hw.started && err == nil && st.ExitCode != 0:
		emptyError(t.w, insideStatus(st.ExitCode))
	case !hw.started:
		emptyError(t.w, http.StatusInternalServerError)
	case hw.left > 0:
		// Fewer bytes than the Content-Length promised: the client must
		// see a broken response, not a short one.
		panic(http.ErrAbortHandler)
	}
}

// headWriter reads the size line of downloadScript, then answers with the
// headers and passes the bytes on.
type headWriter struct {
	t       *tb
	abs     string
	from    int64
	line    []byte
	started bool  // the size line was read and the answer begun
	discard bool  // 416: the rest is not sent
	left    int64 // body bytes still owed
}

func (h *headWriter) Write(p []byte) (int, error) {
	n := len(p)
	if !h.started {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			h.line = append(h.line, p...)
			return n, nil
		}
		h.line = append(h.line, p[:i]...)
		p = p[i+1:]
		size, err := strconv.ParseInt(strings.TrimSpace(string(h.line)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("daytonafake: size line %q: %w", h.line, err)
		}
		h.started = true
		w := h.t.w
		if h.from > 0 && h.from >= size {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			emptyError(w, http.StatusRequestedRangeNotSatisfiable)
			h.discard = true
			return n, nil
		}
		hd := w.Header()
		hd.Set("Content-Type", "application/octet-stream")
		hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(h.abs)}))
		hd.Set("Content-Length", strconv.FormatInt(size-h.from, 10))
		status := http.StatusOK
		if h.from > 0 {
			hd.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", h.from, size-1, size))
			status = http.StatusPartialContent
		}
		h.left = size - h.from
		w.WriteHeader(status)
	}
	if h.discard || len(p) == 0 {
		return n, nil
	}
	if int64(len(p)) > h.left {
		p = p[:h.left]
	}
	m, err := h.t.w.Write(p)
	h.left -= int64(m)
	if err != nil {
		return 0, err
	}
	return n, nil
}

// uploadScript writes stdin to $1, creating its parent directories.
const uploadScript = `d=${1%/*}
[ -z "$d" ] || mkdir -p -- "$d" 2>/dev/null || exit 5
[ -d "$1" ] && exit 4
cat >"$1" 2>/dev/null || exit 5
`

// uploadInside writes src to abs from inside the sandbox, as upload does.
func (t *tb) uploadInside(abs string, src io.Reader) {
	// The backend may abandon a Read of its Stdin that is still running
	// when Exec returns; src must not be read then while
	// the handler closes it, so it is fed through a pipe whose copier ends
	// before this returns.
	pr, pw := io.Pipe()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, err := io.Copy(pw, src)
		pw.CloseWithError(err)
	}()
	// The write runs to its end even when the client left, as the
	// daemon's does: ending the Exec with the request could let the
	// command create the file after the client's clean-up found none.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx()), insideTimeout)
	defer cancel()
	st, err := t.s.backend.Exec(ctx, t.b.backendID, &driver.Command{
		Args: []string{"sh", "-c", uploadScript, "sh", abs}, Dir: t.b.home,
		Stdin: pr, Stdout: io.Discard, Stderr: io.Discard, Timeout: insideTimeout,
	})
	_ = pr.Close()
	<-copied
	if err != nil || st.ExitCode != 0 {
		emptyError(t.w, http.StatusBadRequest)
		return
	}
	t.w.WriteHeader(http.StatusOK)
}

// statScript prints size, raw mode (hex) and modification time (Unix
// seconds) of $1, following links.
const statScript = `[ -e "$1" ] || exit 3
exec stat -L -c '%s %f %Y' -- "$1"
`

// infoInside answers /files/info for abs from inside the sandbox.
func (t *tb) infoInside(abs string) {
	var out bytes.Buffer
	st, err := t.s.backend.Exec(t.ctx(), t.b.backendID, &driver.Command{
		Args: []string{"sh", "-c", statScript, "sh", abs}, Dir: t.b.home,
		Stdout: &out, Stderr: io.Discard, Timeout: insideTimeout,
	})
	if err != nil {
		emptyError(t.w, http.StatusInternalServerError)
		return
	}
	if st.ExitCode != 0 {
		emptyError(t.w, insideStatus(st.ExitCode))
		return
	}
	f := strings.Fields(out.String())
	if len(f) != 3 {
		emptyError(t.w, http.StatusInternalServerError)
		return
	}
	size, err1 := strconv.ParseInt(f[0], 10, 64)
	raw, err2 := strconv.ParseUint(f[1], 16, 32)
	sec, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		emptyError(t.w, http.StatusInternalServerError)
		return
	}
	fi := driver.FileInfo{Path: abs, Size: size, Mode: iox.UnixMode(uint32(raw)), ModTime: time.Unix(sec, 0)}
	writeJSON(t.w, http.StatusOK, fileInfo(fi))
}

// countReader counts the bytes read, to tell a refusal before the first
// byte from a failure in the middle.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
