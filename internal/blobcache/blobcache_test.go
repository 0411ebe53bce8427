package blobcache

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sandboxkit/sandbox/sberrors"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hostSandbox runs the upload script on the host: the cache's contract
// with a Sandbox is only ID and Run, so the real script is exercised
// without a provider.
type hostSandbox struct {
	id      string
	runs    atomic.Int32
	gate    chan struct{} // when non-nil, Run waits for it to close
	entered chan struct{} // when non-nil, Run sends on it first
	fail    bool          // Run reports a command that exited 3
	runErr  error         // Run reports this error
}

func (h *hostSandbox) ID() string { return h.id }

func (h *hostSandbox) Run(ctx context.Context, args []string, stdin io.Reader) (int, []byte, error) {
	h.runs.Add(1)
	if h.entered != nil {
		h.entered <- struct{}{}
	}
	if h.gate != nil {
		select {
		case <-h.gate:
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
	if h.runErr != nil {
		return 0, nil, h.runErr
	}
	if h.fail {
		return 3, []byte("no space left on device\n"), nil
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), stderr.Bytes(), nil
	}
	return 0, stderr.Bytes(), err
}

func TestEnsureWritesOnceAndAtomically(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on this host")
	}
	dir := filepath.Join(t.TempDir(), "bin")
	b := New("tool", []byte("#!/bin/sh\necho hi\n"))
	sb := &hostSandbox{id: "sb1"}
	var c Cache
	p, err := c.Ensure(context.Background(), sb, dir, b)
	if err != nil {
		t.Fatal(err)
	}
	if p != b.Path(dir) {
		t.Fatalf("path %q, want %q", p, b.Path(dir))
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, []byte("#!/bin/sh\necho hi\n")) {
		t.Fatalf("content %q, %v", got, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("mode %v: not executable", fi.Mode())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want the blob alone (no temporary file left)", len(ents))
	}
	if _, err := c.Ensure(context.Background(), sb, dir, b); err != nil {
		t.Fatal(err)
	}
	if n := sb.runs.Load(); n != 1 {
		t.Fatalf("%d uploads, want 1: the second Ensure must use the cache", n)
	}
	c.Forget("sb1", p)
	if _, err := c.Ensure(context.Background(), sb, dir, b); err != nil {
		t.Fatal(err)
	}
	if n := sb.runs.Load(); n != 2 {
		t.Fatalf("%d uploads after Forget, want 2", n)
	}
}

func TestEnsureSharesOneUpload(t *testing.T) {
	sb := &hostSandbox{id: "sb1", gate: make(chan struct{})}
	b := New("tool", []byte("x"))
	var c Cache
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Ensure(context.Background(), sb, t.TempDir(), b)
		}()
	}
	// Different directories are different paths: each is its own upload.
	// The same directory is shared:
	dir := t.TempDir()
	shared := &hostSandbox{id: "sb2", gate: make(chan struct{})}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Ensure(context.Background(), shared, dir, b); err != nil {
				t.Error(err)
			}
		}()
	}
	close(sb.gate)
	close(shared.gate)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := shared.runs.Load(); n != 1 {
		t.Fatalf("%d uploads for one sandbox and path, want 1", n)
	}
}

func TestEnsureErrors(t *testing.T) {
	b := New("tool", []byte("x"))
	var c Cache
	_, err := c.Ensure(context.Background(), &hostSandbox{id: "a"}, "rel/dir", b)
	if sberrors.CodeOf(err) != sberrors.InvalidArgument || !bytes.Contains([]byte(err.Error()), []byte(`"rel/dir"`)) {
		t.Fatalf("relative dir: %v (code %v), want InvalidArgument naming the directory", err, sberrors.CodeOf(err))
	}

	failing := &hostSandbox{id: "b", fail: true}
	_, err = c.Ensure(context.Background(), failing, "/opt/x", b)
	if sberrors.CodeOf(err) != sberrors.Internal || !bytes.Contains([]byte(err.Error()), []byte("exit 3: no space left on device")) {
		t.Fatalf("failed upload: %v, want Internal with the exit status and stderr", err)
	}
	// A failed upload is not remembered.
	failing.fail = false
	failing.runErr = sberrors.ErrUnavailable
	_, err = c.Ensure(context.Background(), failing, "/opt/x", b)
	if !errors.Is(err, sberrors.ErrUnavailable) || failing.runs.Load() != 2 {
		t.Fatalf("after a failure: %v after %d runs, want the Run error after a second run", err, failing.runs.Load())
	}
}

func TestEnsureWaitIsBoundedByContext(t *testing.T) {
	sb := &hostSandbox{id: "a", gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	b := New("tool", []byte("x"))
	var c Cache
	done := make(chan error, 1)
	go func() {
		_, err := c.Ensure(context.Background(), sb, "/opt/x", b)
		done <- err
	}()
	<-sb.entered // the first upload holds the entry
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Ensure(ctx, sb, "/opt/x", b); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter with a cancelled context: %v, want context.Canceled", err)
	}
	sb.runErr = errors.New("stop")
	close(sb.gate)
	<-done
}
