package daytonafake

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
)

// FailEvery injects f into every request whose method is method (any when
// empty) and whose path ends with suffix (any when empty), until the
// returned function is called, for instance every output download of one
// sandbox: ("GET", "/toolbox/"+id+"/files/download"). Faults armed with
// FailNext or FailEvery are tried in the order they were armed.
func (s *Server) FailEvery(method, suffix string, f Fault) (stop func()) {
	on := true
	s.mu.Lock()
	s.faults = append(s.faults, fault{method: method, suffix: suffix, f: f, every: &on})
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.faults = slices.DeleteFunc(s.faults, func(ft fault) bool { return ft.every == &on })
	}
}

// stall handles r, then writes the head of the answer and half its body
// and holds the connection open, moving no more bytes, until the client
// closes it or the server is closed.
func (s *Server) stall(w http.ResponseWriter, r *http.Request, next http.Handler) {
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r)
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
		if k == "Content-Length" {
			continue
		}
		for _, v := range vs {
			fmt.Fprintf(buf, "%s: %s\r\n", k, v)
		}
	}
	fmt.Fprintf(buf, "Content-Length: %d\r\n\r\n", len(body))
	buf.Write(body[:len(body)/2])
	_ = buf.Flush()
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		_, _ = io.Copy(io.Discard, buf) // ends when the client closes
	}()
	select {
	case <-gone:
	case <-s.quit:
	}
	_ = conn.Close()
	<-gone
}
