//go:build !unix

package hostrt

import (
	"os"
	"os/exec"
	"syscall"
)

// newGroup does nothing where there are no process groups.
func newGroup(*exec.Cmd) {}

// killGroup kills the started cmd alone: without process groups its
// children may outlive it.
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

// exitSignal cannot tell where there are no signals: 0.
func exitSignal(*os.ProcessState) syscall.Signal { return 0 }

// reportsSignal says that exitSignal cannot tell.
const reportsSignal = false
