//go:build unix

package sigreset

import (
	"os"
	"os/signal"
	"syscall"
)

// Unignore makes every signal this process ignores caught instead, by a
// handler that drops it: the process goes on ignoring it, and its children
// start with the default action. The C library's own real-time signals,
// which Go leaves alone, stay as they are.
func Unignore() {
	var sigs []os.Signal
	for s := syscall.Signal(1); s < 65; s++ {
		if s != syscall.SIGKILL && s != syscall.SIGSTOP && signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	if len(sigs) > 0 {
		signal.Notify(make(chan os.Signal, 1), sigs...)
	}
}
