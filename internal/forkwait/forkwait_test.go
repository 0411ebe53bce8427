package forkwait

import (
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestWaitWaitsForAStartInProgress: while a start holds ForkLock (as
// os/exec does from the fork until the child execs), Wait does not
// return; it returns once the start lets the lock go.
func TestWaitWaitsForAStartInProgress(t *testing.T) {
	syscall.ForkLock.Lock()
	done := make(chan struct{})
	go func() {
		Wait()
		close(done)
	}()
	select {
	case <-done:
		syscall.ForkLock.Unlock()
		t.Fatal("Wait returned while a process start held ForkLock")
	case <-time.After(50 * time.Millisecond):
	}
	syscall.ForkLock.Unlock()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return within 10 s of the start letting ForkLock go")
	}
}
