package pollwatch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tree is a Lister over a map of paths.
type tree struct {
	mu    sync.Mutex
	files map[string]driver.FileInfo
	gone  bool
}

func (t *tree) set(p string, size int64, dir bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	mode := fs.FileMode(0o644)
	if dir {
		mode = fs.ModeDir | 0o755
	}
	t.files[p] = driver.FileInfo{Path: p, Size: size, Mode: mode, ModTime: time.Unix(1, 0)}
}

func (t *tree) del(p string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for q := range t.files {
		if q == p || strings.HasPrefix(q, p+"/") {
			delete(t.files, q)
		}
	}
}

func (t *tree) Stat(_ context.Context, _, p string) (driver.FileInfo, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gone {
		return driver.FileInfo{}, sberrors.Errorf(sberrors.NotFound, "sandbox gone")
	}
	if p == "/" {
		return driver.FileInfo{Path: "/", Mode: fs.ModeDir}, nil
	}
	fi, ok := t.files[p]
	if !ok {
		return fi, sberrors.ErrNotFound
	}
	return fi, nil
}

func (t *tree) ReadDir(_ context.Context, _, p string) ([]driver.FileInfo, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gone {
		return nil, sberrors.Errorf(sberrors.NotFound, "sandbox gone")
	}
	if fi, ok := t.files[p]; !ok || !fi.Mode.IsDir() {
		return nil, sberrors.ErrNotFound
	}
	var out []driver.FileInfo
	for q, fi := range t.files {
		if path.Dir(q) == p && q != p {
			out = append(out, fi)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func newTree() *tree {
	t := &tree{files: map[string]driver.FileInfo{}}
	t.set("/w", 0, true)
	return t
}

func next(t *testing.T, ch <-chan driver.FileEvent) driver.FileEvent {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return driver.FileEvent{}
}

func run(t *testing.T, tr *tree, req *driver.WatchRequest) (<-chan driver.FileEvent, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	seq, err := Watch(ctx, tr, "id", "/w", req, 5*time.Millisecond)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ch, errc, done := make(chan driver.FileEvent, 1000), make(chan error, 1), make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range seq {
			if err != nil {
				errc <- err
				return
			}
			ch <- ev
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ch, errc
}

// A rename shows as a remove and a create, removes first, a directory
// tree's creations top down, and a size change as a write.
func TestDiffOrder(t *testing.T) {
	tr := newTree()
	tr.set("/w/a", 1, false)
	ch, errc := run(t, tr, &driver.WatchRequest{Recursive: true, Buffer: 100})
	defer func() {
		select {
		case err := <-errc:
			t.Errorf("watch failed: %v", err)
		default:
		}
	}()
	tr.mu.Lock()
	fi := tr.files["/w/a"]
	fi.Path = "/w/b"
	tr.files["/w/b"] = fi
	delete(tr.files, "/w/a")
	tr.mu.Unlock()
	tr.set("/w/d", 0, true)
	tr.set("/w/d/e", 0, true)
	tr.set("/w/d/e/f", 3, false)
	var got []string
	for len(got) < 5 {
		ev := next(t, ch)
		got = append(got, fmt.Sprintf("%s %s", ev.Kind, ev.Path))
	}
	want := []string{"remove /w/a", "create /w/b", "create /w/d", "create /w/d/e", "create /w/d/e/f"}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	tr.set("/w/b", 9, false)
	if ev := next(t, ch); ev.Kind != driver.FileWritten || ev.Path != "/w/b" {
		t.Errorf("size change: %v", ev)
	}
}

// A recursive watch over more directories than it lists per poll says so.
func TestTooManyDirsOverflow(t *testing.T) {
	tr := newTree()
	ch, _ := run(t, tr, &driver.WatchRequest{Recursive: true, Buffer: 10000})
	for i := range MaxDirs + 5 {
		tr.set(fmt.Sprintf("/w/d%03d", i), 0, true)
	}
	for {
		if ev := next(t, ch); ev.Kind == driver.FileOverflow {
			return
		}
	}
}

// The watch fails once the sandbox is gone, and a watched directory that
// goes is reported removed.
func TestGone(t *testing.T) {
	tr := newTree()
	tr.set("/w/x", 1, false)
	ch, errc := run(t, tr, &driver.WatchRequest{Buffer: 100})
	tr.del("/w")
	if ev := next(t, ch); ev.Kind != driver.FileRemoved || ev.Path != "/w/x" {
		t.Errorf("event %v", ev)
	}
	tr.mu.Lock()
	tr.gone = true
	tr.mu.Unlock()
	select {
	case err := <-errc:
		if !errors.Is(err, sberrors.ErrNotFound) && sberrors.CodeOf(err) != sberrors.NotFound {
			t.Errorf("error %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch of a gone sandbox did not fail")
	}
}

func TestNotDirectory(t *testing.T) {
	tr := newTree()
	tr.set("/w/f", 1, false)
	if _, err := Watch(context.Background(), tr, "id", "/w/f", &driver.WatchRequest{Buffer: 1}, time.Second); !errors.Is(err, sberrors.ErrNotDirectory) {
		t.Errorf("watch of a file: %v", err)
	}
	if _, err := Watch(context.Background(), tr, "id", "/nope", &driver.WatchRequest{Buffer: 1}, time.Second); sberrors.CodeOf(err) != sberrors.NotFound {
		t.Errorf("watch of a missing dir: %v", err)
	}
}
