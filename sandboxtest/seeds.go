package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// Subtests for read caps and verified batch writes.
func init() {
	fileTests = append(fileTests,
		test{name: "ReadFileCap", fn: testReadFileCap},
		test{name: "WriteFilesVerified", fn: testWriteFilesVerified})
}

// testReadFileCap checks that a read cap refuses a larger file with
// ResourceExhausted naming its size, reads a file at the cap, and leaves
// Download unbounded.
func testReadFileCap(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	data := bytes.Repeat([]byte("0123456789abcdef"), 64) // 1024 bytes
	check(t, sb.WriteFile(ctx, "cap/big.bin", data))
	_, err := sb.ReadFileLimit(ctx, "cap/big.bin", 1000)
	wantCode(t, err, sandbox.ResourceExhausted, sandbox.ErrLimit)
	if !strings.Contains(err.Error(), "1024 bytes") || !strings.Contains(err.Error(), "1000") {
		t.Fatalf("cap error does not name the size and the cap: %v", err)
	}
	got, err := sb.ReadFileLimit(ctx, "cap/big.bin", 1024)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read at the cap: %d bytes, %v", len(got), err)
	}
	if _, err := sb.ReadFileLimit(ctx, "cap/missing", 1000); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("missing file under a cap: %v", err)
	}
	if sb.Client().MaxReadFile() > 0 && int64(len(data)) <= sb.Client().MaxReadFile() {
		if got, err := sb.ReadFile(ctx, "cap/big.bin"); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("ReadFile under the client's cap: %d bytes, %v", len(got), err)
		}
	}
	rc, err := sb.Download(ctx, "cap/big.bin")
	check(t, err)
	defer rc.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(rc); err != nil || !bytes.Equal(b.Bytes(), data) {
		t.Fatalf("Download: %d bytes, %v", b.Len(), err)
	}
}

// testWriteFilesVerified checks that a batch written as asked passes the
// size and SHA-256 checks, and that a failed write is reported, not
// verified.
func testWriteFilesVerified(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	check(t, sb.MkdirAll(ctx, "v/dir"))
	files := []sandbox.File{
		{Path: "v/a.bin", Data: bytes.Repeat([]byte{0, 1, 2, 255}, 1000)},
		{Path: "v/sub/b.txt", Data: []byte("bravo\n")},
		{Path: "v/empty", Data: nil},
		{Path: "v/dir", Data: []byte("onto a directory")},
	}
	err := sb.WriteFilesVerified(ctx, files, sandbox.VerifyOptions{SHA256: true})
	j, ok := err.(interface{ Unwrap() []error })
	if !ok || len(j.Unwrap()) != 1 || !strings.Contains(j.Unwrap()[0].Error(), "v/dir") {
		t.Fatalf("want one failure, naming v/dir: %v", err)
	}
	for _, f := range files[:3] {
		if strings.Contains(err.Error(), f.Path) {
			t.Fatalf("%s: %v", f.Path, err)
		}
	}
}
