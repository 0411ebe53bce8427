package e2bfake

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/netip"
	"path"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/filesystem/filesystemconnect"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/process/processconnect"
	"github.com/sandboxkit/sandbox/sberrors"
)

// users are the Linux users the fake's sandboxes know.
var users = map[string]bool{"user": true, "root": true}

const defaultUser = "user"

type boxKey struct{}
type userKey struct{}

func boxOf(ctx context.Context) *box { return ctx.Value(boxKey{}).(*box) }

func (s *Server) envdHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("GET /files", s.download)
	mux.HandleFunc("POST /files", s.upload)
	mux.HandleFunc("GET /envs", func(w http.ResponseWriter, r *http.Request) {
		b := boxOf(r.Context())
		s.mu.Lock()
		env := b.env
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, env)
	})
	p, h := processconnect.NewProcessHandler(&processService{s: s})
	mux.Handle(p, h)
	p, h = filesystemconnect.NewFilesystemHandler(&filesystemService{s: s})
	mux.Handle(p, h)

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.expire()
		id, port, err := routeID(r, s.domain)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		s.mu.Lock()
		b, ok := s.boxes[id]
		paused := ok && b.paused
		token := ""
		if ok {
			token = b.token
		}
		s.mu.Unlock()
		if !ok || paused {
			writeJSON(w, http.StatusBadGateway, map[string]any{"sandboxId": id, "message": "The sandbox was not found", "code": http.StatusBadGateway})
			return
		}
		if token != "" && port == EnvdPort && r.URL.Path != "/health" {
			got := r.Header.Get("X-Access-Token")
			if r.URL.Path == "/files" {
				switch {
				case got == "":
					writeError(w, http.StatusUnauthorized, "missing signature query parameter")
					return
				case got != token:
					writeError(w, http.StatusUnauthorized, "access token present in header but does not match")
					return
				}
			} else if got != token {
				writeError(w, http.StatusUnauthorized, "unauthorized access, please provide a valid access token or method signing if supported")
				return
			}
		}
		if port != EnvdPort {
			s.proxyPort(w, r, b, port)
			return
		}
		s.count(r)
		ctx := context.WithValue(r.Context(), boxKey{}, b)
		mux.ServeHTTP(w, r.WithContext(ctx))
	})
}

// routeID finds the sandbox and port a request is for, as E2B's edge
// proxy does: from the E2b-Sandbox-Id and E2b-Sandbox-Port headers when
// the host is an IP literal, localhost or sandbox.<domain>, else from a
// host of the form <port>-<id>.<domain>. Without a domain (WithDomain)
// the headers are honoured on any host.
func routeID(r *http.Request, domain string) (string, int, error) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	id, port := r.Header.Get("E2b-Sandbox-Id"), r.Header.Get("E2b-Sandbox-Port")
	if domain != "" && host != "localhost" && host != "sandbox."+domain {
		if _, err := netip.ParseAddr(host); err != nil {
			// Routed by the host name alone, which must be under the domain.
			if !strings.HasSuffix(host, "."+domain) {
				return "", 0, fmt.Errorf("invalid host: %s", r.Host)
			}
			id, port = "", ""
		}
	}
	if id == "" && port == "" {
		first, _, _ := strings.Cut(host, ".")
		var ok bool
		if port, id, ok = strings.Cut(first, "-"); !ok || id == "" {
			return "", 0, fmt.Errorf("invalid host: %s", r.Host)
		}
	}
	switch {
	case id == "":
		return "", 0, errors.New("Missing header: E2b-Sandbox-Id")
	case port == "":
		return "", 0, errors.New("Missing header: E2b-Sandbox-Port")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", 0, fmt.Errorf("invalid port: %s", port)
	}
	return id, n, nil
}

// resolve turns an envd path (absolute, "~", "~/x", relative to home, or
// empty for home) into an absolute clean path.
func resolve(home, p string) string {
	switch {
	case p == "" || p == "~":
		return home
	case strings.HasPrefix(p, "~/"):
		return path.Join(home, p[2:])
	case !strings.HasPrefix(p, "/"):
		return path.Join(home, p)
	}
	return path.Clean(p)
}

// rpcUser checks the Basic auth user of an RPC.
func rpcUser(h http.Header) (string, error) {
	auth := h.Get("Authorization")
	if auth == "" {
		return defaultUser, nil
	}
	enc, ok := strings.CutPrefix(auth, "Basic ")
	if !ok {
		return "", connect.NewError(connect.CodeUnauthenticated, errors.New("invalid authorization header"))
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", connect.NewError(connect.CodeUnauthenticated, errors.New("invalid authorization header"))
	}
	u, _, _ := strings.Cut(string(raw), ":")
	if !users[u] {
		return "", connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("invalid username: '%s'", u))
	}
	return u, nil
}

func fileUser(w http.ResponseWriter, r *http.Request) bool {
	u := r.URL.Query().Get("username")
	if u != "" && !users[u] {
		writeEnvdError(w, http.StatusUnauthorized, fmt.Sprintf("error looking up user '%s': user: unknown user %s", u, u))
		return false
	}
	return true
}

func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	if !fileUser(w, r) {
		return
	}
	b := boxOf(r.Context())
	p := resolve(b.home, r.URL.Query().Get("path"))
	fi, err := s.backend.Stat(r.Context(), b.backendID, p)
	switch {
	case sberrors.CodeOf(err) == sberrors.NotFound:
		writeEnvdError(w, http.StatusNotFound, fmt.Sprintf("path '%s' does not exist", p))
		return
	case err != nil:
		writeEnvdError(w, http.StatusInternalServerError, "error opening file: "+err.Error())
		return
	case fi.IsDir():
		writeEnvdError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", p))
		return
	}
	rc, err := s.backend.Download(r.Context(), b.backendID, p)
	if err != nil {
		writeEnvdError(w, http.StatusInternalServerError, "error opening file: "+err.Error())
		return
	}
	defer rc.Close()
	h := w.Header()
	h.Set("Content-Disposition", fmt.Sprintf("inline; filename=%q", path.Base(p)))
	h.Set("Accept-Ranges", "bytes")
	if !fi.ModTime.IsZero() {
		h.Set("Last-Modified", fi.ModTime.UTC().Format(http.TimeFormat))
	}
	// envd serves the file with http.ServeContent: the type comes from the
	// name's extension, else from sniffing the first 512 bytes.
	br := bufio.NewReaderSize(rc, 512)
	ctype := mime.TypeByExtension(path.Ext(p))
	if ctype == "" {
		head, _ := br.Peek(512)
		ctype = http.DetectContentType(head)
	}
	h.Set("Content-Type", ctype)
	var body io.Reader = br
	size, status := fi.Size, http.StatusOK
	if rg := r.Header.Get("Range"); rg != "" {
		start, n, ok := byteRange(rg, fi.Size)
		switch {
		case !ok:
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", fi.Size))
			http.Error(w, "invalid range: failed to overlap", http.StatusRequestedRangeNotSatisfiable)
			return
		case n >= 0:
			if _, err := io.CopyN(io.Discard, br, start); err != nil {
				writeEnvdError(w, http.StatusInternalServerError, "error reading file: "+err.Error())
				return
			}
			h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, start+n-1, fi.Size))
			body, size, status = io.LimitReader(br, n), n, http.StatusPartialContent
		}
	}
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		h.Set("Content-Encoding", "gzip")
		w.WriteHeader(status)
		zw := gzip.NewWriter(w)
		_, _ = io.Copy(zw, body)
		_ = zw.Close()
		return
	}
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(status)
	_, _ = io.Copy(w, body)
}

// byteRange parses a Range header of one byte range against a file of
// size bytes, as http.ServeContent does: it returns the first byte and the
// count, n < 0 when the header is to be ignored (not bytes, or several
// ranges, which the fake answers with the whole file), and ok false when
// the range is unsatisfiable (416).
func byteRange(h string, size int64) (start, n int64, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, -1, true
	}
	first, last, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return 0, -1, true
	}
	if first == "" {
		// A suffix: the last N bytes.
		k, err := strconv.ParseInt(last, 10, 64)
		if err != nil || k < 0 {
			return 0, -1, true
		}
		if k == 0 {
			return 0, 0, false
		}
		k = min(k, size)
		return size - k, k, true
	}
	a, err := strconv.ParseInt(first, 10, 64)
	if err != nil || a < 0 {
		return 0, -1, true
	}
	if a >= size {
		return 0, 0, false
	}
	end := size - 1
	if last != "" {
		b, err := strconv.ParseInt(last, 10, 64)
		if err != nil || b < a {
			return 0, -1, true
		}
		end = min(b, size-1)
	}
	return a, end - a + 1, true
}

// writeEnvdError writes one of envd's JSON error bodies.
func writeEnvdError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{status, msg})
}

type uploaded struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Type string `json:"type"`
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	if !fileUser(w, r) {
		return
	}
	b := boxOf(r.Context())
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			writeEnvdError(w, http.StatusBadRequest, "error decompressing body: "+err.Error())
			return
		}
		body = zr
	}
	qpath := r.URL.Query().Get("path")
	ct, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if r.Header.Get("Content-Type") == "" || err != nil {
		writeEnvdError(w, http.StatusBadRequest, "missing or invalid Content-Type")
		return
	}
	out := []uploaded{}
	switch ct {
	case "application/octet-stream":
		if !octetStream(b.version) {
			writeEnvdError(w, http.StatusBadRequest, fmt.Sprintf("unsupported Content-Type: %s", ct))
			return
		}
		if qpath == "" {
			writeEnvdError(w, http.StatusBadRequest, "path is required for octet-stream upload")
			return
		}
		p := resolve(b.home, qpath)
		if status, msg := s.put(r.Context(), b, p, body); status != 0 {
			writeEnvdError(w, status, msg)
			return
		}
		out = append(out, uploaded{Name: path.Base(p), Path: p, Type: "file"})
	case "multipart/form-data":
		mr := multipart.NewReader(body, params["boundary"])
		seen := map[string]bool{}
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				writeEnvdError(w, http.StatusBadRequest, "error reading multipart body: "+err.Error())
				return
			}
			if part.FormName() != "file" {
				_ = part.Close()
				continue
			}
			name := qpath
			if name == "" {
				name = part.FileName()
			}
			p := resolve(b.home, name)
			if seen[p] {
				writeEnvdError(w, http.StatusBadRequest, fmt.Sprintf("you cannot upload multiple files to the same path '%s' in one upload request", p))
				return
			}
			seen[p] = true
			if status, msg := s.put(r.Context(), b, p, part); status != 0 {
				writeEnvdError(w, status, msg)
				return
			}
			out = append(out, uploaded{Name: path.Base(p), Path: p, Type: "file"})
		}
	default:
		writeEnvdError(w, http.StatusBadRequest, fmt.Sprintf("unsupported Content-Type: %s", ct))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	writeJSONRaw(w, out)
}

// writeKey names path p of box b for Server.writes.
func writeKey(b *box, p string) string { return b.backendID + "\x00" + p }

// put writes one uploaded file, returning an HTTP status and message on
// failure. It waits for an abandoned upload of p to stop first, and
// records its own so that a Remove or Move of p waits for it: an upload
// whose client went away has stopped writing once the client's clean-up
// is answered.
func (s *Server) put(ctx context.Context, b *box, p string, r io.Reader) (int, string) {
	if err := s.writes.Wait(ctx, writeKey(b, p)); err != nil {
		return http.StatusInternalServerError, "error writing file: " + err.Error()
	}
	defer s.writes.Begin(writeKey(b, p))()
	if fi, err := s.backend.Stat(ctx, b.backendID, p); err == nil && fi.IsDir() {
		return http.StatusBadRequest, "path is a directory: " + p
	}
	for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
		fi, err := s.backend.Stat(ctx, b.backendID, dir)
		if err == nil {
			if !fi.IsDir() {
				return http.StatusInternalServerError, "error ensuring directories: path is a file: " + dir
			}
			break
		}
	}
	if err := s.backend.Upload(ctx, b.backendID, p, r); err != nil {
		switch {
		case errors.Is(err, sberrors.ErrIsDirectory):
			return http.StatusBadRequest, "path is a directory: " + p
		case sberrors.CodeOf(err) == sberrors.PermissionDenied:
			// envd's os.OpenFile failing: it answers 500 in Go's words.
			return http.StatusInternalServerError, "error opening file: open " + p + ": permission denied"
		}
		return http.StatusInternalServerError, "error writing file: " + err.Error()
	}
	return 0, ""
}

func writeJSONRaw(w http.ResponseWriter, v []uploaded) {
	data, _ := json.Marshal(v)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(data, '\n'))
}

// octetStream reports whether envd version v (0.5.7 and later) accepts raw
// application/octet-stream uploads.
func octetStream(v string) bool {
	var n [3]int
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) != 3 {
		return false
	}
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil {
			return false
		}
		n[i] = x
	}
	return n[0] > 0 || n[1] > 5 || (n[1] == 5 && n[2] >= 7)
}
