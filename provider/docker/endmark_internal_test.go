package docker

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// The end-detecting writers pass a stream on unchanged up to the mark,
// however the stream is cut into writes, drop the mark and what follows
// it, hold back nothing that cannot start the mark (so output streams
// live), and call done once both streams showed it.
func TestEndWriter(t *testing.T) {
	mark := endMark("0123456789abcdef01234567")
	m := []byte(mark)
	cases := []struct {
		name      string
		stream    string
		want      string
		wantSeen  bool
		heldAfter int // bytes held back once the whole stream was written
	}{
		{"plain then mark", "hello\nworld\n" + mark, "hello\nworld\n", true, 0},
		{"mark only", mark, "", true, 0},
		{"after mark dropped", "out" + mark + "stray", "out", true, 0},
		{"no mark", "no end here", "no end here", false, 0},
		{"mark's start in the output", "a" + mark[:5] + "b" + mark[:len(mark)-1] + "c" + mark, "a" + mark[:5] + "b" + mark[:len(mark)-1] + "c", true, 0},
		{"ends in a partial mark", "x" + mark[:7], "x" + mark[:7], false, 7},
		{"binary", "\x00\xff\x1e\x1f\x1e" + mark, "\x00\xff\x1e\x1f\x1e", true, 0},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range cases {
		for round := range 200 {
			var out, errOut bytes.Buffer
			done := 0
			p := newEndPair(mark, &out, &errOut, func() { done++ })
			b := []byte(tc.stream)
			for len(b) > 0 {
				n := 1 + rng.IntN(len(b))
				if round == 0 {
					n = len(b)
				}
				if _, err := p.out.Write(b[:n]); err != nil {
					t.Fatal(err)
				}
				b = b[n:]
			}
			if len(p.out.held) != tc.heldAfter {
				t.Fatalf("%s: %d bytes held back after the stream, want %d", tc.name, len(p.out.held), tc.heldAfter)
			}
			if p.out.seen != tc.wantSeen {
				t.Fatalf("%s: mark seen %v, want %v", tc.name, p.out.seen, tc.wantSeen)
			}
			if _, err := p.err.Write(m); err != nil {
				t.Fatal(err)
			}
			if err := p.flush(); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Fatalf("%s (round %d): passed on %q, want %q", tc.name, round, out.String(), tc.want)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.wantSeen]; done != want {
				t.Fatalf("%s: done called %d times, want %d", tc.name, done, want)
			}
		}
	}
	// Output that cannot start the mark is passed on at once.
	var out bytes.Buffer
	p := newEndPair(mark, &out, &out, nil)
	if _, err := p.out.Write([]byte("ready\n")); err != nil {
		t.Fatal(err)
	}
	if out.String() != "ready\n" {
		t.Errorf("after writing %q, %q passed on: output must not wait for more", "ready\n", out.String())
	}
}
