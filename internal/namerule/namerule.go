// Package namerule checks the names the module accepts (sandbox ids,
// label keys, session keys) without compiling a regular expression: a
// counted repetition such as {0,127} makes package regexp build 128
// copies of its class, about a quarter of a millisecond of CPU each at
// every start of every program that imports the module, and a local
// sandbox's agent is the program started again.
package namerule

// Rule is a name of 1 to Max bytes of ASCII letters, digits and Extra.
type Rule struct {
	// Pattern is the rule as a regular expression, shown in errors.
	Pattern string
	// Max is the longest name, in bytes.
	Max int
	// FirstAlnum requires the first byte to be a letter or a digit.
	FirstAlnum bool
	// Extra lists the other bytes a name may hold.
	Extra string
}

// MatchString reports whether s follows the rule.
func (r Rule) MatchString(s string) bool {
	if len(s) == 0 || len(s) > r.Max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		if i == 0 && r.FirstAlnum || !r.extra(c) {
			return false
		}
	}
	return true
}

func (r Rule) extra(c byte) bool {
	for i := 0; i < len(r.Extra); i++ {
		if r.Extra[i] == c {
			return true
		}
	}
	return false
}

// String returns Pattern.
func (r Rule) String() string { return r.Pattern }
