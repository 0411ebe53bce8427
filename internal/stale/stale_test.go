package stale

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestIs(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"sentinel", ErrStale, true},
		{"wrapped sentinel", fmt.Errorf("exec: %w", ErrStale), true},
		{"net closed", &net.OpError{Op: "write", Err: net.ErrClosed}, true},
		{"refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{"uvloop text", errors.New("TCPTransport closed=True: handler is closed"), true},
		{"idle close", errors.New(`Post "http://x": http: server closed idle connection`), true},
		{"reset mid-body is not stale", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, false},
		{"eof is not stale", io.ErrUnexpectedEOF, false},
		{"plain", errors.New("permission denied"), false},
	}
	for _, c := range cases {
		if got := Is(c.err); got != c.want {
			t.Errorf("%s: Is(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestResult(t *testing.T) {
	if Result(0, "TCPTransport closed handler is closed") {
		t.Error("exit 0 must never be stale")
	}
	if !Result(1, "RuntimeError: unable to perform operation on <TCPTransport>; the handler is closed") {
		t.Error("uvloop result not recognised")
	}
	if Result(1, "handler is closed") {
		t.Error("a single fragment must not match a group")
	}
	if Result(2, "") {
		t.Error("empty text is not stale")
	}
}
