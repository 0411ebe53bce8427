package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxkit/sandbox/sberrors"
)

func TestClosed(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"sentinel", sberrors.ErrStaleTransport, true},
		{"wrapped sentinel", fmt.Errorf("exec: %w", sberrors.ErrStaleTransport), true},
		{"net closed", &net.OpError{Op: "write", Err: net.ErrClosed}, true},
		{"refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		// Text is never evidence: a message that merely reads like a
		// closed transport (a Python SDK's, say) is not one.
		{"uvloop text", errors.New("TCPTransport closed=True: handler is closed"), false},
		{"reset mid-body", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, false},
		{"eof", io.ErrUnexpectedEOF, false},
		{"plain", errors.New("permission denied"), false},
	}
	for _, c := range cases {
		if got := Closed(c.err); got != c.want {
			t.Errorf("%s: Closed(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestClassify(t *testing.T) {
	ctx := context.Background()
	dialErr := &url.Error{Op: "Post", URL: "https://h/x?token=sekrit", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}
	readErr := &net.OpError{Op: "read", Err: syscall.ECONNRESET}
	sent := &Attempt{gotConn: true, conn: &countingConn{}}
	sent.conn.written.Store(10)
	cases := []struct {
		name     string
		a        *Attempt
		counting bool
		mutating bool
		err      error
		want     error
	}{
		{"no connection, not counting: a failed dial", &Attempt{}, false, true, dialErr, sberrors.ErrStaleTransport},
		{"no connection, counting", &Attempt{}, true, true, readErr, sberrors.ErrStaleTransport},
		{"untraced mutating", nil, true, true, readErr, sberrors.ErrOutcomeUnknown},
		{"bytes left, mutating", sent, true, true, readErr, sberrors.ErrOutcomeUnknown},
		{"bytes left, read-only", sent, true, false, readErr, sberrors.ErrUnavailable},
	}
	for _, c := range cases {
		err := Classify(ctx, "x: op", c.a, c.counting, c.mutating, c.err)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want it to match %v", c.name, err, c.want)
		}
		if !strings.HasPrefix(err.Error(), "x: op: ") || strings.Contains(err.Error(), "sekrit") {
			t.Errorf("%s: text %q: want the prefix and no URL", c.name, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := Classify(cctx, "x", &Attempt{}, true, true, readErr); !errors.Is(err, context.Canceled) || errors.Is(err, sberrors.ErrStaleTransport) {
		t.Errorf("ended ctx: %v, want context.Canceled only", err)
	}
}
