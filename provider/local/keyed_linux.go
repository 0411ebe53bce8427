//go:build linux

package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

// keysDir holds one lock file per GetOrCreate key under the root. The
// files stay (they are empty): removing one while another process waits
// on it would split the lock.
const keysDir = ".keys"

// CreateKeyed implements driver.KeyedCreator, so that Client.GetOrCreate
// makes at most one sandbox per key across every process sharing the
// root: it takes an exclusive lock on a file named after the key in the
// root's .keys directory, and under it returns the oldest sandbox carrying
// req.Labels or creates one. The lock is released when CreateKeyed
// returns; waiting for it is bounded by ctx.
func (r *Runtime) CreateKeyed(ctx context.Context, key string, req *driver.CreateRequest) (driver.Info, bool, error) {
	if len(key) != 32 || strings.Trim(key, "0123456789abcdef") != "" {
		return driver.Info{}, false, sberrors.Errorf(sberrors.InvalidArgument, "local: key %q is not 32 lowercase hex digits", key)
	}
	dir := filepath.Join(r.root, keysDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return driver.Info{}, false, sberrors.Errorf(sberrors.Internal, "local: create %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, key+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return driver.Info{}, false, sberrors.Errorf(sberrors.Internal, "local: key lock: %w", err)
	}
	defer f.Close() // releases the lock
	if err := lockCtx(ctx, f); err != nil {
		return driver.Info{}, false, err
	}
	page, _, err := r.List(ctx, &driver.ListRequest{Labels: req.Labels,
		States: []driver.State{driver.StateRunning, driver.StatePaused, driver.StateStarting}})
	if err != nil {
		return driver.Info{}, false, err
	}
	if len(page) > 0 {
		return slices.MinFunc(page, func(a, b driver.Info) int {
			if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		}), false, nil
	}
	in, err := r.Create(ctx, req)
	return in, true, err
}

// lockCtx takes f's exclusive flock, polling so that ctx bounds the wait.
func lockCtx(ctx context.Context, f *os.File) error {
	err := flockCtx(ctx, f, syscall.LOCK_EX)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("local: waiting for the key lock: %w", ctx.Err())
	default:
		return sberrors.Errorf(sberrors.Internal, "local: key lock: %w", err)
	}
}
