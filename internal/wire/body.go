package wire

import "io"

// drainMax bounds what DrainClose reads: past it, a new connection costs
// less than reading on.
const drainMax = 4 << 10

// DrainClose reads what is left of a response body (at most 4 KiB) and
// closes it. A JSON decoder stops at the end of its value and leaves what
// follows (the newline an encoder ends with) unread, and a body closed
// before its end ends its connection: the next call then opens a new one,
// a TCP and TLS handshake away from a cloud provider. Read to its end, the
// body gives its connection back to the pool.
func DrainClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, drainMax))
	_ = body.Close()
}
