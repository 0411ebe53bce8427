package docker

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox/sberrors"
)

// loadWith reads (or makes) the owner key at path as a Runtime's first
// call that needs it does.
func loadWith(path string) error {
	r, err := New(WithHost("unix:///nonexistent/docker.sock"), WithKeyFile(path))
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = r.ownerKey()
	return err
}

// The owner key is made once, owner-only, and read back by every later
// Runtime; racing first Runtimes agree on one key; a key others can read,
// or a damaged one, is refused with an error naming the file.
func TestOwnerKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "state", "sandboxkit", "key")
	const racers = 8
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() {
			errs[i] = loadWith(path)
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	first, err := os.ReadFile(path)
	require.NoError(t, err)
	key, err := hex.DecodeString(strings.TrimSpace(string(first)))
	require.NoError(t, err, "key file %q", first)
	assert.Len(t, key, 32)
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "files left beside the key: %v", entries)
	if runtime.GOOS != "windows" {
		st, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
		st, err = os.Stat(filepath.Dir(path))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	}

	// Later Runtimes use it as it is.
	require.NoError(t, loadWith(path))
	again, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, first, again)

	if runtime.GOOS != "windows" {
		require.NoError(t, os.Chmod(path, 0o644))
		err = loadWith(path)
		assert.Equal(t, sberrors.PermissionDenied, sberrors.CodeOf(err), "a key readable by others: %v", err)
		assert.ErrorContains(t, err, path)
		require.NoError(t, os.Chmod(path, 0o600))
	}
	require.NoError(t, os.WriteFile(path, []byte("not a key\n"), 0o600))
	err = loadWith(path)
	assert.Equal(t, sberrors.FailedPrecondition, sberrors.CodeOf(err), "a damaged key: %v", err)
	assert.ErrorContains(t, err, path)

	_, err = New(WithKeyFile(""))
	assert.Equal(t, sberrors.InvalidArgument, sberrors.CodeOf(err))
	assert.ErrorContains(t, err, "WithKeyFile")
}
