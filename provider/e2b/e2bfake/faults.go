package e2bfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// FaultKind is a kind of injected failure.
type FaultKind int

// The faults the fake can inject.
const (
	// ResetBeforeAdmission resets (TCP RST), as soon as it is injected,
	// every idle keep-alive connection of the server Path belongs to (the
	// control plane or envd; both for ""), before any request on them is
	// read, as a server or proxy that drops idle connections does. The
	// client's next request there finds its pooled connection dead and
	// nothing runs. Times is not used; Hits reports how many connections
	// were reset.
	ResetBeforeAdmission FaultKind = iota + 1
	// ResetAfterAdmission lets the handler run and closes the connection
	// after the first bytes of the response were sent (for Start, after
	// the start event): the work happened, the client cannot know.
	ResetAfterAdmission
	// ProxyBadGateway answers 502 as E2B's edge proxy does for a sandbox
	// it cannot reach, without running the handler.
	ProxyBadGateway
	// Hang never answers: the request blocks until the client gives up or
	// the server closes.
	Hang
	// TooManyRequests answers 429 with the concurrency-limit body.
	TooManyRequests
	// StallResponse runs the handler but holds back its response until the
	// client gives up: the work starts, the client never hears of it.
	StallResponse
	// DropResponse lets the handler run to its end, discards its whole
	// response and closes the connection: the work happened and not one
	// byte of the answer reached the client.
	DropResponse
	// StallStream lets the response begin (status, headers and what the
	// handler wrote up to its first flush: for Start, the start event), then
	// stops moving bytes without closing the connection: the handler runs
	// to its end (the process runs, envd's end event or deadline_exceeded
	// is written) but nothing more reaches the client, and the connection
	// stays open until the client gives up or the server closes.
	StallStream
	// SlowAnswer waits Fault.Delay (or until the client gives up) before
	// running the handler, as an API under load answers late.
	SlowAnswer
	// RewriteState runs the handler and answers every sandbox's "state"
	// as Fault.State (the empty string included), as a newer API with
	// states this client does not know, or a response missing the field,
	// would. It applies to the JSON answers of the control plane
	// (GET /sandboxes/{id}, GET /v2/sandboxes).
	RewriteState
)

// Fault is one injected failure. Path selects the requests it applies to:
// a prefix of "METHOD /path" such as "POST /process.Process/Start",
// "GET /files" or "POST /sandboxes" ("" matches every request on either
// server). Times is how many matching requests fail (default 1).
type Fault struct {
	Kind  FaultKind
	Path  string
	Times int
	// Delay is how long SlowAnswer waits.
	Delay time.Duration
	// State is the state RewriteState answers.
	State string

	mu   sync.Mutex
	hits int
}

// Hits returns how many requests the fault has answered so far.
func (f *Fault) Hits() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits
}

// Inject arms f and returns it. Faults are tried in the order injected.
func (s *Server) Inject(f *Fault) *Fault {
	if f.Times <= 0 {
		f.Times = 1
	}
	if f.Kind == ResetBeforeAdmission {
		api, envd := servesPath(f.Path)
		n := s.conns.ResetIdle(func(tag string) bool { return tag == "envd" && envd || tag == "api" && api })
		f.mu.Lock()
		f.hits += n
		f.mu.Unlock()
		return f
	}
	s.mu.Lock()
	s.faults = append(s.faults, f)
	s.mu.Unlock()
	return f
}

// take returns the first armed fault that matches r, consuming one use.
func (s *Server) take(r *http.Request) *Fault {
	key := r.Method + " " + r.URL.Path
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if !strings.HasPrefix(key, f.Path) {
			continue
		}
		f.mu.Lock()
		f.hits++
		done := f.hits >= f.Times
		f.mu.Unlock()
		if done {
			s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
		}
		return f
	}
	return nil
}

func (s *Server) faulty(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer s.conns.Handling(r)()
		if s.onRequest != nil {
			s.onRequest(r)
		}
		f := s.take(r)
		if f == nil {
			next.ServeHTTP(w, r)
			return
		}
		switch f.Kind {
		case DropResponse:
			next.ServeHTTP(&dropWriter{header: http.Header{}}, r)
			hijackClose(w)
		case ResetAfterAdmission:
			next.ServeHTTP(&resetWriter{ResponseWriter: w}, r)
		case ProxyBadGateway:
			writeJSON(w, http.StatusBadGateway, map[string]any{
				"sandboxId": r.Header.Get("E2b-Sandbox-Id"), "message": "The sandbox was not found", "code": http.StatusBadGateway})
		case Hang:
			select {
			case <-r.Context().Done():
			case <-s.closing:
			}
		case StallResponse:
			next.ServeHTTP(&stallWriter{ResponseWriter: w, done: r.Context().Done(), closing: s.closing}, r)
		case StallStream:
			next.ServeHTTP(&freezeWriter{ResponseWriter: w}, r)
			select { // the response never ends
			case <-r.Context().Done():
			case <-s.closing:
			}
		case SlowAnswer:
			t := time.NewTimer(f.Delay)
			select {
			case <-t.C:
				next.ServeHTTP(w, r)
			case <-r.Context().Done():
				t.Stop()
			case <-s.closing:
				t.Stop()
			}
		case RewriteState:
			rec := &recordWriter{header: w.Header(), code: http.StatusOK}
			next.ServeHTTP(rec, r)
			body := rewriteState(rec.body.Bytes(), f.State)
			w.Header().Del("Content-Length")
			w.WriteHeader(rec.code)
			_, _ = w.Write(body)
		case TooManyRequests:
			writeError(w, http.StatusTooManyRequests, "Rate limit exceeded, please try again later.")
		default:
			panic(fmt.Sprintf("e2bfake: unknown fault kind %d", f.Kind))
		}
	})
}

func hijackClose(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("e2bfake: response writer cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// resetWriter passes the handler's first write through, flushes it and
// closes the connection; later writes fail.
type resetWriter struct {
	http.ResponseWriter
	broken bool
}

func (rw *resetWriter) Write(p []byte) (int, error) {
	if rw.broken {
		return 0, http.ErrHandlerTimeout
	}
	n, err := rw.ResponseWriter.Write(p)
	rw.Flush()
	return n, err
}

func (rw *resetWriter) Flush() {
	if rw.broken {
		return
	}
	if f, ok := rw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	rw.broken = true
	hijackClose(rw.ResponseWriter)
}

func (rw *resetWriter) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// stallWriter blocks the handler's writes until the request ends.
type stallWriter struct {
	http.ResponseWriter
	done, closing <-chan struct{}
}

func (sw *stallWriter) Write(p []byte) (int, error) {
	select {
	case <-sw.done:
	case <-sw.closing:
	}
	return 0, http.ErrHandlerTimeout
}

func (sw *stallWriter) WriteHeader(int) {}

func (sw *stallWriter) Flush() {}

func (sw *stallWriter) Unwrap() http.ResponseWriter { return sw.ResponseWriter }

// envdPaths are the prefixes of envd's routes; every other path is the
// control plane's.
var envdPaths = []string{"/files", "/envs", "/health", "/init", "/process.", "/filesystem."}

// servesPath reports which servers a fault Path ("METHOD /path" prefix)
// can match.
func servesPath(p string) (api, envd bool) {
	if _, rest, ok := strings.Cut(p, " "); ok {
		p = rest
	} else if !strings.HasPrefix(p, "/") {
		p = ""
	}
	if p == "" || p == "/" {
		return true, true
	}
	for _, e := range envdPaths {
		if strings.HasPrefix(p, e) || strings.HasPrefix(e, p) {
			return false, true
		}
	}
	return true, false
}

// dropWriter swallows a handler's whole response.
type dropWriter struct{ header http.Header }

func (d *dropWriter) Header() http.Header         { return d.header }
func (d *dropWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *dropWriter) WriteHeader(int)             {}
func (d *dropWriter) Flush()                      {}

// freezeWriter passes the handler's writes through up to its first
// flush (connect flushes after each message: for Start, that is the start
// event) and flushes them; later writes and flushes are swallowed.
type freezeWriter struct {
	http.ResponseWriter
	frozen bool
}

func (fw *freezeWriter) Write(p []byte) (int, error) {
	if fw.frozen {
		return len(p), nil
	}
	return fw.ResponseWriter.Write(p)
}

func (fw *freezeWriter) WriteHeader(code int) {
	if !fw.frozen {
		fw.ResponseWriter.WriteHeader(code)
	}
}

func (fw *freezeWriter) Flush() {
	if fw.frozen {
		return
	}
	if f, ok := fw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	fw.frozen = true
}

func (fw *freezeWriter) Unwrap() http.ResponseWriter { return fw.ResponseWriter }

// recordWriter keeps a response to rewrite it before it is sent.
type recordWriter struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (rw *recordWriter) Header() http.Header         { return rw.header }
func (rw *recordWriter) Write(p []byte) (int, error) { return rw.body.Write(p) }
func (rw *recordWriter) WriteHeader(code int)        { rw.code = code }

// rewriteState sets the "state" field of a JSON object, or of each object
// of a JSON array, to state; other bodies are returned as they are.
func rewriteState(body []byte, state string) []byte {
	var one map[string]any
	if json.Unmarshal(body, &one) == nil {
		if _, ok := one["state"]; ok {
			one["state"] = state
		}
		if b, err := json.Marshal(one); err == nil {
			return b
		}
		return body
	}
	var many []map[string]any
	if json.Unmarshal(body, &many) == nil {
		for _, m := range many {
			m["state"] = state
		}
		if b, err := json.Marshal(many); err == nil {
			return b
		}
	}
	return body
}
