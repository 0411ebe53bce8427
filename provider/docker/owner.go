package docker

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandboxkit/sandbox/sberrors"
)

// ownerDomain separates this MAC from any other use of the key.
const ownerDomain = "sandboxkit/docker/owner/v1\x00"

// keyBytes is the size of the owner key.
const keyBytes = 32

// DefaultKeyFile returns where the owner key lives unless WithKeyFile says
// otherwise: $XDG_STATE_HOME/sandboxkit/docker/key, else
// ~/.local/state/sandboxkit/docker/key.
func DefaultKeyFile() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "sandboxkit", "docker", "key"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", fmt.Errorf("docker: no state directory for the owner key (%v): set XDG_STATE_HOME, or give the key's file with WithKeyFile or ?keyfile=: %w", err, sberrors.ErrFailedPrecondition)
	}
	return filepath.Join(home, ".local", "state", "sandboxkit", "docker", "key"), nil
}

// loadKey reads the owner key from path, creating it (with its directory,
// mode 0700) when missing: 32 random bytes, hex-encoded, in a file of mode
// 0600. Concurrent first calls agree on one key: each writes a temporary
// file and links it into place, and the losers read the winner's.
func loadKey(path string) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		key, err := readKey(path)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || attempt == 3 {
			return key, err
		}
		if err := writeKey(path); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
}

func readKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("docker: owner key %s: %v: %w", path, err, sberrors.ErrPermission)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("docker: owner key %s: %v: %w", path, err, sberrors.ErrPermission)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("docker: owner key %s is not a regular file: %w", path, sberrors.ErrFailedPrecondition)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("docker: owner key %s is open to other users (mode %#o): anyone who reads it can make containers this provider adopts; chmod 600 it: %w", path, st.Mode().Perm(), sberrors.ErrPermission)
	}
	text, err := io.ReadAll(io.LimitReader(f, 4*keyBytes))
	if err != nil {
		return nil, fmt.Errorf("docker: owner key %s: %v: %w", path, err, sberrors.ErrPermission)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(text)))
	if err != nil || len(key) != keyBytes {
		return nil, fmt.Errorf("docker: owner key %s: want %d hex digits, found something else (remove the file to make a new key; the sandboxes made with the old one are then no longer this provider's): %w", path, 2*keyBytes, sberrors.ErrFailedPrecondition)
	}
	return key, nil
}

func writeKey(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("docker: owner key: %v: %w", err, sberrors.ErrPermission)
	}
	key := make([]byte, keyBytes)
	rand.Read(key)
	tmp, err := os.CreateTemp(dir, ".key-*") // mode 0600
	if err != nil {
		return fmt.Errorf("docker: owner key: %v: %w", err, sberrors.ErrPermission)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(hex.EncodeToString(key) + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("docker: owner key %s: %v: %w", path, err, sberrors.ErrPermission)
	}
	// A link, unlike a rename, never replaces a key another process has
	// just written.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		return fmt.Errorf("docker: owner key %s: %v: %w", path, err, sberrors.ErrPermission)
	}
	return nil
}

// ownerKey returns the owner key, reading (or making) it on first use. A
// failure is not remembered: the next call tries again.
func (r *Runtime) ownerKey() ([]byte, error) {
	r.keyMu.Lock()
	defer r.keyMu.Unlock()
	if r.key != nil {
		return r.key, nil
	}
	path := r.keyFile
	if path == "" {
		var err error
		if path, err = DefaultKeyFile(); err != nil {
			return nil, err
		}
	}
	key, err := loadKey(path)
	if err != nil {
		return nil, err
	}
	r.key = key
	return key, nil
}

// ownerName is the name of the container with this id when the holder of
// key made it: namePrefix + hex(HMAC-SHA256(key, ownerDomain + id)). Create
// renames the container to it once the engine has chosen the id.
func ownerName(key []byte, id string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(ownerDomain))
	m.Write([]byte(id))
	return namePrefix + hex.EncodeToString(m.Sum(nil))
}

// proven reports whether a listed container carries the owner name for its
// id under key.
func proven(key []byte, c container.Summary) bool {
	return slices.Contains(c.Names, "/"+ownerName(key, c.ID))
}

// owns checks that the container with this full id was made by this
// provider with the same key: it carries the owner name for its id. A
// container without it (made outside the provider, whatever labels it
// copied, or whose Create never renamed it) is NotFound. Proven ids are
// remembered.
func (r *Runtime) owns(ctx context.Context, id string) error {
	if _, ok := r.owned.Load(id); ok {
		return nil
	}
	key, err := r.ownerKey()
	if err != nil {
		return err
	}
	f := client.Filters{}
	f.Add("id", id)
	res, err := r.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return r.wrap(ctx, "get", err)
	}
	for _, c := range res.Items {
		if c.ID == id && proven(key, c) {
			r.owned.Store(id, time.Now())
			return nil
		}
	}
	return r.notFound(id)
}

// notFound is the error for an id that names no sandbox of this provider.
func (r *Runtime) notFound(id string) error {
	return fmt.Errorf("docker: no sandbox %s on the engine at %s: %w", shortID(id), r.host, sberrors.ErrNotFound)
}

// shortID bounds an id shown in an error.
func shortID(id string) string {
	if len(id) > 80 {
		return fmt.Sprintf("%q...", id[:64])
	}
	return fmt.Sprintf("%q", id)
}

// forgetGone drops from the proven ids those a complete listing that began
// at since did not see (removed by another client or by hand). An id
// proven after since stays: its Create may still be under way.
func (r *Runtime) forgetGone(since time.Time, seen map[string]bool) {
	r.owned.Range(func(k, v any) bool {
		if at, _ := v.(time.Time); !seen[k.(string)] && at.Before(since) {
			r.owned.Delete(k)
		}
		return true
	})
}
