package sandbox_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// TestPathLimitsRefusedBeforeTheProvider: a path over PATH_MAX or a name
// over NAME_MAX is refused by the portable layer with InvalidArgument
// naming the input and a short message, and the provider is never called
// (the memory fake served a 1 MiB path, and spun for minutes on
// MkdirAll of one).
func TestPathLimitsRefusedBeforeTheProvider(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb, rt := newSandbox(t, sandbox.CreateOptions{})
	huge := strings.Repeat("abcdefgh/", 1<<20/9)
	name300 := "d/" + strings.Repeat("n", 300)
	before := len(rt.Calls())
	for _, p := range []string{huge, name300, "/" + strings.Repeat("a/", 2048)} {
		errs := map[string]error{}
		errs["WriteFile"] = sb.WriteFile(ctx, p, []byte("x"))
		_, errs["ReadFile"] = sb.ReadFile(ctx, p)
		_, errs["Stat"] = sb.Stat(ctx, p)
		_, errs["ReadDir"] = sb.ReadDir(ctx, p)
		errs["MkdirAll"] = sb.MkdirAll(ctx, p)
		errs["Remove"] = sb.Remove(ctx, p)
		errs["Rename from"] = sb.Rename(ctx, p, "x")
		errs["Rename to"] = sb.Rename(ctx, "x", p)
		_, errs["Exec dir"] = sb.Exec(ctx, sandbox.Command{Args: []string{"pwd"}, Dir: p})
		for op, err := range errs {
			if sandbox.CodeOf(err) != sandbox.InvalidArgument || !errors.Is(err, sandbox.ErrInvalidArgument) {
				t.Errorf("%s(%d-byte path): %v, want InvalidArgument", op, len(p), err)
				continue
			}
			msg := err.Error()
			if len(msg) > 400 {
				t.Errorf("%s(%d-byte path): message of %d bytes: %.300s", op, len(p), len(msg), msg)
			}
			want := "invalid path"
			switch op {
			case "Rename from":
				want = "invalid old path"
			case "Rename to":
				want = "invalid new path"
			case "Exec dir":
				want = "invalid dir"
			}
			if !strings.Contains(msg, want) || !strings.Contains(msg, "bytes") {
				t.Errorf("%s: message %q does not name the input (%q) and its size", op, msg, want)
			}
		}
	}
	if got := rt.Calls()[before:]; len(got) != 0 {
		t.Errorf("the provider was called %d times for refused paths: %v", len(got), got[0])
	}
	// At the limits, a path is served.
	ok := "d/" + strings.Repeat("m", 255)
	if err := sb.WriteFile(ctx, ok, []byte("y")); err != nil {
		t.Fatalf("a 255-byte name: %v", err)
	}
}

// TestMemoryRefusesWhatLinuxRefuses: the memory fake, called straight
// (as drivers' tests and the shell do), refuses over-long paths and names
// with InvalidArgument as Linux does with ENAMETOOLONG, instead of
// serving them.
func TestMemoryRefusesWhatLinuxRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb, rt := newSandbox(t, sandbox.CreateOptions{})
	long := "/home/user/" + strings.Repeat("n", 256)
	deep := "/home/user/" + strings.Repeat("abc/", 1100)
	for _, p := range []string{long, deep} {
		if err := rt.MkdirAll(ctx, sb.ID(), p); sandbox.CodeOf(err) != sandbox.InvalidArgument || len(err.Error()) > 400 {
			t.Errorf("MkdirAll(%d bytes) on the runtime: %v", len(p), err)
		}
		if err := rt.Upload(ctx, sb.ID(), p, strings.NewReader("x")); sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("Upload(%d bytes) on the runtime: %v", len(p), err)
		}
		if err := rt.Rename(ctx, sb.ID(), "/home/user", p); sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("Rename(to %d bytes) on the runtime: %v", len(p), err)
		}
	}
	// Its shell too: mkdir of a 256-byte name fails as coreutils' does.
	r, err := sb.Exec(ctx, sandbox.Command{Shell: "mkdir " + strings.Repeat("n", 256) + "; echo $?"})
	if err != nil || !strings.Contains(string(r.Stderr), "too long") || strings.TrimSpace(string(r.Stdout)) == "0" {
		t.Errorf("mkdir of a 256-byte name in the memory shell: %+v, %v", r, err)
	}
	_ = memory.Home
}

// TestRenameIntoItself: moving a directory below itself is InvalidArgument
// (it was Internal on local), decided from the cleaned paths.
func TestRenameIntoItself(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb, _ := newSandbox(t, sandbox.CreateOptions{})
	if err := sb.MkdirAll(ctx, "a/b"); err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{"a/b/c", "a/x", "./a/../a/y", sb.Home() + "/a/b"} {
		err := sb.Rename(ctx, "a", to)
		if sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "new path") {
			t.Errorf("Rename(a, %s): %v, want InvalidArgument naming the new path", to, err)
		}
	}
	// A sibling sharing its first bytes is not inside it.
	if err := sb.Rename(ctx, "a", "ab"); err != nil {
		t.Errorf("Rename(a, ab): %v", err)
	}
}

// TestErrorMessageBounded: an *Error about a long path shows it shortened
// however many times the cause repeats it, and a cause of any length is
// cut, so a message never grows with the input.
func TestErrorMessageBounded(t *testing.T) {
	t.Parallel()
	p := "/" + strings.Repeat("p", 1<<20)
	e := &sandbox.Error{Op: "stat", Provider: "x", Path: p, Code: sandbox.Internal,
		Err: errors.New("x: stat " + p + ": " + p + ": failed")}
	if msg := e.Error(); len(msg) > 1024 || !strings.Contains(msg, "(1048577 bytes)") || !strings.HasSuffix(msg, ": failed") {
		t.Errorf("message of %d bytes: %.300s", len(msg), msg)
	}
	e = &sandbox.Error{Op: "exec", Code: sandbox.Internal, Err: errors.New(strings.Repeat("e", 1<<20))}
	if msg := e.Error(); len(msg) > 9<<10 || !strings.Contains(msg, "(1048576 bytes)") {
		t.Errorf("message of %d bytes: %.300s", len(msg), msg)
	}
	if e.Path != "" || len(e.Err.Error()) != 1<<20 {
		t.Error("the fields lost their values")
	}
}

// TestFSViewLongNames: the io/fs view refuses a name over the limits with
// a PathError whose message stays short.
func TestFSViewLongNames(t *testing.T) {
	t.Parallel()
	sb, _ := newSandbox(t, sandbox.CreateOptions{})
	fsys := sb.FS(context.Background())
	for _, name := range []string{strings.Repeat("x", 1<<20), strings.Repeat("d/", 3000) + "f"} {
		_, err := fs.Stat(fsys, name)
		if !errors.Is(err, fs.ErrInvalid) || len(err.Error()) > 600 {
			t.Errorf("Stat(%d-byte name): %d-byte error %.300s", len(name), len(err.Error()), err)
		}
		_, err = fs.ReadFile(fsys, name)
		if !errors.Is(err, fs.ErrInvalid) || len(err.Error()) > 600 {
			t.Errorf("ReadFile(%d-byte name): %d-byte error %.300s", len(name), len(err.Error()), err)
		}
	}
}

// TestArgumentLimits: an argument, Shell line or environment string longer
// than Linux execs (MAX_ARG_STRLEN) is InvalidArgument naming it, with a
// short message that never shows an env value, on every provider (local
// ran it and answered exit 127 "argument list too long"; memory ran it).
func TestArgumentLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb, rt := newSandbox(t, sandbox.CreateOptions{})
	big := strings.Repeat("a", 128<<10)
	before := len(rt.Calls())
	for what, cmd := range map[string]sandbox.Command{
		"Args[1]":          {Args: []string{"echo", big}},
		"Args[0]":          {Args: []string{big}},
		"Shell":            {Shell: "echo " + big},
		"env value":        {Args: []string{"true"}, Env: map[string]string{"BIG": big}},
		"secret env value": {Args: []string{"true"}, SecretEnv: map[string]string{"TOKEN": "s3cr3t" + big}},
	} {
		_, err := sb.Exec(ctx, cmd)
		if sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), what) || len(err.Error()) > 400 || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s of %d bytes: %.300v", what, len(big), err)
		}
	}
	if got := rt.Calls()[before:]; len(got) != 0 {
		t.Errorf("the provider was called %d times", len(got))
	}
	// One byte less is run.
	r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"echo", big[:128<<10-1]}})
	if err != nil || len(r.Stdout) != 128<<10 {
		t.Errorf("an argument at the limit: %v", err)
	}
}
