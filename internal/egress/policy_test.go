package egress

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/netip"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/sandboxkit/sandbox/driver"
)

func TestSpecialAddresses(t *testing.T) {
	for a, want := range map[string]string{
		"127.0.0.1":          "loopback",
		"127.255.0.9":        "loopback",
		"10.9.8.7":           "private",
		"172.16.0.1":         "private",
		"172.31.255.255":     "private",
		"192.168.0.1":        "private",
		"169.254.169.254":    "link-local",
		"100.64.0.1":         "shared (CGNAT)",
		"0.0.0.0":            "unspecified",
		"224.0.0.251":        "multicast",
		"255.255.255.255":    "broadcast",
		"240.0.0.1":          "reserved",
		"::":                 "unspecified",
		"::1":                "loopback",
		"fd12:3456::1":       "unique local",
		"fe80::1":            "link-local",
		"ff02::1":            "multicast",
		"64:ff9b::a9fe:a9fe": "NAT64 form of 169.254.169.254",
		"2002:7f00:1::1":     "6to4 form of 127.0.0.1",
		"::ffff:10.0.0.1":    "private", // checked unmapped
		"8.8.8.8":            "",
		"172.32.0.1":         "",
		"93.184.216.34":      "",
		"2606:4700::1111":    "",
		"64:ff9b::808:808":   "",
	} {
		got := specialKind(netip.MustParseAddr(a).Unmap())
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("specialKind(%s) = %q, want %q", a, got, want)
		}
	}
}

func TestNameMatching(t *testing.T) {
	pol, err := compilePolicy(&driver.NetworkPolicy{Mode: driver.NetworkAllowList,
		AllowDomains: []string{"*.example.com", "pypi.org", "xn--bcher-kva.example"},
		DenyDomains:  []string{"bad.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	for host, ok := range map[string]bool{
		"a.example.com":        true,
		"a.b.example.com":      true,
		"example.com":          false,
		"notexample.com":       false,
		"pypi.org":             true,
		"PyPI.org.":            true,
		"x.pypi.org":           false,
		"bücher.example":       true,
		"BÜCHER.example":       true,
		"bad.example.com":      false,
		"x.bad.example.com":    true, // the deny entry is exact
		"example.com.evil.org": false,
	} {
		name, err := normalizeName(host)
		if err != nil {
			t.Errorf("normalizeName(%q): %v", host, err)
			continue
		}
		if r := pol.checkName(name); (r == nil) != ok {
			t.Errorf("checkName(%q) = %v, want allowed=%v", host, r, ok)
		}
	}
	for _, bad := range []string{"", "a..b", "127.1", "0x7f000001", "1.2.3.4", "a b", strings.Repeat("a", 64) + ".com"} {
		if n, err := normalizeName(bad); err == nil {
			t.Errorf("normalizeName(%q) = %q, want an error", bad, n)
		}
	}
}

func TestCompilePolicyErrors(t *testing.T) {
	for _, p := range []*driver.NetworkPolicy{
		{Mode: "open"},
		{Mode: driver.NetworkAllowList, AllowDomains: []string{"a..b"}},
		{Mode: driver.NetworkAllowList, AllowCIDRs: []string{"10.0.0.0/33"}},
		{Mode: driver.NetworkAllowAll, DenyCIDRs: []string{"nope"}},
	} {
		if _, err := New(Config{Policy: p}); err == nil {
			t.Errorf("New took policy %+v", p)
		}
	}
	// An IPv4-mapped prefix means its IPv4 prefix.
	pol, err := compilePolicy(&driver.NetworkPolicy{Mode: driver.NetworkAllowList, AllowCIDRs: []string{"::ffff:10.0.0.0/104"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := pol.checkLiteral(netip.MustParseAddr("10.1.1.1")); r != nil {
		t.Errorf("10.1.1.1 under ::ffff:10.0.0.0/104: %v", r)
	}
}

func TestSecretValidation(t *testing.T) {
	const v = "very-secret-value-42"
	ok := driver.BrokeredSecret{Value: v, Hosts: []string{"api.example.com"}, Header: "authorization", Format: "Bearer %s", Placeholder: "PH"}
	if _, err := New(Config{Secrets: []driver.BrokeredSecret{ok}}); err != nil {
		t.Fatalf("valid secret: %v", err)
	}
	for name, mut := range map[string]func(*driver.BrokeredSecret){
		"no hosts":         func(s *driver.BrokeredSecret) { s.Hosts = nil },
		"bad host":         func(s *driver.BrokeredSecret) { s.Hosts = []string{"a..b"} },
		"bad header":       func(s *driver.BrokeredSecret) { s.Header = "X Key" },
		"hop header":       func(s *driver.BrokeredSecret) { s.Header = "Proxy-Authorization" },
		"two verbs":        func(s *driver.BrokeredSecret) { s.Format = "%s %s" },
		"other verb":       func(s *driver.BrokeredSecret) { s.Format = "%d %s" },
		"no verb":          func(s *driver.BrokeredSecret) { s.Format = "Bearer" },
		"empty value":      func(s *driver.BrokeredSecret) { s.Value = "" },
		"newline in value": func(s *driver.BrokeredSecret) { s.Value = v + "\r\nX-Evil: 1" },
		"no placeholder":   func(s *driver.BrokeredSecret) { s.Placeholder = "" },
		"placeholder in value": func(s *driver.BrokeredSecret) {
			s.Placeholder = "secret"
		},
	} {
		s := ok
		mut(&s)
		_, err := New(Config{Secrets: []driver.BrokeredSecret{s}})
		if err == nil {
			t.Errorf("%s: New took it", name)
			continue
		}
		if strings.Contains(err.Error(), v) {
			t.Errorf("%s: the error holds the value: %v", name, err)
		}
	}
}

func TestCAConstraints(t *testing.T) {
	p, err := New(Config{Secrets: []driver.BrokeredSecret{{Value: "v-123456789", Hosts: []string{"api.example.com", "*.corp.example"}, Header: "X-Key", Placeholder: "PH"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	blk, rest := pem.Decode(p.CACertPEM())
	if blk == nil || blk.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("CACertPEM is not one certificate: %q", p.CACertPEM())
	}
	if bytes.Contains(p.CACertPEM(), []byte("PRIVATE")) {
		t.Fatal("CACertPEM holds a key")
	}
	ca, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.IsCA || ca.PublicKeyAlgorithm != x509.ECDSA || ca.NotAfter.Sub(ca.NotBefore) > DefaultCAValidity+2*60*60*1e9 {
		t.Errorf("CA: IsCA %v, %v, valid %v", ca.IsCA, ca.PublicKeyAlgorithm, ca.NotAfter.Sub(ca.NotBefore))
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for name, want := range map[string]bool{"api.example.com": true, "x.corp.example": true, "evil.com": false, "example.com": false} {
		leaf, err := p.ca.leaf(name)
		if err != nil {
			t.Fatal(err)
		}
		_, err = leaf.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots})
		if (err == nil) != want {
			t.Errorf("leaf for %s verifies: %v, want %v", name, err, want)
		}
		if again, _ := p.ca.leaf(name); again != leaf {
			t.Errorf("leaf for %s not cached", name)
		}
	}
}

func TestMaskReader(t *testing.T) {
	sec := []*secret{{value: "SECRETVALUE"}}
	in := "a SECRETVALUE b SECRETVALUESECRETVALUE c SECRETVALU"
	want := "a *********** b ********************** c SECRETVALU"
	for _, r := range []io.Reader{strings.NewReader(in), iotest.OneByteReader(strings.NewReader(in)), iotest.HalfReader(strings.NewReader(in))} {
		got, err := io.ReadAll(newMaskReader(r, sec))
		if err != nil || string(got) != want {
			t.Errorf("masked %q (%v), want %q", got, err, want)
		}
	}
}
