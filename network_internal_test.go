package sandbox

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox/driver"
)

func TestNormalizeNetwork(t *testing.T) {
	t.Parallel()
	dp := func(m NetworkMode, ad, ac, dd, dc []string) *driver.NetworkPolicy {
		return &driver.NetworkPolicy{Mode: m, AllowDomains: ad, AllowCIDRs: ac, DenyDomains: dd, DenyCIDRs: dc}
	}
	for _, tc := range []struct {
		name string
		give *NetworkPolicy
		no   bool
		want *driver.NetworkPolicy
	}{
		{"nil", nil, false, nil},
		{"NoNetwork", nil, true, dp(NetworkDenyAll, nil, nil, nil, nil)},
		{"NoNetwork and deny-all agree", &NetworkPolicy{Mode: NetworkDenyAll}, true, dp(NetworkDenyAll, nil, nil, nil, nil)},
		{"empty is allow-all", &NetworkPolicy{}, false, dp(NetworkAllowAll, nil, nil, nil, nil)},
		{"case, trailing dot, IDNA, duplicates", &NetworkPolicy{Allow: []string{"PyPI.Org.", "pypi.org", "Bücher.Example"}}, false,
			dp(NetworkAllowList, []string{"pypi.org", "xn--bcher-kva.example"}, nil, nil, nil)},
		{"CIDRs canonical", &NetworkPolicy{Allow: []string{"10.1.2.3/8", "2001:DB8::1", "192.0.2.1"}}, false,
			dp(NetworkAllowList, nil, []string{"10.0.0.0/8", "192.0.2.1/32", "2001:db8::1/128"}, nil, nil)},
		{"deny removes a covered allow", &NetworkPolicy{Allow: []string{"a.example.com", "b.example.com"}, Deny: []string{"*.example.com"}}, false,
			dp(NetworkDenyAll, nil, nil, nil, nil)},
		{"wildcard does not cover the apex", &NetworkPolicy{Allow: []string{"example.com"}, Deny: []string{"*.example.com"}}, false,
			dp(NetworkAllowList, []string{"example.com"}, nil, nil, nil)},
		{"carve-out kept", &NetworkPolicy{Allow: []string{"*.example.com", "10.0.0.0/8"}, Deny: []string{"x.example.com", "10.1.0.0/16", "192.0.2.0/24"}}, false,
			// 192.0.2.0/24 overlaps no allowed prefix, but an allowed name
			// could resolve into it: it stays.
			dp(NetworkAllowList, []string{"*.example.com"}, []string{"10.0.0.0/8"}, []string{"x.example.com"}, []string{"10.1.0.0/16", "192.0.2.0/24"})},
		{"outside deny dropped", &NetworkPolicy{Allow: []string{"a.example.com"}, Deny: []string{"b.example.com"}}, false,
			dp(NetworkAllowList, []string{"a.example.com"}, nil, nil, nil)},
		{"deny-list on allow-all", &NetworkPolicy{Deny: []string{"Evil.Example", "192.0.2.9"}}, false,
			dp(NetworkAllowAll, nil, nil, []string{"evil.example"}, []string{"192.0.2.9/32"})},
		{"IPv4-mapped address is IPv4", &NetworkPolicy{Allow: []string{"::ffff:192.0.2.1", "::FFFF:198.51.100.0/120"}}, false,
			dp(NetworkAllowList, nil, []string{"192.0.2.1/32", "198.51.100.0/24"}, nil, nil)},
		{"deny of an IPv4 prefix covers a mapped allow", &NetworkPolicy{Allow: []string{"::ffff:1.2.3.4"}, Deny: []string{"1.2.3.0/24"}}, false,
			dp(NetworkDenyAll, nil, nil, nil, nil)},
		{"deny of every address is deny-all", &NetworkPolicy{Deny: []string{"::/0", "0.0.0.0/0", "evil.example"}}, false,
			dp(NetworkDenyAll, nil, nil, nil, nil)},
		{"deny of IPv4 only stays a deny-list", &NetworkPolicy{Deny: []string{"0.0.0.0/0"}}, false,
			dp(NetworkAllowAll, nil, nil, nil, []string{"0.0.0.0/0"})},
		{"numeric labels before the last are fine", &NetworkPolicy{Allow: []string{"1.2.3.example", "0x7f.example"}}, false,
			dp(NetworkAllowList, []string{"0x7f.example", "1.2.3.example"}, nil, nil, nil)},
		{"v4 prefix does not cover v6", &NetworkPolicy{Allow: []string{"::/0"}, Deny: []string{"0.0.0.0/0"}}, false,
			dp(NetworkAllowList, nil, []string{"::/0"}, nil, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := normalizeNetwork("create", "test", "", tc.give, tc.no)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestNormalizeNetworkRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		give NetworkPolicy
		no   bool
		name string // what the message must name
	}{
		{NetworkPolicy{Allow: []string{"*"}}, false, `"*"`},
		{NetworkPolicy{Allow: []string{"*.*.example.com"}}, false, "*.*.example.com"},
		{NetworkPolicy{Allow: []string{"a*.example.com"}}, false, "a*.example.com"},
		{NetworkPolicy{Allow: []string{"example.*"}}, false, "example.*"},
		{NetworkPolicy{Allow: []string{""}}, false, "empty"},
		{NetworkPolicy{Allow: []string{"fe80::1%eth0"}}, false, "fe80::1%eth0"},
		{NetworkPolicy{Allow: []string{"300.1.1.1"}}, false, "300.1.1.1"},
		{NetworkPolicy{Allow: []string{"a_b.example.com-"}}, false, "a_b.example.com-"},
		{NetworkPolicy{Allow: []string{strings.Repeat("a", 64) + ".com"}}, false, strings.Repeat("a", 64)},
		{NetworkPolicy{Deny: []string{"10.0.0.0/8 "}}, false, "10.0.0.0/8 "},
		{NetworkPolicy{Mode: NetworkAllowAll}, true, "NoNetwork"},
		{NetworkPolicy{Mode: NetworkDenyAll, Deny: []string{"x.example"}}, false, "deny-all"},
		{NetworkPolicy{Mode: "Allow-All"}, false, "Allow-All"},
		// Names inet_aton and the WHATWG URL parser read as IPv4.
		{NetworkPolicy{Allow: []string{"0x7f000001"}}, false, "127.0.0.1/32"},
		{NetworkPolicy{Allow: []string{"1.2.3.0x4"}}, false, "1.2.3.4/32"},
		{NetworkPolicy{Allow: []string{"127.1"}}, false, "127.0.0.1/32"},
		{NetworkPolicy{Deny: []string{"0177.0.0.1"}}, false, "127.0.0.1/32"},
		{NetworkPolicy{Deny: []string{"2130706433"}}, false, "127.0.0.1/32"},
		{NetworkPolicy{Allow: []string{"1.2.3.4."}}, false, "1.2.3.4/32"},
		{NetworkPolicy{Allow: []string{"0X7F.0.0.1"}}, false, "127.0.0.1/32"},
		{NetworkPolicy{Allow: []string{"example.0x"}}, false, "example.0x"},
		{NetworkPolicy{Allow: []string{"a.b.c.d.099"}}, false, "CIDR form"},
		{NetworkPolicy{Allow: []string{"*.0x7f"}}, false, "*.0x7f"},
		// An underscore is no host name's: E2B and Daytona answer 400.
		{NetworkPolicy{Allow: []string{"_dmarc.example.com"}}, false, "_dmarc.example.com"},
	} {
		_, err := normalizeNetwork("create", "test", "", &tc.give, tc.no)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%+v: %v, want InvalidArgument naming %q", tc.give, err, tc.name)
		}
	}
}

func TestNetworkMissing(t *testing.T) {
	t.Parallel()
	p, err := normalizeNetwork("create", "test", "", &NetworkPolicy{Allow: []string{"*.example.com", "10.0.0.0/8"}, Deny: []string{"x.example.com"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	got := networkMissing(p, NetworkSupport{AllowDomains: true, AllowCIDRs: true})
	for _, want := range []string{"wildcard", "x.example.com"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q does not name %q", got, want)
		}
	}
	if strings.Contains(got, "CIDR allow") {
		t.Errorf("missing %q names what is declared", got)
	}
	if m := networkMissing(p, NetworkSupport{AllowWildcards: true, AllowCIDRs: true, DenyOverAllow: true}); m != "" {
		t.Errorf("all declared, yet missing %q", m)
	}
}

func TestNetworkMissingCIDRLimits(t *testing.T) {
	t.Parallel()
	many := []string{"2001:db8::/32"}
	for i := range 10 {
		many = append(many, fmt.Sprintf("10.%d.0.0/16", i))
	}
	p, err := normalizeNetwork("create", "test", "", &NetworkPolicy{Allow: many}, false)
	if err != nil {
		t.Fatal(err)
	}
	got := networkMissing(p, NetworkSupport{AllowCIDRs: true, MaxCIDRs: 10})
	for _, want := range []string{"IPv6 CIDRs (2001:db8::/32)", "11 CIDR entries (at most 10)"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q does not name %q", got, want)
		}
	}
	if m := networkMissing(p, NetworkSupport{AllowCIDRs: true, IPv6CIDRs: true}); m != "" {
		t.Errorf("all declared, yet missing %q", m)
	}
	// A mapped address is IPv4 and needs no IPv6 support.
	p, err = normalizeNetwork("create", "test", "", &NetworkPolicy{Allow: []string{"::ffff:1.2.3.4"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if m := networkMissing(p, NetworkSupport{AllowCIDRs: true, MaxCIDRs: 10}); m != "" {
		t.Errorf("an IPv4-mapped address: missing %q", m)
	}
}
