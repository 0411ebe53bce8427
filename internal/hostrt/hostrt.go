// Package hostrt is a minimal driver.Runtime over the host, for this
// module's tests only. It isolates nothing: a "sandbox" is a home
// directory on the host, its paths are host paths and its commands are
// host processes run by the real /bin/sh. Tests use it where they need
// real shells, tools and symbolic links without a provider, and as the
// backend of the provider fakes (e2bfake, daytonafake).
//
// Commands get a small environment, not the test process's: PATH (the
// test process's), HOME (the sandbox's home), then the sandbox's Env,
// then the command's Env. Each runs in its own process group, which is
// killed when the command's timeout expires or its context ends.
//
// File operations map host errors onto the sandbox sentinels: a missing
// path is NotFound (and still fs.ErrNotExist), a directory where a file
// is needed matches ErrIsDirectory, a file where a directory is needed
// matches ErrNotDirectory.
package hostrt

import (
	"cmp"
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
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/forkwait"
	"github.com/sandboxkit/sandbox/internal/sigreset"
	"github.com/sandboxkit/sandbox/sberrors"
)

// waitDelay bounds how long Exec waits for a command's output pipes after
// the command has exited or been killed. A pipe held longer (by a process
// that left the group) is a bug of the command under test: Exec fails.
const waitDelay = 5 * time.Second

// Runtime is the host runtime. Its sandboxes live in memory: they last as
// long as the Runtime, and Destroy forgets one without touching its files.
type Runtime struct {
	root string // where Create makes homes; "" when home is fixed
	home string // the home every sandbox shares, when root is ""

	mu   sync.Mutex
	next int
	sbx  map[string]*box
}

type box struct {
	info driver.Info
	env  map[string]string
}

// New returns a Runtime that gives each sandbox a fresh home directory
// under root, which must exist (a test's TempDir). The homes stay until
// root is removed, so processes a test leaves running never race with a
// removal. Like a sandbox's, its commands start with every standard signal
// at its default action (see sigreset), whatever this process ignores.
func New(root string) *Runtime {
	sigreset.Unignore()
	return &Runtime{root: root, sbx: map[string]*box{}}
}

// NewWithHome returns a Runtime whose sandboxes all have home as their
// home directory, used as it is: Create neither makes nor empties it.
func NewWithHome(home string) *Runtime {
	sigreset.Unignore()
	return &Runtime{home: home, sbx: map[string]*box{}}
}

// Name implements driver.Runtime.
func (r *Runtime) Name() string { return "hostrt" }

// Capabilities implements driver.Runtime.
func (r *Runtime) Capabilities() driver.Capabilities {
	return driver.Capabilities{Isolation: "none (test host runtime)", Network: true, ReportsSignal: reportsSignal}
}

// Create implements driver.Runtime.
func (r *Runtime) Create(ctx context.Context, req *driver.CreateRequest) (driver.Info, error) {
	r.mu.Lock()
	r.next++
	n := r.next
	r.mu.Unlock()
	id, home := "host-"+strconv.Itoa(n), r.home
	if r.root != "" {
		var err error
		if home, err = os.MkdirTemp(r.root, "home-"); err != nil {
			return driver.Info{}, err
		}
		id = filepath.Base(home)
	}
	in := driver.Info{ID: id, Provider: r.Name(), Labels: maps.Clone(req.Labels),
		State: driver.StateRunning, CreatedAt: time.Now(), Home: home}
	r.mu.Lock()
	r.sbx[id] = &box{info: in, env: maps.Clone(req.Env)}
	r.mu.Unlock()
	return in, nil
}

func (r *Runtime) get(id string) (*box, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.sbx[id]
	if b == nil {
		return nil, sberrors.Errorf(sberrors.NotFound, "sandbox %s not found", id)
	}
	return b, nil
}

// Get implements driver.Runtime.
func (r *Runtime) Get(ctx context.Context, id string) (driver.Info, error) {
	b, err := r.get(id)
	if err != nil {
		return driver.Info{}, err
	}
	return b.info, nil
}

// List implements driver.Runtime: every sandbox, oldest first, in one
// page; the request's filters are ignored.
func (r *Runtime) List(ctx context.Context, req *driver.ListRequest) ([]driver.Info, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]driver.Info, 0, len(r.sbx))
	for _, b := range r.sbx {
		out = append(out, b.info)
	}
	slices.SortFunc(out, func(a, b driver.Info) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, "", nil
}

// Destroy implements driver.Runtime. It forgets the sandbox; its home
// and any process still running in it are left to the test.
func (r *Runtime) Destroy(ctx context.Context, id string) error {
	r.mu.Lock()
	delete(r.sbx, id)
	r.mu.Unlock()
	return nil
}

// SetTimeout implements driver.Runtime. Leases do not expire here.
func (r *Runtime) SetTimeout(ctx context.Context, id string, d time.Duration) error {
	_, err := r.get(id)
	return err
}

// Exec implements driver.Runtime with a host process in its own process
// group, killed with the group on timeout or when ctx ends. A program
// that cannot be found is exit code 127, with the shell's message on
// stderr.
func (r *Runtime) Exec(ctx context.Context, id string, c *driver.Command) (driver.ExitStatus, error) {
	b, err := r.get(id)
	if err != nil {
		return driver.ExitStatus{}, err
	}
	args := c.Args
	if c.Shell != "" {
		args = []string{"/bin/sh", "-c", c.Shell}
	}
	if len(args) == 0 {
		return driver.ExitStatus{}, sberrors.Errorf(sberrors.InvalidArgument, "hostrt: empty command")
	}
	cmd := exec.Command(args[0], args[1:]...)
	if errors.Is(cmd.Err, exec.ErrNotFound) {
		fmt.Fprintf(c.Stderr, "sh: %s: not found\n", args[0])
		return driver.ExitStatus{ExitCode: 127}, nil
	}
	cmd.Dir = c.Dir
	cmd.Env = []string{"PATH=" + cmp.Or(os.Getenv("PATH"), "/usr/local/bin:/usr/bin:/bin"), "HOME=" + b.info.Home}
	for _, m := range []map[string]string{b.env, c.Env} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			cmd.Env = append(cmd.Env, k+"="+m[k])
		}
	}
	sigreset.UnblockCmd(cmd) // no signal blocked, as in a sandbox
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	newGroup(cmd)
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		return driver.ExitStatus{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(c.Timeout)
	defer timer.Stop()
	kill := func() { killGroup(cmd) }
	select {
	case err = <-done:
	case <-timer.C:
		kill()
		<-done
		return driver.ExitStatus{ExitCode: -1, TimedOut: true}, nil
	case <-ctx.Done():
		kill()
		<-done
		return driver.ExitStatus{ExitCode: -1}, ctx.Err()
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return driver.ExitStatus{}, nil
	case errors.As(err, &ee):
		return driver.ExitStatus{ExitCode: ee.ExitCode(), Signal: exitSignal(ee.ProcessState)}, nil
	}
	return driver.ExitStatus{ExitCode: -1}, fmt.Errorf("hostrt: %s: %w", args[0], err)
}

// mapErr maps a host file error onto the sandbox sentinels, keeping the
// original in the chain.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return sberrors.Errorf(sberrors.NotFound, "%w", err)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%w: %w", sberrors.ErrNotDirectory, err)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%w: %w", sberrors.ErrIsDirectory, err)
	}
	return err
}

// Upload implements driver.Runtime.
func (r *Runtime) Upload(ctx context.Context, id, p string, src io.Reader) error {
	if _, err := r.get(id); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
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
	// The file can be executed once no process started meanwhile holds
	// it open (package forkwait).
	return forkwait.CloseReleased(f, ctx.Done())
}

// Download implements driver.Runtime.
func (r *Runtime) Download(ctx context.Context, id, p string) (io.ReadCloser, error) {
	if _, err := r.get(id); err != nil {
		return nil, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, mapErr(err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s: %w", p, sberrors.ErrIsDirectory)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, mapErr(err)
	}
	return f, nil
}

func info(p string, fi fs.FileInfo) driver.FileInfo {
	return driver.FileInfo{Path: p, Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}
}

// Stat implements driver.Runtime. It follows symbolic links.
func (r *Runtime) Stat(ctx context.Context, id, p string) (driver.FileInfo, error) {
	if _, err := r.get(id); err != nil {
		return driver.FileInfo{}, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return driver.FileInfo{}, mapErr(err)
	}
	return info(p, fi), nil
}

// ReadDir implements driver.Runtime: the entries sorted by name, each
// described without following symbolic links.
func (r *Runtime) ReadDir(ctx context.Context, id, p string) ([]driver.FileInfo, error) {
	if _, err := r.get(id); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]driver.FileInfo, 0, len(ents))
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			continue // removed since ReadDir listed it
		}
		out = append(out, info(filepath.Join(p, e.Name()), fi))
	}
	return out, nil
}

// MkdirAll implements driver.Runtime.
func (r *Runtime) MkdirAll(ctx context.Context, id, p string) error {
	if _, err := r.get(id); err != nil {
		return err
	}
	return mapErr(os.MkdirAll(p, 0o755))
}

// Remove implements driver.Runtime: a file, or a directory and all it
// holds; a missing path is NotFound.
func (r *Runtime) Remove(ctx context.Context, id, p string) error {
	if _, err := r.get(id); err != nil {
		return err
	}
	if _, err := os.Lstat(p); err != nil {
		return mapErr(err)
	}
	return mapErr(os.RemoveAll(p))
}

// Rename implements driver.Runtime.
func (r *Runtime) Rename(ctx context.Context, id, oldPath, newPath string) error {
	if _, err := r.get(id); err != nil {
		return err
	}
	return mapErr(os.Rename(oldPath, newPath))
}
