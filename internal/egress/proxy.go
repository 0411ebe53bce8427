package egress

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/textproto"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

// Defaults of the Config limits.
const (
	// DefaultMaxConns is the default cap on client connections served
	// at once.
	DefaultMaxConns = 256
	// DefaultIdleTimeout is how long a connection (a tunnel, or a
	// keep-alive connection between requests) may carry no byte in
	// either direction before the proxy closes it.
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultHeaderTimeout bounds the header phase: a request's line and
	// headers, a SOCKS handshake, the TLS handshake of an intercepted
	// tunnel. A client that sends its headers byte by byte is cut off.
	DefaultHeaderTimeout = 10 * time.Second
	// DefaultCAValidity is how long the per-proxy CA (and every leaf it
	// signs) is valid.
	DefaultCAValidity = 30 * 24 * time.Hour
	// maxHeaderBytes caps a request's line and headers.
	maxHeaderBytes = 64 << 10
	// maxRespHeaderBytes caps an upstream response's status line and
	// headers.
	maxRespHeaderBytes = 1 << 20
	// headerBudget caps the request-head bytes read and not yet parsed
	// across all connections at once, so that many connections that each
	// send most of a large head hold a bounded amount of memory.
	headerBudget = 8 << 20
	// hostAddrsTTL is how long a reading of the host's interface
	// addresses is used before it is read again.
	hostAddrsTTL = 2 * time.Second
	// resolveTimeout bounds one name resolution.
	resolveTimeout = 15 * time.Second
	// dialTimeout is the default Dial's timeout.
	dialTimeout = 30 * time.Second
)

// Resolver resolves host names to addresses; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Proxy. Only Policy is needed; the zero values of
// the rest are the documented defaults.
type Config struct {
	// Policy is the egress policy; nil or NetworkDenyAll refuses every
	// request.
	Policy *driver.NetworkPolicy
	// Secrets are put on requests to their hosts (see package doc); a
	// secret's value never reaches the client.
	Secrets []driver.BrokeredSecret
	// Resolver resolves names; nil means net.DefaultResolver.
	Resolver Resolver
	// Dial connects to an upstream. It is always called with an IP:port
	// the proxy checked, never a name. Nil means a net.Dialer with a 30 s
	// timeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// UpstreamRoots verifies upstream servers' certificates when the
	// proxy intercepts (brokered hosts); nil means the system roots.
	UpstreamRoots *x509.CertPool
	// Logger receives one Info record per refusal and per failed
	// upstream, with the host and the reason; nil discards. It never
	// receives a secret value: every record passes through the masking
	// of every secret's value.
	Logger *slog.Logger
	// HostAddrs returns the addresses of the proxy's host, which the
	// proxy refuses like loopback (see package doc). Nil means the
	// addresses of the host's network interfaces (net.InterfaceAddrs),
	// read again when older than a few seconds.
	HostAddrs func() ([]netip.Addr, error)

	// MaxConns caps the client connections served at once; one over it
	// gets 503 (HTTP) or a general-failure reply (SOCKS) at once. Zero
	// means DefaultMaxConns.
	MaxConns int
	// IdleTimeout closes a connection that carried no byte in either
	// direction for that long (a spliced tunnel reports its activity
	// every quarter of it, so it may live up to a quarter longer). Zero
	// means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// HeaderTimeout bounds the header phase of each request. Zero means
	// DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// CAValidity is the lifetime of the per-proxy CA. Zero means
	// DefaultCAValidity.
	CAValidity time.Duration
}

// secret is a validated BrokeredSecret.
type secret struct {
	hosts       []string
	header      string
	headerValue string // Format applied to Value
	value       string
	placeholder string
}

// Proxy is the egress enforcement point: an HTTP and SOCKS5 proxy that
// checks every destination against a network policy and brokers secrets.
// Its methods are safe for concurrent use.
type Proxy struct {
	log      *slog.Logger
	resolver Resolver
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	roots    *x509.CertPool
	secrets  []secret
	ca       *authority
	pol      atomic.Pointer[policy]
	sem      chan struct{}
	idle     time.Duration
	header   time.Duration
	inFlight atomic.Int64 // request-head bytes read, not yet parsed

	hostAddrs func() ([]netip.Addr, error)
	hostMu    sync.Mutex
	hostSet   map[netip.Addr]bool
	hostAt    time.Time

	mu        sync.Mutex
	closed    bool
	sessions  map[*session]struct{}
	listeners map[net.Listener]struct{}
	wg        sync.WaitGroup
}

// New checks cfg and returns a Proxy with a fresh CA. An entry of the
// policy or a secret that is malformed is an error naming it (never a
// secret's value).
func New(cfg Config) (*Proxy, error) {
	p := &Proxy{
		hostAddrs: cfg.HostAddrs,
		resolver:  cfg.Resolver,
		dial:      cfg.Dial,
		roots:     cfg.UpstreamRoots,
		idle:      cfg.IdleTimeout,
		header:    cfg.HeaderTimeout,
		sessions:  map[*session]struct{}{},
		listeners: map[net.Listener]struct{}{},
	}
	if p.hostAddrs == nil {
		p.hostAddrs = interfaceAddrs
	}
	pol, err := p.compile(cfg.Policy)
	if err != nil {
		return nil, err
	}
	p.pol.Store(pol)
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	if p.dial == nil {
		p.dial = (&net.Dialer{Timeout: dialTimeout}).DialContext
	}
	if p.idle <= 0 {
		p.idle = DefaultIdleTimeout
	}
	if p.header <= 0 {
		p.header = DefaultHeaderTimeout
	}
	n := cfg.MaxConns
	if n <= 0 {
		n = DefaultMaxConns
	}
	p.sem = make(chan struct{}, n)
	var hosts []string
	for i, s := range cfg.Secrets {
		cs, err := compileSecret(s)
		if err != nil {
			return nil, fmt.Errorf("egress: secret %d (for %s): %w", i, strings.Join(s.Hosts, ", "), err)
		}
		p.secrets = append(p.secrets, cs)
		hosts = append(hosts, cs.hosts...)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p.log = slog.New(&maskHandler{h: log.Handler(), mask: p.mask})
	validity := cfg.CAValidity
	if validity <= 0 {
		validity = DefaultCAValidity
	}
	if p.ca, err = newAuthority(hosts, validity); err != nil {
		return nil, err
	}
	return p, nil
}

func compileSecret(s driver.BrokeredSecret) (secret, error) {
	if len(s.Hosts) == 0 {
		return secret{}, errors.New("no hosts")
	}
	cs := secret{value: s.Value, placeholder: s.Placeholder}
	for _, h := range s.Hosts {
		name, wild := strings.CutPrefix(h, "*.")
		n, err := normalizeName(name)
		if err != nil {
			return secret{}, fmt.Errorf("host %q: %w", h, err)
		}
		if wild {
			n = "*." + n
		}
		cs.hosts = append(cs.hosts, n)
	}
	if s.Header == "" || strings.IndexFunc(s.Header, func(r rune) bool { return !isTokenRune(r) }) >= 0 {
		return secret{}, fmt.Errorf("header %q is not a header name", printable(s.Header))
	}
	cs.header = textproto.CanonicalMIMEHeaderKey(s.Header)
	if strings.HasPrefix(cs.header, "Proxy-") || hopHeaders[cs.header] || cs.header == "Host" {
		return secret{}, fmt.Errorf("header %q is not one a proxy may set", cs.header)
	}
	format := s.Format
	if format == "" {
		format = "%s"
	}
	if strings.Count(format, "%s") != 1 || strings.Count(strings.ReplaceAll(format, "%%", ""), "%") != 1 {
		return secret{}, fmt.Errorf("format %q must hold exactly one %%s and no other verb", printable(format))
	}
	if s.Value == "" {
		return secret{}, errors.New("empty value")
	}
	if strings.ContainsAny(s.Value, "\r\n\x00") {
		return secret{}, errors.New("value holds a line break or NUL, which cannot travel in a header")
	}
	if s.Placeholder == "" || strings.ContainsAny(s.Placeholder, "\r\n\x00") {
		return secret{}, errors.New("placeholder is empty or holds a line break or NUL")
	}
	if strings.Contains(s.Placeholder, s.Value) || strings.Contains(s.Value, s.Placeholder) {
		return secret{}, errors.New("placeholder and value contain one another")
	}
	cs.headerValue = fmt.Sprintf(format, s.Value)
	if strings.ContainsAny(cs.headerValue, "\r\n\x00") {
		return secret{}, errors.New("format holds a line break or NUL")
	}
	return cs, nil
}

func isTokenRune(r rune) bool {
	return r < 0x7f && r > 0x20 && !strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
}

// SetPolicy replaces the policy (nil is deny-all). Every request and
// connection that starts after it returns is checked against pol, and so
// is every later request on a kept-alive or intercepted connection; a
// tunnel already open to a destination pol refuses is closed, so that
// narrowing the policy takes effect at once. A malformed policy is an
// error and the old one stays.
func (p *Proxy) SetPolicy(pol *driver.NetworkPolicy) error {
	c, err := p.compile(pol)
	if err != nil {
		return err
	}
	p.pol.Store(c)
	p.mu.Lock()
	var cut []*session
	for s := range p.sessions {
		if t := s.target.Load(); t != nil && c.recheck(t) != nil {
			cut = append(cut, s)
		}
	}
	p.mu.Unlock()
	for _, s := range cut {
		t := s.target.Load()
		p.log.Info("egress: tunnel closed by a policy change", "host", t.host, "addr", t.addr.String(), "reason", c.recheck(t).msg)
		if t.cut != nil {
			t.cut()
		} else {
			s.close()
		}
	}
	return nil
}

// CACertPEM returns the per-proxy CA certificate (PEM) that clients must
// trust for brokered hosts. It never holds the key.
func (p *Proxy) CACertPEM() []byte { return append([]byte(nil), p.ca.pem...) }

// Serve accepts connections on l and serves each with ServeConn until l
// fails or p is closed; then it returns, nil when p was closed. Close
// closes l.
func (p *Proxy) Serve(l net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return nil
	}
	p.listeners[l] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.listeners, l)
		p.mu.Unlock()
	}()
	ctx := context.Background()
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if p.isClosed() {
				return nil
			}
			// Out of file descriptors, or a connection reset before it
			// was accepted: wait and go on, as net/http does.
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("egress: accept: %w", err)
		}
		backoff = 0
		if !p.add() {
			c.Close()
			return nil
		}
		go func() {
			defer p.wg.Done()
			p.ServeConn(ctx, c)
		}()
	}
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// add counts one more goroutine Close must wait for, unless p is closed.
func (p *Proxy) add() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	return true
}

// Close closes the listeners given to Serve and every connection, and
// waits for the goroutines serving them.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	ls := make([]net.Listener, 0, len(p.listeners))
	for l := range p.listeners {
		ls = append(ls, l)
	}
	ss := make([]*session, 0, len(p.sessions))
	for s := range p.sessions {
		ss = append(ss, s)
	}
	p.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	for _, s := range ss {
		s.close()
	}
	p.wg.Wait()
	return nil
}

// ServeConn serves one client connection (HTTP proxy requests or SOCKS5)
// until it ends, ctx ends or p is closed, and closes c.
func (p *Proxy) ServeConn(ctx context.Context, c net.Conn) {
	s := p.newSession(ctx, c)
	if s == nil {
		c.Close()
		return
	}
	defer p.endSession(s)
	select {
	case p.sem <- struct{}{}:
		defer func() { <-p.sem }()
	default:
		p.overCap(s)
		return
	}
	rr := newReqReader(s.client, &p.inFlight)
	s.client.SetReadDeadline(time.Now().Add(p.header))
	b, err := rr.br.Peek(1)
	if err != nil {
		return
	}
	switch b[0] {
	case 0x05:
		p.serveSOCKS(s, rr.br)
	case 0x04:
		// SOCKS4: "request rejected or failed".
		s.client.Write([]byte{0, 0x5b, 0, 0, 0, 0, 0, 0})
		p.log.Info("egress: refused", "reason", "SOCKS4 is not served (use SOCKS5 or HTTP)")
	default:
		p.serveHTTP(s, rr)
	}
}

// overCap answers a connection over MaxConns: 503 or a SOCKS failure,
// after reading its request for a short bounded time. It keeps no more
// than a small buffer however many such connections come: the request
// head is skipped, never held.
func (p *Proxy) overCap(s *session) {
	p.log.Info("egress: refused", "reason", "too many connections")
	wait := min(p.header, 2*time.Second)
	s.client.SetDeadline(time.Now().Add(wait))
	br := bufio.NewReaderSize(s.client, 16)
	b, err := br.Peek(1)
	if err != nil {
		return
	}
	if b[0] == 0x05 {
		if _, ok := socksGreet(s.client, br); ok {
			if _, _, rerr := readSOCKSRequest(br); rerr == nil {
				socksReply(s.client, socksFailure)
			}
		}
		return
	}
	skipHead(br, maxHeaderBytes)
	writeStatus(s.client, 503, fmt.Sprintf("egress: too many connections (at most %d at once)", cap(p.sem)), true, nil)
}

// skipHead reads up to the blank line that ends a request head, at most
// limit bytes, keeping none of them.
func skipHead(br *bufio.Reader, limit int) {
	var last uint32
	for range limit {
		c, err := br.ReadByte()
		if err != nil {
			return
		}
		last = last<<8 | uint32(c)
		if last == 0x0d0a0d0a || last&0xffff == 0x0a0a {
			return
		}
	}
}

// target is what a tunnel reaches, kept to recheck it on SetPolicy.
type target struct {
	host    string // normalised name or literal
	literal bool
	addr    netip.Addr
	// cut, when set, ends what reaches the target instead of the whole
	// session: the upstream of a plain HTTP exchange, whose client
	// connection may go on to other destinations (closing the upstream
	// mid-exchange ends the exchange and the client connection with it).
	cut func()
}

// recheck says whether c refuses t.
func (c *policy) recheck(t *target) *refusal {
	if t.literal {
		return c.checkLiteral(t.addr)
	}
	if r := c.checkName(t.host); r != nil {
		return r
	}
	return c.checkAddr(t.host, t.addr)
}

// session is one client connection and the upstream connections made
// for it.
type session struct {
	p      *Proxy
	ctx    context.Context
	cancel context.CancelFunc
	client net.Conn
	cr     *bufio.Reader // what reads client's requests
	target atomic.Pointer[target]
	last   atomic.Int64 // unix nanoseconds of the last byte either way

	mu     sync.Mutex
	closed bool
	conns  []net.Conn
	timer  *time.Timer
	stop   func() bool
}

func (p *Proxy) newSession(ctx context.Context, c net.Conn) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	s := &session{p: p}
	s.ctx, s.cancel = context.WithCancel(ctx)
	s.client = &actConn{Conn: c, s: s}
	s.conns = []net.Conn{c}
	s.touch()
	s.mu.Lock()
	s.timer = time.AfterFunc(p.idle, s.checkIdle)
	s.stop = context.AfterFunc(s.ctx, s.close)
	s.mu.Unlock()
	p.sessions[s] = struct{}{}
	p.wg.Add(1)
	return s
}

func (p *Proxy) endSession(s *session) {
	s.close()
	p.mu.Lock()
	delete(p.sessions, s)
	p.mu.Unlock()
	p.wg.Done()
}

func (s *session) touch() { s.last.Store(time.Now().UnixNano()) }

// checkIdle closes s when nothing moved for IdleTimeout, else waits for
// the rest of it.
func (s *session) checkIdle() {
	idle := time.Since(time.Unix(0, s.last.Load()))
	if idle >= s.p.idle {
		s.p.log.Info("egress: idle connection closed", "idle", idle.Round(time.Second).String())
		s.close()
		return
	}
	s.mu.Lock()
	if !s.closed {
		s.timer.Reset(s.p.idle - idle)
	}
	s.mu.Unlock()
}

// track adds an upstream connection to s, wrapped to count activity; it
// closes c and returns nil if s is closed.
func (s *session) track(c net.Conn) net.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return nil
	}
	s.conns = append(s.conns, c)
	return &actConn{Conn: c, s: s}
}

func (s *session) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	conns := s.conns
	s.timer.Stop()
	stop := s.stop
	s.mu.Unlock()
	stop()
	s.cancel()
	for _, c := range conns {
		c.Close()
	}
}

// actConn records activity on its session at every byte read or written.
type actConn struct {
	net.Conn
	s *session
}

func (c *actConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.s.touch()
	}
	return n, err
}

func (c *actConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.s.touch()
	}
	return n, err
}

// CloseWrite half-closes when the connection can.
func (c *actConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// prefixConn reads bytes a bufio.Reader already holds before the
// connection's own.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// withBuffered returns c reading first what br holds.
func withBuffered(c net.Conn, br *bufio.Reader) net.Conn {
	n := br.Buffered()
	if n == 0 {
		return c
	}
	b, _ := br.Peek(n)
	return &prefixConn{Conn: c, r: io.MultiReader(strings.NewReader(string(b)), c)}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// tunnel copies bytes both ways until both directions end (each end's
// EOF half-closes the other) or the session closes.
func (s *session) tunnel(a, b net.Conn) {
	if ta, tb := rawTCP(a), rawTCP(b); ta != nil && tb != nil {
		s.tcpTunnel(ta, tb)
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(b, a)
	}()
	pipe(a, b)
	<-done
}

// pipe copies src to dst, then half-closes dst (or closes both).
func pipe(dst, src net.Conn) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	_, err := io.CopyBuffer(writerOnly{dst}, readerOnly{src}, *bp)
	if err != nil {
		dst.Close()
		src.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return
		}
	}
	dst.Close()
}

// rawTCP returns the TCP connection under c, or nil.
func rawTCP(c net.Conn) *net.TCPConn {
	switch c := c.(type) {
	case *actConn:
		return rawTCP(c.Conn)
	case *net.TCPConn:
		return c
	}
	return nil
}

// tcpTunnel is tunnel between two TCP connections: the kernel moves the
// bytes (splice on Linux) without copying them through the proxy.
func (s *session) tcpTunnel(a, b *net.TCPConn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.tcpPipe(b, a)
	}()
	s.tcpPipe(a, b)
	<-done
}

// tcpPipe copies src to dst in rounds that a read deadline of a quarter
// of the idle timeout ends, so that the session sees the activity of a
// copy the kernel does (the idle watchdog then never cuts a tunnel that
// moved bytes within the idle timeout).
func (s *session) tcpPipe(dst, src *net.TCPConn) {
	round := max(s.p.idle/4, time.Millisecond)
	for {
		src.SetReadDeadline(time.Now().Add(round))
		n, err := dst.ReadFrom(src)
		if n > 0 {
			s.touch()
		}
		switch {
		case err == nil: // src's EOF
			if dst.CloseWrite() != nil {
				dst.Close()
			}
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			continue // the idle watchdog decides
		}
		dst.Close()
		src.Close()
		return
	}
}

type writerOnly struct{ io.Writer }
type readerOnly struct{ io.Reader }

// resolved is a destination the policy lets through.
type resolved struct {
	host     string // normalised name, or the literal
	literal  bool
	port     string
	addrs    []netip.Addr
	secrets  []*secret
	hostport string // host:port as the client can read it
}

// resolve checks host and port against the policy, resolves a name with
// the proxy's own resolver and checks every address.
func (p *Proxy) resolve(ctx context.Context, host, port string) (*resolved, *refusal) {
	port, r := parsePort(port)
	if r != nil {
		return nil, r
	}
	pol := p.pol.Load()
	d := &resolved{port: port}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return nil, badRequest("%s: an address with a zone cannot be reached", printable(host))
		}
		a = a.Unmap()
		d.host, d.literal, d.addrs = a.String(), true, []netip.Addr{a}
		d.hostport = net.JoinHostPort(d.host, port)
		if r := pol.checkLiteral(a); r != nil {
			return nil, r
		}
		return d, nil
	}
	name, err := normalizeName(host)
	if err != nil {
		return nil, badRequest("%q is not a valid host: %v", printable(host), err)
	}
	d.host = name
	d.hostport = net.JoinHostPort(name, port)
	if r := pol.checkName(name); r != nil {
		return nil, r
	}
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	addrs, err := p.resolver.LookupNetIP(rctx, "ip", name)
	cancel()
	if err == nil && len(addrs) == 0 {
		err = errors.New("no addresses")
	}
	if err != nil {
		return nil, &refusal{status: 502, socks: socksHostUnreach, msg: fmt.Sprintf("egress: cannot resolve %s: %v", name, err)}
	}
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if r := pol.checkAddr(name, a); r != nil {
			return nil, r
		}
		if !containsAddr(d.addrs, a) {
			d.addrs = append(d.addrs, a)
		}
	}
	for i := range p.secrets {
		if hostMatches(name, p.secrets[i].hosts) {
			d.secrets = append(d.secrets, &p.secrets[i])
		}
	}
	return d, nil
}

func containsAddr(l []netip.Addr, a netip.Addr) bool {
	for _, x := range l {
		if x == a {
			return true
		}
	}
	return false
}

// connect dials the checked addresses of d in turn and returns the first
// connection, tracked by s, and the address it reached.
func (p *Proxy) connect(s *session, d *resolved) (net.Conn, netip.Addr, *refusal) {
	var last error
	for _, a := range d.addrs {
		// The policy may have changed since d was resolved.
		if r := p.pol.Load().recheck(&target{host: d.host, literal: d.literal, addr: a}); r != nil {
			return nil, a, r
		}
		c, err := p.dial(s.ctx, "tcp", net.JoinHostPort(a.String(), d.port))
		if err == nil {
			tc := s.track(c)
			if tc == nil {
				return nil, a, &refusal{status: 503, socks: socksFailure, msg: "egress: proxy closing"}
			}
			return tc, a, nil
		}
		last = err
		if s.ctx.Err() != nil {
			break
		}
	}
	code := byte(socksHostUnreach)
	switch {
	case errors.Is(last, syscall.ECONNREFUSED):
		code = socksConnRefused
	case errors.Is(last, syscall.ENETUNREACH):
		code = socksNetUnreachable
	}
	return nil, netip.Addr{}, &refusal{status: 502, socks: code, msg: fmt.Sprintf("egress: cannot connect to %s: %v", d.hostport, last)}
}

// refuse logs a refusal.
func (p *Proxy) refuse(host string, r *refusal) {
	p.log.Info("egress: refused", "host", host, "status", r.status, "reason", r.msg)
}
