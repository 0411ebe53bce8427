package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// Interrupted uploads: an Upload that fails part way (its reader fails, its
// context ends) leaves the target as it was, absent or byte-identical, and
// nothing lands in the directory after the call returns.

func init() {
	fileTests = append(fileTests, test{name: "InterruptedUpload", fn: interruptedUpload, cases: interruptedUploadCases})
}

// failAfter yields n bytes of r, then fails with err (or, when err is nil,
// calls cancel and goes on yielding bytes, so only ctx can end the upload).
type failAfter struct {
	r      io.Reader
	n      int64
	err    error
	cancel context.CancelFunc
}

func (f *failAfter) Read(p []byte) (int, error) {
	if f.n <= 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.cancel()
	} else if int64(len(p)) > f.n {
		p = p[:f.n]
	}
	n, err := f.r.Read(p)
	f.n -= int64(n)
	return n, err
}

// interruptedUploadCases are the cases of Files/InterruptedUpload: an
// upload to a new or an existing file whose source fails midway, or whose
// context ends midway. Harness.Skip may name each
// ("Files/InterruptedUpload/NewFileCtxEnds").
var interruptedUploadCases = []string{"NewFileReaderFails", "ExistingFileReaderFails", "NewFileCtxEnds", "ExistingFileCtxEnds"}

func interruptedUpload(ctx context.Context, t *testing.T, s *suite) {
	// Four uploads of 10 MiB in a full run (CI's) and their read-backs:
	// through an adapter, its fake and the backend with -race on a
	// starved host this outlasted the Harness's default 2 minutes (a
	// fresh-clone CI run at load 70). A plain run fails them after 1 MiB:
	// what the check needs is that bytes of the source reach the place
	// the provider writes before the upload fails, so that writing in
	// place shows. Every provider streams the source in copies of 32 to
	// 64 KiB (io.Copy, pipes, HTTP bodies), so 1 MiB is 16 or more of
	// them.
	ctx, cancel := atLeast(ctx, 8*time.Minute)
	defer cancel()
	sb := s.create(ctx, t, nil)
	failAt := int64(1 << 20)
	if full() {
		failAt = 10 << 20
	}
	old := bytes.Repeat([]byte("the file before the upload\n"), 100)
	check(t, sb.WriteFile(ctx, "iu/old.bin", old))
	listing := func() string {
		t.Helper()
		list := must[[]sandbox.FileInfo](t, "ReadDir iu")(sb.ReadDir(ctx, "iu"))
		var names []string
		for _, fi := range list {
			names = append(names, fi.Name())
		}
		return strings.Join(names, ",")
	}
	for _, name := range interruptedUploadCases {
		tc := struct {
			name, path  string
			readerFails bool
		}{name, "iu/new.bin", strings.HasSuffix(name, "ReaderFails")}
		if strings.HasPrefix(name, "Existing") {
			tc.path = "iu/old.bin"
		}
		t.Run(tc.name, func(t *testing.T) {
			s.skipCase(t, "Files/InterruptedUpload", tc.name)
			uctx, cancel := context.WithCancel(ctx)
			defer cancel()
			src := &failAfter{r: &patternReader{}, n: failAt, cancel: cancel}
			readerErr := fmt.Errorf("sandboxtest: the source failed after %d bytes", failAt)
			if tc.readerFails {
				src.err = readerErr
			}
			err := sb.Upload(uctx, tc.path, src)
			switch {
			case err == nil:
				t.Fatal("Upload succeeded although it was interrupted")
			case tc.readerFails:
				if !errors.Is(err, readerErr) {
					t.Errorf("Upload error %v does not match the reader's error", err)
				}
				if got, want := sandbox.CodeOf(err), sandbox.CodeOf(readerErr); got != want {
					t.Errorf("Upload error %v: code %v, want the reader error's %v", err, got, want)
				}
			default:
				if got := sandbox.CodeOf(err); got != sandbox.Canceled {
					t.Errorf("Upload error %v: code %v, want Canceled", err, got)
				}
			}
			var se *sandbox.Error
			if !errors.As(err, &se) {
				t.Errorf("Upload error %v (%T) is not a *sandbox.Error", err, err)
			}
			// Twice: right after the call, and once more after another
			// round trip, so that a write still going on is caught.
			for round := range 2 {
				got, rerr := sb.ReadFile(ctx, tc.path)
				if tc.path == "iu/old.bin" {
					if rerr != nil || !bytes.Equal(got, old) {
						t.Errorf("round %d: the file it replaced now holds %d bytes (err %v), want the %d old ones", round, len(got), rerr, len(old))
					}
				} else if !errors.Is(rerr, sandbox.ErrNotFound) {
					t.Errorf("round %d: the new file exists after a failed upload (%d bytes, err %v)", round, len(got), rerr)
				}
				if l := listing(); l != "old.bin" {
					t.Errorf("round %d: the directory holds %q after the failed upload, want only old.bin", round, l)
				}
				if round == 0 {
					sh(ctx, t, sb, "true")
				}
			}
		})
	}
	// The path takes a new upload at once.
	check(t, sb.WriteFile(ctx, "iu/old.bin", []byte("new")))
	if got := must[[]byte](t, "ReadFile")(sb.ReadFile(ctx, "iu/old.bin")); string(got) != "new" {
		t.Errorf("upload after the failed ones: %q", got)
	}
}
