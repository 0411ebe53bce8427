// Package procnet reads the kernel's socket tables (/proc/net/tcp and
// /proc/net/tcp6) as a sandbox's commands print them: where no socket
// API reaches into the sandbox, a cat of the tables does.
package procnet

import (
	"bufio"
	"strconv"
	"strings"
)

// Listening reports whether a /proc/net/tcp{,6} listing has a socket in
// state LISTEN (0A) on port.
func Listening(table string, port int) bool {
	sc := bufio.NewScanner(strings.NewReader(table))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != "0A" {
			continue
		}
		i := strings.LastIndexByte(f[1], ':')
		if i < 0 {
			continue
		}
		p, err := strconv.ParseUint(f[1][i+1:], 16, 16)
		if err == nil && int(p) == port {
			return true
		}
	}
	return false
}
