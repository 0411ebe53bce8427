package egress

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// SOCKS5 (RFC 1928) constants.
const (
	socksVersion    = 0x05
	socksNoAuth     = 0x00
	socksNoMethod   = 0xff
	socksCmdConnect = 0x01
	socksAtypIPv4   = 0x01
	socksAtypDomain = 0x03
	socksAtypIPv6   = 0x04
)

// socksGreet reads the method negotiation and accepts "no
// authentication" when offered; it reports whether it was.
func socksGreet(w io.Writer, br *bufio.Reader) (methods []byte, ok bool) {
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil || h[0] != socksVersion {
		return nil, false
	}
	methods = make([]byte, h[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return nil, false
	}
	for _, m := range methods {
		if m == socksNoAuth {
			_, err := w.Write([]byte{socksVersion, socksNoAuth})
			return methods, err == nil
		}
	}
	w.Write([]byte{socksVersion, socksNoMethod})
	return methods, false
}

// socksRequest is a parsed SOCKS5 request.
type socksRequest struct {
	cmd  byte
	host string // a domain name as sent, or an IP address
	port string
}

// errSOCKS carries the reply code for a request that cannot be read.
type errSOCKS struct {
	code byte
	msg  string
}

func (e *errSOCKS) Error() string { return e.msg }

// readSOCKSRequest reads one request; a malformed one is an *errSOCKS
// with the reply to send, an unreadable one another error.
func readSOCKSRequest(br *bufio.Reader) (*socksRequest, byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return nil, 0, err
	}
	if h[0] != socksVersion {
		return nil, socksFailure, &errSOCKS{socksFailure, fmt.Sprintf("SOCKS request version %d, want 5", h[0])}
	}
	r := &socksRequest{cmd: h[1]}
	switch h[3] {
	case socksAtypIPv4:
		var a [4]byte
		if _, err := io.ReadFull(br, a[:]); err != nil {
			return nil, 0, err
		}
		r.host = netip.AddrFrom4(a).String()
	case socksAtypIPv6:
		var a [16]byte
		if _, err := io.ReadFull(br, a[:]); err != nil {
			return nil, 0, err
		}
		r.host = netip.AddrFrom16(a).String()
	case socksAtypDomain:
		n, err := br.ReadByte()
		if err != nil {
			return nil, 0, err
		}
		name := make([]byte, n)
		if _, err := io.ReadFull(br, name); err != nil {
			return nil, 0, err
		}
		r.host = string(name)
	default:
		return nil, socksAddrUnsupport, &errSOCKS{socksAddrUnsupport, fmt.Sprintf("SOCKS address type %d is not one of 1, 3, 4", h[3])}
	}
	var port [2]byte
	if _, err := io.ReadFull(br, port[:]); err != nil {
		return nil, 0, err
	}
	r.port = strconv.Itoa(int(binary.BigEndian.Uint16(port[:])))
	return r, 0, nil
}

// socksReply writes a reply. Its BND.ADDR is always 0.0.0.0:0: the
// address the proxy connected from is the host's, which the sandbox is
// not told.
func socksReply(w io.Writer, code byte) error {
	_, err := w.Write([]byte{socksVersion, code, 0, socksAtypIPv4, 0, 0, 0, 0, 0, 0})
	return err
}

// serveSOCKS serves one SOCKS5 connection: CONNECT only, checked as an
// HTTP CONNECT is.
func (p *Proxy) serveSOCKS(s *session, br *bufio.Reader) {
	s.client.SetReadDeadline(time.Now().Add(p.header))
	methods, ok := socksGreet(s.client, br)
	if !ok {
		if methods != nil {
			p.log.Info("egress: refused", "reason", "SOCKS client offers no method without authentication")
		}
		return
	}
	req, code, err := readSOCKSRequest(br)
	if err != nil {
		var se *errSOCKS
		if errors.As(err, &se) {
			p.log.Info("egress: refused", "reason", "bad SOCKS request: "+se.msg)
			socksReply(s.client, code)
		}
		return
	}
	s.client.SetReadDeadline(time.Time{})
	if req.cmd != socksCmdConnect {
		what := map[byte]string{2: "BIND", 3: "UDP ASSOCIATE"}[req.cmd]
		if what == "" {
			what = fmt.Sprintf("command %d", req.cmd)
		}
		p.refuse(req.host, &refusal{socks: socksCmdUnsupported, msg: "egress: SOCKS " + what + " is not supported (CONNECT only)"})
		socksReply(s.client, socksCmdUnsupported)
		return
	}
	d, r := p.resolve(s.ctx, req.host, req.port)
	if r == nil {
		var up net.Conn
		var addr netip.Addr
		if up, addr, r = p.connect(s, d); r == nil {
			if socksReply(s.client, socksOK) != nil {
				return
			}
			p.open(s, d, up, addr, withBuffered(s.client, br))
			return
		}
	}
	p.refuse(req.host, r)
	socksReply(s.client, r.socks)
}
