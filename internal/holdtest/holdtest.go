// Package holdtest helps adapters' tests check that a call returns only
// once the server has handled its request: a fake's request hook holds
// each matching request back for a while, and the gate records whether
// one was let go only after the call had returned (a handler the server
// started late, which a loaded host can do).
package holdtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

// Gate holds the requests Match accepts for up to Hold each, or until
// Returned is called.
type Gate struct {
	match    func(*http.Request) bool
	hold     time.Duration
	returned atomic.Bool
	held     atomic.Int32
	late     atomic.Int32
	released chan struct{}
}

// New returns a Gate for the requests match accepts, holding each for up
// to hold.
func New(match func(*http.Request) bool, hold time.Duration) *Gate {
	return &Gate{match: match, hold: hold, released: make(chan struct{}, 64)}
}

// Hook is the fake's request hook.
func (g *Gate) Hook(r *http.Request) {
	if !g.match(r) {
		return
	}
	defer func() { g.released <- struct{}{} }()
	g.held.Add(1)
	deadline := time.Now().Add(g.hold)
	for time.Now().Before(deadline) && !g.returned.Load() {
		time.Sleep(5 * time.Millisecond)
	}
	if g.returned.Load() {
		g.late.Add(1)
	}
}

// Returned records that the call under test returned.
func (g *Gate) Returned() { g.returned.Store(true) }

// reset readies g for another call, once Check saw the last one's
// requests let go.
func (g *Gate) reset() {
	g.returned.Store(false)
	g.held.Store(0)
	g.late.Store(0)
}

// arrived reports whether a matching request reached the hook within d
// (bounded by ctx too).
func (g *Gate) arrived(ctx context.Context, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for g.held.Load() == 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// Check waits (bounded by ctx) until want requests were let go, and
// reports an error unless exactly want were held, none after the call
// returned.
func (g *Gate) Check(ctx context.Context, want int) error {
	for range want {
		select {
		case <-g.released:
		case <-ctx.Done():
			return fmt.Errorf("the server got %d of the %d requests", g.held.Load(), want)
		}
	}
	if n := g.held.Load(); int(n) != want {
		return fmt.Errorf("the server got %d requests, want %d", n, want)
	}
	if g.late.Load() != 0 {
		return errors.New("the call returned before the server's handler of its request started")
	}
	return nil
}

// FailingSource yields N bytes of 'x' and then fails with Err.
type FailingSource struct {
	N   int
	Err error
}

// Read implements io.Reader.
func (f *FailingSource) Read(p []byte) (int, error) {
	if f.N == 0 {
		return 0, f.Err
	}
	p = p[:min(len(p), f.N)]
	for i := range p {
		p[i] = 'x'
	}
	f.N -= len(p)
	return len(p), nil
}

// CancellingSource yields N bytes of 'x', then calls Cancel and goes on
// yielding them: a caller that gives up midway through an upload whose
// source never ends.
type CancellingSource struct {
	N      int
	Cancel context.CancelFunc
}

// Read implements io.Reader.
func (c *CancellingSource) Read(p []byte) (int, error) {
	if c.N <= 0 {
		c.Cancel()
	} else {
		p = p[:min(len(p), c.N)]
		c.N -= len(p)
	}
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// Files is what Uploads needs of a sandbox (a *sandbox.Sandbox has it).
type Files interface {
	MkdirAll(ctx context.Context, path string) error
	Upload(ctx context.Context, path string, r io.Reader) error
}

// Uploads checks on sb, whose provider's fake holds its upload requests
// through g, that an upload to dir/new.bin whose source fails, and one
// whose context ends midway, each return only once the server let the
// request go, with the source's error or the context's, and leave dir
// (made first) empty: entries counts what dir holds.
func Uploads(ctx context.Context, t *testing.T, sb Files, g *Gate, dir string, entries func(ctx context.Context, dir string) (int, error)) {
	t.Helper()
	if err := sb.MkdirAll(ctx, dir); err != nil {
		t.Fatal(err)
	}
	srcErr := errors.New("the source broke")
	for _, tc := range []struct {
		name   string
		upload func() error
		want   error
	}{
		// 16 KiB: the connection's buffers hold it before the server
		// reads any.
		{"source fails", func() error {
			return sb.Upload(ctx, dir+"/new.bin", &FailingSource{N: 16 << 10, Err: srcErr})
		}, srcErr},
		{"context ends", func() error {
			uctx, cancel := context.WithCancel(ctx)
			defer cancel()
			return sb.Upload(uctx, dir+"/new.bin", &CancellingSource{N: 16 << 10, Cancel: cancel})
		}, context.Canceled},
	} {
		g.reset()
		err := tc.upload()
		g.Returned()
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: Upload = %v, want %v", tc.name, err, tc.want)
		}
		if err := g.Check(ctx, 1); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n, err := entries(ctx, dir); err != nil || n != 0 {
			t.Errorf("%s: the directory holds %d entries (%v) after the failed upload, want none", tc.name, n, err)
		}
	}
}

// LateCreate checks that a create whose caller gives up while the server
// holds the request back (g matches the create request and holds it
// longer than the adapter's search for a lost create lasts) leaves no
// sandbox once the server has made it: create makes one (returning how to
// destroy it when it succeeds), backend is what the fake runs its
// sandboxes on.
func LateCreate(ctx context.Context, t *testing.T, g *Gate, create func(ctx context.Context) (destroy func(), err error), backend driver.Runtime) {
	t.Helper()
	// The caller gives up after 200 ms. On a loaded host the request may
	// not reach the server by then, and the client abandons it unsent:
	// nothing to check (and nothing made), so the create is tried again,
	// up to lateCreateTries times.
	const lateCreateTries = 3
	for try := 1; ; try++ {
		g.reset()
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		destroy, err := create(cctx)
		cancel()
		if err == nil {
			destroy()
			t.Fatal("Create succeeded although the server held its request past the caller's deadline")
		}
		if g.arrived(ctx, 10*time.Second) {
			break
		}
		if try == lateCreateTries {
			t.Fatalf("the server got none of %d creates, each abandoned by its caller after 200 ms (%v): this host is too slow for the check", lateCreateTries, err)
		}
		t.Logf("create %d never reached the server before its caller gave up (%v); again", try, err)
	}
	if err := g.Check(ctx, 1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		page, _, err := backend.List(ctx, &driver.ListRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sandboxes are left 30 s after the server made the abandoned create's", len(page))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
