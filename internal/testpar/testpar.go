// Package testpar widens how many parallel tests a test binary runs at
// once, for packages whose tests spend most of their time waiting on
// processes in sandboxes (a command's sleep, a status poll) rather than on
// the CPU: go test's default, one test per CPU, leaves a 2-core machine
// mostly idle through those waits.
package testpar

import (
	"flag"
	"runtime"
	"strconv"
)

// Widen sets -test.parallel to perCPU tests per CPU (at least 2 per CPU)
// unless the command line set it: an explicit -parallel always wins. Call
// it from TestMain before m.Run.
func Widen(perCPU int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			set = true
		}
	})
	if set {
		return
	}
	perCPU = max(perCPU, 2)
	_ = flag.Set("test.parallel", strconv.Itoa(perCPU*runtime.GOMAXPROCS(0)))
}
