package sandbox

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// redactReference is redaction spelled out: every occurrence of every
// secret is a span, spans that overlap are merged, and each merged span is
// replaced once.
func redactReference(b []byte, secrets [][]byte) []byte {
	type span struct{ start, end int }
	var spans []span
	for _, s := range secrets {
		for i := 0; len(s) > 0 && i+len(s) <= len(b); i++ {
			if bytes.HasPrefix(b[i:], s) {
				spans = append(spans, span{i, i + len(s)})
			}
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var out []byte
	at := 0
	for k := 0; k < len(spans); {
		start, end := spans[k].start, spans[k].end
		for k++; k < len(spans) && spans[k].start < end; k++ {
			end = max(end, spans[k].end)
		}
		out = append(append(out, b[at:start]...), redacted...)
		at = end
	}
	return append(out, b[at:]...)
}

// Secrets that overlap in the text (one's end is another's start) are
// replaced as one span: no part of either is left, in one write or in
// writes cut anywhere. Random secrets over a two-letter alphabet make
// overlaps, nestings and touching pairs common; the result must be the
// reference's.
func TestRedactorMergesOverlappingSecrets(t *testing.T) {
	t.Parallel()
	const user, pass = "deploy-X", "X9f2c71d0b8e4a6_db_password_42"
	var out bytes.Buffer
	r := newRedactor(&out, [][]byte{[]byte(pass), []byte(user)})
	_, _ = r.Write([]byte("login deploy-X9f2c71d0b8e4a6_db_password_42 ok"))
	flushWriter(r)
	if got := out.String(); got != "login [REDACTED] ok" {
		t.Fatalf("two overlapping secrets: %q", got)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	word := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = "ab"[rng.IntN(2)]
		}
		return b
	}
	for round := range 3000 {
		var secrets [][]byte
		for range 1 + rng.IntN(3) {
			secrets = append(secrets, word(2+rng.IntN(5)))
		}
		slices.SortFunc(secrets, func(a, b []byte) int { return len(b) - len(a) })
		in := word(rng.IntN(30))
		want := redactReference(in, secrets)
		if got := redact(in, secrets); !bytes.Equal(got, want) {
			t.Fatalf("round %d: redact(%q, %q) = %q, want %q", round, in, secrets, got, want)
		}
		var out bytes.Buffer
		w := newRedactor(&out, secrets)
		for rest := in; len(rest) > 0; {
			n := 1 + rng.IntN(len(rest))
			_, _ = w.Write(rest[:n])
			rest = rest[n:]
		}
		flushWriter(w)
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("round %d: written in pieces, %q with %q gave %q, want %q", round, in, secrets, out.Bytes(), want)
		}
	}
}
