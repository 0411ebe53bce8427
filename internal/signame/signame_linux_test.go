package signame

import (
	"syscall"
	"testing"
)

// TestMatchesGo checks the table against what Go prints on Linux, where
// envd runs.
func TestMatchesGo(t *testing.T) {
	for n := 1; n <= maxSignal; n++ {
		if got, want := Text(syscall.Signal(n)), syscall.Signal(n).String(); got != want {
			t.Errorf("Text(%d) = %q, Go prints %q", n, got, want)
		}
	}
}
