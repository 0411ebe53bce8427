// Package testport picks ports for the servers tests start in sandboxes.
// On some providers (local at L0 and L1) a sandbox shares the host's
// network, so a port is random, below the host's ephemeral range where
// the host tells it: the kernel hands those ports to every outgoing
// connection, and a server cannot bind one that a connection holds. A
// port can still be taken by another process between the pick and the
// bind; TakenIn tells a caller to pick again.
package testport

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
)

// base is the lowest port Pick returns.
const base = 20000

// Pick returns a random port from 20000 up to the host's ephemeral range
// (or 40000 at most).
func Pick() int { return base + rand.IntN(span()) }

var span = sync.OnceValue(func() int {
	return spanFor(os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"))
})

// spanFor is how many ports Pick chooses from, given the contents of
// ip_local_port_range (and the error reading it).
func spanFor(b []byte, err error) int {
	if f := strings.Fields(string(b)); err == nil && len(f) == 2 {
		if lo, err := strconv.Atoi(f[0]); err == nil && lo > base+1000 {
			return min(lo, 2*base) - base
		}
	}
	return base
}

// TakenIn reports whether a server's output says it could not bind its
// port because something else holds it.
func TakenIn(output string) bool {
	return strings.Contains(strings.ToLower(output), "address already in use")
}
