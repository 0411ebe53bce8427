package k8s

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/wire"
	"github.com/sandboxkit/sandbox/sberrors"
)

// grpcConn is a connection to one sandboxd's process service.
type grpcConn struct {
	conn *grpc.ClientConn
}

// endpoint is where one sandbox's sandboxd answers.
type endpoint struct {
	id      string
	sandbox string // the Sandbox's name (the router's X-Sandbox-ID)
	podIP   string
	root    string
}

// forget drops what the Runtime knows of a sandbox (its address, root).
func (r *Runtime) forget(id string) {
	r.mu.Lock()
	delete(r.roots, id)
	r.mu.Unlock()
}

// forgetConns drops cached connections after the sandbox's pod changed.
func (r *Runtime) forgetConns(id string) {
	r.forget(id)
	r.transport.CloseIdleConnections()
}

// endpoint resolves a sandbox to its sandboxd from the claim's status:
// a claim that is not Ready is paused (Suspended) or unavailable, with its
// Ready reason.
func (r *Runtime) endpoint(ctx context.Context, id string) (endpoint, error) {
	c, err := r.claim(ctx, id)
	if err != nil {
		return endpoint{}, err
	}
	in := r.info(c)
	switch in.State {
	case driver.StateRunning:
	case driver.StatePaused:
		return endpoint{}, errorf("sandbox %s: %w", id, sberrors.ErrPaused)
	default:
		return endpoint{}, errorf("sandbox %s is %s (%s): %w", id, in.State, in.Detail["reason"], sberrors.ErrUnavailable)
	}
	ep := endpoint{id: id, sandbox: c.Status.SandboxStatus.Name, podIP: c.Status.SandboxStatus.PodIPs[0]}
	r.mu.Lock()
	ep.root = r.roots[id]
	r.mu.Unlock()
	if ep.root == "" {
		ep.root = r.cfg.root
	}
	if ep.root == "" {
		root, err := r.discoverRoot(ctx, ep)
		if err != nil {
			return endpoint{}, err
		}
		ep.root = root
		r.mu.Lock()
		r.roots[id] = root
		r.mu.Unlock()
	}
	return ep, nil
}

// discoverRoot asks sandboxd where it starts commands that name no
// working directory: its root, which its file API is confined to.
func (r *Runtime) discoverRoot(ctx context.Context, ep endpoint) (string, error) {
	pc, err := r.process(ep)
	if err != nil {
		return "", err
	}
	resp, err := pc.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"pwd", "-P"}}})
	if err != nil {
		return "", grpcErr(ctx, "find the root of "+ep.id, err, false)
	}
	root := strings.TrimSpace(string(resp.GetStdout()))
	if resp.GetExitCode() != 0 || !strings.HasPrefix(root, "/") {
		return "", errorf("find the root of %s: pwd said %q (exit %d): %w", ep.id, root, resp.GetExitCode(), sberrors.ErrInternal)
	}
	return root, nil
}

// process returns a ProcessService client on the sandbox's pod.
func (r *Runtime) process(ep endpoint) (processv1.ProcessServiceClient, error) {
	target := net.JoinHostPort(ep.podIP, strconv.Itoa(r.cfg.grpcPort))
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.grpc[target]; c != nil {
		return processv1.NewProcessServiceClient(c.conn), nil
	}
	// Large flow-control windows: sandboxd gives a process's output
	// readers a 5 s grace after it exits (pipeDrainGrace) and then closes
	// the pipes, so a stream held back by a 64 KiB window could lose the
	// end of the output of a busy sandbox.
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(16 << 20), grpc.WithInitialConnWindowSize(64 << 20)}
	if r.cfg.dial != nil {
		dial := r.cfg.dial
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dial(ctx, "tcp", addr)
		}))
	}
	conn, err := grpc.NewClient("passthrough:///"+target, opts...)
	if err != nil {
		return nil, errorf("sandboxd at %s: %w", target, sberrors.Errorf(sberrors.Internal, "%v", err))
	}
	r.grpc[target] = &grpcConn{conn: conn}
	return processv1.NewProcessServiceClient(conn), nil
}

// grpcErr maps a ProcessService error. notSent says the call cannot have
// reached sandboxd (the stream was never opened), which makes an
// Unavailable a stale transport the portable layer retries once.
func grpcErr(ctx context.Context, what string, err error, notSent bool) error {
	if ctx.Err() != nil {
		return errorf("%s: %w", what, ctx.Err())
	}
	st, _ := status.FromError(err)
	msg := st.Message()
	switch st.Code() {
	case codes.Unavailable:
		if notSent {
			return errorf("%s: %w: %s", what, sberrors.ErrStaleTransport, msg)
		}
		return errorf("%s: %w: %s", what, sberrors.ErrOutcomeUnknown, msg)
	case codes.NotFound:
		return errorf("%s: %w: %s", what, sberrors.ErrNotFound, msg)
	case codes.PermissionDenied:
		return errorf("%s: %w: %s", what, sberrors.ErrPermission, msg)
	case codes.InvalidArgument:
		return errorf("%s: %w: %s", what, sberrors.ErrInvalidArgument, msg)
	case codes.Canceled:
		return errorf("%s: %w: %s", what, sberrors.ErrUnavailable, msg)
	default:
		return errorf("%s: %w", what, sberrors.Errorf(sberrors.Internal, "%s", msg))
	}
}

// inRoot checks that p lies in the directory sandboxd serves.
func inRoot(ep endpoint, p string) error {
	if p == ep.root || strings.HasPrefix(p, strings.TrimRight(ep.root, "/")+"/") {
		return nil
	}
	return errorf("%s is outside %s, the directory sandboxd serves and confines working directories to: %w", p, ep.root, sberrors.ErrPermission)
}

// fileURL is the REST URL of path p, relative to the root.
func (r *Runtime) fileURL(ep endpoint, p string, q url.Values) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(p, strings.TrimRight(ep.root, "/")), "/")
	var b strings.Builder
	for i, seg := range strings.Split(rel, "/") {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(url.PathEscape(seg))
	}
	base := r.cfg.routerURL
	if base == "" {
		base = "http://" + net.JoinHostPort(ep.podIP, strconv.Itoa(r.cfg.restPort))
	}
	u := base + "/v1/files/" + b.String()
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// do sends one REST request to the sandbox's sandboxd; a failure without
// a response is classified by wire.Classify.
func (r *Runtime) do(ctx context.Context, ep endpoint, method, p string, q url.Values, body io.Reader, what string) (*http.Response, error) {
	return r.doExpect(ctx, ep, method, p, q, body, false, what)
}

// doExpect is do, sending the body only once the server has asked for it
// (Expect: 100-continue) when expect is set.
func (r *Runtime) doExpect(ctx context.Context, ep endpoint, method, p string, q url.Values, body io.Reader, expect bool, what string) (*http.Response, error) {
	tctx, attempt := wire.Trace(ctx)
	req, err := http.NewRequestWithContext(tctx, method, r.fileURL(ep, p, q), body)
	if err != nil {
		return nil, errorf("%s: %w", what, sberrors.Errorf(sberrors.InvalidArgument, "%v", err))
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	if expect {
		req.Header.Set("Expect", "100-continue")
	}
	if r.cfg.routerURL != "" {
		// The sandbox-router's routing headers (sandbox-router/proxy/headers.go).
		req.Header.Set("X-Sandbox-ID", ep.sandbox)
		req.Header.Set("X-Sandbox-Namespace", r.cfg.namespace)
		req.Header.Set("X-Sandbox-Port", strconv.Itoa(r.cfg.restPort))
		req.Header.Set("X-Sandbox-Pod-IP", ep.podIP)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, wire.Classify(ctx, "k8s: "+what, attempt, true, method != http.MethodGet, err)
	}
	return resp, nil
}

// restErr maps a sandboxd REST error response (its Error body).
func restErr(resp *http.Response, what string) error {
	var e struct{ Code, Message string }
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	_ = json.Unmarshal(b, &e)
	msg := e.Message
	if msg == "" {
		msg = strings.TrimSpace(string(b))
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return errorf("%s: %w", what, sberrors.ErrNotFound)
	case resp.StatusCode == http.StatusForbidden:
		return errorf("%s: %w: %s", what, sberrors.ErrPermission, msg)
	case resp.StatusCode == http.StatusConflict:
		return errorf("%s: %w: %s", what, sberrors.ErrFailedPrecondition, msg)
	// sandboxd answers a failed system call with 500 and Go's error text:
	// EACCES (a daemon that is not root, as in most pods, reading a file or
	// directory its user may not) and ENOENT keep their meaning.
	case strings.Contains(msg, "permission denied"):
		return errorf("%s: %w: %s", what, sberrors.ErrPermission, msg)
	case strings.Contains(msg, "no such file or directory"):
		return errorf("%s: %w", what, sberrors.ErrNotFound)
	case strings.Contains(msg, "too many levels of symbolic links"):
		return errorf("%s: %w", what, sberrors.Errorf(sberrors.FailedPrecondition, "a loop of symbolic links: %s", msg))
	case strings.Contains(msg, "not a directory"):
		return errorf("%s: %w", what, sberrors.ErrNotDirectory)
	case strings.Contains(msg, "is a directory"):
		return errorf("%s: %w", what, sberrors.ErrIsDirectory)
	case resp.StatusCode == http.StatusBadGateway, resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		return errorf("%s: %w: HTTP %d %s", what, sberrors.ErrUnavailable, resp.StatusCode, msg)
	case resp.StatusCode == http.StatusBadRequest:
		return errorf("%s: %w: %s", what, sberrors.ErrInvalidArgument, msg)
	default:
		return errorf("%s: %w", what, sberrors.Errorf(sberrors.Internal, "HTTP %d: %s", resp.StatusCode, msg))
	}
}

// Upload streams r to path with PUT /v1/files/{path}, which sandboxd
// writes to a temporary file renamed over path, creating parents.
//
// A failed upload leaves no temporary file behind once Upload returns.
// sandboxd removes the temporary file of a failed upload when its handler
// finds the body broken, after the client gave up; and it creates the
// file when its handler starts, which on a loaded host can come after the
// client has sent the whole body it had into the socket's buffers and
// given up. So a body that fits in smallUpload is read whole first (its
// reader cannot then fail midway, and it costs no extra round trip), and
// a larger one is sent only once sandboxd asks for it (Expect:
// 100-continue), which its handler does on its first read, after it made
// the temporary file: when the caller's reader then fails, the file
// exists, and Upload waits until it is gone.
func (r *Runtime) Upload(ctx context.Context, id, p string, body io.Reader) error {
	ep, err := r.endpoint(ctx, id)
	if err != nil {
		return err
	}
	if err := inRoot(ep, p); err != nil {
		return err
	}
	if p == ep.root {
		return errorf("upload %s: %w", p, sberrors.ErrIsDirectory)
	}
	var src io.Reader // what the request sends
	re := &readErr{}  // the caller's reader, when src reads from it
	expect := false
	if inMemory(body) <= smallUpload {
		src = body // it cannot fail, and its length is known
	} else {
		head := make([]byte, smallUpload+1)
		n, err := io.ReadFull(body, head)
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			src = bytes.NewReader(head[:n])
		case err != nil:
			return errorf("upload %s: %w", p, err)
		default:
			re.r, src, expect = io.MultiReader(bytes.NewReader(head), body), re, true
		}
	}
	resp, err := r.doExpect(ctx, ep, http.MethodPut, p, nil, src, expect, "upload "+p)
	if re.err != nil {
		if resp != nil {
			_ = resp.Body.Close()
		}
		r.awaitTempsGone(ctx, ep, path.Dir(p))
		return errorf("upload %s: %w", p, re.err)
	}
	if err != nil {
		if ctx.Err() != nil {
			r.awaitTempsGone(ctx, ep, path.Dir(p))
		}
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		return restErr(resp, "upload "+p)
	}
	return nil
}

// inMemory returns what is left of a body that is held in memory and so
// cannot fail to read, or more than smallUpload for any other.
func inMemory(body io.Reader) int {
	switch b := body.(type) {
	case *bytes.Reader:
		return b.Len()
	case *strings.Reader:
		return b.Len()
	case *bytes.Buffer:
		return b.Len()
	}
	return smallUpload + 1
}

// smallUpload is the largest body Upload reads whole before sending it;
// a larger one waits for sandboxd's 100 Continue (a round trip, small
// beside the transfer).
const smallUpload = 64 << 10

// expectWait bounds the wait for sandboxd's 100 Continue; the body goes
// anyway after it (net/http's Transport.ExpectContinueTimeout). sandboxd
// answers as soon as its handler reads, so the bound is only reached
// through a proxy that never answers 100.
const expectWait = 5 * time.Second

// tempPrefix begins the names of the temporary files sandboxd writes an
// upload to, beside its target, before renaming them over it.
const tempPrefix = ".sandboxd-tmp-"

// tempWait bounds how long an aborted upload waits for sandboxd to remove
// its temporary file.
const tempWait = 2 * time.Second

// awaitTempsGone waits, after an upload to a file in dir was aborted, until
// the temporary files sandboxd holds there now are gone (at most
// tempWait, even when ctx has ended). sandboxd removes the temporary file
// of a failed upload, but only once its handler sees the connection
// broken, which comes after the client's call returned: without the wait
// a caller listing dir at once found it. Temporary files of other uploads
// in flight in dir are waited for too, within the same bound.
func (r *Runtime) awaitTempsGone(ctx context.Context, ep endpoint, dir string) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tempWait)
	defer cancel()
	held := func() map[string]bool {
		list, err := r.readDir(wctx, ep, dir)
		if err != nil {
			return nil
		}
		names := map[string]bool{}
		for _, fi := range list {
			if strings.HasPrefix(fi.Name(), tempPrefix) {
				names[fi.Name()] = true
			}
		}
		return names
	}
	first := held()
	for len(first) > 0 {
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-wctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		now := held()
		if now == nil {
			return
		}
		for n := range first {
			if !now[n] {
				delete(first, n)
			}
		}
	}
}

// readErr remembers the error of the caller's reader, so Upload returns
// it rather than the transport's.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

// Download streams path with GET /v1/files/{path}; a directory (which
// sandboxd answers with a JSON listing) is ErrIsDirectory.
func (r *Runtime) Download(ctx context.Context, id, p string) (io.ReadCloser, error) {
	ep, err := r.endpoint(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := inRoot(ep, p); err != nil {
		return nil, err
	}
	resp, err := r.do(ctx, ep, http.MethodGet, p, nil, nil, "download "+p)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer func() { _ = resp.Body.Close() }()
		return nil, restErr(resp, "download "+p)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		_ = resp.Body.Close()
		return nil, errorf("download %s: %w", p, sberrors.ErrIsDirectory)
	}
	return resp.Body, nil
}

// listing is sandboxd's DirectoryListing.
type listing struct {
	Path    string `json:"path"`
	Entries []struct {
		Name       string `json:"name"`
		Size       int64  `json:"size"`
		Type       string `json:"type"`
		ModifiedAt string `json:"modified_at"`
		Mode       string `json:"mode"`
	} `json:"entries"`
}

// readDir lists directory p; a file is ErrNotDirectory.
func (r *Runtime) readDir(ctx context.Context, ep endpoint, p string) ([]driver.FileInfo, error) {
	resp, err := r.do(ctx, ep, http.MethodGet, p, nil, nil, "list "+p)
	if err != nil {
		return nil, err
	}
	defer wire.DrainClose(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, restErr(resp, "list "+p)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return nil, errorf("list %s: %w", p, sberrors.ErrNotDirectory)
	}
	var l listing
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return nil, errorf("list %s: %w", p, sberrors.Errorf(sberrors.Internal, "bad listing: %v", err))
	}
	out := make([]driver.FileInfo, 0, len(l.Entries))
	for _, e := range l.Entries {
		perm, _ := strconv.ParseUint(e.Mode, 8, 32)
		mode := fs.FileMode(perm) & fs.ModePerm
		if e.Type == "directory" {
			mode |= fs.ModeDir
		}
		mt, _ := time.Parse(time.RFC3339, e.ModifiedAt)
		out = append(out, driver.FileInfo{Path: path.Join(p, e.Name), Size: e.Size, Mode: mode, ModTime: mt})
	}
	return out, nil
}

// ReadDir lists path from sandboxd's directory listing (which follows
// symbolic links and leaves out those that leave the root).
func (r *Runtime) ReadDir(ctx context.Context, id, p string) ([]driver.FileInfo, error) {
	ep, err := r.endpoint(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := inRoot(ep, p); err != nil {
		return nil, err
	}
	return r.readDir(ctx, ep, p)
}

// Stat finds path in its parent's listing (sandboxd has no stat call).
func (r *Runtime) Stat(ctx context.Context, id, p string) (driver.FileInfo, error) {
	ep, err := r.endpoint(ctx, id)
	if err != nil {
		return driver.FileInfo{}, err
	}
	if err := inRoot(ep, p); err != nil {
		return driver.FileInfo{}, err
	}
	if p == ep.root {
		if _, err := r.readDir(ctx, ep, p); err != nil {
			return driver.FileInfo{}, err
		}
		return driver.FileInfo{Path: p, Mode: fs.ModeDir | 0o755}, nil
	}
	entries, err := r.readDir(ctx, ep, path.Dir(p))
	if err != nil {
		if errors.Is(err, sberrors.ErrNotDirectory) {
			return driver.FileInfo{}, errorf("stat %s: %w", p, sberrors.ErrNotDirectory)
		}
		return driver.FileInfo{}, err
	}
	for _, e := range entries {
		if e.Path == p {
			return e, nil
		}
	}
	// Listings leave out links that are broken, loop or leave the root:
	// ask for the path itself so a loop is not taken for a missing file.
	resp, err := r.do(ctx, ep, http.MethodGet, p, nil, nil, "stat "+p)
	if err != nil {
		return driver.FileInfo{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return driver.FileInfo{}, restErr(resp, "stat "+p)
	}
	return driver.FileInfo{}, errorf("stat %s: %w", p, sberrors.ErrNotFound)
}

// Remove deletes path, and everything below a directory, through the
// process service: sandboxd's DELETE /v1/files/{path} resolves symbolic
// links first, so removing a link to a directory would delete the
// directory's contents. rm removes the link itself.
func (r *Runtime) Remove(ctx context.Context, id, p string) error {
	ep, err := r.endpoint(ctx, id)
	if err != nil {
		return err
	}
	if err := inRoot(ep, p); err != nil {
		return err
	}
	if p == ep.root {
		return errorf("remove %s: the root sandboxd serves: %w", p, sberrors.ErrPermission)
	}
	code, stderr, err := r.execute(ctx, ep, []string{"/bin/sh", "-c", `[ -e "$1" ] || [ -L "$1" ] || exit 3; exec rm -rf -- "$1"`, "sh", p})
	switch {
	case err != nil:
		return err
	case code == 0:
		return nil
	case code == 3:
		return errorf("remove %s: %w", p, sberrors.ErrNotFound)
	default:
		return errorf("remove %s: %w: %s", p, sberrors.ErrPermission, strings.TrimSpace(stderr))
	}
}

// MkdirAll runs mkdir -p through the process service (sandboxd's file API
// has no directory call); a failure is classified by what exists.
func (r *Runtime) MkdirAll(ctx context.Context, id, p string) error {
	ep, err := r.endpoint(ctx, id)
	if err != nil {
		return err
	}
	if err := inRoot(ep, p); err != nil {
		return err
	}
	code, stderr, err := r.execute(ctx, ep, []string{"mkdir", "-p", "--", p})
	if err != nil || code == 0 {
		return err
	}
	for q := p; q != ep.root && q != "/"; q = path.Dir(q) {
		if fi, serr := r.Stat(ctx, id, q); serr == nil {
			if !fi.IsDir() {
				return errorf("mkdir %s: %s: %w", p, q, sberrors.ErrNotDirectory)
			}
			break
		}
	}
	return errorf("mkdir %s: %w: %s", p, sberrors.ErrPermission, strings.TrimSpace(stderr))
}

// Rename runs mv through the process service; a missing source is
// NotFound.
func (r *Runtime) Rename(ctx context.Context, id, oldPath, newPath string) error {
	ep, err := r.endpoint(ctx, id)
	if err != nil {
		return err
	}
	for _, p := range []string{oldPath, newPath} {
		if err := inRoot(ep, p); err != nil {
			return err
		}
	}
	if oldPath == newPath {
		_, err := r.Stat(ctx, id, oldPath)
		return err
	}
	code, stderr, err := r.execute(ctx, ep, []string{"mv", "-f", "--", oldPath, newPath})
	if err != nil || code == 0 {
		return err
	}
	if strings.Contains(stderr, "subdirectory of itself") {
		return errorf("rename %s into itself (%s): %w", oldPath, newPath, sberrors.ErrInvalidArgument)
	}
	if _, serr := r.Stat(ctx, id, oldPath); serr != nil {
		return serr
	}
	if fi, serr := r.Stat(ctx, id, newPath); serr == nil && fi.IsDir() {
		return errorf("rename %s to %s: %w", oldPath, newPath, sberrors.ErrIsDirectory)
	}
	return errorf("rename %s to %s: %w: %s", oldPath, newPath, sberrors.ErrPermission, strings.TrimSpace(stderr))
}

// execute runs a short helper command with Execute and returns its exit
// code and stderr.
func (r *Runtime) execute(ctx context.Context, ep endpoint, argv []string) (int, string, error) {
	pc, err := r.process(ep)
	if err != nil {
		return 0, "", err
	}
	resp, err := pc.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: argv}})
	if err != nil {
		return 0, "", grpcErr(ctx, argv[0], err, false)
	}
	return int(resp.GetExitCode()), string(resp.GetStderr()), nil
}

// argv is the command line sandboxd runs for cmd: a shell line through
// /bin/sh -c, an argument vector through sh's exec, so a missing program
// is exit code 127 as the contract says (sandboxd itself answers a gRPC
// NotFound that it also uses for a missing working directory).
func argv(cmd *driver.Command) []string {
	if cmd.Args == nil {
		return []string{"/bin/sh", "-c", cmd.Shell}
	}
	return append([]string{"/bin/sh", "-c", `exec "$@"`, "sh"}, cmd.Args...)
}

// run is one process on a Start stream.
type run struct {
	r      *Runtime
	ep     endpoint
	pc     processv1.ProcessServiceClient
	pid    int32
	cancel context.CancelFunc
	stream grpc.ServerStreamingClient[processv1.StartResponse]

	mu             sync.Mutex
	stdout, stderr io.Writer
	done           chan struct{}
	status         driver.ExitStatus
	err            error
}

// exited reports whether the process's exit was seen (its stream ended
// with a status, not an error).
func (ru *run) exited() bool {
	select {
	case <-ru.done:
		return ru.err == nil
	default:
		return false
	}
}

// start opens the Start stream and waits for the process's InitEvent.
func (r *Runtime) start(ctx context.Context, id string, cmd *driver.Command) (*run, error) {
	ep, err := r.endpoint(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := inRoot(ep, cmd.Dir); err != nil {
		return nil, err
	}
	pc, err := r.process(ep)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	dir := cmd.Dir
	stream, err := pc.Start(sctx, &processv1.StartRequest{Config: &processv1.ProcessConfig{Command: argv(cmd), EnvVars: cmd.Env, Cwd: &dir}})
	if err != nil {
		cancel()
		return nil, grpcErr(ctx, "start in "+id, err, true)
	}
	first := make(chan error, 1)
	var msg *processv1.StartResponse
	go func() {
		var err error
		msg, err = stream.Recv()
		first <- err
	}()
	select {
	case err = <-first:
	case <-ctx.Done():
		cancel()
		<-first
		return nil, errorf("start in %s: %w", id, ctx.Err())
	}
	if err != nil {
		cancel()
		st, _ := status.FromError(err)
		if st.Code() == codes.NotFound || (st.Code() == codes.Internal && strings.Contains(st.Message(), "not a directory")) {
			// The working directory is missing or a file: chdir failed.
			if fi, serr := r.Stat(ctx, id, cmd.Dir); serr != nil {
				return nil, errorf("dir %s: %w", cmd.Dir, serr)
			} else if !fi.IsDir() {
				return nil, errorf("dir %s: %w", cmd.Dir, sberrors.ErrNotDirectory)
			}
		}
		// No InitEvent: nothing ran unless the process started and the
		// stream broke before its first message.
		return nil, grpcErr(ctx, "start in "+id, err, false)
	}
	init := msg.GetInit()
	if init == nil {
		cancel()
		return nil, errorf("start in %s: %w", id, sberrors.Errorf(sberrors.Internal, "sandboxd sent no InitEvent first"))
	}
	ru := &run{r: r, ep: ep, pc: pc, pid: init.GetProcessId(), cancel: cancel, stream: stream,
		stdout: cmd.Stdout, stderr: cmd.Stderr, done: make(chan struct{})}
	return ru, nil
}

// pump reads the stream to its ExitEvent, writing output as it comes.
func (ru *run) pump() {
	defer close(ru.done)
	defer ru.cancel()
	for {
		msg, err := ru.stream.Recv()
		if err != nil {
			ru.err = grpcErr(context.Background(), fmt.Sprintf("process %d in %s", ru.pid, ru.ep.id), err, false)
			if status.Code(err) == codes.Canceled {
				ru.err = errorf("process %d in %s: %w: the stream was closed", ru.pid, ru.ep.id, sberrors.ErrOutcomeUnknown)
			}
			return
		}
		switch ev := msg.Event.(type) {
		case *processv1.StartResponse_Stdout:
			ru.mu.Lock()
			w := ru.stdout
			ru.mu.Unlock()
			if w != nil {
				_, _ = w.Write(ev.Stdout)
			}
		case *processv1.StartResponse_Stderr:
			ru.mu.Lock()
			w := ru.stderr
			ru.mu.Unlock()
			if w != nil {
				_, _ = w.Write(ev.Stderr)
			}
		case *processv1.StartResponse_Exit:
			code := int(ev.Exit.GetExitCode())
			ru.status = driver.ExitStatus{ExitCode: code}
			return
		}
	}
}

// kill sends SIGKILL to the process group, bounded by a short detached
// context.
func (ru *run) kill() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = ru.pc.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: ru.pid, Signal: processv1.Signal_SIGNAL_SIGKILL})
}

// feed copies stdin to the process with WriteStdin, then sends EOF.
func (ru *run) feed(stdin io.Reader) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-ru.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if stdin != nil {
		buf := make([]byte, 32<<10)
		for {
			n, err := stdin.Read(buf)
			if n > 0 {
				if _, werr := ru.pc.WriteStdin(ctx, &processv1.WriteStdinRequest{ProcessId: ru.pid,
					Payload: &processv1.WriteStdinRequest_Input{Input: bytes.Clone(buf[:n])}}); werr != nil {
					return
				}
			}
			if err != nil {
				break
			}
		}
	}
	_, _ = ru.pc.WriteStdin(ctx, &processv1.WriteStdinRequest{ProcessId: ru.pid, Payload: &processv1.WriteStdinRequest_Eof{}})
}

// Exec runs cmd on a Start stream, streaming its output; cmd.Timeout ends
// the process group with SIGKILL (sandboxd has no timeout field).
func (r *Runtime) Exec(ctx context.Context, id string, cmd *driver.Command) (driver.ExitStatus, error) {
	ru, err := r.start(ctx, id, cmd)
	if err != nil {
		return driver.ExitStatus{}, err
	}
	go ru.pump()
	stdinDone := make(chan struct{})
	go func() {
		defer close(stdinDone)
		ru.feed(cmd.Stdin)
	}()
	finish := func() {
		if c, ok := cmd.Stdin.(io.Closer); ok {
			_ = c.Close()
		}
		<-stdinDone
	}
	timer := time.NewTimer(cmd.Timeout)
	defer timer.Stop()
	select {
	case <-ru.done:
		finish()
		if ru.err != nil {
			return driver.ExitStatus{}, ru.err
		}
		return ru.status, nil
	case <-timer.C:
		ru.kill()
		select {
		case <-ru.done:
		case <-time.After(ExecGrace):
			ru.cancel()
			<-ru.done
		}
		finish()
		return driver.ExitStatus{ExitCode: -1, TimedOut: true}, nil
	case <-ctx.Done():
		ru.kill()
		ru.cancel()
		<-ru.done
		finish()
		return driver.ExitStatus{}, errorf("exec in %s: %w", id, ctx.Err())
	}
}

// ExecGrace is how long Exec waits for the output of a command it killed
// at its timeout before it closes the stream.
const ExecGrace = 5 * time.Second

// handle is a background process on a Start stream this Runtime holds.
type handle struct {
	ru *run
}

// Start starts cmd in the background. sandboxd ties a process to the
// stream that started it, so the process lives as long as this Runtime
// (Close of the handle keeps it; Close of the Runtime ends it).
func (r *Runtime) Start(ctx context.Context, id string, cmd *driver.Command) (driver.ProcessHandle, error) {
	ru, err := r.start(ctx, id, cmd)
	if err != nil {
		return nil, err
	}
	go ru.pump()
	go ru.feed(cmd.Stdin)
	if cmd.Timeout > 0 {
		go func() {
			t := time.NewTimer(cmd.Timeout)
			defer t.Stop()
			select {
			case <-t.C:
				ru.kill()
			case <-ru.done:
			}
		}()
	}
	r.mu.Lock()
	if r.procs == nil {
		r.procs = map[string]*run{}
	}
	r.procs[procKey(id, int(ru.pid))] = ru
	r.mu.Unlock()
	return &handle{ru: ru}, nil
}

func procKey(id string, pid int) string { return id + "/" + strconv.Itoa(pid) }

// Attach connects to a process this Runtime started: sandboxd streams a
// process's output only to the stream that started it, so another Client
// cannot attach (Capabilities.AttachAcrossClients is false).
func (r *Runtime) Attach(ctx context.Context, id string, pid int, stdout, stderr io.Writer) (driver.ProcessHandle, error) {
	if _, err := r.claim(ctx, id); err != nil {
		return nil, err
	}
	r.mu.Lock()
	ru := r.procs[procKey(id, pid)]
	r.mu.Unlock()
	if ru == nil {
		return nil, errorf("process %d in %s: %w (sandboxd streams a process only to the client that started it)", pid, id, sberrors.ErrNotFound)
	}
	select {
	case <-ru.done:
		return nil, errorf("process %d in %s has exited: %w", pid, id, sberrors.ErrNotFound)
	default:
	}
	ru.mu.Lock()
	ru.stdout, ru.stderr = stdout, stderr
	ru.mu.Unlock()
	return &handle{ru: ru}, nil
}

// PID is sandboxd's process id.
func (h *handle) PID() int { return int(h.ru.pid) }

// Wait waits for the ExitEvent.
func (h *handle) Wait(ctx context.Context) (driver.ExitStatus, error) {
	select {
	case <-h.ru.done:
		if h.ru.err != nil {
			return driver.ExitStatus{}, h.ru.err
		}
		return h.ru.status, nil
	case <-ctx.Done():
		return driver.ExitStatus{}, errorf("wait for process %d: %w", h.ru.pid, ctx.Err())
	}
}

// Signal sends sig to the process group; sandboxd delivers SIGINT,
// SIGKILL and SIGTERM only. A process that has exited is not signalled,
// and that is no error.
func (h *handle) Signal(ctx context.Context, sig syscall.Signal) error {
	var s processv1.Signal
	switch sig {
	case syscall.SIGKILL:
		s = processv1.Signal_SIGNAL_SIGKILL
	case syscall.SIGTERM:
		s = processv1.Signal_SIGNAL_SIGTERM
	case syscall.SIGINT:
		s = processv1.Signal_SIGNAL_SIGINT
	default:
		return errorf("signal %v: %w (sandboxd sends SIGINT, SIGTERM and SIGKILL)", sig, sberrors.ErrUnimplemented)
	}
	if h.ru.exited() {
		return nil
	}
	if _, err := h.ru.pc.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: h.ru.pid, Signal: s}); err != nil {
		err = grpcErr(ctx, fmt.Sprintf("signal process %d", h.ru.pid), err, false)
		if sberrors.CodeOf(err) == sberrors.NotFound && iox.WaitClosed(ctx, h.ru.done, time.Second) && h.ru.exited() {
			return nil // it exited as the signal came
		}
		return err
	}
	return nil
}

// Close stops passing output to the handle's writers; the process runs on.
func (h *handle) Close() error {
	h.ru.mu.Lock()
	h.ru.stdout, h.ru.stderr = nil, nil
	h.ru.mu.Unlock()
	return nil
}
