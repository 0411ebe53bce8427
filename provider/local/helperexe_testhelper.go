//go:build sandboxkit_testhelper

package local

import "os"

// Built with this tag (make test does), a program starts its spawner,
// agents and egress proxies from the binary SANDBOXKIT_TEST_HELPER names,
// when set: internal/localhelper built without the race detector, so that
// a race-built test binary's helpers do not each pay the race runtime's
// start (about a tenth of a second of CPU; their reports reach no test).
// A build without the tag never reads the variable: which binary runs as
// every sandbox's agent is not for the environment to choose.
func init() {
	if p := os.Getenv("SANDBOXKIT_TEST_HELPER"); p != "" {
		helperExe = p
	}
}
