package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// The Network group: egress policies (CreateOptions.Network) are reported
// back in Info as given (normalised), a policy the provider cannot enforce
// is refused with FailedPrecondition before anything is created, bad
// entries are InvalidArgument naming the entry, deny wins over allow, and
// SetNetwork changes the policy where the provider can (Unimplemented
// elsewhere). It runs on every provider: what each subtest asks for
// follows Capabilities.NetworkPolicy.

func init() {
	networkTests = append(networkTests,
		test{name: "InfoReportsPolicy", fn: testNetworkInfo},
		test{name: "Unsupported", fn: testNetworkUnsupported},
		test{name: "BadEntries", fn: testNetworkBadEntries},
		test{name: "DenyWins", fn: testNetworkDenyWins},
		test{name: "SetNetwork", fn: testNetworkSet},
		test{name: "SetNetworkReadBack", fn: testNetworkSetReadBack},
	)
}

// networkTests is the Network group.
var networkTests []test

// netCase is a policy, what Info must report for it, and whether the
// provider's declared support admits it.
type netCase struct {
	name string
	give sandbox.NetworkPolicy
	want sandbox.NetworkPolicy
	ok   func(sandbox.NetworkSupport) bool
}

var netCases = []netCase{
	{"DenyAll", sandbox.NetworkPolicy{Mode: sandbox.NetworkDenyAll}, sandbox.NetworkPolicy{Mode: sandbox.NetworkDenyAll},
		func(s sandbox.NetworkSupport) bool { return s.DenyAll }},
	{"AllowAll", sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowAll}, sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowAll},
		func(s sandbox.NetworkSupport) bool { return s.AllowAll }},
	{"Domains", sandbox.NetworkPolicy{Allow: []string{"PyPI.org.", "Bücher.example", "pypi.org"}},
		sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []string{"pypi.org", "xn--bcher-kva.example"}},
		func(s sandbox.NetworkSupport) bool { return s.AllowDomains }},
	{"Wildcard", sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []string{"*.PythonHosted.org"}},
		sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []string{"*.pythonhosted.org"}},
		func(s sandbox.NetworkSupport) bool { return s.AllowWildcards }},
	{"CIDRs", sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []string{"203.0.113.7", "198.51.100.77/24"}},
		sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []string{"198.51.100.0/24", "203.0.113.7/32"}},
		func(s sandbox.NetworkSupport) bool { return s.AllowCIDRs }},
	{"DenyCIDRs", sandbox.NetworkPolicy{Deny: []string{"192.0.2.0/24"}},
		sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowAll, Deny: []string{"192.0.2.0/24"}},
		func(s sandbox.NetworkSupport) bool { return s.AllowAll && s.DenyCIDRs }},
	{"DenyDomains", sandbox.NetworkPolicy{Deny: []string{"evil.example"}},
		sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowAll, Deny: []string{"evil.example"}},
		func(s sandbox.NetworkSupport) bool { return s.AllowAll && s.DenyDomains }},
	{"DenyOverAllow", sandbox.NetworkPolicy{Allow: []string{"*.example.com"}, Deny: []string{"secret.example.com"}},
		sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []string{"*.example.com"}, Deny: []string{"secret.example.com"}},
		func(s sandbox.NetworkSupport) bool { return s.AllowWildcards && s.DenyOverAllow }},
	{"IPv6CIDRs", sandbox.NetworkPolicy{Allow: []string{"2001:DB8::/32", "::ffff:192.0.2.1"}},
		sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []string{"192.0.2.1/32", "2001:db8::/32"}},
		func(s sandbox.NetworkSupport) bool { return s.AllowCIDRs && s.IPv6CIDRs }},
	{"ElevenCIDRs", sandbox.NetworkPolicy{Allow: elevenCIDRs()}, sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: elevenCIDRs()},
		func(s sandbox.NetworkSupport) bool { return s.AllowCIDRs && (s.MaxCIDRs == 0 || s.MaxCIDRs >= 11) }},
}

// createNet creates a sandbox of the suite with policy p (and labels),
// destroying it at the end of the test when it was made.
// elevenCIDRs is one more CIDR than Daytona's networkAllowList takes.
func elevenCIDRs() []string {
	var l []string
	for i := range 11 {
		l = append(l, fmt.Sprintf("198.51.100.%d/32", i*8))
	}
	return l
}

func (s *suite) createNet(ctx context.Context, t *testing.T, p *sandbox.NetworkPolicy, labels map[string]string) (*sandbox.Sandbox, error) {
	t.Helper()
	opts := s.h.Create
	opts.NoNetwork, opts.Network = false, p
	opts.Labels = map[string]string{"sandboxtest": s.runID}
	for k, v := range s.h.Create.Labels {
		opts.Labels[k] = v
	}
	for k, v := range labels {
		opts.Labels[k] = v
	}
	sb, err := s.c.Create(ctx, opts)
	if err == nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60e9)
			defer cancel()
			if err := sb.Destroy(ctx); err != nil {
				t.Errorf("cleanup Destroy(%s): %v", sb.ID(), err)
			}
		})
	}
	return sb, err
}

func samePolicy(got *sandbox.NetworkPolicy, want sandbox.NetworkPolicy) string {
	if got == nil {
		return fmt.Sprintf("no policy, want %+v", want)
	}
	norm := func(l []string) []string { return slices.Sorted(slices.Values(l)) }
	if got.Mode != want.Mode || !slices.Equal(norm(got.Allow), norm(want.Allow)) || !slices.Equal(norm(got.Deny), norm(want.Deny)) {
		return fmt.Sprintf("policy %+v, want %+v", *got, want)
	}
	return ""
}

func testNetworkInfo(ctx context.Context, t *testing.T, s *suite) {
	ran := false
	for _, tc := range netCases {
		if !tc.ok(s.caps.NetworkPolicy) {
			continue
		}
		ran = true
		t.Run(tc.name, func(t *testing.T) {
			p := tc.give
			sb, err := s.createNet(ctx, t, &p, nil)
			if err != nil {
				t.Fatalf("Create with %+v, which the provider declares it enforces: %v", tc.give, err)
			}
			if msg := samePolicy(sb.Info().Network, tc.want); msg != "" {
				t.Errorf("Info after Create: %s", msg)
			}
			in, err := sb.Refresh(ctx)
			check(t, err)
			if msg := samePolicy(in.Network, tc.want); msg != "" {
				t.Errorf("Info after Refresh: %s", msg)
			}
		})
	}
	if !ran {
		t.Skip("the provider declares no network policy it can enforce")
	}
	t.Run("NoNetworkIsDenyAll", func(t *testing.T) {
		if !s.caps.NetworkPolicy.DenyAll {
			t.Skip("the provider cannot cut a sandbox off (NetworkPolicy.DenyAll false)")
		}
		opts := s.h.Create
		opts.NoNetwork, opts.Network = true, nil
		opts.Labels = map[string]string{"sandboxtest": s.runID}
		sb, err := s.c.Create(ctx, opts)
		check(t, err)
		t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
		if msg := samePolicy(sb.Info().Network, sandbox.NetworkPolicy{Mode: sandbox.NetworkDenyAll}); msg != "" {
			t.Errorf("NoNetwork: %s", msg)
		}
	})
}

// listed returns the ids of the sandboxes carrying label k=v.
func (s *suite) listed(ctx context.Context, t *testing.T, k, v string) []string {
	t.Helper()
	var ids []string
	for in, err := range s.c.List(ctx, sandbox.ListOptions{Labels: map[string]string{k: v}}) {
		check(t, err)
		ids = append(ids, in.ID)
	}
	return ids
}

func testNetworkUnsupported(ctx context.Context, t *testing.T, s *suite) {
	ran := false
	for i, tc := range netCases {
		if tc.ok(s.caps.NetworkPolicy) {
			continue
		}
		ran = true
		t.Run(tc.name, func(t *testing.T) {
			mark := fmt.Sprintf("unsupported-%s-%d", s.runID, i)
			p := tc.give
			sb, err := s.createNet(ctx, t, &p, map[string]string{"sandboxtest-net": mark})
			if err == nil {
				t.Fatalf("Create with %+v, which the provider does not declare, succeeded (sandbox %s, Info.Network %+v): a sandbox more open than asked", tc.give, sb.ID(), sb.Info().Network)
			}
			if msg := checkRow(err, sandbox.FailedPrecondition, []error{sandbox.ErrFailedPrecondition}, true); msg != "" {
				t.Fatal(msg)
			}
			if !strings.Contains(err.Error(), "network policy") {
				t.Errorf("the error does not say the network policy is what cannot be had: %v", err)
			}
			if ids := s.listed(ctx, t, "sandboxtest-net", mark); len(ids) > 0 {
				t.Errorf("a refused Create left sandboxes behind: %v", ids)
			}
		})
	}
	if !ran {
		t.Skip("the provider declares every policy of the group (" + noteOf(s.caps.NetworkPolicy) + ")")
	}
}

func noteOf(s sandbox.NetworkSupport) string {
	if s.NotEnforced {
		return "recorded, not enforced: " + s.Note
	}
	return "enforced"
}

func testNetworkBadEntries(ctx context.Context, t *testing.T, s *suite) {
	bad := map[string]sandbox.NetworkPolicy{
		"exa mple.com":         {Allow: []string{"ok.example", "exa mple.com"}},
		"*.*.example.com":      {Allow: []string{"*.*.example.com"}},
		"api.*.example.com":    {Allow: []string{"api.*.example.com"}},
		"foo*.example.com":     {Deny: []string{"foo*.example.com"}},
		"10.0.0.0/33":          {Allow: []string{"10.0.0.0/33"}},
		"-lead.example.com":    {Allow: []string{"-lead.example.com"}},
		"a..example.com":       {Allow: []string{"a..example.com"}},
		"1.2.3":                {Allow: []string{"1.2.3"}},
		"0x7f000001":           {Allow: []string{"0x7f000001"}},
		"1.2.3.0x4":            {Deny: []string{"1.2.3.0x4"}},
		"127.1":                {Allow: []string{"127.1"}},
		"_dmarc.example.com":   {Allow: []string{"_dmarc.example.com"}},
		"mode sometimes":       {Mode: "sometimes"},
		"deny-all with Allow":  {Mode: sandbox.NetworkDenyAll, Allow: []string{"pypi.org"}},
		"allow-all with Allow": {Mode: sandbox.NetworkAllowAll, Allow: []string{"pypi.org"}},
	}
	mark := "bad-" + s.runID
	for name, p := range bad {
		t.Run(strings.NewReplacer(" ", "_", "/", "_", "*", "star").Replace(name), func(t *testing.T) {
			_, err := s.createNet(ctx, t, &p, map[string]string{"sandboxtest-net": mark})
			if msg := checkRow(err, sandbox.InvalidArgument, []error{sandbox.ErrInvalidArgument}, true); msg != "" {
				t.Fatal(msg)
			}
			want := name
			switch name {
			case "mode sometimes":
				want = "sometimes"
			case "deny-all with Allow", "allow-all with Allow":
				want = "Allow"
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error does not name %q: %v", want, err)
			}
		})
	}
	t.Run("NoNetworkConflict", func(t *testing.T) {
		opts := s.h.Create
		opts.NoNetwork, opts.Network = true, &sandbox.NetworkPolicy{Allow: []string{"pypi.org"}}
		opts.Labels = map[string]string{"sandboxtest": s.runID, "sandboxtest-net": mark}
		_, err := s.c.Create(ctx, opts)
		if msg := checkRow(err, sandbox.InvalidArgument, []error{sandbox.ErrInvalidArgument}, true); msg != "" {
			t.Fatal(msg)
		}
		if !strings.Contains(err.Error(), "NoNetwork") {
			t.Errorf("the error does not name NoNetwork: %v", err)
		}
	})
	if ids := s.listed(ctx, t, "sandboxtest-net", mark); len(ids) > 0 {
		t.Errorf("refused Creates left sandboxes behind: %v", ids)
	}
}

func testNetworkDenyWins(ctx context.Context, t *testing.T, s *suite) {
	ns := s.caps.NetworkPolicy
	t.Run("DenyRemovesAllow", func(t *testing.T) {
		if !ns.AllowDomains {
			t.Skip("the provider has no domain allow-lists (NetworkPolicy.AllowDomains false)")
		}
		// a.example.com is denied outright: it leaves the allow-list, and
		// the deny entry, overlapping nothing left, is not needed.
		p := sandbox.NetworkPolicy{Allow: []string{"a.example.com", "b.example.com"}, Deny: []string{"A.example.com"}}
		sb, err := s.createNet(ctx, t, &p, nil)
		check(t, err)
		if msg := samePolicy(sb.Info().Network, sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []string{"b.example.com"}}); msg != "" {
			t.Error(msg)
		}
	})
	t.Run("DenyCoversEverything", func(t *testing.T) {
		if !ns.DenyAll {
			t.Skip("the provider cannot cut a sandbox off (NetworkPolicy.DenyAll false)")
		}
		p := sandbox.NetworkPolicy{Allow: []string{"x.example.com", "10.1.2.3"}, Deny: []string{"*.example.com", "10.0.0.0/8"}}
		sb, err := s.createNet(ctx, t, &p, nil)
		check(t, err)
		if msg := samePolicy(sb.Info().Network, sandbox.NetworkPolicy{Mode: sandbox.NetworkDenyAll}); msg != "" {
			t.Errorf("an allow-list whose every entry is denied: %s", msg)
		}
	})
}

func testNetworkSet(ctx context.Context, t *testing.T, s *suite) {
	ns := s.caps.NetworkPolicy
	var from, to *netCase
	for i := range netCases {
		if !netCases[i].ok(ns) {
			continue
		}
		if from == nil {
			from = &netCases[i]
		} else if to == nil && netCases[i].want.Mode != from.want.Mode || to == nil && netCases[i].name == "Domains" {
			to = &netCases[i]
		}
	}
	if from == nil {
		t.Skip("the provider declares no network policy it can enforce")
	}
	p := from.give
	sb, err := s.createNet(ctx, t, &p, nil)
	check(t, err)
	if !s.caps.NetworkUpdate {
		err := sb.SetNetwork(ctx, from.give)
		if msg := checkRow(err, sandbox.Unimplemented, []error{sandbox.ErrUnimplemented}, true); msg != "" {
			t.Fatal(msg)
		}
		return
	}
	if to == nil {
		t.Skip("the provider declares only one network mode: nothing to change to")
	}
	other, err := s.c.Attach(ctx, sb.ID())
	check(t, err)
	if err := other.SetNetwork(ctx, to.give); !errors.Is(err, sandbox.ErrFailedPrecondition) {
		t.Errorf("SetNetwork on an attached handle: %v, want FailedPrecondition", err)
	}
	check(t, sb.SetNetwork(ctx, to.give))
	if msg := samePolicy(sb.Info().Network, to.want); msg != "" {
		t.Errorf("Info after SetNetwork: %s", msg)
	}
	in, err := sb.Refresh(ctx)
	check(t, err)
	if msg := samePolicy(in.Network, to.want); msg != "" {
		t.Errorf("Refresh after SetNetwork: %s", msg)
	}
	// Back again: the new policy replaces the old one whole.
	check(t, sb.SetNetwork(ctx, from.give))
	in, err = sb.Refresh(ctx)
	check(t, err)
	if msg := samePolicy(in.Network, from.want); msg != "" {
		t.Errorf("Refresh after setting the first policy again: %s", msg)
	}
	// A policy the provider cannot enforce is refused here too.
	for _, tc := range netCases {
		if !tc.ok(ns) {
			err := sb.SetNetwork(ctx, tc.give)
			if msg := checkRow(err, sandbox.FailedPrecondition, []error{sandbox.ErrFailedPrecondition}, true); msg != "" {
				t.Errorf("SetNetwork %s: %s", tc.name, msg)
			}
			break
		}
	}
}

// testNetworkSetReadBack checks that what Info reports after SetNetwork is
// what the provider reports when the sandbox is read again: a caller never
// sees one policy on its handle and another on a fresh one.
func testNetworkSetReadBack(ctx context.Context, t *testing.T, s *suite) {
	ns := s.caps.NetworkPolicy
	if !s.caps.NetworkUpdate {
		t.Skip("the provider cannot change a running sandbox's policy (Capabilities.NetworkUpdate false)")
	}
	var give []sandbox.NetworkPolicy
	for _, tc := range netCases {
		if tc.ok(ns) {
			give = append(give, tc.give)
		}
	}
	if ns.AllowAll && ns.DenyCIDRs {
		give = append(give, sandbox.NetworkPolicy{Deny: []string{"0.0.0.0/0"}}, sandbox.NetworkPolicy{Deny: []string{"::ffff:192.0.2.0/120"}})
		if ns.IPv6CIDRs {
			give = append(give, sandbox.NetworkPolicy{Deny: []string{"::/0"}})
		}
	}
	if ns.AllowAll && ns.DenyCIDRs && ns.IPv6CIDRs && ns.DenyAll {
		give = append(give, sandbox.NetworkPolicy{Deny: []string{"0.0.0.0/0", "::/0"}})
	}
	if ns.AllowCIDRs {
		give = append(give, sandbox.NetworkPolicy{Allow: []string{"::ffff:192.0.2.1"}})
	}
	if len(give) < 2 {
		t.Skip("the provider declares fewer than two network policies: nothing to change to")
	}
	p := give[0]
	sb, err := s.createNet(ctx, t, &p, nil)
	check(t, err)
	for _, p := range give[1:] {
		if err := sb.SetNetwork(ctx, p); err != nil {
			t.Errorf("SetNetwork %+v, which the provider declares it enforces: %v", p, err)
			continue
		}
		got := sb.Info().Network
		in, err := sb.Refresh(ctx)
		check(t, err)
		if in.Network == nil {
			t.Errorf("SetNetwork %+v: Refresh reports no policy, Info reported %+v", p, got)
			continue
		}
		if msg := samePolicy(got, *in.Network); msg != "" {
			t.Errorf("SetNetwork %+v: Info %s (the want is what Refresh reports)", p, msg)
		}
	}
}
