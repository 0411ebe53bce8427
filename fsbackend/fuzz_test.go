package fsbackend

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/internal/hostrt"
	"github.com/sandboxkit/sandbox/internal/pathsafe"
)

var jailSeeds = []string{
	"", "/", ".", "..", "../x", "a/../..", "/../../etc/passwd", "report..final.md", "[...slug]",
	`..\..\x`, "a/./b//c/", "~/x", "/home/user/workspace/../x", ".fsbackend/binary/x", "./.fsbackend",
	"link/../../x", "outdir/x", "outfile", "sub/up/x", "a\x00b", "\xff", "dir/..../x",
}

// FuzzJail checks, lexically, that no agent path maps outside the
// workspace or into its metadata, and, on a real file system seeded with
// symbolic links that lead outside, that no write through the backend
// lands outside the workspace.
func FuzzJail(f *testing.F) {
	for _, s := range jailSeeds {
		f.Add(s)
	}
	dir, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	base, out := filepath.Join(dir, "ws"), filepath.Join(dir, "outside")
	for _, d := range []string{base + "/sub", out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	for link, target := range map[string]string{"outdir": out, "outfile": out + "/secret", "sub/up": "../../outside", "dangling": out + "/new", "link": "sub"} {
		if err := os.Symlink(target, filepath.Join(base, link)); err != nil {
			f.Fatal(err)
		}
	}
	rt := hostrt.NewWithHome(dir)
	sb, err := sandbox.NewClient(rt).Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		f.Fatal(err)
	}
	b, err := New(sb, Options{BaseDir: base})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { b.Close() })

	f.Fuzz(func(t *testing.T, p string) {
		rel, perr := jail(base, p)
		if perr != nil {
			if perr.Code != backend.CodeInvalidPath {
				t.Fatalf("jail(%q) error code %q", p, perr.Code)
			}
		} else {
			full := path.Join(base, rel)
			if strings.HasPrefix(rel, "/") || !pathsafe.Within(base, full) || isMeta(rel) {
				t.Fatalf("jail(%q) = %q: outside the workspace or in its metadata", p, rel)
			}
			for _, e := range strings.Split(rel, "/") {
				if e == ".." || e == "" {
					t.Fatalf("jail(%q) = %q holds a %q element", p, rel, e)
				}
			}
		}
		if len(p) > 200 {
			return
		}
		if _, err := b.Write(context.Background(), &backend.WriteRequest{Path: p, Content: "fuzz"}); err != nil {
			t.Fatalf("write %q: %v", p, err)
		}
		ents, err := os.ReadDir(out)
		if err != nil || len(ents) != 0 {
			t.Fatalf("write %q created something outside the workspace: %v %v", p, ents, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "ws.fuzz")); err == nil {
			t.Fatalf("write %q escaped next to the workspace", p)
		}
	})
}
