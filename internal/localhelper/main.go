// Command localhelper is the local provider's helpers (its spawner, the
// sandbox agents and the egress proxies) and nothing else: importing
// provider/local runs the helper its argv[0] names, before main.
//
// make test builds it without the race detector and has the race-built
// test binaries start their helpers from it (see provider/local's
// sandboxkit_testhelper build tag): a race-built helper costs about a
// tenth of a second of CPU at every start, one or more per sandbox, and
// a race report from a helper goes to no place a test reads.
package main

import (
	"fmt"
	"os"

	_ "github.com/sandboxkit/sandbox/provider/local"
)

func main() {
	// Reached only when argv[0] names no helper role.
	fmt.Fprintln(os.Stderr, "localhelper: run by the local provider only (argv[0] names its role)")
	os.Exit(2)
}
