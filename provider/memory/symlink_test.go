package memory_test

import (
	"context"
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
