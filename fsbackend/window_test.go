package fsbackend

import (
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox/backend"

	"github.com/stretchr/testify/require"
)

// envsBothPaths is envs plus provider/local kept to the shell path, so that
// a behaviour is checked with the helper (host, local) and without it
// (local-shell, memory).
func envsBothPaths(t *testing.T, opts Options) map[string]envMaker {
	m := envs(t, opts)
	m["local-shell"] = localShell(opts)
	return m
}

func grepOK(t *testing.T, b *FilesystemBackend, req backend.GrepRequest) *backend.GrepResult {
	t.Helper()
	r, err := b.Grep(ctx, &req)
	require.NoError(t, err)
	require.Nil(t, r.Error, "grep %+v", req)
	return r
}

// TestGrepRegexCaseContext checks Regex, IgnoreCase, Before and After on
// every path: the helper (Go's regexp) and the sandbox's grep.
func TestGrepRegexCaseContext(t *testing.T) {
	t.Parallel()
	for name, mk := range envsBothPaths(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := mk(t)
			write(t, e.b, "ctx.txt", "1\nfoo\n3\n4\n5\n6\nFOO\n8\n")
			write(t, e.b, "sub/n.txt", "id 42\nid x\nfooo\n")

			// A regular expression, RE2 syntax.
			require.Equal(t, "ctx.txt:2:foo\nsub/n.txt:3:fooo", grepOK(t, e.b, backend.GrepRequest{Pattern: `^f(o)+$`, Regex: true}).Text())
			require.Equal(t, "sub/n.txt:1:id 42", grepOK(t, e.b, backend.GrepRequest{Pattern: `id \d+`, Regex: true}).Text())
			require.Equal(t, "No matches found", grepOK(t, e.b, backend.GrepRequest{Pattern: `^f(o)+$`}).Text(), "literal without Regex")
			// Case.
			require.Equal(t, "ctx.txt:2:foo\nctx.txt:7:FOO", grepOK(t, e.b, backend.GrepRequest{Pattern: "foo", IgnoreCase: true, Path: "ctx.txt"}).Text())
			require.Equal(t, "ctx.txt:7:FOO", grepOK(t, e.b, backend.GrepRequest{Pattern: "FOO"}).Text())
			require.Equal(t, "ctx.txt:2:foo\nctx.txt:7:FOO\nsub/n.txt:3:fooo", grepOK(t, e.b, backend.GrepRequest{Pattern: "^fo+$", Regex: true, IgnoreCase: true}).Text())

			// Context lines, as grep -B1 -A1 shows them, in a directory and
			// in one file.
			want := "ctx.txt-1-1\nctx.txt:2:foo\nctx.txt-3-3\n--\nctx.txt-6-6\nctx.txt:7:FOO\nctx.txt-8-8"
			for _, p := range []string{"", "ctx.txt"} {
				r := grepOK(t, e.b, backend.GrepRequest{Pattern: "foo", IgnoreCase: true, Before: 1, After: 1, Path: p, Glob: "ctx.txt"})
				require.Equal(t, want, r.Text(), "path %q", p)
				require.Len(t, r.Matches, 6)
				require.True(t, r.Matches[0].Context && !r.Matches[1].Context && r.Matches[2].Context)
			}
			// Overlapping context: each line once.
			r := grepOK(t, e.b, backend.GrepRequest{Pattern: "foo", IgnoreCase: true, Before: 3, After: 3, Path: "ctx.txt"})
			require.Len(t, r.Matches, 8)
			for i, m := range r.Matches {
				require.Equal(t, i+1, m.Line)
			}
			// MaxCount counts matches, not context: the context of the
			// matches kept stays, the next match's goes.
			r = grepOK(t, e.b, backend.GrepRequest{Pattern: "foo", IgnoreCase: true, Before: 1, After: 1, MaxCount: 1, Path: "ctx.txt"})
			require.Equal(t, "ctx.txt-1-1\nctx.txt:2:foo\nctx.txt-3-3\n[results truncated at 1 matches]", r.Text())
			r = grepOK(t, e.b, backend.GrepRequest{Pattern: "o", Regex: true, After: 2, MaxCount: 1})
			require.Equal(t, "ctx.txt:2:foo\nctx.txt-3-3\nctx.txt-4-4\n[results truncated at 1 matches]", r.Text())
			r = grepOK(t, e.b, backend.GrepRequest{Pattern: "o", Regex: true, After: 2, MaxCount: 2})
			require.Equal(t, "ctx.txt:2:foo\nctx.txt-3-3\nctx.txt-4-4\n--\nsub/n.txt:3:fooo", r.Text())
			require.False(t, r.Truncated)

			// Bad input is refused before any search, naming it.
			for _, req := range []backend.GrepRequest{
				{Pattern: "a(", Regex: true},
				{Pattern: "a(", Regex: true, IgnoreCase: true},
				{Pattern: "a\nb", Regex: true},
				{Pattern: "x", Before: -1},
				{Pattern: "x", After: -2},
			} {
				g, err := e.b.Grep(ctx, &req)
				require.NoError(t, err)
				require.Equal(t, backend.CodeInvalidArgument, codeOf(g.Error), "%+v", req)
			}
			g, _ := e.b.Grep(ctx, &backend.GrepRequest{Pattern: "a(", Regex: true})
			require.Contains(t, g.Error.Text(), `"a("`)
			g, _ = e.b.Grep(ctx, &backend.GrepRequest{Pattern: "x", Before: -1})
			require.Contains(t, g.Error.Text(), "before")
		})
	}
}

// TestGrepContextCutAndEscaped checks that context lines are cut and
// escaped as matches are.
func TestGrepContextCutAndEscaped(t *testing.T) {
	t.Parallel()
	for name, mk := range envsBothPaths(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := mk(t)
			long := strings.Repeat("y", MaxLineChars+50)
			write(t, e.b, "c.txt", long+"\nneedle\n\x1b[31mred\n")
			r := grepOK(t, e.b, backend.GrepRequest{Pattern: "needle", Before: 1, After: 1})
			require.Len(t, r.Matches, 3)
			require.True(t, r.Matches[0].Context)
			require.Equal(t, strings.Repeat("y", MaxLineChars)+"...", r.Matches[0].Text)
			require.True(t, r.Matches[2].Context && r.Matches[2].Escaped)
			require.Equal(t, `\x1b[31mred`, r.Matches[2].Text)
		})
	}
}

// TestReadLargeFileWindow checks that Read streams a line window of a file
// larger than the read cap (32 MiB by default) instead of refusing it, and
// that the bytes returned stay capped.
func TestReadLargeFileWindow(t *testing.T) {
	t.Parallel()
	// A cap of 256 KiB stands for the default 32 MiB: the rule is the
	// same, and the memory provider's shell builds a 40 MB file in
	// minutes, not seconds.
	const maxRead = 256 << 10
	for name, mk := range envsBothPaths(t, Options{MaxReadBytes: maxRead}) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := mk(t)
			// 100 short lines, one line of 375 KB, 10 short lines:
			// made in the sandbox, so the test moves none of it itself.
			e.sh(t, `cd `+e.base+` 2>/dev/null || { mkdir -p `+e.base+` && cd `+e.base+`; }
i=1; while [ $i -le 100 ]; do echo "line $i"; i=$((i+1)); done > big.txt
yes xxxxxxxxxxxxxxx | head -c 400000 | tr -d '\n' >> big.txt
echo >> big.txt
i=1; while [ $i -le 10 ]; do echo "tail $i"; i=$((i+1)); done >> big.txt`)

			r, err := e.b.Read(ctx, &backend.ReadRequest{Path: "big.txt", Limit: 3})
			require.NoError(t, err)
			require.Nil(t, r.Error, "read of a file over the cap")
			require.Equal(t, "     1\tline 1\n     2\tline 2\n     3\tline 3", r.Text())
			require.Equal(t, 111, r.TotalLines)
			require.False(t, r.Truncated)

			r, err = e.b.Read(ctx, &backend.ReadRequest{Path: "big.txt", Offset: 101, Limit: 2})
			require.NoError(t, err)
			require.Nil(t, r.Error)
			require.Equal(t, "   102\ttail 1\n   103\ttail 2", r.Text(), "a window past the long line")
			r, err = e.b.Read(ctx, &backend.ReadRequest{Path: "big.txt", Offset: 500})
			require.NoError(t, err)
			require.Equal(t, "", r.Content)
			require.Equal(t, 111, r.TotalLines)

			// A window holding the long line: cut at the cap, and said so.
			r, err = e.b.Read(ctx, &backend.ReadRequest{Path: "big.txt", Offset: 98, Limit: 5})
			require.NoError(t, err)
			require.Nil(t, r.Error)
			require.True(t, r.Truncated)
			require.Equal(t, "    99\tline 99\n   100\tline 100", r.Content, "the whole lines that fit")
			require.Contains(t, r.Text(), "Output truncated")
			r, err = e.b.Read(ctx, &backend.ReadRequest{Path: "big.txt", Offset: 100, Limit: 1})
			require.NoError(t, err)
			require.Nil(t, r.Error)
			require.True(t, r.Truncated)
			require.LessOrEqual(t, len(r.Content), maxRead+8, "the bytes returned stay capped")
			require.Greater(t, len(r.Content), maxRead-8)
			require.True(t, strings.HasPrefix(r.Content, "   101\txxxx"))

			// The whole-file reads still refuse it.
			rb, err := e.b.ReadBytes(ctx, &backend.ReadBytesRequest{Path: "big.txt"})
			require.NoError(t, err)
			require.Equal(t, backend.CodeTooLarge, codeOf(rb.Error))
		})
	}
}

// TestWorkspaceRecreatedEveryShell checks the re-pin of a workspace
// removed and recreated on every environment, the memory provider's shell
// included.
func TestWorkspaceRecreatedEveryShell(t *testing.T) {
	t.Parallel()
	for name, mk := range envsBothPaths(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := mk(t)
			write(t, e.b, "a.txt", "old")
			e.sh(t, "rm -rf "+e.base+" && mkdir "+e.base+" && echo new > "+e.base+"/b.txt")
			require.Equal(t, "     1\tnew", readText(t, e.b, "b.txt").Content)
			require.Equal(t, "     1\tnew", readText(t, e.reopen(t), "b.txt").Content)
			// A link to elsewhere: refused, whether the file named is
			// there or not.
			// The pinned directory is kept aside, not removed: a directory
			// made later could otherwise get its inode back and match the
			// pin (see the other-owner case below).
			e.sh(t, "rm -rf "+e.base+".keep && mv "+e.base+" "+e.base+".keep && echo SECRET > "+e.out+"/s.txt && ln -s "+e.out+" "+e.base)
			for _, p := range []string{"s.txt", "b.txt"} {
				for _, b := range []*FilesystemBackend{e.b, e.reopen(t)} {
					r := readText(t, b, p)
					require.Equal(t, backend.CodeInvalidPath, codeOf(r.Error), "read %s through a linked workspace: %q", p, r.Content)
					require.Contains(t, r.Text(), "symbolic link")
				}
			}
			// A directory another user owns, where the sandbox may chown
			// (the host runtime, run as root).
			if e.try("rm -f " + e.base + " && mkdir " + e.base + " && chown 65534 " + e.base) {
				for _, b := range []*FilesystemBackend{e.b, e.reopen(t)} {
					r := readText(t, b, "b.txt")
					require.Equal(t, backend.CodeInvalidPath, codeOf(r.Error))
					require.Contains(t, r.Text(), "does not own")
				}
			} else {
				t.Log("the sandbox cannot chown: the other-owner case is not exercised here")
			}
		})
	}
}
