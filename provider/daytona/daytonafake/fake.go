// Package daytonafake is an in-process fake of Daytona: the main API (the
// NestJS service under /api) and the toolbox API (the daemon in each
// sandbox, reached through the toolbox proxy at /toolbox/{id}/...), served
// by one httptest server and speaking the real wire protocol. Commands and
// files are executed for real through a backing driver.Runtime (the local
// provider in this module's tests), so an adapter tested against it does
// real work.
//
// It enforces what Daytona enforces, as recorded in the project's research
// notes (research/daytona.md, research/daemons.md):
//   - Authorization: Bearer with the fake's key on both APIs (401 otherwise,
//     each API with its own error body shape);
//   - sandbox states and their transitions (creating → started; stop →
//     stopping then stopped; delete → destroying then 404; archive), the
//     derived state names in lifecycle responses, auto-stop after the
//     auto-stop interval of inactivity (toolbox calls count as activity);
//   - a stopped sandbox refuses toolbox calls with 400 "... Is the Sandbox
//     started?", an archived one with 404 "sandbox container not found";
//   - the status-code quirks: 201 from the POST setters, PUT labels answers
//     the full Sandbox, 409 for a taken name, empty bodies on most file
//     errors, 409 when a move's destination exists;
//   - /process/execute feeds the command to sh on stdin, merges stdout and
//     stderr into one JSON string (so invalid UTF-8 becomes U+FFFD), and on
//     timeout kills the command and answers 408 with the output thrown away;
//   - session output split or merged according to X-Daytona-SDK-Version;
//   - label filters (JSON containment), state filters and cursor pages on
//     GET /sandbox, or the older plain array (WithLegacyList).
//   - GET /system/metrics answers the daemon's SystemMetrics, sampled from
//     the backend's driver.Metrics (see metrics.go).
//
// Faults are injected with FailNext (502, 429, idle connections reset
// before a request is read, a response cut in the middle or dropped whole
// after the request was handled, a request that never answers, a sandbox
// deleted or stopped just before the request is handled) and
// FailNextCreate; Stop, Archive, Delete and Advance change
// sandboxes behind a client's back.
//
// # Differences from the real service
//
// The fake deliberately differs from Daytona in these ways:
//   - One server answers both APIs; the toolbox proxy is {server}/toolbox
//     and the older path /api/toolbox/{id}/toolbox is served too.
//   - Creation is synchronous: a snapshot name is recorded, not checked;
//     buildInfo builds nothing; resources are recorded and capped per
//     sandbox (4 CPU, 8 GiB, 10 GiB), not enforced; there is no quota.
//     "creating" is seen only with WithCreatePolls.
//   - Lifecycle responses show the transitional state (stopping,
//     destroying, archiving) but the transition completes at once; start
//     answers started directly (no restoring). Auto-stop, auto-archive and
//     auto-delete are applied lazily when a sandbox is next looked at, on
//     the fake's clock (Advance), not by a timer.
//   - A stopped or archived sandbox keeps its backend sandbox: files stay,
//     session commands are killed, but a /process/execute command already
//     running is not.
//   - The daemon's working directory (the base of relative paths,
//     /work-dir, /user-home-dir) is the backend's home. Paths the backend
//     does not serve (provider/local serves only the home) fail with its
//     error mapped to 403/404/400 (/files/folder: 400 for every failure, as
//     the daemon). FileInfo owner and group are "1001".
//   - /process/execute runs bash when the backend has it, else sh (the
//     daemon picks zsh, then bash, from /etc/shells). A client that
//     disconnects leaves the command running, as the daemon does.
//   - Each session command runs as its own process (sh -c), not written
//     into one long-lived shell: cd and export do not carry over, exit does
//     not hang the request, stdin is closed (no /input), there is no
//     entrypoint session and no WebSocket log following.
//   - GET /sandbox sorts newest first by creation (the server's default is
//     lastActivityAt), ignores sort, order and the name/id/resource
//     filters, and its cursor is its own opaque string.
//   - Rate limits come only from Fault429; repeated bad keys are not
//     throttled.
//   - Download honours only "Range: bytes=N-".
//   - networkBlockAll is enforced (the backend sandbox gets no network).
//     networkAllowList (IPv4 addresses and CIDRs, at most 10) and
//     domainAllowList are validated, recorded, echoed in the Sandbox DTO
//     and changed by POST /sandbox/{id}/network-settings; they are
//     enforced where the backend enforces allow-lists (the local
//     provider, by its egress proxy: an HTTP/HTTPS/SOCKS5 proxy, so a
//     program must use the proxy variables, where Daytona filters every
//     connection): the backend sandbox is created with them as its
//     network policy, and network-settings changes it (SetNetwork) before
//     answering, or answers 500 saying why the backend could not. On any
//     other backend they are recorded only and the backend sandbox keeps
//     the network the backend gives it.
//   - A destroyed or unknown id on the toolbox gives 404 with a gin body
//     "failed to get sandbox" (the real proxy's exact answer is unverified).
//   - Not served: fork, snapshot, volumes, preview and signed URLs, SSH,
//     resize, recover, VM pause, bulk upload and
//     download, find/search/replace/permissions, git, LSP, PTY, code-run,
//     ports, build logs.
package daytonafake

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/conntrack"
	"github.com/sandboxkit/sandbox/internal/fakeserve"
	"github.com/sandboxkit/sandbox/internal/inflight"
	"github.com/sandboxkit/sandbox/internal/opts"
)

// Fault is a failure FailNext injects into one matching request.
type Fault int

// The faults.
const (
	// Fault502 answers 502 with an empty body, as the proxy does while a
	// sandbox changes state or after the daemon died. The request is not
	// handled.
	Fault502 Fault = iota + 1
	// Fault429 answers 429 with the NestJS throttler body and rate-limit
	// headers. The request is not handled.
	Fault429
	// FaultResetMidBody handles the request, then sends the status line,
	// the headers and half of the body and resets the connection: the
	// request was executed but the client cannot know its outcome.
	FaultResetMidBody
	// FaultHang never answers: the request hangs until the client gives up
	// or the server is closed. The request is not handled.
	FaultHang
	// FaultDelete deletes the sandbox named in the request's path (as if
	// another client deleted it between list and use), then handles the
	// request.
	FaultDelete
	// FaultStop stops the sandbox named in the request's path (as auto-stop
	// does), then handles the request.
	FaultStop
	// FaultResetBeforeAdmission resets (TCP RST), as soon as FailNext is
	// called, every idle keep-alive connection, before any request on them
	// is read, as a server or proxy that drops idle connections does: the
	// client's next request finds its pooled connection dead and nothing
	// runs. method and suffix are not used (see ResetIdleConnections).
	FaultResetBeforeAdmission
	// FaultDropResponse handles the request to its end, then closes the
	// connection without sending a byte of the answer, as a proxy that
	// cuts a long request does: the work happened, the client cannot know.
	FaultDropResponse
	// FaultStallResponse handles the request to its end but holds back
	// the whole answer until the client gives up (or the server closes):
	// the work happened, the client never hears of it.
	FaultStallResponse
	// FaultStall handles the request, sends the status line, the headers
	// and half of the body, then stops moving bytes without closing the
	// connection, until the client gives up or the server is closed, as a
	// proxy whose upstream froze does: the work happened, the answer
	// never completes.
	FaultStall
	// FaultNotFound answers 404 with an empty body, as the daemon's file
	// handlers do for a missing file. The request is not handled.
	FaultNotFound
	// FaultLateAdmission holds the request until the client has given up
	// on it (its context ended, the connection closed), then handles it a
	// moment later, as a server that was slow to act on a request the
	// caller abandoned: the work happens after the caller left.
	FaultLateAdmission
)

// config is what the options set.
type config struct {
	key         string
	addr        string
	createPolls int
	legacyList  bool
	noProxyURL  bool
	onRequest   func(*http.Request)
	bad         opts.Errors
}

// Option configures a Server. New panics, as httptest.NewServer does when
// it cannot listen, with an InvalidArgument error naming any option given
// an invalid value.
type Option func(*config)

// WithAPIKey sets the key clients must send as "Authorization: Bearer
// <key>". The default is a random dtn_ key; read it with APIKey.
func WithAPIKey(key string) Option {
	return func(c *config) {
		if key == "" {
			c.bad.Invalid("WithAPIKey", "empty key")
		}
		c.key = key
	}
}

// WithRequestHook makes the fake call f with each request it receives
// before it answers: tests use it to see what reached the service
// (headers such as traceparent). f must not keep or change the request,
// and must be safe for concurrent use.
func WithRequestHook(f func(*http.Request)) Option { return func(c *config) { c.onRequest = f } }

// WithCreatePolls makes a new sandbox report "creating" to its first n
// GETs (and refuse toolbox calls with 502) before it is started, so
// clients must poll. The default 0 answers POST /sandbox with "started",
// as the real server does after waiting for it.
func WithCreatePolls(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.bad.Invalid("WithCreatePolls", "%d is negative", n)
		}
		c.createPolls = n
	}
}

// WithAddr makes the fake listen on addr (a loopback "host:port"); the
// default picks a free port. Restart serves again on the same address.
func WithAddr(addr string) Option { return func(c *config) { c.addr = addr } }

// WithLegacyList makes GET /sandbox answer a plain array of every match,
// as servers before May 2026 did, instead of a cursor page.
func WithLegacyList() Option { return func(c *config) { c.legacyList = true } }

// WithoutToolboxProxyURL leaves toolboxProxyUrl out of the Sandbox DTO,
// as servers before February 2026 did; clients then ask
// GET /sandbox/{id}/toolbox-proxy-url.
func WithoutToolboxProxyURL() Option { return func(c *config) { c.noProxyURL = true } }

// Server is a running fake. Close it when done.
type Server struct {
	backend driver.Runtime
	portTr  *http.Transport // the preview proxy's connections to user ports
	writes  inflight.Writes // uploads in progress, by backend id and path
	config
	ts *fakeserve.Server

	baseCtx   context.Context
	stop      context.CancelFunc
	quit      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once

	mu        sync.Mutex
	sandboxes map[string]*sbx // by id
	order     int64
	faults    []fault
	conns     conntrack.Tracker // for FaultResetBeforeAdmission
	counts    map[string]int
	skew      time.Duration
	nextFail  *createFailure
	snaps     snapStore // snapshots.go
}

type fault struct {
	method, suffix string
	f              Fault
	every          *bool // FailEvery: not consumed while *every
}

type createFailure struct{ state, reason string }

// New starts a fake whose sandboxes run on backend. The fake creates one
// backend sandbox per Daytona sandbox and destroys it on delete and Close.
func New(backend driver.Runtime, opts ...Option) *Server {
	cfg := config{key: "dtn_" + randHex(16)}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.bad.Err("daytonafake"); err != nil {
		panic(err)
	}
	s := &Server{
		backend:   backend,
		config:    cfg,
		quit:      make(chan struct{}),
		sandboxes: map[string]*sbx{},
		counts:    map[string]int{},
	}
	s.baseCtx, s.stop = context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("/api/toolbox/{id}/toolbox/{rest...}", s.toolbox)
	mux.HandleFunc("/toolbox/{id}/{rest...}", s.toolbox)
	mux.HandleFunc("/api/", s.api)
	s.portTr = &http.Transport{}
	root := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == AuthPath {
			// Before the preview hosts: a client following the redirect
			// sends X-Forwarded-Host along.
			authPage(w, r)
			return
		}
		if host, ok := previewHost(r); ok {
			s.preview(w, r, host)
			return
		}
		mux.ServeHTTP(w, r)
	})
	ts, err := fakeserve.Start(s.addr, s.faulty(root), func(hs *http.Server) { s.conns.Serve(hs, "toolbox") })
	if err != nil {
		panic("daytonafake: " + err.Error())
	}
	s.ts = ts
	return s
}

// URL returns the main API's base URL (what DAYTONA_API_URL holds), ending
// in /api.
func (s *Server) URL() string { return s.ts.URL + "/api" }

// ToolboxURL returns the toolbox proxy's base URL (the toolboxProxyUrl of
// every sandbox).
func (s *Server) ToolboxURL() string { return s.ts.URL + "/toolbox" }

// APIKey returns the key clients must send.
func (s *Server) APIKey() string { return s.key }

// Client returns an HTTP client for the fake's server.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// Restart stops the server as a crash would and serves again on the same
// address: idle keep-alive connections are reset (TCP RST, so a client's
// next write on one fails and it can tell nothing was sent) and every
// other connection is closed, so requests in flight get no answer. The
// sandboxes, their backends and their commands survive, as they do when
// Daytona's API restarts.
func (s *Server) Restart() error {
	s.ResetIdleConnections()
	return s.ts.Restart()
}

// Close stops the server, ends every running command and destroys the
// backend sandboxes. Calling it again does nothing.
func (s *Server) Close() {
	s.closeOnce.Do(s.close)
}

func (s *Server) close() {
	close(s.quit)
	s.stop()
	s.ts.Close()
	s.portTr.CloseIdleConnections()
	s.mu.Lock()
	var all []*sbx
	for _, b := range s.sandboxes {
		all = append(all, b)
	}
	s.mu.Unlock()
	for _, b := range all {
		b.killSessions()
	}
	s.wg.Wait()
	s.closeSnapshots()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, b := range all {
		if b.stored != stateDestroyed {
			_ = s.backend.Destroy(ctx, b.backendID)
		}
	}
}

// FailNext injects f into the next request whose method is method (any
// when empty) and whose path ends with suffix (any when empty), such as
// ("POST", "/process/execute") or ("GET", "/files/download").
func (s *Server) FailNext(method, suffix string, f Fault) {
	if f == FaultResetBeforeAdmission {
		s.ResetIdleConnections()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, fault{method: method, suffix: suffix, f: f})
}

// FailNextCreate makes the next created sandbox end in state (error or
// build_failed) with reason as its errorReason instead of starting.
func (s *Server) FailNextCreate(state, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextFail = &createFailure{state, reason}
}

// Count returns how many requests with method whose path ends with suffix
// the fake has received (faulted ones included).
func (s *Server) Count(method, suffix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, c := range s.counts {
		m, p, _ := strings.Cut(k, " ")
		if (method == "" || m == method) && strings.HasSuffix(p, suffix) {
			n += c
		}
	}
	return n
}

// Advance moves the fake's clock forward by d, so that auto-stop and the
// other intervals can fire without waiting.
func (s *Server) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skew += d
}

// Stop stops a started sandbox as auto-stop does (processes end, files
// stay). It reports whether the sandbox was started.
func (s *Server) Stop(id string) bool {
	s.mu.Lock()
	b := s.sandboxes[id]
	ok := b != nil && b.stored == stateStarted
	if ok {
		b.stored = stateStopped
		b.updated = s.now()
	}
	s.mu.Unlock()
	if ok {
		b.killSessions()
	}
	return ok
}

// Archive moves a stopped sandbox to archived. It reports whether it was
// stopped.
func (s *Server) Archive(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.sandboxes[id]
	if b == nil || b.stored != stateStopped {
		return false
	}
	b.stored = stateArchived
	return true
}

// Delete deletes a sandbox as another client would. It reports whether
// the sandbox existed.
func (s *Server) Delete(id string) bool {
	s.mu.Lock()
	b := s.sandboxes[id]
	ok := b != nil && b.stored != stateDestroyed
	if ok {
		b.stored = stateDestroyed
	}
	s.mu.Unlock()
	if ok {
		s.destroyBackend(b)
	}
	return ok
}

// Sandboxes returns the ids of the sandboxes that are not destroyed, in
// creation order.
func (s *Server) Sandboxes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var live []*sbx
	for _, b := range s.sandboxes {
		s.tickLocked(b)
		if b.stored != stateDestroyed {
			live = append(live, b)
		}
	}
	slices.SortFunc(live, func(a, b *sbx) int { return int(a.seq - b.seq) })
	ids := make([]string, len(live))
	for i, b := range live {
		ids[i] = b.id
	}
	return ids
}

// State returns the stored state of a sandbox ("" when unknown).
func (s *Server) State(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.sandboxes[id]; b != nil {
		s.tickLocked(b)
		return b.stored
	}
	return ""
}

// Sessions returns how many toolbox sessions exist in a sandbox.
func (s *Server) Sessions(id string) int {
	s.mu.Lock()
	b := s.sandboxes[id]
	s.mu.Unlock()
	if b == nil {
		return 0
	}
	b.smu.Lock()
	defer b.smu.Unlock()
	return len(b.sessions)
}

func (s *Server) destroyBackend(b *sbx) {
	b.killSessions()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.backend.Destroy(ctx, b.backendID)
}

func (s *Server) now() time.Time { return time.Now().Add(s.skew) }

// faulty counts requests and applies injected faults.
func (s *Server) faulty(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer s.conns.Handling(r)()
		if s.onRequest != nil {
			s.onRequest(r)
		}
		s.mu.Lock()
		s.counts[r.Method+" "+r.URL.Path]++
		var f Fault
		for i, ft := range s.faults {
			if (ft.method == "" || ft.method == r.Method) && strings.HasSuffix(r.URL.Path, ft.suffix) {
				f = ft.f
				if ft.every == nil {
					s.faults = append(s.faults[:i], s.faults[i+1:]...)
				}
				break
			}
		}
		s.mu.Unlock()
		switch f {
		case Fault502:
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusBadGateway)
		case Fault429:
			h := w.Header()
			h.Set("X-RateLimit-Limit-authenticated", "10000")
			h.Set("X-RateLimit-Remaining-authenticated", "0")
			h.Set("X-RateLimit-Reset-authenticated", "1")
			h.Set("Retry-After-authenticated", "1")
			nestError(w, r, http.StatusTooManyRequests, "ThrottlerException: Too Many Requests")
		case FaultDropResponse:
			next.ServeHTTP(httptest.NewRecorder(), r)
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
				}
			}
		case FaultHang:
			select {
			case <-r.Context().Done():
			case <-s.quit:
			}
		case FaultStallResponse:
			next.ServeHTTP(httptest.NewRecorder(), r)
			select {
			case <-r.Context().Done():
			case <-s.quit:
			}
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
				}
			}
		case FaultResetMidBody:
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			resetMidBody(w, rec)
		case FaultStall:
			s.stall(w, r, next)
		case FaultLateAdmission:
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			select {
			case <-r.Context().Done():
			case <-s.quit:
				return
			}
			time.Sleep(300 * time.Millisecond)
			next.ServeHTTP(httptest.NewRecorder(), r.WithContext(context.WithoutCancel(r.Context())))
		case FaultNotFound:
			emptyError(w, http.StatusNotFound)
		case FaultDelete, FaultStop:
			if id := sandboxInPath(r.URL.Path); id != "" {
				if f == FaultDelete {
					s.Delete(id)
				} else {
					s.Stop(id)
				}
			}
			next.ServeHTTP(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// sandboxInPath finds the sandbox id in a main-API or toolbox path.
func sandboxInPath(p string) string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "toolbox":
		return parts[1]
	case len(parts) >= 3 && parts[0] == "api" && (parts[1] == "sandbox" || parts[1] == "toolbox"):
		return parts[2]
	}
	return ""
}

// resetMidBody writes the recorded response's head and half its body, then
// resets the connection.
func resetMidBody(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("daytonafake: response writer cannot be hijacked")
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	body := rec.Body.Bytes()
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\n", rec.Code, http.StatusText(rec.Code))
	for k, vs := range rec.Header() {
		for _, v := range vs {
			fmt.Fprintf(buf, "%s: %s\r\n", k, v)
		}
	}
	fmt.Fprintf(buf, "Content-Length: %d\r\n\r\n", len(body)+1)
	buf.Write(body[:len(body)/2])
	buf.Flush()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}

// nestError writes the main API's (NestJS) error body.
func nestError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	writeJSON(w, status, map[string]any{
		"path": r.URL.Path, "timestamp": time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
		"statusCode": status, "error": http.StatusText(status), "message": msg,
	})
}

// ginError writes the toolbox's (gin) error body.
func ginError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	writeJSON(w, status, map[string]any{
		"statusCode": status, "message": msg, "code": code,
		"timestamp": time.Now().UTC().Format(time.RFC3339), "path": r.URL.Path, "method": r.Method,
	})
}

// emptyError answers status with an empty body, as the daemon's file
// handlers do.
func emptyError(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(status)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"statusCode":500,"message":"marshal"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func uuid4() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// bearer reports whether r carries the fake's key.
func (s *Server) bearer(r *http.Request) bool {
	return r.Header.Get("Authorization") == "Bearer "+s.key
}
