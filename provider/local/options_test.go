package local

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox/internal/opts/optstest"
)

// TestBadOptionNamesIt: New refuses invalid option values with one
// InvalidArgument error naming each bad option, before touching the host.
func TestBadOptionNamesIt(t *testing.T) {
	_, err := New(WithRoot(t.TempDir()), WithNetwork("bogus"), WithWarmPool(-1))
	optstest.Check(t, "WithNetwork", err)
	optstest.Check(t, "WithWarmPool", err)
	_, err = New(WithRoot(t.TempDir()), WithHalfCloseTimeout(0))
	optstest.Check(t, "WithHalfCloseTimeout", err)
	if err != nil && strings.Contains(err.Error(), "WithRoot") {
		t.Errorf("a valid option is named: %v", err)
	}
}

// The egress test hooks refuse what they cannot use, naming themselves.
func TestBadEgressOptionsNameThem(t *testing.T) {
	_, err := New(WithRoot(t.TempDir()),
		WithEgressHosts(map[string][]netip.Addr{"bad name": {netip.MustParseAddr("192.0.2.1")}}),
		WithEgressRootCAs([]byte("not a certificate")),
		WithEgressDialOverride(map[netip.AddrPort]netip.AddrPort{{}: netip.MustParseAddrPort("127.0.0.1:1")}))
	optstest.Check(t, "WithEgressHosts", err)
	optstest.Check(t, "WithEgressRootCAs", err)
	optstest.Check(t, "WithEgressDialOverride", err)
}
