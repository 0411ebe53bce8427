// Package forkwait lets a file just written be executed at once.
//
// A process being started holds a copy of its parent's descriptors from
// the fork until its exec closes the close-on-exec ones. While any process
// holds a descriptor open for writing on a file, the kernel refuses to
// execute that file (ETXTBSY, "Text file busy"). So a program that writes
// an executable and runs it straight away fails at random when another of
// its goroutines is starting a process at the moment of the write: the
// new process holds the written file open until it execs, which under
// load can be milliseconds after the writer closed the file.
package forkwait

import (
	"os"
	"syscall"
)

// Wait returns once every process start this program began before the
// call has passed the point where its parent resumes, so that almost no
// descriptor the caller closed before calling Wait is still held by one
// of them (see CloseReleased for the rest).
//
// Starts through os/exec and syscall.ForkExec hold syscall.ForkLock
// (write-locked, shared among concurrent starts) from the fork until the
// child, made with vfork, has replaced its memory; Wait takes the lock
// for reading and lets it go. The child closes its close-on-exec
// descriptors a little after its parent resumes; a child made without
// vfork (one given a new user namespace, or traced) is let go before its
// exec; a fork outside the Go runtime (cgo) takes no lock.
func Wait() {
	syscall.ForkLock.RLock()
	// Empty: the lock is a barrier here, not a guard.
	syscall.ForkLock.RUnlock()
}

// waitReleased returns once no process holds the file f names open for
// writing (f is the caller's own descriptor on it, opened for reading
// after its writer was closed), or once done is closed, or after bound,
// whichever comes first. It calls Wait first, which settles almost every
// case; where the system can tell (Linux) it then checks, and polls while
// another process still holds the file open for writing: a child started
// during the write that has not yet closed its copy. Where the check is
// unavailable (another system, a file system without leases) it returns
// after Wait.
func waitReleased(f *os.File, done <-chan struct{}) {
	Wait()
	released(f, done)
}

// CloseReleased closes f, a file the caller has just written, and then
// returns once the file can be executed: once no process started while
// f was open still holds it open for writing (see waitReleased, whose done
// and bound apply). It returns the error of closing f; when that fails
// it does not wait. Where the file cannot be reopened for reading (its
// mode denies it) it waits with Wait alone.
func CloseReleased(f *os.File, done <-chan struct{}) error {
	rf := reopen(f)
	err := f.Close()
	switch {
	case err != nil:
	case rf != nil:
		waitReleased(rf, done)
	default:
		Wait()
	}
	if rf != nil {
		rf.Close()
	}
	return err
}
