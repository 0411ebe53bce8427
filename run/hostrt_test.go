package run

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox"
)

// hostRuntime is a minimal sandbox.Runtime over os/exec for these tests.
// Each sandbox is a directory under root, which is also its home; paths
// are the host's own. Commands run as host processes in their own process
// group, like a provider would run them. It stands in for a provider in
// unit tests and as the backend of the e2b and daytona fakes; the scenario
// tests run over provider/local too.
type hostRuntime struct {
	root string
	next atomic.Int64
}

func (h *hostRuntime) Name() string { return "host" }

func (h *hostRuntime) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Persistent: true, Isolation: "none (test host runtime)", Network: true}
}

func (h *hostRuntime) info(id string) sandbox.Info {
	return sandbox.Info{ID: id, Provider: "host", State: sandbox.StateRunning, Home: filepath.Join(h.root, id)}
}

func (h *hostRuntime) check(id string) error {
	if fi, err := os.Stat(filepath.Join(h.root, id)); err != nil || !fi.IsDir() || strings.ContainsAny(id, "/.") {
		return sandbox.Errorf(sandbox.NotFound, "sandbox %s not found", id)
	}
	return nil
}

func (h *hostRuntime) Create(ctx context.Context, req *sandbox.CreateRequest) (sandbox.Info, error) {
	id := "s" + strconv.FormatInt(h.next.Add(1), 10) + "-" + strconv.Itoa(os.Getpid())
	if err := os.Mkdir(filepath.Join(h.root, id), 0o755); err != nil {
		return sandbox.Info{}, err
	}
	return h.info(id), nil
}

func (h *hostRuntime) Get(ctx context.Context, id string) (sandbox.Info, error) {
	if err := h.check(id); err != nil {
		return sandbox.Info{}, err
	}
	return h.info(id), nil
}

func (h *hostRuntime) List(ctx context.Context, req *sandbox.ListRequest) ([]sandbox.Info, string, error) {
	des, err := os.ReadDir(h.root)
	if err != nil {
		return nil, "", err
	}
	var out []sandbox.Info
	for _, de := range des {
		if de.IsDir() {
			out = append(out, h.info(de.Name()))
		}
	}
	return out, "", nil
}

// Destroy leaves the directory: the tests kill their runs themselves.
func (h *hostRuntime) Destroy(ctx context.Context, id string) error { return nil }

func (h *hostRuntime) SetTimeout(ctx context.Context, id string, d time.Duration) error {
	return h.check(id)
}

func (h *hostRuntime) Exec(ctx context.Context, id string, c *sandbox.Command) (sandbox.ExitStatus, error) {
	if err := h.check(id); err != nil {
		return sandbox.ExitStatus{}, err
	}
	argv := c.Args
	if c.Shell != "" {
		argv = []string{"sh", "-c", c.Shell}
	}
	cctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, argv[0], argv[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = os.Environ()
	for k, v := range c.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = c.Stdin
	cmd.Stdout, cmd.Stderr = c.Stdout, c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A leaked output pipe is a bug of the command under test: fail fast.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return sandbox.ExitStatus{}, ctx.Err()
	case cctx.Err() != nil:
		return sandbox.ExitStatus{ExitCode: -1, TimedOut: true}, nil
	case errors.As(err, &ee):
		return sandbox.ExitStatus{ExitCode: ee.ExitCode()}, nil
	case errors.Is(err, exec.ErrNotFound):
		return sandbox.ExitStatus{ExitCode: 127}, nil
	}
	return sandbox.ExitStatus{}, err
}

func (h *hostRuntime) Upload(ctx context.Context, id, path string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (h *hostRuntime) Download(ctx context.Context, id, path string) (io.ReadCloser, error) {
	return os.Open(path)
}

func fileInfo(path string, fi fs.FileInfo) sandbox.FileInfo {
	return sandbox.FileInfo{Path: path, Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}
}

func (h *hostRuntime) Stat(ctx context.Context, id, path string) (sandbox.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	return fileInfo(path, fi), nil
}

func (h *hostRuntime) ReadDir(ctx context.Context, id, path string) ([]sandbox.FileInfo, error) {
	des, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var out []sandbox.FileInfo
	for _, de := range des {
		fi, err := de.Info()
		if err != nil {
			continue
		}
		out = append(out, fileInfo(filepath.Join(path, de.Name()), fi))
	}
	slices.SortFunc(out, func(a, b sandbox.FileInfo) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

func (h *hostRuntime) MkdirAll(ctx context.Context, id, path string) error {
	return os.MkdirAll(path, 0o755)
}

func (h *hostRuntime) Remove(ctx context.Context, id, path string) error {
	if _, err := os.Lstat(path); err != nil {
		return err
	}
	return os.RemoveAll(path)
}

func (h *hostRuntime) Rename(ctx context.Context, id, oldPath, newPath string) error {
	return os.Rename(oldPath, newPath)
}
