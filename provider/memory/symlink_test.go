package memory_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// Stat and ReadDir follow symbolic links as os.Stat and os.ReadDir do: a
// dangling link (even through a missing directory) and a loop are errors,
// never the link itself; Stat of a link to a file describes the file and
// reports the link's target.
func TestStatAndReadDirFollowLinks(t *testing.T) {
	ctx := context.Background()
	c := sandbox.NewClient(memory.New())
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	r, err := sb.Exec(ctx, sandbox.Command{Shell: `set -e
printf 'twelve bytes' > f
ln -s f link
ln -s /no/such/dir/f dangling
ln -s /no/such/dir dirdangling
ln -s loop-b loop-a
ln -s loop-a loop-b`})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("setup: %v, %+v", err, r)
	}
	fi, err := sb.Stat(ctx, "link")
	if err != nil || fi.Size != 12 || !fi.Mode.IsRegular() || fi.LinkTarget != "f" {
		t.Errorf("Stat(link) = %+v, %v; want the 12-byte file with LinkTarget f", fi, err)
	}
	for _, p := range []string{"dangling", "dirdangling"} {
		if fi, err := sb.Stat(ctx, p); sandbox.CodeOf(err) != sandbox.NotFound {
			t.Errorf("Stat(%s) = %+v, %v; want NotFound", p, fi, err)
		}
	}
	if fi, err := sb.Stat(ctx, "loop-a"); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("Stat(loop-a) = %+v, %v; want InvalidArgument (a loop of links)", fi, err)
	}
	if list, err := sb.ReadDir(ctx, "dirdangling"); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("ReadDir(dirdangling) = %v, %v; want NotFound", list, err)
	}
}

// TestSymlinkTargetOverPathMax: ln -s of a target over PATH_MAX fails as
// symlink(2) does on Linux (ENAMETOOLONG), and creates nothing; a target
// of PATH_MAX bytes less the NUL is made.
func TestSymlinkTargetOverPathMax(t *testing.T) {
	ctx := context.Background()
	c := sandbox.NewClient(memory.New())
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	target := strings.Repeat("t/", 2048)
	r, err := sb.Exec(ctx, sandbox.Command{Shell: "ln -s " + target + " over; echo $?; ln -s " + target[:4095] + " at; echo $?"})
	if err != nil || string(r.Stdout) != "1\n0\n" || !strings.Contains(string(r.Stderr), "too long") {
		t.Fatalf("ln -s of 4096 then 4095 bytes: %+v, %v; want the first refused (file name too long), the second made", r, err)
	}
	if _, err := sb.Stat(ctx, "over"); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("the refused link exists: %v", err)
	}
}
