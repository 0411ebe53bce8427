//go:build !linux

package sigreset

import (
	"errors"
	"os/exec"
)

// ReexecUnblocked does nothing here: the programs that call it re-execute
// themselves only on Linux.
func ReexecUnblocked() error { return nil }

// Blocked reports no blocked signals here.
func Blocked() (uint64, error) { return 0, nil }

// ExecUnblocked is not available here.
func ExecUnblocked(path string, argv, env []string) error {
	return errors.ErrUnsupported
}

// UnblockCmd changes nothing here.
func UnblockCmd(cmd *exec.Cmd) {}
