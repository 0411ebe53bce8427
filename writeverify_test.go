package sandbox_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// lossyRuntime corrupts uploads to paths containing "cut" (one byte
// short) or "flip" (same size, last byte changed), as a broken transfer
// the provider acknowledged would.
type lossyRuntime struct{ *memory.Runtime }

func (l lossyRuntime) Upload(ctx context.Context, id, p string, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	switch {
	case strings.Contains(p, "cut") && len(b) > 0:
		b = b[:len(b)-1]
	case strings.Contains(p, "flip") && len(b) > 0:
		b = bytes.Clone(b)
		b[len(b)-1] ^= 0xff
	}
	return l.Runtime.Upload(ctx, id, p, bytes.NewReader(b))
}

func TestWriteFilesVerified(t *testing.T) {
	ctx := context.Background()
	c := sandbox.NewClient(lossyRuntime{memory.New()})
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	files := []sandbox.File{
		{Path: "ok/a.txt", Data: []byte("alpha")},
		{Path: "cut/b.txt", Data: []byte("bravo")},
		{Path: "flip/c.txt", Data: []byte("charlie")},
		{Path: "ok/empty", Data: nil},
	}
	// WriteFiles trusts the provider's acknowledgement.
	for _, r := range sb.WriteFiles(ctx, files) {
		if r.Err != nil {
			t.Fatalf("WriteFiles %s: %v", r.Path, r.Err)
		}
	}
	sizes := sb.WriteFilesVerified(ctx, files, sandbox.VerifyOptions{})
	hashes := sb.WriteFilesVerified(ctx, files, sandbox.VerifyOptions{SHA256: true})
	for i, f := range files {
		wantSize := !strings.Contains(f.Path, "cut")
		wantHash := wantSize && !strings.Contains(f.Path, "flip")
		if (sizes[i].Err == nil) != wantSize || (hashes[i].Err == nil) != wantHash || sizes[i].Path != f.Path {
			t.Fatalf("%s: size check %v, hash check %v; want ok=%v/%v", f.Path, sizes[i].Err, hashes[i].Err, wantSize, wantHash)
		}
	}
	if err := sizes[1].Err; sandbox.CodeOf(err) != sandbox.Internal || !strings.Contains(err.Error(), "4 bytes") || !strings.Contains(err.Error(), "5 were written") {
		t.Fatalf("size mismatch error: %v", err)
	}
	if err := hashes[2].Err; sandbox.CodeOf(err) != sandbox.Internal || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("hash mismatch error: %v", err)
	}
}
