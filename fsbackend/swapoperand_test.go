package fsbackend

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/internal/hostrt"
	"github.com/stretchr/testify/require"
)

// TestShellGrepSwapAfterListing makes the race of TestAdversarialSwapRace
// happen every time: the shell path lists the workspace, then runs grep
// over it, and a grep placed first on PATH swaps a directory and a file at
// the workspace's top for symbolic links to the outside just before the real
// grep starts. A search must not report what the links point at: grep given
// a link as an operand on its command line follows it, even with -r.
func TestShellGrepSwapAfterListing(t *testing.T) {
	t.Parallel()
	real, err := exec.LookPath("grep")
	if err != nil {
		t.Skip("needs grep on the host")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	home, out, bin := filepath.Join(dir, "home"), filepath.Join(dir, "outside"), filepath.Join(dir, "bin")
	for _, d := range []string{home, filepath.Join(out, "d"), bin} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(out, "d", "file.txt"), []byte("SECRET\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(out, "secret.txt"), []byte("SECRET\n"), 0o644))
	// The swap happens once per recursive search, in the directory grep
	// runs in, only while both names are still the workspace's own.
	wrapper := `#!/bin/sh
case " $* " in
*" -r "*)
  if [ -d d ] && [ ! -L d ] && [ -f f.txt ] && [ ! -L f.txt ]; then
    mv d d.real && ln -s '` + out + `/d' d && mv f.txt f.real && ln -s '` + out + `/secret.txt' f.txt
  fi ;;
esac
exec '` + real + `' "$@"
`
	require.NoError(t, os.WriteFile(filepath.Join(bin, "grep"), []byte(wrapper), 0o755))
	rt := hostrt.NewWithHome(home)
	sb, err := sandbox.NewClient(rt).Create(context.Background(), sandbox.CreateOptions{
		Env: map[string]string{"PATH": bin + ":" + os.Getenv("PATH")},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	b, err := New(sb, Options{BaseDir: filepath.Join(home, "workspace")})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	b.shellOnly()
	e := &env{b: b, sb: sb, base: filepath.Join(home, "workspace"), out: out}
	write(t, b, "d/file.txt", "inside\n")
	write(t, b, "f.txt", "inside\n")

	g, err := b.Grep(context.Background(), &backend.GrepRequest{Pattern: "SECRET"})
	require.NoError(t, err)
	require.Nil(t, g.Error)
	require.True(t, e.try("[ -L "+e.base+"/d ] && [ -L "+e.base+"/f.txt ]"), "the grep on PATH swapped both names before the search")
	for _, m := range g.Matches {
		require.NotContains(t, m.Text, "SECRET", "the search read %s through a link to the outside", m.Path)
	}
	require.Empty(t, g.Matches)
}
