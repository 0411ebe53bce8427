package fsbackend

import (
	"encoding/json"
	"os"
	"path"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox/backend"
)

// pathCorpus is the module's shared path corpus (testdata/paths.json).
type pathCorpus struct {
	Accept  map[string]string `json:"accept"`
	Escape  []string          `json:"escape"`
	Invalid []string          `json:"invalid"`
}

// TestPathCorpus runs every path of the shared corpus through the file tools
// on every environment: an accepted path (however odd its spelling: dots,
// quotes, shell metacharacters, a leading dash, non-ASCII) is written and
// read back under the name the corpus gives, and listed there; an escaping
// or invalid one is refused with CodeInvalidPath and writes nothing. A
// false rejection of an ordinary name fails here as surely as an escape.
func TestPathCorpus(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../testdata/paths.json")
	require.NoError(t, err)
	var c pathCorpus
	require.NoError(t, json.Unmarshal(data, &c))
	require.NotEmpty(t, c.Accept)

	for name, mk := range envs(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := mk(t)
			for in, rel := range c.Accept {
				content := "corpus " + rel + "\n"
				w, err := e.b.Write(ctx, &backend.WriteRequest{Path: in, Content: content})
				require.NoError(t, err, "write %q", in)
				if !assert.Nil(t, w.Error, "write %q was refused", in) {
					continue
				}
				assert.Equal(t, rel, w.Path, "write %q", in)
				r := readText(t, e.b, rel)
				if assert.Nil(t, r.Error, "read back %q (written as %q)", rel, in) {
					assert.Equal(t, content, r.Content[len("     1\t"):]+"\n", "read back %q", rel)
				}
				dir := path.Dir(rel)
				if dir == "." {
					dir = ""
				}
				ls, err := e.b.Ls(ctx, &backend.LsRequest{Path: dir})
				require.NoError(t, err)
				found := false
				for _, ent := range ls.Files {
					found = found || path.Base(ent.Path) == path.Base(rel)
				}
				assert.True(t, found, "ls %q does not list %q", path.Dir(rel), rel)
			}
			for _, in := range append(c.Escape, c.Invalid...) {
				w, err := e.b.Write(ctx, &backend.WriteRequest{Path: in, Content: "must not land"})
				require.NoError(t, err, "write %q", in)
				if assert.NotNil(t, w.Error, "write %q was accepted as %q", in, w.Path) {
					assert.Equal(t, backend.CodeInvalidPath, w.Error.Code, "write %q", in)
				}
			}
		})
	}
}
