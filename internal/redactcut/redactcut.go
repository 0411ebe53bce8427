// Package redactcut finds where a text can be cut without cutting a
// secret value in two, knowing only the function that redacts the values:
// a part of a value cut off its text is no longer found by that function,
// and would show in clear.
package redactcut

import "bytes"

// Clean reports whether redacting p[:k] and p[k:] apart gives whole,
// p redacted at once: then no secret found in p runs across k.
func Clean(p []byte, k int, whole []byte, redact func([]byte) []byte) bool {
	a := redact(p[:k])
	if !bytes.HasPrefix(whole, a) {
		return false
	}
	b := redact(p[k:])
	return len(a)+len(b) == len(whole) && bytes.HasSuffix(whole, b)
}

// Off returns a place near k where p can be cut with no secret found in
// p running across it: k itself, or else the start of the secret that runs
// across k (back) or its end (forward), backward first unless back is
// false, then the other way. Knowing the redaction only, it finds the
// secret's ends where redacting p whole and redacting its part before (or
// after) k stop agreeing; then, if needed, it tries the places nearby.
func Off(p []byte, k int, back bool, redact func([]byte) []byte) int {
	whole := redact(p)
	if Clean(p, k, whole, redact) {
		return k
	}
	before := func() int {
		a := redact(p[:k])
		d := 0
		for d < len(a) && d < len(whole) && a[d] == whole[d] {
			d++
		}
		for c := k - (len(a) - d); c > 0 && c > k-(len(a)-d)-64; c-- {
			if Clean(p, c, whole, redact) {
				return c
			}
		}
		return -1
	}
	after := func() int {
		b := redact(p[k:])
		e := 0
		for e < len(b) && e < len(whole) && b[len(b)-1-e] == whole[len(whole)-1-e] {
			e++
		}
		for c := k + (len(b) - e); c < len(p) && c < k+(len(b)-e)+64; c++ {
			if Clean(p, c, whole, redact) {
				return c
			}
		}
		return -1
	}
	first, second := before, after
	if !back {
		first, second = after, before
	}
	if c := first(); c >= 0 {
		return c
	}
	if c := second(); c >= 0 {
		return c
	}
	return k
}
