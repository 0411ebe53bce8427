package iox

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestCountingReader(t *testing.T) {
	c := &CountingReader{R: strings.NewReader("hello")}
	if b, err := io.ReadAll(c); err != nil || string(b) != "hello" || c.N != 5 || c.Err != nil {
		t.Fatalf("ReadAll: %q %v, N %d Err %v", b, err, c.N, c.Err)
	}
	boom := errors.New("boom")
	c = &CountingReader{R: iotest.ErrReader(boom)}
	_, _ = c.Read(make([]byte, 4))
	_, _ = c.Read(make([]byte, 4))
	if c.N != 0 || c.Err != boom {
		t.Fatalf("failing source: N %d Err %v, want 0 and boom", c.N, c.Err)
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain":            "plain",
		"a\x00b\nc\x1b[2J": `a\x00b\nc\x1b[2J`,
		"\xff":             `\xff`,
		"0123456789abc":    "0123456789...",
	} {
		if got := Printable(in, 10); got != want {
			t.Errorf("Printable(%q, 10) = %q, want %q", in, got, want)
		}
	}
}

func TestUnixMode(t *testing.T) {
	for raw, want := range map[uint32]fs.FileMode{
		0o100644: 0o644,
		0o040755: fs.ModeDir | 0o755,
		0o120777: fs.ModeSymlink | 0o777,
		0o010600: fs.ModeNamedPipe | 0o600,
		0o140755: fs.ModeSocket | 0o755,
		0o020620: fs.ModeDevice | fs.ModeCharDevice | 0o620,
		0o060660: fs.ModeDevice | 0o660,
		0o104755: fs.ModeSetuid | 0o755,
		0o102755: fs.ModeSetgid | 0o755,
		0o041777: fs.ModeDir | fs.ModeSticky | 0o777,
	} {
		if got := UnixMode(raw); got != want {
			t.Errorf("UnixMode(%o) = %v, want %v", raw, got, want)
		}
	}
}

func TestWaitClosed(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	if !WaitClosed(context.Background(), closed, time.Hour) {
		t.Error("a closed channel: false, want true at once")
	}
	open := make(chan struct{})
	if WaitClosed(context.Background(), open, 10*time.Millisecond) {
		t.Error("a channel never closed: true, want false after d")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if WaitClosed(ctx, open, time.Hour) {
		t.Error("ended ctx: true, want false at once")
	}
	later := make(chan struct{})
	timer := time.AfterFunc(20*time.Millisecond, func() { close(later) })
	defer timer.Stop()
	if !WaitClosed(context.Background(), later, time.Hour) {
		t.Error("a channel closed within d: false, want true")
	}
}
