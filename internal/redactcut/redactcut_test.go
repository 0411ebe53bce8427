package redactcut

import (
	"bytes"
	"testing"
)

func redactWith(secrets ...string) func([]byte) []byte {
	return func(b []byte) []byte {
		for _, s := range secrets {
			b = bytes.ReplaceAll(b, []byte(s), []byte("[REDACTED]"))
		}
		return b
	}
}

// Off moves a cut through a secret to its start, or past its end when it
// starts the text or when asked to look forward first, and leaves a clean
// cut where it is.
func TestOff(t *testing.T) {
	t.Parallel()
	red := redactWith("SECRET42")
	p := []byte("abcSECRET42xyz")
	for _, c := range []struct {
		k    int
		back bool
		want int
	}{
		{2, true, 2}, {3, true, 3}, {11, true, 11},
		{4, true, 3}, {7, true, 3}, {10, true, 3},
		{4, false, 11}, {10, false, 11},
	} {
		if got := Off(p, c.k, c.back, red); got != c.want {
			t.Errorf("Off(%q, %d, back=%v) = %d, want %d", p, c.k, c.back, got, c.want)
		}
	}
	q := []byte("SECRET42tail")
	if got := Off(q, 4, true, red); got != 8 {
		t.Errorf("a secret that starts the text: Off = %d, want its end, 8", got)
	}
	if !Clean(p, 3, red(p), red) || Clean(p, 5, red(p), red) {
		t.Error("Clean: the cut before the secret is clean, one inside it is not")
	}
}
