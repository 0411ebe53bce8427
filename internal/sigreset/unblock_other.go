//go:build !linux

package sigreset

// ReexecUnblocked does nothing here: the programs that call it re-execute
// themselves only on Linux.
func ReexecUnblocked() error { return nil }
