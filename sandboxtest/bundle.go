package sandboxtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
)

func init() {
	fileTests = append(fileTests, test{name: "WriteBundleManifest", fn: testWriteBundleManifest})
}

// testWriteBundleManifest checks that WriteBundle writes the files and a
// manifest of their sizes and SHA-256 that the sandbox verifies, and that
// VerifyManifest names each file changed or removed afterwards.
func testWriteBundleManifest(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	files := []sandbox.File{
		{Path: "bundle/a.bin", Data: bytes.Repeat([]byte{0, 1, 2, 255, '\n', ' '}, 1000)},
		{Path: "bundle/sub/naïve name.txt", Data: []byte("bravo\n")},
		{Path: "bundle/empty", Data: nil},
	}
	m, err := sb.WriteBundle(ctx, files, sandbox.BundleOptions{})
	if err != nil {
		t.Fatalf("WriteBundle: %v", err)
	}
	doc, err := sb.ReadFile(ctx, sandbox.DefaultManifestPath)
	check(t, err)
	var got sandbox.Manifest
	if err := json.Unmarshal(doc, &got); err != nil || len(got.Files) != len(files) {
		t.Fatalf("manifest in the sandbox: %q, %v", doc, err)
	}
	for i, f := range files {
		if e := got.Files[i]; e != m.Files[i] || e.Path != path.Join(sb.Home(), f.Path) || e.Size != int64(len(f.Data)) {
			t.Errorf("manifest entry %d: %+v, returned %+v, for %s", i, e, m.Files[i], f.Path)
		}
	}
	check(t, sb.VerifyManifest(ctx, got))
	check(t, sb.WriteFile(ctx, "bundle/sub/naïve name.txt", []byte("BRAVO\n")))
	check(t, sb.Remove(ctx, "bundle/empty"))
	err = sb.VerifyManifest(ctx, got)
	j, ok := err.(interface{ Unwrap() []error })
	if !ok || len(j.Unwrap()) != 2 {
		t.Fatalf("VerifyManifest after a change and a removal: %v, want 2 failures", err)
	}
	changed, removed := j.Unwrap()[0], j.Unwrap()[1]
	if sandbox.CodeOf(changed) != sandbox.Internal || !strings.Contains(changed.Error(), "naïve name.txt") || !strings.Contains(changed.Error(), "SHA-256") {
		t.Errorf("changed file: %v", changed)
	}
	if !errors.Is(removed, fs.ErrNotExist) || !strings.Contains(removed.Error(), "bundle/empty") {
		t.Errorf("removed file: %v", removed)
	}
}
