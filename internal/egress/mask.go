package egress

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

// mask replaces every secret's value in s (of every host, whatever its
// length) with as many '*'. Every message the proxy writes to a client
// or a log goes through it, so that no upstream bytes or error text
// quoted in one can carry a value out.
func (p *Proxy) mask(s string) string {
	for i := range p.secrets {
		if v := p.secrets[i].value; strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, strings.Repeat("*", len(v)))
		}
	}
	return s
}

// maskHandler is a slog.Handler that masks the message and every
// attribute value before passing a record on.
type maskHandler struct {
	h    slog.Handler
	mask func(string) string
}

func (m *maskHandler) Enabled(ctx context.Context, l slog.Level) bool { return m.h.Enabled(ctx, l) }

func (m *maskHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, m.mask(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(m.attr(a))
		return true
	})
	return m.h.Handle(ctx, out)
}

func (m *maskHandler) WithAttrs(as []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(as))
	for i, a := range as {
		masked[i] = m.attr(a)
	}
	return &maskHandler{h: m.h.WithAttrs(masked), mask: m.mask}
}

func (m *maskHandler) WithGroup(name string) slog.Handler {
	return &maskHandler{h: m.h.WithGroup(name), mask: m.mask}
}

// attr masks one attribute: strings, and any other value by its text
// (an error, a Stringer), groups member by member.
func (m *maskHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, x := range g {
			out[i] = m.attr(x)
		}
		return slog.Group(a.Key, out...)
	case slog.KindString:
		return slog.String(a.Key, m.mask(v.String()))
	case slog.KindAny:
		return slog.String(a.Key, m.mask(v.String()))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// interfaceAddrs returns the addresses of the host's network interfaces.
func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range as {
		var ip net.IP
		switch a := a.(type) {
		case *net.IPNet:
			ip = a.IP
		case *net.IPAddr:
			ip = a.IP
		}
		if x, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, x.Unmap())
		}
	}
	return out, nil
}

// isHostAddr reports whether a is an address of the proxy's host. The
// set is read again when older than hostAddrsTTL; when it cannot be read
// the last reading stays.
func (p *Proxy) isHostAddr(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	p.hostMu.Lock()
	defer p.hostMu.Unlock()
	if p.hostSet == nil || time.Since(p.hostAt) >= hostAddrsTTL {
		if as, err := p.hostAddrs(); err == nil {
			set := make(map[netip.Addr]bool, len(as))
			for _, x := range as {
				set[x.Unmap().WithZone("")] = true
			}
			p.hostSet = set
		} else {
			p.log.Info("egress: cannot read the host's addresses", "err", err.Error())
		}
		p.hostAt = time.Now()
	}
	if p.hostSet[a] {
		return true
	}
	if v4, ok := embeddedV4(a); ok {
		return p.hostSet[v4]
	}
	return false
}

// compile compiles a policy for p: its checks know the host's addresses.
func (p *Proxy) compile(pol *driver.NetworkPolicy) (*policy, error) {
	c, err := compilePolicy(pol)
	if err != nil {
		return nil, err
	}
	c.own = p.isHostAddr
	return c, nil
}
