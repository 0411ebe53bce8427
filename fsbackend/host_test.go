package fsbackend

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox"
)

// hostRuntime is a test-only sandbox.Runtime that runs commands for real
// with the host's sh, find, grep and tar, on host paths (sandbox paths are
// host paths; the home is a temporary directory). It isolates nothing; it
// exists so the backend's shell program is tested against real tools and
// real symbolic links.
type hostRuntime struct {
	home  string
	calls atomic.Int64
}

func (r *hostRuntime) Name() string { return "host" }
func (r *hostRuntime) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: "none (test)"}
}

func (r *hostRuntime) info() sandbox.Info {
	return sandbox.Info{ID: "host-1", Provider: "host", State: sandbox.StateRunning, Home: r.home}
}

func (r *hostRuntime) Create(context.Context, *sandbox.CreateRequest) (sandbox.Info, error) {
	r.calls.Add(1)
	return r.info(), nil
}

func (r *hostRuntime) Get(context.Context, string) (sandbox.Info, error) {
	r.calls.Add(1)
	return r.info(), nil
}

func (r *hostRuntime) List(context.Context, *sandbox.ListRequest) ([]sandbox.Info, string, error) {
	return []sandbox.Info{r.info()}, "", nil
}

func (r *hostRuntime) Destroy(context.Context, string) error                   { return nil }
func (r *hostRuntime) SetTimeout(context.Context, string, time.Duration) error { return nil }

func (r *hostRuntime) Exec(ctx context.Context, _ string, cmd *sandbox.Command) (sandbox.ExitStatus, error) {
	r.calls.Add(1)
	cctx, cancel := context.WithTimeout(ctx, cmd.Timeout)
	defer cancel()
	var c *exec.Cmd
	if cmd.Shell != "" {
		c = exec.CommandContext(cctx, "sh", "-c", cmd.Shell)
	} else {
		c = exec.CommandContext(cctx, cmd.Args[0], cmd.Args[1:]...)
	}
	c.Dir = cmd.Dir
	c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + r.home}
	for k, v := range cmd.Env {
		c.Env = append(c.Env, k+"="+v)
	}
	c.Stdin, c.Stdout, c.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = time.Second
	err := c.Run()
	if ctx.Err() != nil {
		return sandbox.ExitStatus{ExitCode: -1}, ctx.Err()
	}
	if cctx.Err() != nil {
		return sandbox.ExitStatus{ExitCode: -1, TimedOut: true}, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return sandbox.ExitStatus{ExitCode: ee.ExitCode()}, nil
	}
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	return sandbox.ExitStatus{}, nil
}

func mapErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && errors.Is(pe.Err, syscall.EISDIR) {
		return sandbox.ErrIsDirectory
	}
	if errors.Is(err, fs.ErrNotExist) {
		return errors.Join(err, sandbox.ErrNotFound)
	}
	return err
}

func (r *hostRuntime) Upload(_ context.Context, _, p string, src io.Reader) error {
	r.calls.Add(1)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return mapErr(err)
	}
	f, err := os.Create(p)
	if err != nil {
		return mapErr(err)
	}
	if _, err := io.Copy(f, src); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (r *hostRuntime) Download(_ context.Context, _, p string) (io.ReadCloser, error) {
	r.calls.Add(1)
	fi, err := os.Stat(p)
	if err != nil {
		return nil, mapErr(err)
	}
	if fi.IsDir() {
		return nil, sandbox.ErrIsDirectory
	}
	f, err := os.Open(p)
	return f, mapErr(err)
}

func toInfo(p string, fi fs.FileInfo) sandbox.FileInfo {
	return sandbox.FileInfo{Path: p, Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}
}

func (r *hostRuntime) Stat(_ context.Context, _, p string) (sandbox.FileInfo, error) {
	r.calls.Add(1)
	fi, err := os.Stat(p)
	if err != nil {
		return sandbox.FileInfo{}, mapErr(err)
	}
	return toInfo(p, fi), nil
}

func (r *hostRuntime) ReadDir(_ context.Context, _, p string) ([]sandbox.FileInfo, error) {
	r.calls.Add(1)
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, mapErr(err)
	}
	var out []sandbox.FileInfo
	for _, e := range ents {
		fi, err := e.Info()
		if err == nil {
			out = append(out, toInfo(filepath.Join(p, e.Name()), fi))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func (r *hostRuntime) MkdirAll(_ context.Context, _, p string) error {
	r.calls.Add(1)
	return mapErr(os.MkdirAll(p, 0o755))
}

func (r *hostRuntime) Remove(_ context.Context, _, p string) error {
	r.calls.Add(1)
	if _, err := os.Lstat(p); err != nil {
		return mapErr(err)
	}
	return os.RemoveAll(p)
}

func (r *hostRuntime) Rename(_ context.Context, _, from, to string) error {
	r.calls.Add(1)
	return mapErr(os.Rename(from, to))
}
