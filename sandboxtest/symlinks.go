package sandboxtest

import (
	"context"
	"errors"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// Reading through a symbolic link: the file methods follow a link inside
// the sandbox's own file system, as the sandbox's programs do, and never
// hand back the link's target text as if it were the file's content. A
// link to a file reads that file (an absolute target, a relative one
// resolved against the link's directory, a link in the middle of a path);
// a dangling link is NotFound; a link to a directory is "is a directory";
// a loop of links is an error.

func init() {
	fileTests = append(fileTests, test{name: "ReadThroughSymlink", fn: readThroughSymlink})
}

func readThroughSymlink(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	d := sb.Home() + "/links-" + randHex(4)
	const body = "the target's bytes\n"
	r := must[*sandbox.Result](t, "Exec ln")(sb.Exec(ctx, sandbox.Command{Shell: `set -e
mkdir -p "$D/sub" "$D/other"
printf '%s\n' "the target's bytes" > "$D/sub/f"
ln -s "$D/sub/f" "$D/abs"
ln -s sub/f "$D/rel"
ln -s ../sub/f "$D/other/up"
ln -s sub "$D/dirlink"
ln -s missing-file "$D/dangling"
ln -s "$D/no-such-dir/f" "$D/dangling-abs"
ln -s loop-b "$D/loop-a"
ln -s loop-a "$D/loop-b"`, Env: map[string]string{"D": d}}))
	if r.ExitCode != 0 {
		t.Fatalf("setting up the links: exit %d, stderr %q", r.ExitCode, r.Stderr)
	}
	for _, name := range []string{"abs", "rel", "other/up", "dirlink/f"} {
		p := d + "/" + name
		got, err := sb.ReadFile(ctx, p)
		if err != nil || string(got) != body {
			t.Errorf("ReadFile(%s) = %q, %v; want the target's content %q", p, got, err, body)
		}
	}
	for _, name := range []string{"dangling", "dangling-abs"} {
		p := d + "/" + name
		got, err := sb.ReadFile(ctx, p)
		if err == nil {
			t.Errorf("ReadFile(%s), a dangling link, = %q, nil; want NotFound", p, got)
			continue
		}
		wantCode(t, err, sandbox.NotFound, sandbox.ErrNotFound)
	}
	got, err := sb.ReadFile(ctx, d+"/dirlink")
	if err == nil {
		t.Errorf("ReadFile(%s/dirlink), a link to a directory, = %q, nil; want is a directory", d, got)
	} else if !errors.Is(err, sandbox.ErrIsDirectory) {
		t.Errorf("ReadFile(%s/dirlink), a link to a directory: %v; want ErrIsDirectory", d, err)
	}
	got, err = sb.ReadFile(ctx, d+"/loop-a")
	t.Logf("a loop of links reads as: %v (code %v)", err, sandbox.CodeOf(err))
	if err == nil {
		t.Errorf("ReadFile(%s/loop-a), a loop of links, = %q, nil; want an error", d, got)
	} else if sandbox.CodeOf(err) == sandbox.NotFound || errors.Is(err, sandbox.ErrIsDirectory) {
		t.Errorf("ReadFile(%s/loop-a), a loop of links: %v (code %v); want a loop error, not missing or a directory", d, err, sandbox.CodeOf(err))
	}
	// The sandbox's own programs agree.
	if r := sh(ctx, t, sb, `cat "`+d+`/rel"`); string(r.Stdout) != body {
		t.Errorf("the sandbox's cat read %q through the link", r.Stdout)
	}
}
