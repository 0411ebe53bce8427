package hostrt

import (
	"fmt"
	"os"
	"sync"

	"github.com/sandboxkit/sandbox/internal/sigreset"
)

// unblockArg0 is the name this program is run under to start a command
// with no signal blocked: a Go program's children start with the signal
// mask the program started with (perf blocks SIGWINCH), and a sandbox's
// commands start with none blocked. Only a program started with some
// blocked pays for the extra exec.
const unblockArg0 = "sandboxkit-hostrt-unblocked"

func init() {
	if len(os.Args) > 2 && os.Args[0] == unblockArg0 {
		// argv: unblockArg0, the command's path, its argv.
		err := sigreset.ExecUnblocked(os.Args[1], os.Args[2:], os.Environ())
		fmt.Fprintf(os.Stderr, "sh: %s: %v\n", os.Args[2], err)
		os.Exit(126)
	}
}

// blockedAtStart reports whether this program started with any of
// signals 1-31 blocked.
var blockedAtStart = sync.OnceValue(func() bool {
	m, err := sigreset.Blocked()
	return err == nil && m != 0
})
