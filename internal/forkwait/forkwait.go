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

import "syscall"

// Wait returns once every process start this program began before the
// call has passed its exec, so that no descriptor the caller closed before
// calling Wait is still held by one of them. Call it after closing a file
// written for a sandbox and before reporting the write done.
//
// Starts through os/exec and syscall.ForkExec hold syscall.ForkLock
// (write-locked, shared among concurrent starts) from the fork until the
// child, made with vfork, has exec'd; Wait takes the lock for reading
// and lets it go. It covers those starts, which are how Go programs start
// processes; a child made without vfork (one given a new user namespace,
// or traced) is released before its exec, and a fork outside the Go
// runtime (cgo) takes no lock: neither is waited for.
func Wait() {
	syscall.ForkLock.RLock()
	// Empty: the lock is a barrier here, not a guard.
	syscall.ForkLock.RUnlock()
}
