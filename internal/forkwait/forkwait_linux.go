package forkwait

import (
	"errors"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// bound is how long released polls: a child between fork and exec holds
// the file for milliseconds; a process that keeps it open for writing
// for longer is no start in transit, and waiting would not help.
const bound = 2 * time.Second

// released polls with a read lease: the kernel grants one only while no
// descriptor on the file is open for writing (EAGAIN otherwise), and the
// lease is let go at once.
func released(f *os.File, done <-chan struct{}) {
	sc, err := f.SyscallConn()
	if err != nil {
		return
	}
	try := func() (free, known bool) {
		var lerr error
		if err := sc.Control(func(fd uintptr) {
			_, lerr = unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_RDLCK)
			if lerr == nil {
				_, _ = unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_UNLCK)
			}
		}); err != nil {
			return false, false
		}
		switch {
		case lerr == nil:
			return true, true
		case errors.Is(lerr, unix.EAGAIN):
			return false, true
		}
		return false, false // no leases here (EINVAL, EACCES...): cannot tell
	}
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	delay := 100 * time.Microsecond
	for {
		if free, known := try(); free || !known {
			return
		}
		t := time.NewTimer(delay)
		select {
		case <-done:
			t.Stop()
			return
		case <-deadline.C:
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, 5*time.Millisecond)
	}
}

// reopen opens the file f names for reading through f itself (one open,
// no walk of its path, which may have changed); nil if it cannot.
func reopen(f *os.File) *os.File {
	sc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	var rf *os.File
	_ = sc.Control(func(fd uintptr) {
		rf, _ = os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(fd)), os.O_RDONLY, 0)
	})
	return rf
}
