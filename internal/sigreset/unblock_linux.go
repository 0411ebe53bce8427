//go:build linux

package sigreset

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// reexecEnv marks a process ReexecUnblocked re-executed, so that it does
// so once at most.
const reexecEnv = "SANDBOXKIT_SIGMASK_CLEARED"

// standard is the mask of signals 1-31 (bit n-1 is signal n).
const standard = 1<<31 - 1

// ReexecUnblocked gives the process's children signals 1-31 unblocked. A
// process starts with its parent's signal mask (perf blocks SIGWINCH;
// supervisors and shells running a trap block others), a Go program's
// children start with the mask the program itself started with, and Go
// offers no way to change that: a blocked SIGWINCH or SIGUSR1 would reach
// every command the program runs (a terminal's program would never hear
// of a resize). When the calling thread has any of those signals blocked,
// ReexecUnblocked clears its mask and re-executes the program
// (/proc/self/exe, with the same arguments and environment and the
// descriptors not marked close-on-exec), which then starts with none
// blocked; the copy does not do it again. It returns when nothing is
// blocked, or with the error when the re-exec failed. Call it first thing,
// from package initialisation or main.
func ReexecUnblocked() error {
	if os.Getenv(reexecEnv) != "" {
		return os.Unsetenv(reexecEnv)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cur unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, nil, &cur); err != nil {
		return fmt.Errorf("reading the signal mask: %w", err)
	}
	if cur.Val[0]&standard == 0 {
		return nil
	}
	var none unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &none, nil); err != nil {
		return fmt.Errorf("clearing the signal mask: %w", err)
	}
	err := syscall.Exec("/proc/self/exe", os.Args, append(os.Environ(), reexecEnv+"=1"))
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &cur, nil)
	return fmt.Errorf("re-executing with no signal blocked: %w", err)
}

// RestartBlocked replaces the process with the program itself, started
// again with the same arguments and sigs blocked, as a parent that blocks
// them would start it, and with the environment variable key set to value
// (replacing it): the tests of the programs that must not pass a blocked
// signal on start a copy of themselves so. It returns only the error of a
// failed exec.
func RestartBlocked(key, value string, sigs ...syscall.Signal) error {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, key+"=") })
	env = append(env, key+"="+value)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	for _, s := range sigs {
		set.Val[(s-1)/64] |= 1 << ((uint(s) - 1) % 64)
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return err
	}
	err := syscall.Exec("/proc/self/exe", os.Args, env)
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return err
}

// Blocked returns the calling thread's mask of signals 1-31 that are
// blocked (bit n-1 is signal n).
func Blocked() (uint64, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cur unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, nil, &cur); err != nil {
		return 0, err
	}
	return cur.Val[0] & standard, nil
}

// ExecUnblocked replaces the process with path (argv, env) started with
// no signal blocked. It returns only the error of a failed exec.
func ExecUnblocked(path string, argv, env []string) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var none, old unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &none, &old); err != nil {
		return err
	}
	err := syscall.Exec(path, argv, env)
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return err
}

// unblockArg0 is the name a program that imports this package is run
// under to start a command with no signal blocked (see UnblockCmd).
const unblockArg0 = "sandboxkit-unblocked-exec"

func init() {
	if len(os.Args) > 2 && os.Args[0] == unblockArg0 {
		// argv: unblockArg0, the command's path, its argv.
		err := ExecUnblocked(os.Args[1], os.Args[2:], os.Environ())
		fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[2], err)
		os.Exit(126)
	}
}

// blockedAtStart reports whether this program has any of signals 1-31
// blocked (a Go program's threads keep the mask it started with).
var blockedAtStart = sync.OnceValue(func() bool {
	m, err := Blocked()
	return err == nil && m != 0
})

// UnblockCmd makes cmd, not yet started, start with no signal blocked. A
// Go program's children start with the signal mask the program started
// with, which Go cannot change: when some are blocked, cmd is started
// through this program re-run under a marker name, which clears the mask
// and executes the command (the program must import this package). It
// changes nothing otherwise.
func UnblockCmd(cmd *exec.Cmd) {
	if cmd.Err != nil || !blockedAtStart() {
		return
	}
	cmd.Args = append([]string{unblockArg0, cmd.Path}, cmd.Args...)
	cmd.Path = "/proc/self/exe"
}
