package eino_test

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/adk/filesystem"
	"github.com/cloudwego/eino/components/tool"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	eino "github.com/sandboxkit/sandbox/contrib/eino"
)

// TestBackendMapping checks how eino's requests map onto the file tools:
// Read's 1-based offset and "0 means to the end" limit, grep's context
// lines, type and glob filters, multiline refused, directories marked,
// and failures as *backend.Error matching the io/fs sentinels.
func TestBackendMapping(t *testing.T) {
	ctx := context.Background()
	b, _ := newFixed(t, providers()[0].client(t), eino.Options{})
	for p, c := range map[string]string{
		"src/main.go":   "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n",
		"src/util.py":   "def main():\n    print('hi')\n",
		"docs/guide.md": "# main\n",
	} {
		require.NoError(t, b.Write(ctx, &filesystem.WriteRequest{FilePath: p, Content: c}))
	}

	r, err := b.Read(ctx, &filesystem.ReadRequest{FilePath: "src/main.go", Offset: 3, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, "func main() {\n\tprintln(\"hi\")", r.Content)
	r, err = b.Read(ctx, &filesystem.ReadRequest{FilePath: "/src/main.go"})
	require.NoError(t, err)
	require.Equal(t, "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}", r.Content, "absolute paths are re-rooted; limit 0 reads to the end")
	r, err = b.Read(ctx, &filesystem.ReadRequest{FilePath: "src/main.go", Offset: 50})
	require.NoError(t, err)
	require.Equal(t, "", r.Content)

	ls, err := b.LsInfo(ctx, &filesystem.LsInfoRequest{Path: "/"})
	require.NoError(t, err)
	var names []string
	for _, fi := range ls {
		names = append(names, fi.Path)
	}
	require.Equal(t, []string{"docs/", "src/"}, names)
	ls, err = b.LsInfo(ctx, &filesystem.LsInfoRequest{Path: "src"})
	require.NoError(t, err)
	require.Len(t, ls, 2)
	require.Equal(t, "src/main.go", ls[0].Path)
	require.Equal(t, int64(45), ls[0].Size)
	require.NotEmpty(t, ls[0].ModifiedAt)

	m, err := b.GrepRaw(ctx, &filesystem.GrepRequest{Pattern: "print", AfterLines: 1})
	require.NoError(t, err)
	require.Equal(t, []filesystem.GrepMatch{
		{Path: "src/main.go", Line: 4, Content: "\tprintln(\"hi\")"},
		{Path: "src/main.go", Line: 5, Content: "}"},
		{Path: "src/util.py", Line: 2, Content: "    print('hi')"},
	}, m)
	m, err = b.GrepRaw(ctx, &filesystem.GrepRequest{Pattern: "MAIN", CaseInsensitive: true, FileType: "py"})
	require.NoError(t, err)
	require.Equal(t, []filesystem.GrepMatch{{Path: "src/util.py", Line: 1, Content: "def main():"}}, m)
	m, err = b.GrepRaw(ctx, &filesystem.GrepRequest{Pattern: "main", Glob: "src/*", FileType: "go"})
	require.NoError(t, err)
	require.Len(t, m, 2, "glob and type both apply")
	for _, x := range m {
		require.Equal(t, "src/main.go", x.Path)
	}
	_, err = b.GrepRaw(ctx, &filesystem.GrepRequest{Pattern: "a.b", EnableMultiline: true})
	var be *backend.Error
	require.ErrorAs(t, err, &be)
	require.Equal(t, backend.CodeInvalidArgument, be.Code)
	_, err = b.GrepRaw(ctx, &filesystem.GrepRequest{Pattern: "(unclosed"})
	require.ErrorAs(t, err, &be)
	require.Equal(t, backend.CodeInvalidArgument, be.Code)

	g, err := b.GlobInfo(ctx, &filesystem.GlobInfoRequest{Pattern: "*.{go,md}"})
	require.NoError(t, err)
	require.Len(t, g, 2)
	require.Equal(t, "docs/guide.md", g[0].Path)

	require.NoError(t, b.Edit(ctx, &filesystem.EditRequest{FilePath: "src/util.py", OldString: "hi", NewString: "ho"}))
	err = b.Edit(ctx, &filesystem.EditRequest{FilePath: "src/util.py", OldString: "absent", NewString: "x"})
	require.ErrorAs(t, err, &be)
	require.Equal(t, backend.CodeNoMatch, be.Code)

	_, err = b.Read(ctx, &filesystem.ReadRequest{FilePath: "nope.txt"})
	require.ErrorIs(t, err, fs.ErrNotExist)
	err = b.Write(ctx, &filesystem.WriteRequest{FilePath: "../out.txt", Content: "x"})
	require.ErrorIs(t, err, fs.ErrInvalid)
	require.ErrorContains(t, err, "../out.txt")
}

// TestNotesAndCaps: what eino's results cannot carry (more entries than
// shown, more matches than returned) reaches the model through the
// middleware.
func TestNotesAndCaps(t *testing.T) {
	ctx := context.Background()
	b, _ := newFixed(t, providers()[0].client(t), eino.Options{MaxEntries: 3, MaxGrepMatches: 2})
	for i := range 5 {
		require.NoError(t, b.Write(ctx, &filesystem.WriteRequest{FilePath: fmt.Sprintf("f%d.txt", i), Content: "match\n"}))
	}
	mw, err := eino.NewMiddleware(ctx, b, nil)
	require.NoError(t, err)
	run := toolRunner(t, mw)

	require.Equal(t, "f0.txt\nf1.txt\nf2.txt\n[2 more entries not shown (at most 3 are listed): narrow the path or pattern]", run("ls", `{}`))
	require.Equal(t, "f0.txt\nf1.txt\nf2.txt\n[2 more entries not shown (at most 3 are listed): narrow the path or pattern]", run("glob", `{"pattern":"*.txt"}`))
	require.Equal(t, "f0.txt:1:match\nf1.txt:1:match\n[results truncated at 2 matches: narrow the pattern, path or glob]", run("grep", `{"pattern":"match","output_mode":"content"}`))
}

// toolRunner returns a function that calls a tool of mw as an agent does:
// through the middleware's wrapper of the tool call.
func toolRunner(t *testing.T, mw adk.ChatModelAgentMiddleware) func(name, args string) string {
	ctx := context.Background()
	_, rc, err := mw.BeforeAgent(ctx, &adk.ChatModelAgentContext{})
	require.NoError(t, err)
	tools := map[string]tool.InvokableTool{}
	for _, tl := range rc.Tools {
		info, err := tl.Info(ctx)
		require.NoError(t, err)
		if it, ok := tl.(tool.InvokableTool); ok {
			tools[info.Name] = it
		}
	}
	return func(name, args string) string {
		t.Helper()
		it := tools[name]
		require.NotNil(t, it, name)
		ep, err := mw.WrapInvokableToolCall(ctx, func(ctx context.Context, a string, opts ...tool.Option) (string, error) {
			return it.InvokableRun(ctx, a, opts...)
		}, &adk.ToolContext{Name: name, CallID: "c"})
		require.NoError(t, err)
		out, err := ep(ctx, args)
		require.NoError(t, err)
		return out
	}
}

// TestOptionsAndConstructors: bad input is refused naming it.
func TestOptionsAndConstructors(t *testing.T) {
	_, err := eino.New(nil, eino.Options{})
	require.ErrorIs(t, err, sandbox.ErrInvalidArgument)
	_, err = eino.NewFromSandbox(nil, "", eino.Options{})
	require.ErrorIs(t, err, sandbox.ErrInvalidArgument)
	mgr := newManager(t, providers()[0].client(t))
	_, err = eino.New(mgr, eino.Options{MaxReadOutput: -1})
	require.ErrorIs(t, err, sandbox.ErrInvalidArgument)
	require.ErrorContains(t, err, "MaxReadOutput")
	_, err = eino.NewMiddleware(context.Background(), nil, nil)
	require.ErrorIs(t, err, sandbox.ErrInvalidArgument)

	// A session key of the wrong type in the adk session values is named.
	b, err := eino.New(mgr, eino.Options{})
	require.NoError(t, err)
	defer b.Close()
	_, err = b.LsInfo(context.Background(), &filesystem.LsInfoRequest{})
	require.ErrorIs(t, err, eino.ErrNoSessionKey)
	_, err = b.LsInfo(eino.WithSessionKey(context.Background(), "k"), &filesystem.LsInfoRequest{})
	require.NoError(t, err)
	bk, err := eino.New(mgr, eino.Options{Key: func(context.Context) (string, error) { return "", nil }})
	require.NoError(t, err)
	defer bk.Close()
	_, err = bk.LsInfo(context.Background(), &filesystem.LsInfoRequest{})
	require.ErrorIs(t, err, eino.ErrNoSessionKey)
	require.True(t, strings.Contains(err.Error(), eino.SessionKey))
}
