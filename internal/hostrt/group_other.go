//go:build !unix

package hostrt

import "os/exec"

// newGroup does nothing where there are no process groups.
func newGroup(*exec.Cmd) {}

// killGroup kills the started cmd alone: without process groups its
// children may outlive it.
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
