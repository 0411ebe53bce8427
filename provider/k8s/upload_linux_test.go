//go:build linux

package k8s_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/k8s"
)

// An upload whose reader fails midway leaves no temporary file once Upload
// has returned, even when sandboxd's handler starts late (a loaded host):
// nothing of it is made or removed in the target's directory after the
// call, and the file it was to replace is whole. Every PUT here reaches
// sandboxd 400 ms late, after the client could have sent the whole body
// it had into the socket's buffers and given up.
func TestFailedUploadLeavesNoLateTemp(t *testing.T) {
	cl := newCluster(t)
	var mu sync.Mutex
	var held []*lateConn
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := cl.dial(ctx, network, addr)
		if err != nil || !strings.HasSuffix(addr, ":8080") {
			return c, err
		}
		lc := newLateConn(c, 400*time.Millisecond)
		mu.Lock()
		held = append(held, lc)
		mu.Unlock()
		return lc, nil
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
			select {
			case <-c.done:
			case <-time.After(10 * time.Second):
				c.Conn.Close() // a write the server never read
				<-c.done
			}
		}
	})
	rt := newRuntime(t, cl, k8s.WithDialer(dial))
	c := sandbox.NewClient(rt)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	old := []byte("the file before the upload\n")
	if err := sb.WriteFile(ctx, "up/old.bin", old); err != nil {
		t.Fatal(err)
	}
	cl.mu.Lock()
	var dir string
	for _, p := range cl.pods {
		dir = p.root + "/up"
	}
	cl.mu.Unlock()
	events := watchDir(t, dir)

	for _, size := range []int{128 << 10, 1 << 20} {
		readerErr := errors.New("the source failed")
		err := sb.Upload(ctx, "up/old.bin", io.MultiReader(bytes.NewReader(make([]byte, size)), failingReader{readerErr}))
		before := events.drain()
		if !errors.Is(err, readerErr) {
			t.Errorf("Upload of %d bytes then a failure: %v, want the reader's error", size, err)
		}
		time.Sleep(1500 * time.Millisecond) // past the PUT's delay, and its handler's end
		if late := events.drain(); len(late) > 0 {
			t.Errorf("Upload of %d bytes then a failure returned, then sandboxd did %v in the target's directory (before the return: %v)", size, late, before)
		}
		if got, err := sb.ReadFile(ctx, "up/old.bin"); err != nil || !bytes.Equal(got, old) {
			t.Errorf("after the failed upload of %d bytes the file holds %q (err %v), want the old content", size, got, err)
		}
	}
	list, err := sb.ReadDir(ctx, "up")
	if err != nil || len(list) != 1 || list[0].Name() != "old.bin" {
		t.Errorf("the directory after the failed uploads: %v (err %v), want only old.bin", list, err)
	}
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

// lateConn passes what the client writes on to the server in order, a
// PUT's headers only after delay; the client's writes (and its
// Close) return at once, as into a socket's buffers.
type lateConn struct {
	net.Conn
	delay time.Duration
	mu    sync.Mutex
	buf   [][]byte
	shut  bool
	wake  chan struct{}
	done  chan struct{}
}

func newLateConn(c net.Conn, delay time.Duration) *lateConn {
	lc := &lateConn{Conn: c, delay: delay, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go lc.forward()
	return lc
}

func (c *lateConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.shut {
		c.mu.Unlock()
		return 0, net.ErrClosed
	}
	c.buf = append(c.buf, bytes.Clone(p))
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (c *lateConn) Close() error {
	c.mu.Lock()
	c.shut = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// forward sends what was written, in order, then closes the connection
// once the client has.
func (c *lateConn) forward() {
	defer close(c.done)
	defer c.Conn.Close()
	for {
		c.mu.Lock()
		buf, shut := c.buf, c.shut
		c.buf = nil
		c.mu.Unlock()
		for _, b := range buf {
			if bytes.HasPrefix(b, []byte("PUT ")) {
				time.Sleep(c.delay) // a request's start: its headers
			}
			if _, err := c.Conn.Write(b); err != nil {
				return
			}
		}
		if shut && len(buf) == 0 {
			return
		}
		if len(buf) == 0 {
			<-c.wake
		}
	}
}

// dirEvents are the inotify events of one directory's entries.
type dirEvents struct {
	fd int
}

// watchDir watches dir for entries made, removed or moved in.
func watchDir(t *testing.T, dir string) *dirEvents {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		t.Skipf("no inotify: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if _, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_CREATE|syscall.IN_DELETE|syscall.IN_MOVED_TO|syscall.IN_MOVED_FROM); err != nil {
		t.Fatalf("inotify %s: %v", dir, err)
	}
	return &dirEvents{fd: fd}
}

// drain returns the events queued so far, as "op name".
func (d *dirEvents) drain() []string {
	var out []string
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.Read(d.fd, buf)
		if n <= 0 || err != nil {
			return out
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := string(bytes.TrimRight(buf[off+syscall.SizeofInotifyEvent:off+syscall.SizeofInotifyEvent+int(ev.Len)], "\x00"))
			op := "?"
			switch {
			case ev.Mask&syscall.IN_CREATE != 0:
				op = "create"
			case ev.Mask&syscall.IN_DELETE != 0:
				op = "remove"
			case ev.Mask&syscall.IN_MOVED_TO != 0:
				op = "rename-to"
			case ev.Mask&syscall.IN_MOVED_FROM != 0:
				op = "rename-from"
			}
			out = append(out, op+" "+name)
			off += syscall.SizeofInotifyEvent + int(ev.Len)
		}
	}
}
