package signame

import (
	"syscall"
	"testing"
)

func TestFromStatus(t *testing.T) {
	for status, want := range map[string]syscall.Signal{
		"signal: killed":                           9,
		"signal: terminated":                       15,
		"signal: segmentation fault (core dumped)": 11,
		"signal: interrupt":                        2,
		"signal: aborted (core dumped)":            6,
		"signal: hangup":                           1,
		"signal: broken pipe":                      13,
		"signal: signal 34":                        34,
		"exit status 143":                          0,
		"signal: something new":                    0,
		"signal: signal 99":                        0,
		"":                                         0,
	} {
		if got := FromStatus(status); got != want {
			t.Errorf("FromStatus(%q) = %d, want %d", status, got, want)
		}
	}
}

func TestNameText(t *testing.T) {
	if got := Name(15); got != "SIGTERM" {
		t.Errorf("Name(15) = %q", got)
	}
	if got := Name(40); got != "signal 40" {
		t.Errorf("Name(40) = %q", got)
	}
	if got := Name(0); got != "" {
		t.Errorf("Name(0) = %q", got)
	}
	for n := syscall.Signal(1); n <= maxSignal; n++ {
		if got := FromStatus("signal: " + Text(n)); got != n {
			t.Errorf("FromStatus(Text(%d)) = %d", n, got)
		}
	}
}
