package fsbackend

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox/backend"
	"github.com/stretchr/testify/require"
)

// badInputEnvs are envs plus provider/local kept to the shell path, so
// both the helper and the shell script see every bad input.
func badInputEnvs(t *testing.T) map[string]envMaker {
	m := envs(t, Options{})
	m["local-shell"] = localShell(Options{})
	return m
}

// requireInvalid checks that e is a CodeInvalidArgument error naming the
// argument name, with a message short enough to show a model.
func requireInvalid(t *testing.T, e *backend.Error, name string) {
	t.Helper()
	require.NotNil(t, e, "want an invalid %s error", name)
	require.Equal(t, backend.CodeInvalidArgument, e.Code, "%s", e.Message)
	require.Contains(t, e.Message, name)
	require.Less(t, len(e.Message), 1024, "message of %d bytes", len(e.Message))
}

// TestReadWindowOverflow: a window whose end overflows an int (offset
// 1500, limit near 2^63, as a model may send) returns the lines from the
// offset to the end, not an empty window; negative offsets and limits are
// refused naming the argument, never read as zero.
func TestReadWindowOverflow(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	content := b.String()
	for name, mk := range badInputEnvs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := mk(t)
			write(t, e.b, "long.txt", content)
			for _, limit := range []int{math.MaxInt, math.MaxInt - 1000, math.MaxInt - 1499, 1 << 62} {
				r, err := e.b.Read(ctx, &backend.ReadRequest{Path: "long.txt", Offset: 1500, Limit: limit})
				require.NoError(t, err)
				require.Nil(t, r.Error)
				require.Equal(t, 2000, r.TotalLines)
				lines := strings.Split(r.Content, "\n")
				require.Len(t, lines, 500, "limit %d", limit)
				require.Equal(t, "  1501\tline 1501", lines[0])
				require.Equal(t, "  2000\tline 2000", lines[499])
			}
			r, err := e.b.Read(ctx, &backend.ReadRequest{Path: "long.txt", Offset: math.MaxInt, Limit: math.MaxInt})
			require.NoError(t, err)
			require.Nil(t, r.Error)
			require.Equal(t, "", r.Content)
			require.Equal(t, 2000, r.TotalLines)

			c, err := e.b.ReadChars(ctx, &backend.ReadCharsRequest{Path: "long.txt", Offset: 7, MaxChars: math.MaxInt})
			require.NoError(t, err)
			require.Nil(t, c.Error)
			require.Equal(t, content[7:], c.Content)

			for _, tc := range []struct {
				req  backend.ReadRequest
				name string
			}{
				{backend.ReadRequest{Path: "long.txt", Offset: -1}, "offset"},
				{backend.ReadRequest{Path: "long.txt", Offset: math.MinInt, Limit: 5}, "offset"},
				{backend.ReadRequest{Path: "long.txt", Limit: -1}, "limit"},
				{backend.ReadRequest{Path: "long.txt", Offset: 3, Limit: math.MinInt}, "limit"},
			} {
				r, err := e.b.Read(ctx, &tc.req)
				require.NoError(t, err)
				requireInvalid(t, r.Error, tc.name)
				require.Equal(t, "", r.Content)
			}
			c, err = e.b.ReadChars(ctx, &backend.ReadCharsRequest{Path: "long.txt", Offset: -2})
			require.NoError(t, err)
			requireInvalid(t, c.Error, "offset")
			c, err = e.b.ReadChars(ctx, &backend.ReadCharsRequest{Path: "long.txt", MaxChars: -2})
			require.NoError(t, err)
			requireInvalid(t, c.Error, "max chars")

			g, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: "line 19", MaxCount: math.MaxInt})
			require.NoError(t, err)
			require.Nil(t, g.Error)
			require.Len(t, g.Matches, 111) // 19, 190-199, 1900-1999
			require.False(t, g.Truncated)
			g, err = e.b.Grep(ctx, &backend.GrepRequest{Pattern: "line 19", MaxCount: -1})
			require.NoError(t, err)
			requireInvalid(t, g.Error, "max count")
		})
	}
}

// TestGrepPatternLength: a pattern too long for the command's environment
// is refused with an error naming it (it failed in the sandbox with
// "Internal: helper exited 127"), and one at the limit, made of the
// characters a shell would expand, is searched for exactly.
func TestGrepPatternLength(t *testing.T) {
	t.Parallel()
	unit := `'"$(echo x)\` + "`" + `; * ? [a] ~ %s `
	atLimit := strings.Repeat(unit, MaxPatternBytes/len(unit)+1)[:MaxPatternBytes]
	for name, mk := range badInputEnvs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := mk(t)
			write(t, e.b, "q.txt", "first line\n<"+atLimit+">\n")
			for _, p := range []string{strings.Repeat("x", 1<<20), strings.Repeat("y", MaxPatternBytes+1)} {
				g, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: p})
				require.NoError(t, err)
				requireInvalid(t, g.Error, "pattern")
			}
			g, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: atLimit})
			require.NoError(t, err)
			require.Nil(t, g.Error)
			require.Len(t, g.Matches, 1)
			require.Equal(t, 2, g.Matches[0].Line)
			require.Equal(t, "q.txt", g.Matches[0].Path)

			for _, glob := range []string{strings.Repeat("*", 1<<20), strings.Repeat("a", MaxGlobBytes+1)} {
				g, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: "first", Glob: glob})
				require.NoError(t, err)
				requireInvalid(t, g.Error, "glob")
				r, err := e.b.Glob(ctx, &backend.GlobRequest{Pattern: glob})
				require.NoError(t, err)
				requireInvalid(t, r.Error, "glob")
			}
		})
	}
}

// TestGrepControlCharacters: a matching line that holds a terminal escape,
// a C1 control or bytes that are not UTF-8 is returned escaped and marked,
// never dropped (it was neither a match nor listed as skipped).
func TestGrepControlCharacters(t *testing.T) {
	t.Parallel()
	content := "plain ERROR\n\x1b[31mERROR\x1b[0m red\ncaf\xe9 ERROR\n\u009b2J ERROR\ttab\r\nno match\n"
	want := []backend.GrepMatch{
		{Path: "log.txt", Line: 1, Text: "plain ERROR"},
		{Path: "log.txt", Line: 2, Text: `\x1b[31mERROR\x1b[0m red`, Escaped: true},
		{Path: "log.txt", Line: 3, Text: `caf\xe9 ERROR`, Escaped: true},
		{Path: "log.txt", Line: 4, Text: `\xc2\x9b2J ERROR` + "\ttab\r", Escaped: true},
	}
	for name, mk := range badInputEnvs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := mk(t)
			write(t, e.b, "log.txt", content)
			for _, path := range []string{"", "log.txt"} {
				g, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: "ERROR", Path: path})
				require.NoError(t, err)
				require.Nil(t, g.Error)
				require.Equal(t, want, g.Matches, "path %q", path)
				require.Empty(t, g.Skipped)
			}
			// The pattern may hold the escape itself.
			g, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: "\x1b[31m"})
			require.NoError(t, err)
			require.Equal(t, want[1:2], g.Matches)
		})
	}
}

// TestEscapeLineCut: an escaped line is cut like any other, at
// MaxLineChars characters, never inside an escape.
func TestEscapeLineCut(t *testing.T) {
	t.Parallel()
	b := &FilesystemBackend{}
	esc, cut := escapeLine([]byte(strings.Repeat("\x1b", 3*MaxLineChars)))
	require.Equal(t, strings.Repeat(`\x1b`, MaxLineChars)+"...", b.cutAt(esc, cut, false))
	esc, cut = escapeLine([]byte("ok\x00\x7f" + strings.Repeat("é", 5)))
	require.Equal(t, `ok\x00\x7f`+strings.Repeat("é", 5), b.cutAt(esc, cut, false))
	// A secret beside a control character is cut off whole, as on a text line.
	secret := "tok-5ecret-XYZ-123"
	b = &FilesystemBackend{opts: Options{SecretEnv: map[string]string{"K": secret}}}
	line := "\x1b" + strings.Repeat("a", MaxLineChars-5) + secret
	esc, cut = escapeLine([]byte(line))
	require.Equal(t, `\x1b`+strings.Repeat("a", MaxLineChars-5)+"...", b.cutAt(esc, cut, false))
}

// TestLongPathMessages: whatever path or pattern a model sends, the
// error it gets back is short (a 1 MiB path that climbs above the
// workspace came back whole in the message).
func TestLongPathMessages(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t, Options{})
	for _, p := range []string{strings.Repeat("../", 1<<18), strings.Repeat("a/", 1<<18), strings.Repeat("n", 1<<20), "/" + strings.Repeat("x", 300)} {
		r, err := e.b.Read(ctx, &backend.ReadRequest{Path: p})
		require.NoError(t, err)
		require.NotNil(t, r.Error)
		require.Equal(t, backend.CodeInvalidPath, r.Error.Code)
		require.Less(t, len(r.Error.Message), 1024, "%.200s", r.Error.Message)
	}
	for _, glob := range []string{"[" + strings.Repeat("x", MaxGlobBytes-1)} {
		r, err := e.b.Glob(ctx, &backend.GlobRequest{Pattern: glob})
		require.NoError(t, err)
		require.NotNil(t, r.Error)
		require.Less(t, len(r.Error.Message), 1024, "%.200s", r.Error.Message)
	}
}
