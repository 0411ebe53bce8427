package sandboxtest

import (
	"bytes"
	"testing"
)

// TestPatternReaderStream checks that patternReader's table-driven Read
// yields the stream its formula defines, across the period's end and for
// reads of every size pattern a caller uses.
func TestPatternReaderStream(t *testing.T) {
	const total = patternPeriod + 5000
	want := make([]byte, total)
	for i := range want {
		n := uint64(i + 1)
		want[i] = byte(n*2654435761>>13) ^ byte(n>>8)
	}
	for _, chunk := range []int{1, 7, 4096, 65537, total} {
		p := &patternReader{}
		got := make([]byte, 0, total)
		buf := make([]byte, chunk)
		for len(got) < total {
			n, err := p.Read(buf[:min(chunk, total-len(got))])
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, buf[:n]...)
		}
		if !bytes.Equal(got, want) {
			i := 0
			for got[i] == want[i] {
				i++
			}
			t.Errorf("reads of %d bytes: stream differs from the formula at byte %d", chunk, i)
		}
	}
}

// TestExactContentShared checks that exactContent gives the same bytes on
// every call (the cache returns what the first call made).
func TestExactContentShared(t *testing.T) {
	a := bytes.Clone(exactContent(4097))
	if b := exactContent(4097); !bytes.Equal(a, b) || len(b) != 4097 {
		t.Fatalf("exactContent(4097) changed between calls")
	}
	if bytes.Equal(exactContent(4096), a[:4096]) {
		t.Fatalf("exactContent of two sizes share a prefix; want content fixed per size")
	}
}
