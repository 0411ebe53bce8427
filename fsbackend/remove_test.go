package fsbackend

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox/backend"

	"github.com/stretchr/testify/require"
)

func remove(t *testing.T, b *FilesystemBackend, p string) *backend.RemoveResult {
	t.Helper()
	r, err := b.Remove(ctx, &backend.RemoveRequest{Path: p})
	require.NoError(t, err, "remove %s", p)
	return r
}

// Remove unlinks a file or a symbolic link itself, never a link's target,
// refuses a directory, the root and the metadata, and never reaches
// outside the workspace through a linked parent.
func TestRemove(t *testing.T) {
	t.Parallel()
	for name, mk := range envs(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := mk(t)
			write(t, e.b, "a/file.txt", "x")
			e.sh(t, "printf keep > "+e.out+"/victim.txt")
			e.sh(t, "ln -s "+e.out+"/victim.txt "+e.base+"/link")
			e.sh(t, "ln -s "+e.out+" "+e.base+"/outdir")
			up, err := filepath.Rel(e.base+"/a", e.out)
			require.NoError(t, err)
			e.sh(t, "ln -s "+up+" "+e.base+"/a/up")

			r := remove(t, e.b, "a/file.txt")
			require.Nil(t, r.Error)
			require.Equal(t, "a/file.txt", r.Path)
			require.Equal(t, "no\n", e.sh(t, "[ -e "+e.base+"/a/file.txt ] && echo yes || echo no"))

			require.Equal(t, backend.CodeFileNotFound, codeOf(remove(t, e.b, "a/file.txt").Error), "removed twice")
			require.Equal(t, backend.CodeFileNotFound, codeOf(remove(t, e.b, "no/such/file").Error))

			require.Nil(t, remove(t, e.b, "link").Error, "a link is removed itself")
			require.Equal(t, "no\n", e.sh(t, "[ -L "+e.base+"/link ] && echo yes || echo no"))
			require.Equal(t, "keep", e.sh(t, "cat "+e.out+"/victim.txt"), "a link's target survives")

			for _, p := range []string{"outdir/victim.txt", "a/up/victim.txt", "../outside/victim.txt", MetadataDir, MetadataDir + "/x"} {
				require.Equal(t, backend.CodeInvalidPath, codeOf(remove(t, e.b, p).Error), "remove %s", p)
			}
			require.Equal(t, "keep", e.sh(t, "cat "+e.out+"/victim.txt"), "nothing outside was removed")

			require.Equal(t, backend.CodeIsDirectory, codeOf(remove(t, e.b, "a").Error))
			require.Equal(t, backend.CodeIsDirectory, codeOf(remove(t, e.b, "/").Error))
			require.Equal(t, "yes\n", e.sh(t, "[ -d "+e.base+"/a ] && echo yes || echo no"))
			require.Equal(t, backend.CodeInvalidPath, codeOf(remove(t, e.b, "a/up/x/y").Error), "a link to a directory outside is not walked")
		})
	}
}

// Read's window of a line longer than the cap ends before a SecretEnv
// value that straddles the cut: its start is not shown.
func TestReadLongLineCutKeepsSecretWhole(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-t0ken-value"
	for name, mk := range envs(t, Options{MaxReadBytes: 4096, SecretEnv: map[string]string{"TOK": secret}}) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := mk(t)
			write(t, e.b, "f.txt", strings.Repeat("A", 4086)+secret+"\nx\n"+strings.Repeat("B", 100000))
			r := readText(t, e.b, "f.txt")
			require.Nil(t, r.Error)
			require.True(t, r.Truncated)
			require.Contains(t, r.Content, "AAAA")
			require.NotContains(t, r.Content, secret[:4], "the start of the secret is shown")
		})
	}
}
