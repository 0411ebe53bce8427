package namerule

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// Each rule the module uses accepts exactly what its Pattern matches:
// edge cases, then random strings over letters, digits, the extra bytes
// and a few that are never allowed.
func TestRulesMatchTheirPatterns(t *testing.T) {
	t.Parallel()
	rules := []Rule{
		{Pattern: `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`, Max: 128, FirstAlnum: true, Extra: "._-"},
		{Pattern: `^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$`, Max: 128, FirstAlnum: true, Extra: "._/-"},
		{Pattern: `^[A-Za-z0-9._-]{1,128}$`, Max: 128, Extra: "._-"},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "aZ09._-/ \n\x00é:+"
	for _, r := range rules {
		re := regexp.MustCompile(r.Pattern)
		cases := []string{"", "a", "-", ".a", "a-", "a/b", "a b", "A9", strings.Repeat("a", 128), strings.Repeat("a", 129), "a\n", "é", "a\x00"}
		for range 20000 {
			b := make([]byte, rng.IntN(132))
			for i := range b {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
			cases = append(cases, string(b))
		}
		for _, s := range cases {
			if got, want := r.MatchString(s), re.MatchString(s); got != want {
				t.Errorf("%s: MatchString(%q) = %v, the pattern says %v", r, s, got, want)
			}
		}
		if r.String() != r.Pattern {
			t.Errorf("String() = %q", r.String())
		}
	}
}
