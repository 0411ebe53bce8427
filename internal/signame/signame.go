// Package signame names Linux signals the way a sandbox reports them: the
// numbers and names of Linux (every sandbox runs Linux, whatever the
// host), and the descriptions Go prints for them (syscall.Signal.String
// on Linux, which os.ProcessState.String puts after "signal: ").
package signame

import (
	"strconv"
	"strings"
	"syscall"
)

// linux holds, by Linux signal number, the signal's name and the text Go
// prints for it on Linux.
var linux = [...]struct{ name, text string }{
	1:  {"SIGHUP", "hangup"},
	2:  {"SIGINT", "interrupt"},
	3:  {"SIGQUIT", "quit"},
	4:  {"SIGILL", "illegal instruction"},
	5:  {"SIGTRAP", "trace/breakpoint trap"},
	6:  {"SIGABRT", "aborted"},
	7:  {"SIGBUS", "bus error"},
	8:  {"SIGFPE", "floating point exception"},
	9:  {"SIGKILL", "killed"},
	10: {"SIGUSR1", "user defined signal 1"},
	11: {"SIGSEGV", "segmentation fault"},
	12: {"SIGUSR2", "user defined signal 2"},
	13: {"SIGPIPE", "broken pipe"},
	14: {"SIGALRM", "alarm clock"},
	15: {"SIGTERM", "terminated"},
	16: {"SIGSTKFLT", "stack fault"},
	17: {"SIGCHLD", "child exited"},
	18: {"SIGCONT", "continued"},
	19: {"SIGSTOP", "stopped (signal)"},
	20: {"SIGTSTP", "stopped"},
	21: {"SIGTTIN", "stopped (tty input)"},
	22: {"SIGTTOU", "stopped (tty output)"},
	23: {"SIGURG", "urgent I/O condition"},
	24: {"SIGXCPU", "CPU time limit exceeded"},
	25: {"SIGXFSZ", "file size limit exceeded"},
	26: {"SIGVTALRM", "virtual timer expired"},
	27: {"SIGPROF", "profiling timer expired"},
	28: {"SIGWINCH", "window changed"},
	29: {"SIGIO", "I/O possible"},
	30: {"SIGPWR", "power failure"},
	31: {"SIGSYS", "bad system call"},
}

// maxSignal is the highest Linux signal number (SIGRTMAX).
const maxSignal = 64

// Name returns the Linux name of sig ("SIGTERM"), or "signal N" for a
// number without one (the real-time signals), "" for one out of range.
func Name(sig syscall.Signal) string {
	n := int(sig)
	switch {
	case n > 0 && n < len(linux):
		return linux[n].name
	case n >= len(linux) && n <= maxSignal:
		return "signal " + strconv.Itoa(n)
	}
	return ""
}

// Text returns the text Go prints on Linux for sig ("terminated"): the
// part after "signal: " of os.ProcessState.String.
func Text(sig syscall.Signal) string {
	n := int(sig)
	if n > 0 && n < len(linux) {
		return linux[n].text
	}
	return "signal " + strconv.Itoa(n)
}

// FromStatus returns the signal an os.ProcessState.String text names
// ("signal: terminated", "signal: segmentation fault (core dumped)",
// "signal: signal 34"), or 0 when the text is not a signal's (an exit
// status, an unknown description).
func FromStatus(status string) syscall.Signal {
	text, ok := strings.CutPrefix(strings.TrimSpace(status), "signal: ")
	if !ok {
		return 0
	}
	text = strings.TrimSuffix(text, " (core dumped)")
	for n := 1; n < len(linux); n++ {
		if linux[n].text == text {
			return syscall.Signal(n)
		}
	}
	if num, ok := strings.CutPrefix(text, "signal "); ok {
		if n, err := strconv.Atoi(num); err == nil && n > 0 && n <= maxSignal {
			return syscall.Signal(n)
		}
	}
	return 0
}
