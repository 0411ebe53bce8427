package forkwait

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// writerAndReader creates a file and returns a descriptor open for
// writing on it and one open for reading, both closed when t ends.
func writerAndReader(t *testing.T) (w, r *os.File) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "run.sh")
	w, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if r, err = os.Open(p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return w, r
}

// TestReleasedWaitsForTheLastWriter: while a descriptor on the file is
// open for writing anywhere (here, one the test keeps), waitReleased does not
// return; it returns once that descriptor is closed. A file no one writes
// is released at once.
func TestReleasedWaitsForTheLastWriter(t *testing.T) {
	w, r := writerAndReader(t)
	done := make(chan struct{})
	go func() {
		waitReleased(r, nil)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("waitReleased returned while a descriptor held the file open for writing")
	case <-time.After(100 * time.Millisecond):
	}
	start := time.Now()
	w.Close()
	select {
	case <-done:
		t.Logf("released %v after the writer closed", time.Since(start))
	case <-time.After(bound):
		t.Fatalf("waitReleased did not return within %v of the writer closing", bound)
	}
	start = time.Now()
	waitReleased(r, nil)
	if d := time.Since(start); d > time.Second {
		t.Errorf("waitReleased took %v on a file no one writes", d)
	}
}

// TestReleasedEndsWithDone: a writer that stays does not hold waitReleased
// past done.
func TestReleasedEndsWithDone(t *testing.T) {
	_, r := writerAndReader(t)
	stop := make(chan struct{})
	start := time.Now() // before the timer, which ends 50 ms after its own start
	time.AfterFunc(50*time.Millisecond, func() { close(stop) })
	waitReleased(r, stop)
	if d := time.Since(start); d < 50*time.Millisecond || d > bound {
		t.Errorf("waitReleased returned after %v, want when done closed (50 ms)", d)
	}
}

// TestCloseReleasedWaitsForAnotherWriter: CloseReleased closes the
// caller's writer and returns only once another descriptor open for
// writing on the file (as a child between fork and exec holds) is
// closed too; the file is then executable.
func TestCloseReleasedWaitsForAnotherWriter(t *testing.T) {
	w, _ := writerAndReader(t)
	other, err := os.OpenFile(w.Name(), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := w.WriteString("#!/bin/sh\nexit 0\n"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- CloseReleased(w, nil) }()
	select {
	case err := <-done:
		t.Fatalf("CloseReleased returned (%v) while another descriptor held the file open for writing", err)
	case <-time.After(100 * time.Millisecond):
	}
	other.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("CloseReleased: %v", err)
		}
	case <-time.After(bound):
		t.Fatalf("CloseReleased did not return within %v of the other writer closing", bound)
	}
	if err := exec.Command(w.Name()).Run(); err != nil {
		t.Fatalf("running the file once CloseReleased returned: %v", err)
	}
}

// TestCloseReleasedReportsTheClose: the error of closing the writer is
// returned (and nothing is waited for); a file its mode keeps from being
// reopened for reading is closed and waited for with Wait alone.
func TestCloseReleasedReportsTheClose(t *testing.T) {
	w, _ := writerAndReader(t)
	w.Close()
	if err := CloseReleased(w, nil); !errors.Is(err, os.ErrClosed) {
		t.Errorf("CloseReleased of a closed file: %v, want os.ErrClosed", err)
	}
	if os.Geteuid() == 0 {
		t.Skip("root reads any file: the write-only case needs another user")
	}
	p := filepath.Join(t.TempDir(), "wo")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o200)
	if err != nil {
		t.Fatal(err)
	}
	if err := CloseReleased(f, nil); err != nil {
		t.Errorf("CloseReleased of a write-only file: %v", err)
	}
}
