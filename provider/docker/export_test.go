package docker

import "io"

// SetLoseTail puts f between every follower's stream and the caller's
// writers, so a test can cut a stream as the engine does under load.
func SetLoseTail(r *Runtime, f func(round int, stdout, stderr io.Writer) (io.Writer, io.Writer)) {
	r.loseTail = f
}

// SetBeforeAck has f told, for every Exec, whether its exec still ran
// when both end marks arrived.
func SetBeforeAck(r *Runtime, f func(running bool)) { r.beforeAck = f }
