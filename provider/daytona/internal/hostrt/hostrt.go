// Package hostrt is a minimal sandbox.Runtime over the host, for this
// module's Daytona tests only: each "sandbox" is a temporary home
// directory, paths are host paths and commands are host processes run by
// the real /bin/sh. It isolates nothing. The tests use it as the backend
// of daytonafake until provider/local can serve instead.
package hostrt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox"
)

// Runtime runs sandboxes as directories under a root.
type Runtime struct {
	root string
	mu   sync.Mutex
	sbx  map[string]*box
}

type box struct {
	info sandbox.Info
	env  map[string]string
}

// New returns a Runtime whose homes live under root (a test's TempDir).
func New(root string) *Runtime { return &Runtime{root: root, sbx: map[string]*box{}} }

// Name implements sandbox.Runtime.
func (r *Runtime) Name() string { return "hostrt" }

// Capabilities implements sandbox.Runtime.
func (r *Runtime) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: "none (test host runtime)", Network: true}
}

// Create implements sandbox.Runtime.
func (r *Runtime) Create(ctx context.Context, req *sandbox.CreateRequest) (sandbox.Info, error) {
	home, err := os.MkdirTemp(r.root, "home-")
	if err != nil {
		return sandbox.Info{}, err
	}
	in := sandbox.Info{ID: filepath.Base(home), Provider: r.Name(), Labels: maps.Clone(req.Labels),
		State: sandbox.StateRunning, CreatedAt: time.Now(), Home: home}
	r.mu.Lock()
	r.sbx[in.ID] = &box{info: in, env: maps.Clone(req.Env)}
	r.mu.Unlock()
	return in, nil
}

func (r *Runtime) get(id string) (*box, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.sbx[id]
	if b == nil {
		return nil, sandbox.Errorf(sandbox.NotFound, "sandbox %s not found", id)
	}
	return b, nil
}

// Get implements sandbox.Runtime.
func (r *Runtime) Get(ctx context.Context, id string) (sandbox.Info, error) {
	b, err := r.get(id)
	if err != nil {
		return sandbox.Info{}, err
	}
	return b.info, nil
}

// List implements sandbox.Runtime.
func (r *Runtime) List(ctx context.Context, req *sandbox.ListRequest) ([]sandbox.Info, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []sandbox.Info
	for _, b := range r.sbx {
		out = append(out, b.info)
	}
	return out, "", nil
}

// Destroy implements sandbox.Runtime.
func (r *Runtime) Destroy(ctx context.Context, id string) error {
	r.mu.Lock()
	b := r.sbx[id]
	delete(r.sbx, id)
	r.mu.Unlock()
	if b != nil {
		return os.RemoveAll(b.info.Home)
	}
	return nil
}

// SetTimeout implements sandbox.Runtime.
func (r *Runtime) SetTimeout(ctx context.Context, id string, d time.Duration) error {
	_, err := r.get(id)
	return err
}

// Exec implements sandbox.Runtime with a host process in its own process
// group, killed with the group on timeout or when ctx ends.
func (r *Runtime) Exec(ctx context.Context, id string, c *sandbox.Command) (sandbox.ExitStatus, error) {
	b, err := r.get(id)
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	args := c.Args
	if c.Shell != "" {
		args = []string{"/bin/sh", "-c", c.Shell}
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		fmt.Fprintf(c.Stderr, "sh: %s: not found\n", args[0])
		return sandbox.ExitStatus{ExitCode: 127}, nil
	}
	cmd := exec.Command(path, args[1:]...)
	cmd.Dir = c.Dir
	env := append(os.Environ(), "HOME="+b.info.Home)
	for _, m := range []map[string]string{b.env, c.Env} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			env = append(env, k+"="+m[k])
		}
	}
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return sandbox.ExitStatus{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(c.Timeout)
	defer timer.Stop()
	kill := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	select {
	case err = <-done:
	case <-timer.C:
		kill()
		<-done
		return sandbox.ExitStatus{ExitCode: -1, TimedOut: true}, nil
	case <-ctx.Done():
		kill()
		<-done
		return sandbox.ExitStatus{ExitCode: -1}, ctx.Err()
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return sandbox.ExitStatus{}, nil
	case errors.As(err, &ee):
		return sandbox.ExitStatus{ExitCode: ee.ExitCode()}, nil
	default:
		return sandbox.ExitStatus{ExitCode: -1}, nil
	}
}

func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return sandbox.Errorf(sandbox.NotFound, "%w", err)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%w: %w", sandbox.ErrNotDirectory, err)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%w: %w", sandbox.ErrIsDirectory, err)
	}
	return err
}

// Upload implements sandbox.Runtime.
func (r *Runtime) Upload(ctx context.Context, id, p string, src io.Reader) error {
	if _, err := r.get(id); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return mapErr(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return mapErr(err)
	}
	if _, err := io.Copy(f, src); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Download implements sandbox.Runtime.
func (r *Runtime) Download(ctx context.Context, id, p string) (io.ReadCloser, error) {
	if _, err := r.get(id); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s: %w", p, sandbox.ErrIsDirectory)
	}
	f, err := os.Open(p)
	return f, mapErr(err)
}

func info(p string, fi fs.FileInfo) sandbox.FileInfo {
	return sandbox.FileInfo{Path: p, Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}
}

// Stat implements sandbox.Runtime.
func (r *Runtime) Stat(ctx context.Context, id, p string) (sandbox.FileInfo, error) {
	if _, err := r.get(id); err != nil {
		return sandbox.FileInfo{}, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return sandbox.FileInfo{}, mapErr(err)
	}
	return info(p, fi), nil
}

// ReadDir implements sandbox.Runtime.
func (r *Runtime) ReadDir(ctx context.Context, id, p string) ([]sandbox.FileInfo, error) {
	if _, err := r.get(id); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]sandbox.FileInfo, 0, len(ents))
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, info(filepath.Join(p, e.Name()), fi))
	}
	return out, nil
}

// MkdirAll implements sandbox.Runtime.
func (r *Runtime) MkdirAll(ctx context.Context, id, p string) error {
	if _, err := r.get(id); err != nil {
		return err
	}
	return mapErr(os.MkdirAll(p, 0o755))
}

// Remove implements sandbox.Runtime.
func (r *Runtime) Remove(ctx context.Context, id, p string) error {
	if _, err := r.get(id); err != nil {
		return err
	}
	if _, err := os.Lstat(p); err != nil {
		return mapErr(err)
	}
	return mapErr(os.RemoveAll(p))
}

// Rename implements sandbox.Runtime.
func (r *Runtime) Rename(ctx context.Context, id, oldPath, newPath string) error {
	if _, err := r.get(id); err != nil {
		return err
	}
	return mapErr(os.Rename(oldPath, newPath))
}
