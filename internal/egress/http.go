package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// hopHeaders are the hop-by-hop headers (RFC 9110 §7.6.1) a proxy does
// not forward; so is every Proxy-* header.
var hopHeaders = map[string]bool{
	"Connection":          true,
	"Proxy-Connection":    true,
	"Keep-Alive":          true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Te":                  true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
}

// stripHop removes hop-by-hop headers from h and returns the protocol
// the message asks to upgrade to, if any.
func stripHop(h http.Header) (upgrade string) {
	for _, v := range h["Connection"] {
		for _, tok := range strings.Split(v, ",") {
			tok = strings.TrimSpace(tok)
			if strings.EqualFold(tok, "upgrade") {
				upgrade = h.Get("Upgrade")
			}
			if tok != "" {
				h.Del(tok)
			}
		}
	}
	for k := range h {
		if hopHeaders[k] || strings.HasPrefix(k, "Proxy-") {
			delete(h, k)
		}
	}
	return upgrade
}

var (
	errIdle     = errors.New("no request")
	errTooLarge = errors.New("request headers too large")
	errBusy     = errors.New("too many request headers in flight")
)

// headReader reads from a connection; while a head is read (n is not
// MaxInt64) it stops at n bytes and charges what it reads to a budget
// shared by all connections, failing with errBusy when the budget is
// spent.
type headReader struct {
	r       io.Reader
	n       int64
	budget  *atomic.Int64 // nil: none
	charged int64
	over    bool
}

func (h *headReader) Read(b []byte) (int, error) {
	if h.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > h.n {
		b = b[:h.n]
	}
	k, err := h.r.Read(b)
	if h.n != math.MaxInt64 {
		h.n -= int64(k)
		if h.budget != nil && k > 0 {
			h.charged += int64(k)
			if h.budget.Add(int64(k)) > headerBudget {
				h.over = true
				return k, errBusy
			}
		}
	}
	return k, err
}

// start begins a head of at most limit bytes.
func (h *headReader) start(limit int64) { h.n = limit }

// end ends a head: it gives back what it charged and reports whether
// the head reached its limit and whether the budget was spent.
func (h *headReader) end() (tooLarge, busy bool) {
	tooLarge, busy = h.n == 0, h.over
	if h.budget != nil {
		h.budget.Add(-h.charged)
	}
	h.n, h.charged, h.over = math.MaxInt64, 0, false
	return tooLarge, busy
}

// reqReader reads request heads from a client connection with a size
// cap, a share of the proxy-wide header budget and deadlines on the
// header phase.
type reqReader struct {
	conn net.Conn
	lr   *headReader
	br   *bufio.Reader
}

func newReqReader(c net.Conn, budget *atomic.Int64) *reqReader {
	lr := &headReader{r: c, n: math.MaxInt64, budget: budget}
	return &reqReader{conn: c, lr: lr, br: bufio.NewReaderSize(lr, 4096)}
}

// next reads a request head: its first byte within wait (errIdle when
// none comes), the rest of it within header.
func (r *reqReader) next(wait, header time.Duration) (*http.Request, error) {
	r.conn.SetReadDeadline(time.Now().Add(wait))
	if _, err := r.br.Peek(1); err != nil {
		return nil, errIdle
	}
	deadline := time.Now().Add(header)
	r.conn.SetReadDeadline(deadline)
	r.lr.start(maxHeaderBytes)
	req, err := readHead(r.br)
	tooLarge, busy := r.lr.end()
	r.conn.SetReadDeadline(time.Time{})
	switch {
	case err == nil:
		return req, nil
	case busy:
		return nil, errBusy
	case tooLarge:
		return nil, errTooLarge
	case !time.Now().Before(deadline):
		// A timeout can surface as a cut-off (malformed) line: bufio
		// returns the partial line first and the error on the next read.
		return nil, fmt.Errorf("%w: %v", os.ErrDeadlineExceeded, err)
	}
	return nil, err
}

func readHead(br *bufio.Reader) (*http.Request, error) { return http.ReadRequest(br) }

// headError answers a request head that could not be read.
func (p *Proxy) headError(w io.Writer, err error) {
	switch {
	case errors.Is(err, errIdle):
		return
	case errors.Is(err, errTooLarge):
		p.log.Info("egress: refused", "reason", "request headers over the limit")
		writeStatus(w, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("egress: request headers are larger than %d bytes", maxHeaderBytes), true, nil)
	case errors.Is(err, errBusy):
		p.log.Info("egress: refused", "reason", "too many request headers in flight")
		writeStatus(w, http.StatusServiceUnavailable, fmt.Sprintf("egress: too many request headers in flight (at most %d bytes at once); try again", headerBudget), true, nil)
	case errors.Is(err, os.ErrDeadlineExceeded):
		p.log.Info("egress: refused", "reason", "request headers not sent in time")
		writeStatus(w, http.StatusRequestTimeout, fmt.Sprintf("egress: request headers not received within %s", p.header), true, nil)
	default:
		msg := p.mask("egress: malformed request: " + printable(err.Error()))
		p.log.Info("egress: refused", "reason", msg)
		writeStatus(w, http.StatusBadRequest, msg, true, nil)
	}
}

// writeStatus writes a small text/plain response whose body is msg.
func writeStatus(w io.Writer, status int, msg string, closeConn bool, extra http.Header) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n", status, http.StatusText(status), len(msg)+1)
	if closeConn {
		b.WriteString("Connection: close\r\n")
	}
	extra.Write(&b)
	b.WriteString("\r\n" + msg + "\n")
	_, err := w.Write(b.Bytes())
	return err
}

// serveHTTP serves HTTP proxy requests on s until the client is done.
func (p *Proxy) serveHTTP(s *session, rr *reqReader) {
	s.cr = rr.br
	var up *upstream
	defer func() { up.close() }()
	for first := true; ; first = false {
		wait := p.idle
		if first {
			wait = p.header
		}
		req, err := rr.next(wait, p.header)
		if err != nil {
			p.headError(s.client, err)
			return
		}
		if req.Method == http.MethodConnect {
			p.serveConnect(s, rr, req)
			return
		}
		if !p.forwardPlain(s, rr, req, &up) {
			return
		}
	}
}

// refuseHTTP answers req with r; it says whether the connection may
// serve another request (not when a body was left unread).
func (p *Proxy) refuseHTTP(w io.Writer, host string, req *http.Request, r *refusal, extra http.Header) bool {
	p.refuse(host, r)
	closeConn := req.Close || req.ContentLength != 0
	if err := writeStatus(w, r.status, p.mask(r.msg), closeConn, extra); err != nil {
		return false
	}
	return !closeConn
}

// serveConnect serves a CONNECT request: after the checks, a tunnel of
// bytes, or, for a host with a brokered secret, interception.
func (p *Proxy) serveConnect(s *session, rr *reqReader, req *http.Request) {
	host, port, err := net.SplitHostPort(req.Host)
	if err != nil {
		p.refuseHTTP(s.client, req.Host, req, badRequest("CONNECT %s: the target must be host:port", printable(req.Host)), nil)
		return
	}
	d, r := p.resolve(s.ctx, host, port)
	if r == nil {
		var up net.Conn
		var addr netip.Addr
		if up, addr, r = p.connect(s, d); r == nil {
			if err := writeRaw(s.client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
				return
			}
			p.open(s, d, up, addr, withBuffered(s.client, rr.br))
			return
		}
	}
	p.refuseHTTP(s.client, host, req, r, nil)
}

func writeRaw(w io.Writer, s string) error {
	_, err := io.WriteString(w, s)
	return err
}

// open serves an established CONNECT or SOCKS tunnel from client to up.
func (p *Proxy) open(s *session, d *resolved, up net.Conn, addr netip.Addr, client net.Conn) {
	s.target.Store(&target{host: d.host, literal: d.literal, addr: addr})
	// A policy change between the check and this point is seen here.
	if r := p.pol.Load().recheck(s.target.Load()); r != nil {
		p.refuse(d.host, r)
		return
	}
	if len(d.secrets) > 0 {
		p.log.Debug("egress: intercepting for a brokered secret", "host", d.host, "addr", addr.String(), "port", d.port)
		p.intercept(s, d, client, up, addr)
		return
	}
	p.log.Debug("egress: tunnel", "host", d.host, "addr", addr.String(), "port", d.port)
	s.tunnel(client, up)
}

// upstream is an upstream connection kept for the next request.
type upstream struct {
	conn net.Conn
	lr   *io.LimitedReader // caps a response head
	br   *bufio.Reader
	key  string // host:port
	t    target
}

func newUpstream(c net.Conn, key string, t target) *upstream {
	lr := &io.LimitedReader{R: c, N: math.MaxInt64}
	return &upstream{conn: c, lr: lr, br: bufio.NewReaderSize(lr, 32<<10), key: key, t: t}
}

func (u *upstream) close() {
	if u != nil && u.conn != nil {
		u.conn.Close()
	}
}

// forwardPlain relays one absolute-form request; it says whether the
// client connection may serve another.
func (p *Proxy) forwardPlain(s *session, rr *reqReader, req *http.Request, upp **upstream) bool {
	if req.URL.Scheme == "" || req.URL.Host == "" {
		return p.refuseHTTP(s.client, req.Host, req, badRequest("%s %s: this is a proxy; a request must name its destination in absolute form (GET http://host/path) or be a CONNECT host:port", printable(req.Method), printable(req.RequestURI)), nil)
	}
	if req.URL.Scheme != "http" {
		return p.refuseHTTP(s.client, req.URL.Host, req, badRequest("%s://%s: only http:// is relayed in absolute form; use CONNECT for %s", printable(req.URL.Scheme), printable(req.URL.Host), printable(req.URL.Scheme)), nil)
	}
	if req.Method == "PRI" {
		return p.refuseHTTP(s.client, req.URL.Host, req, &refusal{status: http.StatusMethodNotAllowed, msg: "egress: HTTP/2 is not relayed in absolute form"}, nil)
	}
	host, port := req.URL.Hostname(), req.URL.Port()
	if port == "" {
		port = "80"
	}
	up := *upp
	var d *resolved
	reuse := false
	if up != nil && up.key == net.JoinHostPort(host, port) {
		// Same destination: recheck the address already reached under
		// the current policy instead of resolving again.
		if r := p.pol.Load().recheck(&up.t); r != nil {
			return p.refuseHTTP(s.client, host, req, r, nil)
		}
		reuse = true
	} else {
		var r *refusal
		if d, r = p.resolve(s.ctx, host, port); r != nil {
			return p.refuseHTTP(s.client, host, req, r, nil)
		}
		if len(d.secrets) > 0 {
			return p.refuseHTTP(s.client, host, req, forbidden("%s has a brokered secret, which is only ever sent over TLS: use https://%s", d.host, d.hostport), nil)
		}
	}
	out := outgoing(req)
	for try := 0; ; try++ {
		if !reuse {
			up.close()
			*upp = nil
			c, addr, r := p.connect(s, d)
			if r != nil {
				return p.refuseHTTP(s.client, host, req, r, nil)
			}
			p.log.Debug("egress: http", "host", d.host, "addr", addr.String(), "port", d.port)
			up = newUpstream(c, net.JoinHostPort(host, port), target{host: d.host, literal: d.literal, addr: addr})
			*upp = up
		}
		// While the exchange lasts (a long stream, or the tunnel an
		// upgrade makes of it), SetPolicy sees its destination and cuts
		// it when the new policy refuses it.
		t := up.t
		upConn := up.conn
		t.cut = func() { upConn.Close() }
		s.target.Store(&t)
		if r := p.pol.Load().recheck(&t); r != nil {
			s.target.Store(nil)
			up.close()
			*upp = nil
			return p.refuseHTTP(s.client, host, req, r, nil)
		}
		keep, ok, retry := p.exchange(s, req, out, up, nil, reuse && try == 0)
		s.target.Store(nil)
		if !ok {
			up.close()
			*upp = nil
		}
		if retry {
			// The kept connection was closed by the upstream before
			// the request: send it once more on a new one.
			if d == nil {
				var r *refusal
				if d, r = p.resolve(s.ctx, host, port); r != nil {
					return p.refuseHTTP(s.client, host, req, r, nil)
				}
			}
			reuse = false
			continue
		}
		return keep
	}
}

// outgoing is req as sent upstream: hop-by-hop headers removed, no
// User-Agent added where the client sent none.
func outgoing(req *http.Request) *http.Request {
	out := new(http.Request)
	*out = *req
	out.Header = req.Header.Clone()
	if out.Header == nil {
		out.Header = http.Header{}
	}
	upgrade := stripHop(out.Header)
	out.Header.Del("Expect")
	if upgrade != "" {
		out.Header.Set("Connection", "Upgrade")
		out.Header.Set("Upgrade", upgrade)
	}
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""} // Request.Write would add Go's
	}
	out.Close = false
	out.RequestURI = ""
	return out
}

// exchange sends out on up and relays the response to the client. It
// returns whether the client connection may serve another request,
// whether up may be kept, and whether the request should be sent again
// on a new connection (canRetry, and up was found closed before any
// response byte on a request without a body).
func (p *Proxy) exchange(s *session, req, out *http.Request, up *upstream, scrub []*secret, canRetry bool) (keep, upOK, retry bool) {
	canRetry = canRetry && (req.Body == nil || req.Body == http.NoBody)
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") && req.ProtoAtLeast(1, 1) {
		// Let the client send its body now: the proxy forwards it
		// without waiting for the upstream's interim answer.
		if writeRaw(s.client, "HTTP/1.1 100 Continue\r\n\r\n") != nil {
			return false, false, false
		}
	}
	host := req.URL.Host
	if host == "" {
		host = req.Host
	}
	if err := out.Write(up.conn); err != nil {
		if canRetry {
			return false, false, true
		}
		p.refuseHTTP(s.client, host, req, &refusal{status: 502, msg: fmt.Sprintf("egress: sending the request to %s failed: %v", up.key, err)}, nil)
		return false, false, false
	}
	var resp *http.Response
	// The response head (with any interim 1xx heads) is capped: the
	// upstream may be one the sandbox controls.
	up.lr.N = maxRespHeaderBytes
	for {
		var err error
		resp, err = http.ReadResponse(up.br, out)
		if err != nil {
			tooLarge := up.lr.N == 0
			if canRetry && errors.Is(err, io.EOF) {
				return false, false, true
			}
			if s.ctx.Err() == nil {
				p.refuseHTTP(s.client, host, req, &refusal{status: 502, msg: respError(up.key, err, tooLarge)}, nil)
			}
			return false, false, false
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		// Interim 1xx answers: the proxy sent its own 100 Continue.
		resp.Body.Close()
	}
	up.lr.N = math.MaxInt64
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if out.Header.Get("Upgrade") == "" {
			resp.Body.Close()
			p.refuseHTTP(s.client, host, req, &refusal{status: 502, msg: fmt.Sprintf("egress: %s switched protocols unasked", up.key)}, nil)
			return false, false, false
		}
		upgrade := resp.Header.Get("Upgrade")
		stripHop(resp.Header)
		resp.Header.Set("Connection", "Upgrade")
		resp.Header.Set("Upgrade", upgrade)
		scrubHeader(resp.Header, scrub)
		var b bytes.Buffer
		fmt.Fprintf(&b, "HTTP/1.1 101 %s\r\n", http.StatusText(101))
		resp.Header.Write(&b)
		b.WriteString("\r\n")
		if _, err := s.client.Write(b.Bytes()); err != nil {
			return false, false, false
		}
		s.tunnel(withBuffered(s.client, s.cr), withBuffered(up.conn, up.br))
		return false, false, false
	}
	clientClose := req.Close
	upOK = !resp.Close
	stripHop(resp.Header)
	scrubHeader(resp.Header, scrub)
	resp.Status = p.mask(resp.Status) // the reason phrase
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
	if !req.ProtoAtLeast(1, 1) && len(resp.TransferEncoding) > 0 {
		// No chunks for an HTTP/1.0 client: the end of the body is
		// the end of the connection.
		resp.TransferEncoding = nil
	}
	if resp.ContentLength < 0 && len(resp.TransferEncoding) == 0 {
		clientClose = true
	}
	resp.Close = clientClose
	bw := bufio.NewWriterSize(s.client, 32<<10)
	body := &relayBody{r: resp.Body, bw: bw, up: up.conn, remain: resp.ContentLength}
	if len(scrub) > 0 {
		body.r = newMaskReader(resp.Body, scrub)
		// Trailers arrive with the end of the body and are written
		// after it: mask them when the end is read.
		body.atEOF = func() { scrubHeader(resp.Trailer, scrub) }
	}
	body.closer = resp.Body
	resp.Body = body
	err := resp.Write(writerOnly{bw})
	if err == nil {
		err = bw.Flush()
	}
	if err != nil || !body.eof && resp.ContentLength != 0 && req.Method != http.MethodHead {
		// The client went away or the body was cut short.
		return false, false, false
	}
	return !clientClose && !resp.Close, upOK, false
}

// relayBody flushes what the client writer holds before every read of
// the upstream body, so that a streamed response (server-sent events)
// reaches the client as it comes; its Close on a body not read to the
// end closes the upstream connection rather than draining it.
type relayBody struct {
	r      io.Reader
	closer io.Closer
	bw     *bufio.Writer
	up     net.Conn
	remain int64 // bytes still expected, -1 when not known
	eof    bool
	atEOF  func() // called once at the end of the body
}

func (b *relayBody) Read(p []byte) (int, error) {
	if err := b.bw.Flush(); err != nil {
		return 0, err
	}
	n, err := b.r.Read(p)
	if b.remain >= 0 {
		b.remain -= int64(n)
		if b.remain <= 0 {
			b.eof = true
		}
	}
	if err == io.EOF {
		b.eof = true
		if b.atEOF != nil {
			b.atEOF()
			b.atEOF = nil
		}
	}
	return n, err
}

func (b *relayBody) Close() error {
	if !b.eof {
		b.up.Close()
	}
	return b.closer.Close()
}

// intercept serves a tunnel to a host with a brokered secret: it
// terminates the client's TLS with a leaf from the proxy's CA, opens its
// own verified TLS to the host, and relays HTTP/1.1 request by request,
// putting the secrets on each.
func (p *Proxy) intercept(s *session, d *resolved, client, raw net.Conn, addr netip.Addr) {
	client.SetReadDeadline(time.Now().Add(p.header))
	br := bufio.NewReader(client)
	b, err := br.Peek(1)
	if err != nil {
		return
	}
	if b[0] != 0x16 { // not a TLS handshake record
		r := forbidden("%s has a brokered secret, which is only ever sent over TLS: the tunnel must carry TLS", d.host)
		p.refuse(d.host, r)
		writeStatus(client, r.status, r.msg, true, nil)
		return
	}
	cc := tls.Server(withBuffered(client, br), &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return p.ca.leaf(d.host) },
		NextProtos:     []string{"http/1.1"},
		MinVersion:     tls.VersionTLS12,
	})
	hctx, cancel := context.WithTimeout(s.ctx, p.header)
	err = cc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		p.log.Info("egress: TLS handshake with the client failed", "host", d.host, "err", err.Error())
		return
	}
	defer cc.Close()
	s.client = &actConn{Conn: cc, s: s}
	var up *upstream
	defer func() { up.close() }()
	dial := func() (*upstream, *refusal) {
		c, a := raw, addr
		raw = nil
		if c == nil {
			var r *refusal
			if c, a, r = p.connect(s, d); r != nil {
				return nil, r
			}
		}
		tc := tls.Client(c, &tls.Config{ServerName: d.host, RootCAs: p.roots, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
		hctx, cancel := context.WithTimeout(s.ctx, dialTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			c.Close()
			return nil, &refusal{status: 502, msg: fmt.Sprintf("egress: TLS to %s failed: %v", d.hostport, err)}
		}
		s.target.Store(&target{host: d.host, addr: a})
		return newUpstream(tc, d.hostport, target{host: d.host, addr: a}), nil
	}
	rr := newReqReader(s.client, &p.inFlight)
	s.cr = rr.br
	for first := true; ; first = false {
		wait := p.idle
		if first {
			wait = p.header
		}
		req, err := rr.next(wait, p.header)
		if err != nil {
			p.headError(s.client, err)
			return
		}
		if r := p.checkInner(d, req); r != nil {
			if !p.refuseHTTP(s.client, d.host, req, r, nil) {
				return
			}
			continue
		}
		// Each request is checked against the policy in force.
		t := target{host: d.host, addr: addr}
		if up != nil {
			t = up.t
		}
		if r := p.pol.Load().recheck(&t); r != nil {
			p.refuseHTTP(s.client, d.host, req, r, nil)
			return
		}
		out := outgoing(req)
		if upg := out.Header.Get("Upgrade"); upg != "" {
			// After a 101 the stream is raw: a value the upstream
			// echoes in it could not be masked.
			r := forbidden("%s has a brokered secret: a protocol upgrade (to %s) is not relayed, since the secret's value could not be masked in the raw stream after it", d.host, printable(upg))
			p.refuse(d.host, r)
			writeStatus(s.client, r.status, p.mask(r.msg), true, nil)
			return
		}
		if out.Host == "" {
			out.Host = d.host
		}
		scrub := applySecrets(out.Header, d.secrets)
		keep := false
		for try := 0; ; try++ {
			reused := up != nil
			if up == nil {
				var r *refusal
				if up, r = dial(); r != nil {
					p.refuseHTTP(s.client, d.host, req, r, nil)
					return
				}
			}
			var ok, retry bool
			keep, ok, retry = p.exchange(s, req, out, up, scrub, reused && try == 0)
			if !ok {
				up.close()
				up = nil
			}
			if !retry {
				break
			}
		}
		if !keep {
			return
		}
	}
}

// checkInner refuses a request inside an intercepted tunnel that is not
// for the tunnel's host.
func (p *Proxy) checkInner(d *resolved, req *http.Request) *refusal {
	if req.Method == http.MethodConnect || req.Method == "PRI" {
		return &refusal{status: http.StatusMethodNotAllowed, msg: fmt.Sprintf("egress: %s inside a tunnel to %s is not relayed", printable(req.Method), d.host)}
	}
	if req.URL.IsAbs() {
		if req.URL.Scheme != "https" {
			return badRequest("%s inside a TLS tunnel to %s", printable(req.URL.Scheme+"://"+req.URL.Host), d.host)
		}
		req.URL.Scheme, req.URL.Host = "", ""
	}
	if req.Host == "" {
		return nil
	}
	h, port, err := net.SplitHostPort(req.Host)
	if err != nil {
		h, port = strings.TrimSuffix(strings.TrimPrefix(req.Host, "["), "]"), ""
	}
	name, nerr := normalizeName(h)
	if nerr != nil || name != d.host || port != "" && port != d.port {
		return &refusal{status: http.StatusMisdirectedRequest, msg: fmt.Sprintf("egress: a request for %s inside a tunnel to %s is refused", printable(req.Host), d.hostport)}
	}
	return nil
}

// applySecrets puts the secrets on a request's headers and returns those
// whose value is long enough to be masked in responses.
func applySecrets(h http.Header, secrets []*secret) []*secret {
	var scrub []*secret
	for _, sec := range secrets {
		for k, vs := range h {
			for i, v := range vs {
				if strings.Contains(v, sec.placeholder) {
					h[k][i] = strings.ReplaceAll(v, sec.placeholder, sec.value)
				}
			}
		}
		h.Set(sec.header, sec.headerValue)
		if len(sec.value) >= minMaskLen {
			scrub = append(scrub, sec)
		}
	}
	if len(scrub) > 0 {
		// An encoded body could not be searched for the value.
		h.Set("Accept-Encoding", "identity")
	}
	return scrub
}

// minMaskLen is the shortest secret value masked in responses: masking
// a shorter string would garble ordinary content.
const minMaskLen = 8

// scrubHeader masks secret values in response headers.
func scrubHeader(h http.Header, secrets []*secret) {
	for _, sec := range secrets {
		for _, vs := range h {
			for i, v := range vs {
				if strings.Contains(v, sec.value) {
					vs[i] = strings.ReplaceAll(v, sec.value, strings.Repeat("*", len(sec.value)))
				}
			}
		}
	}
}

// maskReader replaces each secret value in a stream with as many '*',
// so that lengths (Content-Length, ranges) stay right.
type maskReader struct {
	r    io.Reader
	vals [][]byte
	keep int
	buf  []byte // read, not yet released
	out  []byte // released, not yet returned
	obuf []byte // out's backing array
	err  error
	tmp  []byte
}

func newMaskReader(r io.Reader, secrets []*secret) *maskReader {
	m := &maskReader{r: r, tmp: make([]byte, 32<<10)}
	for _, s := range secrets {
		m.vals = append(m.vals, []byte(s.value))
		m.keep = max(m.keep, len(s.value)-1)
	}
	return m
}

func (m *maskReader) Read(p []byte) (int, error) {
	for len(m.out) == 0 {
		if m.err != nil {
			return 0, m.err
		}
		n, err := m.r.Read(m.tmp)
		m.buf = append(m.buf, m.tmp[:n]...)
		m.err = err
		for _, v := range m.vals {
			for i := 0; ; {
				j := bytes.Index(m.buf[i:], v)
				if j < 0 {
					break
				}
				for k := range v {
					m.buf[i+j+k] = '*'
				}
				i += j + len(v)
			}
		}
		release := len(m.buf) - m.keep
		if err != nil {
			release = len(m.buf)
		}
		if release > 0 {
			m.obuf = append(m.obuf[:0], m.buf[:release]...)
			m.out = m.obuf
			m.buf = append(m.buf[:0], m.buf[release:]...)
		}
	}
	n := copy(p, m.out)
	m.out = m.out[n:]
	return n, nil
}

// respError says why no response could be read from an upstream,
// without quoting what it sent: that may be a secret's value echoed
// back.
func respError(key string, err error, tooLarge bool) string {
	var ne net.Error
	switch {
	case tooLarge:
		return fmt.Sprintf("egress: %s: response header too large (over %d bytes)", key, maxRespHeaderBytes)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Sprintf("egress: %s closed the connection before a complete response", key)
	case errors.As(err, &ne):
		return fmt.Sprintf("egress: reading the response from %s failed: %v", key, ne)
	}
	return fmt.Sprintf("egress: no valid response from %s: malformed response", key)
}
