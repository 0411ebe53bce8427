package memory_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
)

func TestBuiltinShell(t *testing.T) {
	ctx := context.Background()
	c := sandbox.NewClient(memory.New())
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
		{sandbox.Command{Shell: "echo a b | wc -w; x=$(printf '%s' in); echo \"[$x]\""}, "2\n[in]\n", "", 0},
		{sandbox.Command{Shell: "nosuch arg"}, "", "nosuch: command not found\n", 127},
		{sandbox.Command{Args: []string{"nosuch"}}, "", "nosuch: command not found\n", 127},
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
	rt := memory.New()
	c := sandbox.NewClient(rt)
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
	c := sandbox.NewClient(memory.New())
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
	rt := memory.New()
	c := sandbox.NewClient(rt)
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

func newSandbox(t *testing.T) (*sandbox.Sandbox, *memory.Runtime) {
	t.Helper()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	sb, err := c.Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sb, rt
}

// run runs a shell line and returns stdout, stderr and the exit code.
func run(t *testing.T, sb *sandbox.Sandbox, line string) (string, string, int) {
	t.Helper()
	r, err := sb.Exec(context.Background(), sandbox.Command{Shell: line})
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return string(r.Stdout), string(r.Stderr), r.ExitCode
}

func TestShellSyntaxOverMemoryFiles(t *testing.T) {
	sb, _ := newSandbox(t)
	cases := []struct{ line, out string }{
		{`printf 'b\na\nb\n' > l.txt; sort -u < l.txt | head -n 1`, "a\n"},
		{`f() { echo "in f: $1"; }; f arg`, "in f: arg\n"},
		{`for i in 1 2 3; do printf '%s' "$i" >> n.txt; done; cat n.txt`, "123"},
		{`mkdir -p g/sub && touch g/a.go g/b.go g/sub/c.go && echo g/*.go`, "g/a.go g/b.go\n"},
		{`x=$(cd g && pwd); echo "${x#/home/}"`, "user/g\n"},
		{`if [ -d g ] && [ ! -e nope ]; then echo yes; fi`, "yes\n"},
		{`cat <<EOF
here $((1 + 2))
EOF`, "here 3\n"},
		{`echo "$(echo out; echo err >&2)" 2>/dev/null`, "out\n"},
		{`printf 'x\nneedle 1\n' > g/sub/c.go; grep -rn --null -F needle . | tr '\0' :`, "./g/sub/c.go:2:needle 1\n"},
		{`find g -mindepth 1 -printf '%y %P\n'`, "f a.go\nf b.go\nd sub\nf sub/c.go\n"},
		{`(cd g; tar -cf ../g.tar .) && mkdir x && tar -xf g.tar -C x && cat x/sub/c.go && ls x`, "x\nneedle 1\na.go\nb.go\nsub\n"},
		// What the Daytona adapter's exec wrapper runs: output files held on
		// descriptors 8 and 9, closed for the command itself, then base64.
		{`exec 8>o.txt 9>e.txt; { echo out; echo err >&2; } >&8 2>&9 8>&- 9>&-; cat o.txt e.txt; base64 o.txt`, "out\nerr\nb3V0Cg==\n"},
		{`printf '%080d' 0 | base64 | wc -l; printf 'hi' | base64 -w 0; echo aGkK | base64 -d`, "2\naGk=\nhi\n"},
	}
	for _, tc := range cases {
		out, errOut, code := run(t, sb, tc.line)
		if out != tc.out || code != 0 {
			t.Errorf("%q: out %q err %q exit %d; want %q", tc.line, out, errOut, code, tc.out)
		}
	}
	// A syntax error is the shell's exit 2, with the parser's message.
	if _, errOut, code := run(t, sb, `echo "unterminated`); code != 2 || !strings.Contains(errOut, "without closing quote") {
		t.Errorf("syntax error: exit %d, stderr %q", code, errOut)
	}
}

func TestSymlinksAndIdentity(t *testing.T) {
	sb, _ := newSandbox(t)
	ctx := context.Background()
	steps := []struct{ line, out string }{
		{`mkdir -p real/d && printf hi > real/d/f && ln -s real/d link && cat link/f`, "hi"},
		{`readlink link; readlink -f link/f; readlink -f link/missing`, "real/d\n/home/user/real/d/f\n/home/user/real/d/missing\n"},
		{`cd -P link && pwd && pwd -P`, "/home/user/real/d\n/home/user/real/d\n"},
		{`cd link && pwd && pwd -P`, "/home/user/link\n/home/user/real/d\n"},
		{`[ -L link ] && [ -d link ] && [ ! -L real ] && echo ok`, "ok\n"},
		{`ln -s /nowhere dangling; [ -e dangling ] || [ -L dangling ] && echo dangling`, "dangling\n"},
		{`find . -maxdepth 1 -name 'd*' -printf '%y%Y %p\n'`, "lN ./dangling\n"},
		{`[ real/d/f -ef link/f ] && echo same; [ real/d/f -ef dangling ] || echo different`, "same\ndifferent\n"},
	}
	for _, s := range steps {
		if out, errOut, code := run(t, sb, s.line); out != s.out || code != 0 {
			t.Errorf("%q: out %q err %q exit %d; want %q", s.line, out, errOut, code, s.out)
		}
	}
	// Inodes are stable across writes and renames, distinct between files,
	// and every file has one link.
	id := func(p string) string {
		out, errOut, code := run(t, sb, "stat -c '%d:%i %h' "+p)
		if code != 0 {
			t.Fatalf("stat %s: %s", p, errOut)
		}
		return out
	}
	before := id("real/d/f")
	if !strings.HasSuffix(before, " 1\n") {
		t.Errorf("link count: %q", before)
	}
	run(t, sb, "echo more >> real/d/f; echo new > real/d/f; mv real/d/f real/g")
	if after := id("real/g"); after != before {
		t.Errorf("inode changed across writes and a rename: %q then %q", before, after)
	}
	if other := id("link"); other == before {
		t.Errorf("two files share %q", other)
	}
	if _, errOut, code := run(t, sb, "ln real/g hard"); code == 0 || !strings.Contains(errOut, "hard links") {
		t.Errorf("hard link: exit %d, stderr %q", code, errOut)
	}
	// What the shell wrote, the file API reads.
	if b, err := sb.ReadFile(ctx, "real/g"); err != nil || string(b) != "new\n" {
		t.Errorf("ReadFile after shell writes: %q %v", b, err)
	}
}

func TestPermissionsHonoured(t *testing.T) {
	sb, _ := newSandbox(t)
	out, errOut, code := run(t, sb, `printf s > f && chmod 000 f; cat f; echo "$?"; [ -r f ] || echo unreadable; echo x > f; chmod -w f; [ -w f ] || echo readonly; chmod u+rw f; cat f`)
	if out != "1\nunreadable\nreadonly\ns" || code != 0 || !strings.Contains(errOut, "Permission denied") {
		t.Errorf("out %q err %q exit %d", out, errOut, code)
	}
}

func TestHandlersInsideShellLines(t *testing.T) {
	sb, rt := newSandbox(t)
	rt.Handle("python3", func(_ context.Context, c *memory.Call) int {
		fmt.Fprintf(c.Stdout, "ran %s in %s with X=%s\n", strings.Join(c.Args[1:], " "), c.Dir, c.Env["X"])
		return 3
	})
	out, _, code := run(t, sb, `mkdir -p w && cd w && X=1 python3 x.py | tr a A; echo "${PIPESTATUS:-}$?"`)
	if out != "rAn x.py in /home/user/w with X=1\n0\n" || code != 0 {
		t.Errorf("handler in a pipe: %q exit %d", out, code)
	}
	if out, _, code := run(t, sb, "command -v python3 cat cd; command -v nosuch || echo missing; type echo"); code != 0 ||
		out != "/usr/bin/python3\n/usr/bin/cat\ncd\nmissing\necho is a shell builtin\n" {
		t.Errorf("command -v: %q %d", out, code)
	}
	if out, _, code := run(t, sb, "python3 x.py"); code != 3 || !strings.HasPrefix(out, "ran x.py") {
		t.Errorf("handler exit status: %q %d", out, code)
	}
	// A script file in the sandbox runs through the same shell.
	run(t, sb, `printf 'echo "script $1"; exit 4\n' > s.sh && chmod +x s.sh`)
	if out, _, code := run(t, sb, "./s.sh arg"); out != "script arg\n" || code != 4 {
		t.Errorf("script file: %q %d", out, code)
	}
}

func TestShellHonoursTimeoutAndStdin(t *testing.T) {
	t.Parallel()
	sb, _ := newSandbox(t)
	ctx := context.Background()
	// The timeouts at once: each waits out its second.
	t.Run("Timeouts", func(t *testing.T) {
		for _, cmd := range []sandbox.Command{{Shell: "while :; do :; done"}, {Shell: "sleep 60 | cat"}, {Shell: "cat"}, {Args: []string{"cat"}}, {Args: []string{"head", "-c", "1"}}} {
			line := cmd.Shell + strings.Join(cmd.Args, " ")
			t.Run(line, func(t *testing.T) {
				t.Parallel()
				pr, pw := io.Pipe() // a stdin that never ends
				defer pw.Close()
				start := time.Now()
				cmd.Stdin, cmd.Timeout = pr, time.Second
				r, err := sb.Exec(ctx, cmd)
				took := time.Since(start)
				if err != nil || !r.TimedOut {
					t.Errorf("%q: %+v %v", line, r, err)
				}
				if took > 10*time.Second {
					t.Errorf("%q: returned after %v with a 1s timeout", line, took)
				}
			})
		}
	})
	// Stdin streams through pipes and builtins alike.
	r, err := sb.Exec(ctx, sandbox.Command{Shell: "read first; echo \"<$first>\"; cat | wc -l", Stdin: strings.NewReader("one\ntwo\nthree\n")})
	if err != nil || string(r.Stdout) != "<one>\n2\n" {
		t.Errorf("stdin: %q %q %v", r.Stdout, r.Stderr, err)
	}
}

func TestExecDirErrors(t *testing.T) {
	sb, _ := newSandbox(t)
	ctx := context.Background()
	run(t, sb, "touch file; mkdir -p real; ln -s real link")
	if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}, Dir: "missing"}); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("missing Dir: %v", err)
	}
	if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}, Dir: "file"}); !errors.Is(err, sandbox.ErrNotDirectory) {
		t.Errorf("Dir that is a file: %v", err)
	}
	if _, err := sb.Start(ctx, sandbox.Command{Args: []string{"true"}, Dir: "missing"}); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("Start in a missing Dir: %v", err)
	}
	if r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"pwd"}, Dir: "link"}); err != nil || string(r.Stdout) != "/home/user/link\n" {
		t.Errorf("Dir through a link: %q %v", r.Stdout, err)
	}
}

// The file API sees the links the shell makes, as a real provider's does.
func TestFileAPIFollowsLinks(t *testing.T) {
	sb, _ := newSandbox(t)
	ctx := context.Background()
	run(t, sb, "mkdir -p real/d && printf data > real/d/f && ln -s real/d dl && ln -s real/d/f fl")
	if b, err := sb.ReadFile(ctx, "fl"); err != nil || string(b) != "data" {
		t.Errorf("ReadFile through a file link: %q %v", b, err)
	}
	if b, err := sb.ReadFile(ctx, "dl/f"); err != nil || string(b) != "data" {
		t.Errorf("ReadFile through a directory link: %q %v", b, err)
	}
	if err := sb.WriteFile(ctx, "dl/new", []byte("n")); err != nil {
		t.Fatal(err)
	}
	if out, _, _ := run(t, sb, "cat real/d/new"); out != "n" {
		t.Errorf("WriteFile through a link landed elsewhere: %q", out)
	}
	list, err := sb.ReadDir(ctx, "dl")
	if err != nil || len(list) != 2 || list[0].Path != "/home/user/dl/f" {
		t.Errorf("ReadDir through a link: %+v %v", list, err)
	}
	if err := sb.Remove(ctx, "dl"); err != nil {
		t.Fatal(err)
	}
	if out, _, code := run(t, sb, "ls real/d"); code != 0 || out != "f\nnew\n" {
		t.Errorf("Remove of a link removed its target's files: %q", out)
	}
}

// Descriptors above 2 and set -C, which the interpreter lacks, work as in
// a POSIX shell for the forms scripts use.
func TestDescriptorsAndNoclobber(t *testing.T) {
	sb, _ := newSandbox(t)
	steps := []struct{ line, out string }{
		{`printf 'hello world' > f; exec 3< f; head -c 5 <&3; echo; exec 3<&-; cat <&3 2>/dev/null || echo closed`, "hello\nclosed\n"},
		{`exec 4<> g; printf abc >&4; printf de >&4; cat g`, "abcde"},
		{`printf 12345 > h; exec 4<> h; printf ab >&4; cat h`, "ab345"},
		{`set -C; { : > f; } 2>/dev/null || echo refused; : > new; set +C; : > f && echo allowed; cat f`, "refused\nallowed\n"},
		{`x=$(exec 3< missing 2>/dev/null || echo cannot); echo "$x"`, "cannot\n"},
		{`f() { false || return; echo not reached; }; f; echo "$?"`, "1\n"},
	}
	for _, s := range steps {
		if out, errOut, code := run(t, sb, s.line); out != s.out || code != 0 {
			t.Errorf("%q: out %q err %q exit %d; want %q", s.line, out, errOut, code, s.out)
		}
	}
}

// TestGrepContextAndRegex checks grep's -E, -i, -A, -B, -C and group
// separators against what GNU grep prints for the same input.
func TestGrepContextAndRegex(t *testing.T) {
	sb, _ := newSandbox(t)
	run(t, sb, `printf '1\nfoo\n3\n4\n5\n6\nFOO\n8\n' > g.txt && printf 'foo\n' > h.txt`)
	steps := []struct{ line, out string }{
		{`grep -n -A1 -B1 -i foo g.txt`, "1-1\n2:foo\n3-3\n--\n6-6\n7:FOO\n8-8\n"},
		{`grep -n -C1 -E 'f(o)+' g.txt`, "1-1\n2:foo\n3-3\n"},
		{`grep -n --context=1 -E 'f(o)+' g.txt`, "1-1\n2:foo\n3-3\n"},
		{`grep -n -A1 -m1 foo g.txt`, "2:foo\n3-3\n"},
		{`grep -H -n --null -B2 --no-group-separator -i foo g.txt | tr '\0' '|'`, "g.txt|1-1\ng.txt|2:foo\ng.txt|5-5\ng.txt|6-6\ng.txt|7:FOO\n"},
		{`grep -n -B1 -i -e 3 -e 4 g.txt`, "2-foo\n3:3\n4:4\n"},
		{`grep -A1 foo g.txt h.txt`, "g.txt:foo\ng.txt-3\n--\nh.txt:foo\n"},
		{`grep -c -A3 -i foo g.txt`, "2\n"},
	}
	for _, s := range steps {
		if out, errOut, code := run(t, sb, s.line); out != s.out || code != 0 {
			t.Errorf("%q: out %q err %q exit %d; want %q", s.line, out, errOut, code, s.out)
		}
	}
	if _, errOut, code := run(t, sb, `grep -E 'a(' g.txt`); code != 2 || errOut == "" {
		t.Errorf("an invalid pattern: exit %d, stderr %q; want 2 and a message", code, errOut)
	}
	if _, errOut, code := run(t, sb, `grep -A x foo g.txt`); code != 2 || !strings.Contains(errOut, "context") {
		t.Errorf("a bad context length: exit %d, stderr %q; want 2 and a message", code, errOut)
	}
}

// find's expression, grep's and tar's options as fsbackend's helper uses
// them.
func TestFindGrepTarOptions(t *testing.T) {
	sb, _ := newSandbox(t)
	run(t, sb, `mkdir -p w/.meta/tmp w/a && printf 'one\nneedle\n' > w/a/x.txt && printf 'needle too\n' > w/.meta/m && printf big > w/a/big.bin`)
	steps := []struct{ line, out string }{
		{`cd w && find . -path ./.meta -prune -o -type f \( -size +2c -a ! -name '*.bin' \) -printf '%P %n\n'`, "a/x.txt 1\n"},
		{`cd w && find . -path ./.meta -prune -o -type f -fprintf ../list './%P\n' && cat ../list`, "./a/big.bin\n./a/x.txt\n"},
		{`cd w && i=$(find a/x.txt -printf %i) && find . -inum "$i" -printf '%p\n'`, "./a/x.txt\n"},
		{`cd w && find . -name '*.txt' -exec cat {} +`, "one\nneedle\n"},
		{`cd w && grep -r -n --null --exclude-dir=.meta -e needle -- . | tr '\0' :`, "./a/x.txt:2:needle\n"},
		{`grep -H -n -D skip --label=./x -F -e needle < w/a/x.txt`, "./x:2:needle\n"},
		{`printf 'a\nb\na\n' | grep -c -x -F -e a`, "2\n"},
		{`cd w && printf './a/big.bin\n' > ../ex && tar -cf ../t.tar --no-wildcards --exclude=./.meta -X ../ex . && tar -tf ../t.tar`, "./\n./a/\n./a/x.txt\n"},
	}
	for _, s := range steps {
		if out, errOut, code := run(t, sb, s.line); out != s.out || code != 0 {
			t.Errorf("%q: out %q err %q exit %d; want %q", s.line, out, errOut, code, s.out)
		}
	}
}

// rm -r has the user's rights below the named directory too: an entry of
// a directory the user may not write stays, with the directories above it,
// and rm fails; the rest goes.
func TestRmRecursiveHasTheUsersRights(t *testing.T) {
	sb, _ := newSandbox(t)
	line := `mkdir -p r/sub r/ok && echo x > r/sub/f && echo y > r/ok/g && echo z > r/h && chmod 555 r/sub && rm -rf r`
	if _, errOut, code := run(t, sb, line); code != 1 || !strings.Contains(errOut, "Permission denied") {
		t.Fatalf("rm -rf over a 555 subdirectory: exit %d, stderr %q; want 1 and Permission denied", code, errOut)
	}
	out, errOut, code := run(t, sb, `find r | sort`)
	if want := "r\nr/sub\nr/sub/f\n"; out != want || code != 0 {
		t.Errorf("after rm -rf: %q (%q, exit %d); want %q", out, errOut, code, want)
	}
	if _, errOut, code := run(t, sb, `chmod 755 r/sub && rm -rf r && ! test -e r`); code != 0 {
		t.Errorf("rm -rf of the user's own tree: exit %d, stderr %q", code, errOut)
	}
}
