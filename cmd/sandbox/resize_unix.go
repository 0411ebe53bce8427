//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// watchResize calls f on every window size change of the tool's terminal
// (SIGWINCH) until stop is called.
func watchResize(f func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-ch:
				f()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
		<-finished
	}
}
