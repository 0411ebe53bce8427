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
	t.Parallel()
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
	if err := sb.WriteFiles(ctx, files); err != nil {
		t.Fatalf("WriteFiles: %v", err)
	}
	sizes := failures(sb.WriteFilesVerified(ctx, files, sandbox.VerifyOptions{}))
	hashes := failures(sb.WriteFilesVerified(ctx, files, sandbox.VerifyOptions{SHA256: true}))
	if len(sizes) != 1 || len(hashes) != 2 {
		t.Fatalf("size check failures %v, hash check failures %v; want 1 and 2", sizes, hashes)
	}
	if !strings.Contains(sizes[0].Error(), "cut/b.txt") || !strings.Contains(hashes[0].Error(), "cut/b.txt") || !strings.Contains(hashes[1].Error(), "flip/c.txt") {
		t.Fatalf("failures do not name their files: %v; %v", sizes, hashes)
	}
	if err := sizes[0]; sandbox.CodeOf(err) != sandbox.Internal || !strings.Contains(err.Error(), "4 bytes") || !strings.Contains(err.Error(), "5 were written") {
		t.Fatalf("size mismatch error: %v", err)
	}
	if err := hashes[1]; sandbox.CodeOf(err) != sandbox.Internal || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("hash mismatch error: %v", err)
	}
}

// failures returns the errors joined in err (none for nil).
func failures(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
