package driver_test

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sandboxkit/sandbox"

// TestLayering enforces the split of issue 17: no package under provider/
// or internal/, and neither driver nor sberrors, depends on the user
// package (directly or through another package of the module): internal
// packages serve the layers above and never call up into the user API.
// sberrors is a leaf that
// depends on nothing of the module but internal packages. It reads the
// import clauses of the non-test files for more than one GOOS, so a file
// with a build constraint cannot hide an import.
func TestLayering(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, goos := range []string{"linux", "darwin", "windows"} {
		ctx := build.Default
		ctx.GOOS = goos
		ctx.CgoEnabled = false
		deps := map[string][]string{} // module package -> its module imports
		var load func(path string) []string
		load = func(path string) []string {
			if d, ok := deps[path]; ok {
				return d
			}
			deps[path] = nil
			dir := filepath.Join(root, strings.TrimPrefix(strings.TrimPrefix(path, module), "/"))
			pkg, err := ctx.ImportDir(dir, 0)
			if err != nil {
				if _, ok := err.(*build.NoGoError); ok {
					return nil
				}
				t.Fatalf("GOOS=%s: %s: %v", goos, path, err)
			}
			var own []string
			for _, imp := range pkg.Imports {
				if imp == module || strings.HasPrefix(imp, module+"/") {
					own = append(own, imp)
				}
			}
			deps[path] = own
			for _, imp := range own {
				load(imp)
			}
			return own
		}
		closure := func(path string) map[string]string { // dep -> who imported it
			seen := map[string]string{}
			var walk func(p string)
			walk = func(p string) {
				for _, d := range load(p) {
					if _, ok := seen[d]; !ok {
						seen[d] = p
						walk(d)
					}
				}
			}
			walk(path)
			return seen
		}
		var checked []string
		check := []string{module + "/driver", module + "/sberrors"}
		for _, top := range []string{"provider", "internal"} {
			err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() && d.Name() == "testdata" {
					return filepath.SkipDir
				}
				if d.IsDir() {
					rel, _ := filepath.Rel(root, p)
					check = append(check, module+"/"+filepath.ToSlash(rel))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, pkg := range check {
			pkgDir := filepath.Join(root, strings.TrimPrefix(pkg, module+"/"))
			if _, err := ctx.ImportDir(pkgDir, 0); err != nil {
				continue // no Go files for this GOOS
			}
			checked = append(checked, pkg)
			deps := closure(pkg)
			if by, ok := deps[module]; ok {
				if strings.HasPrefix(pkg, module+"/internal/") {
					t.Errorf("GOOS=%s: %s depends on the user package %s (imported by %s); an internal package serves the layers above: take what it needs as a small interface",
						goos, pkg, module, by)
				} else {
					t.Errorf("GOOS=%s: %s depends on the user package %s (imported by %s); drivers import %s/driver and %s/sberrors",
						goos, pkg, module, by, module, module)
				}
			}
			if pkg == module+"/sberrors" {
				for d := range deps {
					if !strings.HasPrefix(d, module+"/internal/") {
						t.Errorf("GOOS=%s: sberrors must stay a leaf but depends on %s", goos, d)
					}
				}
			}
		}
		for _, want := range []string{"/provider/local", "/provider/memory", "/provider/e2b", "/provider/daytona", "/provider/e2b/e2bfake", "/provider/daytona/daytonafake", "/driver", "/sberrors", "/internal/blobcache", "/internal/iox"} {
			if !slices.Contains(checked, module+want) {
				t.Errorf("GOOS=%s: %s was not checked (checked %v)", goos, module+want, checked)
			}
		}
	}
}
