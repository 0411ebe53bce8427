package sandboxtest

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// Bad input: a path longer than PATH_MAX (4096 bytes with its NUL), a
// name element longer than NAME_MAX (255 bytes) and a rename of a
// directory into itself are refused alike on every provider, the memory
// fake included, with InvalidArgument naming the input and a message short
// enough to log (a long path is shown shortened), and nothing is created.

func init() {
	fileTests = append(fileTests, test{name: "PathLimits", fn: fileBadInput})
	execTests = append(execTests, test{name: "PathLimits", fn: execBadInput})
}

// maxErrorMessage is the longest error message a refusal of bad input may
// have: enough for the operation, the provider, the sandbox id, the
// shortened input and why.
const maxErrorMessage = 1024

// longPath returns a relative path under dir of n bytes made of short
// elements, so only its length is wrong.
func longPath(dir string, n int) string {
	var b strings.Builder
	b.WriteString(dir)
	for b.Len() < n-11 {
		b.WriteString("/abcdefghij")
	}
	for b.Len() < n {
		b.WriteString("x")
	}
	return b.String()
}

// badInputs are the paths every file call and Command.Dir must refuse.
func badInputs(dir string) map[string]string {
	return map[string]string{
		"path of 5000 bytes":          longPath(dir, 5000),
		"path of 1 MiB":               longPath(dir, 1<<20),
		"name of 300 bytes":           dir + "/" + strings.Repeat("n", 300),
		"name of 256 bytes, nested":   dir + "/ok/" + strings.Repeat("é", 128) + "/leaf",
		"absolute path of 4097 bytes": "/" + longPath("tmp", 4096),
	}
}

// checkBadInput reports what is wrong with err, the refusal of an input
// named name ("path", "dir", ...).
func checkBadInput(err error, name string) string {
	if msg := checkRow(err, sandbox.InvalidArgument, []error{sandbox.ErrInvalidArgument}, true); msg != "" {
		if len(msg) > 2*maxErrorMessage {
			msg = msg[:2*maxErrorMessage] + fmt.Sprintf("...(%d bytes)", len(msg))
		}
		return msg
	}
	text := err.Error()
	if len(text) > maxErrorMessage {
		return fmt.Sprintf("the message is %d bytes, over %d: %.300s...", len(text), maxErrorMessage, text)
	}
	if !strings.Contains(text, name) {
		return fmt.Sprintf("the message does not name the input %q: %s", name, text)
	}
	return ""
}

func fileBadInput(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	check(t, sb.MkdirAll(ctx, "bi/ok"))
	check(t, sb.WriteFile(ctx, "bi/file", []byte("keep me")))
	for what, p := range badInputs("bi") {
		t.Run(strings.ReplaceAll(what, " ", "_"), func(t *testing.T) {
			for _, op := range []fileOp{opReadFile, opDownload, opStat, opReadDir, opMkdirAll, opRemove, opUpload} {
				if msg := checkBadInput(portableOp(ctx, sb, op, p), "path"); msg != "" {
					t.Errorf("Sandbox.%s(%s): %s", op, what, msg)
				}
			}
			if msg := checkBadInput(sb.WriteFile(ctx, p, []byte("x")), "path"); msg != "" {
				t.Errorf("Sandbox.WriteFile(%s): %s", what, msg)
			}
			if msg := checkBadInput(sb.Rename(ctx, "bi/file", p), "new path"); msg != "" {
				t.Errorf("Sandbox.Rename(bi/file, %s): %s", what, msg)
			}
			if msg := checkBadInput(sb.Rename(ctx, p, "bi/moved"), "old path"); msg != "" {
				t.Errorf("Sandbox.Rename(%s, bi/moved): %s", what, msg)
			}
		})
	}
	t.Run("AtTheLimits", func(t *testing.T) {
		// A name of exactly 255 bytes (multi-byte characters count in
		// bytes) is a valid name everywhere.
		for _, name := range []string{strings.Repeat("m", 255), strings.Repeat("é", 127) + "x"} {
			p := "bi/ok/" + name
			data := []byte("at the limit")
			if err := sb.WriteFile(ctx, p, data); err != nil {
				t.Errorf("WriteFile of a %d-byte name: %v", len(name), err)
				continue
			}
			if got, err := sb.ReadFile(ctx, p); err != nil || string(got) != string(data) {
				t.Errorf("ReadFile of a %d-byte name: %q, %v", len(name), got, err)
			}
			if fi, err := sb.Stat(ctx, p); err != nil || fi.Name() != name {
				t.Errorf("Stat of a %d-byte name: %+v, %v", len(name), fi, err)
			}
		}
	})
	t.Run("RenameIntoItself", func(t *testing.T) {
		check(t, sb.MkdirAll(ctx, "bi/r/a/inner"))
		check(t, sb.WriteFile(ctx, "bi/r/a/inner/f", []byte("stay")))
		for _, to := range []string{"bi/r/a/b", "bi/r/a/inner/deeper", "bi/r/./a/../a/c", "bi/r/a/inner"} {
			err := sb.Rename(ctx, "bi/r/a", to)
			if msg := checkBadInput(err, "new path"); msg != "" {
				t.Errorf("Sandbox.Rename(bi/r/a, %s): %s", to, msg)
			}
		}
		// Absolute and relative spellings of the same directory.
		home := sb.Home()
		if err := sb.Rename(ctx, path.Join(home, "bi/r/a"), "bi/r/a/z"); checkBadInput(err, "new path") != "" {
			t.Errorf("Sandbox.Rename(%s, bi/r/a/z): %s", path.Join(home, "bi/r/a"), checkBadInput(err, "new path"))
		}
		// Nothing moved.
		if got, err := sb.ReadFile(ctx, "bi/r/a/inner/f"); err != nil || string(got) != "stay" {
			t.Errorf("bi/r/a/inner/f after the refused renames: %q, %v", got, err)
		}
		for _, p := range []string{"bi/r/a/b", "bi/r/a/c", "bi/r/a/z", "bi/r/a/inner/deeper"} {
			if _, err := sb.Stat(ctx, p); sandbox.CodeOf(err) != sandbox.NotFound {
				t.Errorf("Stat(%s) after the refused renames: %v, want NotFound", p, err)
			}
		}
		// Through a symbolic link among the new path's parents, which
		// only the provider can see: the same code.
		t.Run("ThroughLink", func(t *testing.T) {
			r, err := sb.Exec(ctx, sandbox.Command{Shell: "cd bi/r && ln -s a link && echo ok"})
			if err != nil || !strings.Contains(string(r.Stdout), "ok") {
				t.Skipf("no symbolic link here (ln -s: %v %q)", err, r.Stderr)
			}
			defer func() { _ = sb.Remove(ctx, "bi/r/link") }()
			err = sb.Rename(ctx, "bi/r/a", "bi/r/link/inner/x")
			if msg := checkRow(err, sandbox.InvalidArgument, []error{sandbox.ErrInvalidArgument}, true); msg != "" {
				t.Errorf("Sandbox.Rename(bi/r/a, bi/r/link/inner/x) with link -> a: %s", msg)
			}
			if got, err := sb.ReadFile(ctx, "bi/r/a/inner/f"); err != nil || string(got) != "stay" {
				t.Errorf("bi/r/a/inner/f after the refused rename: %q, %v", got, err)
			}
		})
		// A path renamed onto itself is a no-op that succeeds, as
		// rename(2) makes it, on every provider alike: a directory
		// (with a trailing slash, or spelled absolute on one side), a
		// file; a missing path is NotFound.
		selfRows := [][2]string{
			{"bi/r/a", "bi/r/a"},
			{"bi/r/a/", "bi/r/a"},
			{"bi/r/a", "bi/r/a/"},
			{"bi/r/a/./inner/..", "bi/r/a"},
			{path.Join(home, "bi/r/a"), "bi/r/a"},
			{"bi/r/a/inner/f", "bi/r/a/inner/f"},
		}
		for _, row := range selfRows {
			if err := sb.Rename(ctx, row[0], row[1]); err != nil {
				t.Errorf("Sandbox.Rename(%s, %s) onto itself: %v, want nil (a no-op, as rename(2))", row[0], row[1], err)
			}
		}
		if err := sb.Rename(ctx, "bi/r/missing", "bi/r/missing/"); sandbox.CodeOf(err) != sandbox.NotFound {
			t.Errorf("Sandbox.Rename(bi/r/missing, bi/r/missing/): %v, want NotFound", err)
		}
		if got, err := sb.ReadFile(ctx, "bi/r/a/inner/f"); err != nil || string(got) != "stay" {
			t.Errorf("bi/r/a/inner/f after the renames onto itself: %q, %v", got, err)
		}
		// A sibling whose name starts with the same bytes is not inside.
		check(t, sb.Rename(ctx, "bi/r/a", "bi/r/ab"))
		if got, err := sb.ReadFile(ctx, "bi/r/ab/inner/f"); err != nil || string(got) != "stay" {
			t.Errorf("bi/r/ab/inner/f after the rename to a sibling: %q, %v", got, err)
		}
	})
	// The refused calls created nothing and changed nothing.
	list, err := sb.ReadDir(ctx, "bi")
	check(t, err)
	var names []string
	for _, fi := range list {
		names = append(names, fi.Name())
	}
	if strings.Join(names, ",") != "file,ok,r" {
		t.Errorf("bi holds %v after the refused calls, want [file ok r]", names)
	}
	if got, err := sb.ReadFile(ctx, "bi/file"); err != nil || string(got) != "keep me" {
		t.Errorf("bi/file after the refused calls: %q, %v", got, err)
	}
}

func execBadInput(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	check(t, sb.MkdirAll(ctx, "bi"))
	// An argument, a Shell line or an environment string longer than
	// Linux execs (MAX_ARG_STRLEN, 128 KiB) is refused alike, naming it.
	big := strings.Repeat("a", 200<<10)
	for what, cmd := range map[string]sandbox.Command{
		"Args[1]": {Args: []string{"echo", big}},
		"Shell":   {Shell: "echo " + big},
		"env":     {Args: []string{"true"}, Env: map[string]string{"BIG": big}},
		// Each under the one-string limit, together over ARG_MAX.
		"arguments and environment": {Args: append([]string{"echo"}, slices.Repeat([]string{big[:100<<10]}, 16)...),
			Env: map[string]string{"A": big[:100<<10], "B": big[:100<<10], "C": big[:100<<10], "D": big[:100<<10]}},
	} {
		_, err := sb.Exec(ctx, cmd)
		if msg := checkBadInput(err, what); msg != "" {
			t.Errorf("Sandbox.Exec with a %d-byte %s: %s", len(big), what, msg)
		}
	}
	t.Run("InTheSandbox", func(t *testing.T) {
		// Programs in the sandbox meet the kernel's limits too: a name
		// over NAME_MAX is refused to mkdir and to a redirection, a
		// symbolic link's target over PATH_MAX to ln -s; at the limits
		// both are made.
		long, ok := strings.Repeat("n", 256), strings.Repeat("m", 255)
		target := strings.Repeat("t/", 2048) // 4096 bytes: over PATH_MAX with its NUL
		script := fmt.Sprintf("cd bi || exit 9\n"+
			"mkdir %[1]s 2>/dev/null && echo mkdir-over\n"+
			"true 2>/dev/null >%[1]s && echo create-over\n"+
			"ln -s %[3]s link-over 2>/dev/null && echo ln-over\n"+
			"mkdir %[2]s && echo mkdir-at\n"+
			"ln -s %[4]s link-at && echo ln-at\n"+
			"true\n", long, ok, target, target[:4095])
		r, err := sb.Exec(ctx, sandbox.Command{Shell: script})
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		if got := string(r.Stdout); got != "mkdir-at\nln-at\n" || r.ExitCode != 0 {
			t.Errorf("in the sandbox: exit %d, made %q, want only the names and target at the limits (mkdir-at, ln-at); stderr %.300q",
				r.ExitCode, strings.Fields(got), r.Stderr)
		}
	})
	for what, d := range badInputs("bi") {
		t.Run(strings.ReplaceAll(what, " ", "_"), func(t *testing.T) {
			for _, cmd := range []sandbox.Command{{Args: []string{"pwd"}, Dir: d}, {Shell: "pwd", Dir: d}} {
				_, err := sb.Exec(ctx, cmd)
				if msg := checkBadInput(err, "dir"); msg != "" {
					t.Errorf("Sandbox.Exec(Dir %s, shell %t): %s", what, cmd.Shell != "", msg)
				}
				if s.caps.Processes {
					p, err := sb.Start(ctx, cmd)
					if err == nil {
						_, _ = p.Wait(ctx)
						p.Close()
					}
					if msg := checkBadInput(err, "dir"); msg != "" {
						t.Errorf("Sandbox.Start(Dir %s, shell %t): %s", what, cmd.Shell != "", msg)
					}
				}
			}
		})
	}
}
