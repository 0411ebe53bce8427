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
)

// GetFiles returns every regular file of the workspace with its content and
// binary mark, sorted by path. It takes three round trips however many files
// the workspace holds: one command archives the workspace into a temporary
// file under the metadata directory, one download streams the archive, and
// one call removes it.
// Symbolic links are not followed and not returned.
func (b *FilesystemBackend) GetFiles(ctx context.Context, _ *backend.GetFilesRequest) (*backend.GetFilesResult, error) {
	base, err := b.BaseDir(ctx)
	if err != nil {
		return nil, err
	}
	r, err := b.run(ctx, base, "tar", map[string]string{"SBX_PATH": "."}, nil, 4096)
	if err != nil {
		return nil, err
	}
	archive := r.get("tar")
	if r.code != 0 || !strings.HasPrefix(archive, "/") {
		return nil, sandbox.Errorf(sandbox.Internal, "fsbackend: get files: the sandbox reported no archive (exit %d)", r.code)
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
	files, marks, err := readArchive(rc)
	if err != nil {
		return nil, fmt.Errorf("fsbackend: get files: %w", err)
	}
	for i := range files {
		files[i].Binary = marks[files[i].Path]
	}
	slices.SortFunc(files, func(a, b backend.File) int { return strings.Compare(a.Path, b.Path) })
	return &backend.GetFilesResult{Files: files}, nil
}

// readArchive reads the workspace archive: regular files outside the
// metadata directory become Files; binary marks become the set of marked
// paths.
func readArchive(r io.Reader) ([]backend.File, map[string]bool, error) {
	files := []backend.File{}
	marks := map[string]bool{}
	markDir := MetadataDir + "/binary/"
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, marks, nil
		}
		if err != nil {
			return nil, nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if name == "" {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case strings.HasPrefix(name, markDir):
			marks[string(data)] = true
		case isMeta(name):
		default:
			files = append(files, backend.File{Path: name, Data: data})
		}
	}
}
