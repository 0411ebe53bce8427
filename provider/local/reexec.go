package local

import (
	"os"

	"github.com/sandboxkit/sandbox/internal/sigreset"
)

// argv[0] markers of the helper roles the binary is re-executed in.
const (
	spawnerArg0 = "sandboxkit-local-spawner"
	agentArg0   = "sandboxkit-local-agent"
	egressArg0  = "sandboxkit-local-egress"
)

// helperExe is the binary started in those roles: this program (the
// kernel's link to it, valid whatever became of its path).
var helperExe = "/proc/self/exe"

func init() { Init() }

// Init runs the spawner, a sandbox agent or a sandbox's egress proxy when the binary was re-executed
// as one (recognised by its argv[0]) and then exits the process; in every
// other case it returns at once. The package's init function calls it, so
// programs (and test binaries) need not: a program that wants the hook
// explicit may call it first thing in main or TestMain too.
func Init() {
	if len(os.Args) == 0 {
		return
	}
	switch os.Args[0] {
	case spawnerArg0, agentArg0, egressArg0:
		// Started with signals blocked (by whoever started the program),
		// a helper would pass them on to every command: it re-executes
		// itself with none blocked first (once: the spawner's agents
		// start clear).
		_ = sigreset.ReexecUnblocked()
	}
	switch os.Args[0] {
	case spawnerArg0:
		spawnerMain()
	case agentArg0:
		agentMain()
	case egressArg0:
		egressMain()
	}
}
