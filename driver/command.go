package driver

import (
	"io"
	"time"
)

// Command is a command as a driver receives it: resolved by the portable
// layer, which validated it and applied its defaults. Exactly one of Args
// and Shell is set. It carries no secrets list and no output cap: Env holds
// every variable the command gets (the caller's secret values included,
// which the portable layer redacts from what Stdout and Stderr pass on),
// and Stdout and Stderr apply the portable layer's cap.
type Command struct {
	// Args is the program and its arguments, run without a shell.
	Args []string
	// Shell is a line for the sandbox's shell ("sh -c" or the provider's
	// equivalent).
	Shell string
	// Dir is the absolute working directory; never empty.
	Dir string
	// Env adds environment variables for this command.
	Env map[string]string
	// Stdin is nil when the command's stdin must be closed (empty).
	// Otherwise it is the command's input until it returns io.EOF; see
	// Runtime.Exec for when its Reads fail.
	Stdin io.Reader
	// Stdout and Stderr receive the command's output as it is produced,
	// split and byte-exact; never nil. They are safe to call from more
	// than one goroutine, one stream each.
	Stdout, Stderr io.Writer
	// Timeout is the command's lifetime, which the driver enforces (and
	// sends on the wire where the provider has such a field). It is > 0
	// for Exec; for ProcessRuntime.Start 0 means no limit.
	Timeout time.Duration
}
