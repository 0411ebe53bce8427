package sandbox_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// tamperRuntime damages uploads the provider then acknowledges: to a path
// containing "cut" one byte short, "flip" the last byte changed, "drop"
// not written at all. With noTool, the sandbox seems to have no SHA-256
// tool for the verification command.
type tamperRuntime struct {
	driver.Runtime
	noTool bool

	mu    chan struct{}
	execs int
}

func newTamper(rt driver.Runtime) *tamperRuntime {
	return &tamperRuntime{Runtime: rt, mu: make(chan struct{}, 1)}
}

func (r *tamperRuntime) Upload(ctx context.Context, id, p string, src io.Reader) error {
	b, err := io.ReadAll(src)
	if err != nil {
		return err
	}
	switch base := path.Base(p); {
	case strings.Contains(base, "drop"):
		return nil
	case strings.Contains(base, "cut") && len(b) > 0:
		b = b[:len(b)-1]
	case strings.Contains(base, "flip") && len(b) > 0:
		b = bytes.Clone(b)
		b[len(b)-1] ^= 0xff
	}
	return r.Runtime.Upload(ctx, id, p, bytes.NewReader(b))
}

func (r *tamperRuntime) Exec(ctx context.Context, id string, cmd *driver.Command) (driver.ExitStatus, error) {
	r.mu <- struct{}{}
	r.execs++
	<-r.mu
	if r.noTool && len(cmd.Args) > 3 && cmd.Args[3] == "sandboxkit-verify" {
		io.WriteString(cmd.Stdout, "notool\n")
		return driver.ExitStatus{}, nil
	}
	return r.Runtime.Exec(ctx, id, cmd)
}

func (r *tamperRuntime) execCount() int {
	r.mu <- struct{}{}
	defer func() { <-r.mu }()
	return r.execs
}

// bundleFiles are the files the bundle tests write: binary, empty,
// spaces and unicode in names, and the damaged ones.
func bundleFiles() []sandbox.File {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	return []sandbox.File{
		{Path: "b/ok.bin", Data: all},
		{Path: "b/empty", Data: nil},
		{Path: "b/with  two spaces ", Data: []byte("spaces\n")},
		{Path: "b/é ü.txt", Data: []byte("unicode")},
		{Path: "b/cut.txt", Data: []byte("bravo")},
		{Path: "b/flip.txt", Data: []byte("charlie")},
		{Path: "b/drop.txt", Data: []byte("delta")},
	}
}

// checkBundle runs the bundle checks over rt: WriteBundle writes the
// files and the manifest, verifies them in one command, names each
// damaged file, and VerifyManifest catches later changes.
func checkBundle(t *testing.T, rt driver.Runtime) {
	ctx := context.Background()
	tr := newTamper(rt)
	c := sandbox.NewClient(tr)
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	files := bundleFiles()
	before := tr.execCount()
	m, err := sb.WriteBundle(ctx, files, sandbox.BundleOptions{})
	if n := tr.execCount() - before; n != 1 {
		t.Errorf("WriteBundle ran %d commands, want 1 verification", n)
	}
	fails := failures(err)
	if len(fails) != 3 {
		t.Fatalf("WriteBundle: %d failures (%v), want the cut, flipped and dropped files", len(fails), err)
	}
	for i, want := range []struct {
		name string
		code sandbox.Code
		text string
	}{{"b/cut.txt", sandbox.Internal, "has 4 bytes, the manifest says 5"}, {"b/flip.txt", sandbox.Internal, "SHA-256"}, {"b/drop.txt", sandbox.NotFound, "missing"}} {
		e := fails[i]
		var se *sandbox.Error
		if !errors.As(e, &se) || se.Path != path.Join(sb.Home(), want.name) || sandbox.CodeOf(e) != want.code || !strings.Contains(e.Error(), want.text) {
			t.Errorf("failure %d: %v (code %v); want %s naming %s with %q", i, e, sandbox.CodeOf(e), want.code, want.name, want.text)
		}
	}
	if !errors.Is(fails[2], fs.ErrNotExist) {
		t.Errorf("a missing file's error %v does not match fs.ErrNotExist", fails[2])
	}

	// The manifest in the sandbox, at the documented path.
	doc, err := sb.ReadFile(ctx, sandbox.DefaultManifestPath)
	if err != nil {
		t.Fatalf("reading the manifest: %v", err)
	}
	var got sandbox.Manifest
	if err := json.Unmarshal(doc, &got); err != nil {
		t.Fatalf("manifest %q: %v", doc, err)
	}
	if got.Version != sandbox.ManifestVersion || len(got.Files) != len(files) || !slices.Equal(got.Files, m.Files) {
		t.Fatalf("manifest in the sandbox %+v, returned %+v", got, m)
	}
	for i, f := range files {
		sum := sha256.Sum256(f.Data)
		e := got.Files[i]
		if e.Path != path.Join(sb.Home(), f.Path) || e.Size != int64(len(f.Data)) || e.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("manifest entry %d = %+v for %s", i, e, f.Path)
		}
	}

	// The good files verify; changes made later are caught, each named.
	good := sandbox.Manifest{Version: 1, Files: got.Files[:4]}
	before = tr.execCount()
	if err := sb.VerifyManifest(ctx, good); err != nil {
		t.Fatalf("VerifyManifest of the good files: %v", err)
	}
	if n := tr.execCount() - before; n != 1 {
		t.Errorf("VerifyManifest ran %d commands, want 1", n)
	}
	if err := sb.WriteFile(ctx, "b/ok.bin", bytes.Repeat([]byte{7}, 256)); err != nil {
		t.Fatal(err)
	}
	if err := sb.Remove(ctx, "b/empty"); err != nil {
		t.Fatal(err)
	}
	if err := sb.MkdirAll(ctx, "b/empty"); err != nil {
		t.Fatal(err)
	}
	fails = failures(sb.VerifyManifest(ctx, good))
	if len(fails) != 2 || !strings.Contains(fails[0].Error(), "ok.bin") || !strings.Contains(fails[0].Error(), "SHA-256") ||
		!strings.Contains(fails[1].Error(), "b/empty") || !strings.Contains(fails[1].Error(), "not a regular file") {
		t.Fatalf("VerifyManifest after changes: %v", fails)
	}

	// Without a SHA-256 tool in the sandbox, files are read back instead.
	tr.noTool = true
	fails = failures(sb.VerifyManifest(ctx, good))
	if len(fails) != 2 || !strings.Contains(fails[0].Error(), "ok.bin") || !strings.Contains(fails[1].Error(), "b/empty") {
		t.Fatalf("VerifyManifest by download: %v", fails)
	}
	tr.noTool = false

	// Another manifest path; bad input is refused before anything is written.
	if _, err := sb.WriteBundle(ctx, files[2:4], sandbox.BundleOptions{ManifestPath: "/tmp/m.json"}); err != nil {
		t.Fatalf("WriteBundle with ManifestPath: %v", err)
	}
	if fi, err := sb.Stat(ctx, "/tmp/m.json"); err != nil || fi.Size == 0 {
		t.Fatalf("manifest at ManifestPath: %+v, %v", fi, err)
	}
	for name, bad := range map[string][]sandbox.File{
		"twice":    {{Path: "x/a", Data: []byte("1")}, {Path: "x/./a", Data: []byte("2")}},
		"manifest": {{Path: sandbox.DefaultManifestPath, Data: []byte("1")}},
		"control":  {{Path: "x/a\nb", Data: []byte("1")}},
	} {
		_, err := sb.WriteBundle(ctx, bad, sandbox.BundleOptions{})
		if sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("WriteBundle %s: %v, want InvalidArgument", name, err)
		}
		if _, err := sb.Stat(ctx, "x"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("WriteBundle %s wrote files before refusing: %v", name, err)
		}
	}
	for name, bad := range map[string]sandbox.ManifestEntry{
		"relative": {Path: "b/ok.bin", SHA256: strings.Repeat("0", 64)},
		"size":     {Path: "/b", Size: -1, SHA256: strings.Repeat("0", 64)},
		"sha":      {Path: "/b", SHA256: "abc"},
	} {
		if err := sb.VerifyManifest(ctx, sandbox.Manifest{Files: []sandbox.ManifestEntry{bad}}); sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("VerifyManifest with a bad entry (%s): %v, want InvalidArgument", name, err)
		}
	}
}

func TestWriteBundleMemory(t *testing.T) {
	t.Parallel()
	checkBundle(t, memory.New())
}

func TestWriteBundleLocal(t *testing.T) {
	t.Parallel()
	rt, err := local.New(local.WithRoot(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	checkBundle(t, rt)
}
