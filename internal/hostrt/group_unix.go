//go:build unix

package hostrt

import (
	"os"
	"os/exec"
	"syscall"
)

// newGroup makes cmd the leader of a process group of its own.
func newGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills the process group of a started cmd.
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }

// exitSignal returns the signal that ended the process of ps, or 0.
func exitSignal(ps *os.ProcessState) syscall.Signal {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}

// reportsSignal says that exitSignal can tell.
const reportsSignal = true
