package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// The error table: the same bad input gets the same Code and sentinel on
// every provider, through the portable Sandbox. The same rows straight on
// the provider's Runtime are drivertest's Codes (run as the Driver group),
// so a driver that answers with the wrong code fails by itself rather than
// being papered over by the portable layer.

func init() {
	fileTests = append(fileTests, test{name: "ErrorTable", fn: fileErrorTable,
		cases: []string{"Unreadable", "Unreadable/File", "Unreadable/InClosedDirectory", "ReadOnly"}})
	execTests = append(execTests, test{name: "ErrorTable", fn: execErrorTable})
}

// readOnlyDir is the directory the read-only row writes into unless the
// harness names another (Harness.ReadOnlyDir).
const readOnlyDir = "/usr"

// fileOp is one file operation, done through the portable Sandbox or
// through the portable Sandbox.
type fileOp string

const (
	opReadFile fileOp = "ReadFile"
	opDownload fileOp = "Download"
	opStat     fileOp = "Stat"
	opReadDir  fileOp = "ReadDir"
	opMkdirAll fileOp = "MkdirAll"
	opRemove   fileOp = "Remove"
	opUpload   fileOp = "Upload"
)

// errRow is one row of the table: op on path (relative to the home unless
// absolute) must fail with code and match every sentinel.
type errRow struct {
	op        fileOp
	path      string
	code      sandbox.Code
	sentinels []error
}

var (
	notFound    = []error{sandbox.ErrNotFound, fs.ErrNotExist}
	isDirectory = []error{sandbox.ErrIsDirectory}
	notDir      = []error{sandbox.ErrNotDirectory}
	denied      = []error{sandbox.ErrPermission, fs.ErrPermission}
)

// portableOp runs op on p through sb.
func portableOp(ctx context.Context, sb *sandbox.Sandbox, op fileOp, p string) error {
	switch op {
	case opReadFile:
		_, err := sb.ReadFile(ctx, p)
		return err
	case opDownload:
		rc, err := sb.Download(ctx, p)
		if err == nil {
			_, err = io.Copy(io.Discard, rc)
			rc.Close()
		}
		return err
	case opStat:
		_, err := sb.Stat(ctx, p)
		return err
	case opReadDir:
		_, err := sb.ReadDir(ctx, p)
		return err
	case opMkdirAll:
		return sb.MkdirAll(ctx, p)
	case opRemove:
		return sb.Remove(ctx, p)
	case opUpload:
		return sb.Upload(ctx, p, strings.NewReader("error table"))
	}
	panic("unknown op " + op)
}

// checkRow reports whether err has the row's code and sentinels; portable
// errors must also be a *sandbox.Error.
func checkRow(err error, code sandbox.Code, sentinels []error, portable bool) string {
	if err == nil {
		return fmt.Sprintf("succeeded, want %v", code)
	}
	if got := sandbox.CodeOf(err); got != code {
		return fmt.Sprintf("code %v, want %v (error: %v)", got, code, err)
	}
	var se *sandbox.Error
	if portable && !errors.As(err, &se) {
		return fmt.Sprintf("error %v (%T) is not a *sandbox.Error", err, err)
	}
	for _, s := range sentinels {
		if !errors.Is(err, s) {
			return fmt.Sprintf("error %v does not match %v", err, s)
		}
	}
	return ""
}

func fileErrorTable(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	check(t, sb.MkdirAll(ctx, "et/dir/sub"))
	check(t, sb.WriteFile(ctx, "et/file", []byte("keep me")))
	rows := []errRow{
		// A missing file.
		{opReadFile, "et/missing", sandbox.NotFound, notFound},
		{opDownload, "et/missing", sandbox.NotFound, notFound},
		{opStat, "et/missing", sandbox.NotFound, notFound},
		{opRemove, "et/missing", sandbox.NotFound, notFound},
		{opReadDir, "et/missing", sandbox.NotFound, notFound},
		{opReadFile, "et/nodir/missing", sandbox.NotFound, notFound},
		// A directory where a file is expected.
		{opReadFile, "et/dir", sandbox.FailedPrecondition, isDirectory},
		{opDownload, "et/dir", sandbox.FailedPrecondition, isDirectory},
		{opUpload, "et/dir", sandbox.FailedPrecondition, isDirectory},
		// A file where a directory is expected, also as a parent.
		{opReadDir, "et/file", sandbox.FailedPrecondition, notDir},
		{opMkdirAll, "et/file", sandbox.FailedPrecondition, notDir},
		{opMkdirAll, "et/file/sub", sandbox.FailedPrecondition, notDir},
		{opUpload, "et/file/x", sandbox.FailedPrecondition, notDir},
	}
	for _, row := range rows {
		name := fmt.Sprintf("%s(%s)", row.op, row.path)
		t.Run(name, func(t *testing.T) {
			if msg := checkRow(portableOp(ctx, sb, row.op, row.path), row.code, row.sentinels, true); msg != "" {
				t.Errorf("Sandbox.%s(%q): %s", row.op, row.path, msg)
			}
		})
	}
	// The failed calls changed nothing.
	if got, err := sb.ReadFile(ctx, "et/file"); err != nil || string(got) != "keep me" {
		t.Errorf("et/file after the failed calls: %q, %v", got, err)
	}
	if fi, err := sb.Stat(ctx, "et/dir/sub"); err != nil || !fi.IsDir() {
		t.Errorf("et/dir/sub after the failed calls: %+v, %v", fi, err)
	}

	t.Run("ControlCharacters", func(t *testing.T) {
		for _, p := range []string{"et/a\x00b", "et/a\x01b", "et/a\nb", "et/a\rb", "et/\x1b[2J", "et/a\x7fb"} {
			for _, op := range []fileOp{opReadFile, opDownload, opStat, opReadDir, opMkdirAll, opRemove, opUpload} {
				err := portableOp(ctx, sb, op, p)
				if msg := checkRow(err, sandbox.InvalidArgument, []error{sandbox.ErrInvalidArgument}, true); msg != "" {
					t.Errorf("Sandbox.%s(%q): %s", op, p, msg)
				}
			}
		}
		err := sb.Rename(ctx, "et/file", "et/a\x00b")
		if msg := checkRow(err, sandbox.InvalidArgument, []error{sandbox.ErrInvalidArgument}, true); msg != "" {
			t.Errorf("Sandbox.Rename to a NUL path: %s", msg)
		}
	})

	t.Run("Unreadable", func(t *testing.T) {
		if reason, ok := s.h.Skip["Files/ErrorTable/Unreadable"]; ok {
			t.Skip(reason)
		}
		// A file the sandbox's user may not read (mode 000), and one in a
		// directory it may not search: the file methods have the user's
		// rights, so reading them is PermissionDenied, as cat is refused.
		check(t, sb.WriteFile(ctx, "et/unreadable", []byte("secret")))
		check(t, sb.WriteFile(ctx, "et/closed/f", []byte("secret")))
		r := must[*sandbox.Result](t, "Exec chmod")(sb.Exec(ctx, sandbox.Command{Args: []string{"chmod", "000", "et/unreadable", "et/closed"}}))
		if r.ExitCode != 0 {
			t.Fatalf("chmod 000: exit %d, %s", r.ExitCode, r.Stderr)
		}
		defer sb.Exec(ctx, sandbox.Command{Args: []string{"chmod", "755", "et/closed"}}) //nolint:errcheck // best effort, so the tree can be removed
		for name, p := range map[string]string{"File": "et/unreadable", "InClosedDirectory": "et/closed/f"} {
			t.Run(name, func(t *testing.T) {
				if reason, ok := s.h.Skip["Files/ErrorTable/Unreadable/"+name]; ok {
					t.Skip(reason)
				}
				// Where the sandbox's own commands can read it (root, say)
				// there is nothing to test.
				r := must[*sandbox.Result](t, "Exec cat")(sb.Exec(ctx, sandbox.Command{Args: []string{"cat", p}}))
				if r.ExitCode == 0 {
					t.Skipf("the sandbox's commands can read %s here: nothing to test", p)
				}
				for _, op := range []fileOp{opReadFile, opDownload} {
					if msg := checkRow(portableOp(ctx, sb, op, p), sandbox.PermissionDenied, denied, true); msg != "" {
						t.Errorf("Sandbox.%s(%q): %s", op, p, msg)
					}
				}
			})
		}
	})

	t.Run("ReadOnly", func(t *testing.T) {
		if reason, ok := s.h.Skip["Files/ErrorTable/ReadOnly"]; ok {
			t.Skip(reason)
		}
		dir := s.h.ReadOnlyDir
		if dir == "" {
			dir = readOnlyDir
		}
		name := "sandboxtest-ro-" + randHex(4)
		// The place must be read-only for the sandbox's own commands too:
		// where they can write it (root at L1, say) there is nothing to test.
		r := must[*sandbox.Result](t, "Exec test -w")(sb.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `test -d "$1" && ! test -w "$1"`, "sh", dir}}))
		if r.ExitCode != 0 {
			t.Skipf("%s is not a read-only directory for the sandbox's commands here (test -d && ! test -w exited %d)", dir, r.ExitCode)
		}
		for _, op := range []fileOp{opUpload, opMkdirAll} {
			p := path.Join(dir, name)
			if msg := checkRow(portableOp(ctx, sb, op, p), sandbox.PermissionDenied, denied, true); msg != "" {
				t.Errorf("Sandbox.%s(%q): %s", op, p, msg)
			}
		}
		// Nothing was created, as the sandbox's commands see it.
		r = must[*sandbox.Result](t, "Exec test -e")(sb.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `test -e "$1"`, "sh", path.Join(dir, name)}}))
		if r.ExitCode == 0 {
			t.Errorf("%s exists after the refused writes", path.Join(dir, name))
		}
	})
}

func execErrorTable(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	check(t, sb.WriteFile(ctx, "et/file", []byte("x")))
	rows := []struct {
		dir       string
		code      sandbox.Code
		sentinels []error
	}{
		{"et/missing", sandbox.NotFound, notFound},
		{"et/file", sandbox.FailedPrecondition, notDir},
	}
	for _, row := range rows {
		t.Run("Dir("+row.dir+")", func(t *testing.T) {
			for _, shell := range []bool{false, true} {
				cmd := sandbox.Command{Args: []string{"pwd"}, Dir: row.dir}
				if shell {
					cmd = sandbox.Command{Shell: "pwd", Dir: row.dir}
				}
				_, err := sb.Exec(ctx, cmd)
				if msg := checkRow(err, row.code, row.sentinels, true); msg != "" {
					t.Errorf("Sandbox.Exec(%+v): %s", cmd, msg)
				}
				if s.caps.Processes {
					p, err := sb.Start(ctx, cmd)
					if err == nil {
						_, _ = p.Wait(ctx)
						p.Close()
					}
					if msg := checkRow(err, row.code, row.sentinels, true); msg != "" {
						t.Errorf("Sandbox.Start(%+v): %s", cmd, msg)
					}
				}
			}
		})
	}
	t.Run("ControlCharacters", func(t *testing.T) {
		for _, d := range []string{"et/a\x00b", "et/a\nb", "et/\x1b[2J"} {
			_, err := sb.Exec(ctx, sandbox.Command{Args: []string{"pwd"}, Dir: d})
			if msg := checkRow(err, sandbox.InvalidArgument, []error{sandbox.ErrInvalidArgument}, true); msg != "" {
				t.Errorf("Sandbox.Exec(Dir %q): %s", d, msg)
			}
		}
	})
}
