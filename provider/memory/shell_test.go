package memory_test

import (
	"context"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
)

func TestBuiltinShell(t *testing.T) {
	ctx := context.Background()
	c, _ := memory.NewClient()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		cmd      sandbox.Command
		out, err string
		code     int
	}{
		{sandbox.Command{Shell: `echo "a  b" 'c $X' $X; echo -n z`, Env: map[string]string{"X": "x"}}, "a  b c $X x\nz", "", 0},
		{sandbox.Command{Shell: "false || echo recovered && echo chained"}, "recovered\nchained\n", "", 0},
		{sandbox.Command{Shell: "false && echo skipped; echo $?"}, "1\n", "", 0},
		{sandbox.Command{Shell: "echo to-err 1>&2; echo x > f.txt; cat < f.txt; echo y >> f.txt; cat f.txt"}, "x\nx\ny\n", "to-err\n", 0},
		{sandbox.Command{Args: []string{"sh", "-c", `echo "$0:$1:$2"`, "prog", "a b", "c"}}, "prog:a b:c\n", "", 0},
		{sandbox.Command{Shell: "echo a | cat"}, "", "sh: unsupported shell syntax \"|\"\n", 2},
		{sandbox.Command{Shell: "nosuch arg"}, "", "sh: 1: nosuch: not found\n", 127},
		{sandbox.Command{Shell: `echo "unterminated`}, "", "sh: unterminated double quote\n", 2},
		{sandbox.Command{Shell: "exit 300"}, "", "", 44},
	}
	for _, tc := range cases {
		r, err := sb.Exec(ctx, tc.cmd)
		if err != nil {
			t.Fatalf("%+v: %v", tc.cmd, err)
		}
		if string(r.Stdout) != tc.out || string(r.Stderr) != tc.err || r.ExitCode != tc.code {
			t.Errorf("%q %q: got out %q err %q code %d; want %q %q %d", tc.cmd.Shell, tc.cmd.Args, r.Stdout, r.Stderr, r.ExitCode, tc.out, tc.err, tc.code)
		}
	}
}

func TestHandlerFiles(t *testing.T) {
	ctx := context.Background()
	c, rt := memory.NewClient()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rt.Handle("tidy", func(_ context.Context, c *memory.Call) int {
		if err := c.Files.MkdirAll("out/deep"); err != nil {
			return 1
		}
		if err := c.Files.Remove("junk"); err != nil {
			return 2
		}
		if fi, err := c.Files.Stat("out/deep"); err != nil || !fi.IsDir() {
			return 3
		}
		return 0
	})
	if err := sb.WriteFile(ctx, "junk/a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"tidy"}})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("handler: %v %v", r, err)
	}
	if _, err := sb.Stat(ctx, "junk/a"); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("Remove through Files left junk: %v", err)
	}
}

func TestRelativePathsFollowDir(t *testing.T) {
	ctx := context.Background()
	c, _ := memory.NewClient()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "sub/f.txt", []byte("in sub")); err != nil {
		t.Fatal(err)
	}
	r, err := sb.Exec(ctx, sandbox.Command{Shell: "cat f.txt; echo made > g.txt", Dir: "sub"})
	if err != nil || string(r.Stdout) != "in sub" {
		t.Fatalf("cat relative to Dir: %q %q %v", r.Stdout, r.Stderr, err)
	}
	if b, err := sb.ReadFile(ctx, "sub/g.txt"); err != nil || string(b) != "made\n" {
		t.Fatalf("redirect relative to Dir: %q %v", b, err)
	}
}

func TestEmptyScriptAndListWhileDestroying(t *testing.T) {
	ctx := context.Background()
	c, rt := memory.NewClient()
	var ids []string
	for range 3 {
		sb, err := c.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"k": "v"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID())
	}
	sb, _ := c.Attach(ctx, ids[0])
	for _, cmd := range []sandbox.Command{{Args: []string{"sh", "-c", ""}}, {Shell: "  "}} {
		if r, err := sb.Exec(ctx, cmd); err != nil || r.ExitCode != 0 {
			t.Errorf("empty script %+v: %v %v", cmd, r, err)
		}
	}
	for in, err := range c.List(ctx, sandbox.ListOptions{Labels: map[string]string{"k": "v"}, PageSize: 1}) {
		if err != nil {
			t.Fatalf("List while destroying: %v", err)
		}
		if err := rt.Destroy(ctx, in.ID); err != nil {
			t.Fatal(err)
		}
	}
	if rt.Live() != 0 {
		t.Fatalf("%d sandboxes left after destroying every listed one", rt.Live())
	}
}
