package testport

import (
	"errors"
	"testing"
)

func TestSpanStaysBelowEphemeralRange(t *testing.T) {
	for _, c := range []struct {
		in   string
		err  error
		want int
	}{
		{"32768\t60999\n", nil, 12768},
		{"49152 65535", nil, 20000},
		{"1024 65535", nil, 20000},
		{"", errors.New("no such file"), 20000},
		{"garbage", nil, 20000},
	} {
		if got := spanFor([]byte(c.in), c.err); got != c.want {
			t.Errorf("spanFor(%q, %v) = %d, want %d", c.in, c.err, got, c.want)
		}
	}
	for range 1000 {
		if p := Pick(); p < base || p >= base+span() {
			t.Fatalf("Pick() = %d, outside [%d, %d)", p, base, base+span())
		}
	}
}

func TestTakenIn(t *testing.T) {
	if !TakenIn("OSError: [Errno 98] Address already in use\n") || !TakenIn("listen tcp :80: bind: address already in use") {
		t.Error("EADDRINUSE messages not recognised")
	}
	if TakenIn("Permission denied") {
		t.Error("another error taken for a port in use")
	}
}
