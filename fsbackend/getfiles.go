package fsbackend

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/internal/telemetry"
)

// GetFiles returns every regular file of the workspace with its content and
// binary mark, sorted by path. It takes three round trips however many files
// the workspace holds: one command archives the workspace into a temporary
// file under the metadata directory, one download streams the archive, and
// one call removes it.
// Symbolic links are not followed and not returned. A workspace replaced
// since it was pinned is a result with CodeInvalidPath, not a Go error.
func (b *FilesystemBackend) GetFiles(ctx context.Context, _ *backend.GetFilesRequest) (_ *backend.GetFilesResult, err error) {
	ctx, span := b.span(ctx, "get_files")
	defer func() { telemetry.End(span, err) }()
	base, err := b.BaseDir(ctx)
	if err != nil {
		return nil, err
	}
	r, err := b.run(ctx, base, "tar", map[string]string{"SBX_PATH": "."}, nil, 0)
	if err != nil {
		return nil, err
	}
	if r.code == exitReplaced {
		return &backend.GetFilesResult{Files: []backend.File{}, Error: pathError(r, "/", "", b.opts.MaxReadBytes)}, nil
	}
	archive, err := archivePath(r)
	if err != nil {
		return nil, err
	}
	defer func() {
		// Best effort, bounded: a leftover temporary file is harmless.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = b.sb.Remove(rctx, archive)
	}()
	rc, err := b.sb.Download(ctx, archive)
	if err != nil {
		return nil, fmt.Errorf("fsbackend: get files: %w", err)
	}
	defer rc.Close()
	list, err := readArchive(rc)
	if err != nil {
		return nil, fmt.Errorf("fsbackend: get files: %w", err)
	}
	recs, marks := files(r), b.marks(r)
	n := len(list)
	list = slices.DeleteFunc(list, func(f backend.File) bool {
		rec, ok := recs[f.Path]
		return !ok || b.skipped(rec)
	})
	if n > len(list) {
		b.opts.Logger.Warn("fsbackend: get files passed over files larger than the read limit, with several hard links, or changed while being archived", "count", n-len(list))
	}
	for i := range list {
		list[i].Binary = marks[recs[list[i].Path].key]
	}
	slices.SortFunc(list, func(a, b backend.File) int { return strings.Compare(a.Path, b.Path) })
	return &backend.GetFilesResult{Files: list}, nil
}

// archivePath returns the archive the helper reported, after checking that
// it is the one file the helper makes: exactly one tar= line, naming a
// snapshot file in the metadata directory's tmp of the resolved workspace.
// A workspace whose resolved path holds a newline could otherwise inject a
// second tar= line and have GetFiles download, then remove, any path.
func archivePath(r *opResult) (string, error) {
	tars, pbases := r.kv["tar"], r.kv["pbase"]
	if r.code != 0 || len(tars) != 1 || len(pbases) != 1 {
		return "", sandbox.Errorf(sandbox.Internal, "fsbackend: get files: the sandbox reported no archive (exit %d)", r.code)
	}
	archive, pbase := tars[0], pbases[0]
	if !strings.HasPrefix(pbase, "/") || archive != path.Clean(archive) ||
		path.Dir(archive) != path.Join(pbase, MetadataDir, "tmp") || !strings.HasPrefix(path.Base(archive), "snapshot.") {
		return "", sandbox.Errorf(sandbox.Internal, "fsbackend: get files: the sandbox reported an unexpected archive path %q", printable(archive))
	}
	return archive, nil
}

// readArchive reads the workspace archive: its regular files outside the
// metadata directory become Files.
func readArchive(r io.Reader) ([]backend.File, error) {
	files := []backend.File{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if name == "" || isMeta(name) {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files = append(files, backend.File{Path: name, Data: data})
	}
}
