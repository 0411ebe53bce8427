package sandboxtest

import (
	"os/exec"
	"strings"
	"sync"
)

// forkStorm starts processes from this program, n goroutines one after
// another, until the returned stop is called (stop waits for them): what
// a Go service using a sandbox does while it starts processes of its own,
// and what an in-process provider or fake does as it starts sandboxes.
// From its fork until its exec, each holds a copy of the descriptors the
// program had open at the fork. Each is given about a megabyte of
// environment, which the kernel copies before the exec replaces the
// process: the window is as wide as a loaded host makes it. Where no
// true(1) is found, nothing is started.
func forkStorm(n int) (stop func()) {
	path, err := exec.LookPath("true")
	if err != nil {
		return func() {}
	}
	env := make([]string, 8)
	for i := range env {
		env[i] = "STORM" + string(rune('A'+i)) + "=" + strings.Repeat("x", 120<<10)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				c := exec.Command(path)
				c.Env = env
				_ = c.Run()
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}
