package memory

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"sort"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

// The operation names of the snapshot calls, for Calls and FailNext.
const (
	OpSnapshot       = "snapshot"
	OpGetSnapshot    = "get-snapshot"
	OpListSnapshots  = "list-snapshots"
	OpDeleteSnapshot = "delete-snapshot"
)

// memSnap is a stored snapshot: its description and a deep copy of the
// source's files.
type memSnap struct {
	info  driver.SnapshotInfo
	files map[string]*node
}

// copyFiles deep-copies a sandbox's file tree: every file's bytes, mode,
// modification time and owner, every directory and every symbolic link.
// Inode numbers are not copied: the copy's files are new files.
func copyFiles(files map[string]*node) (map[string]*node, int64) {
	out := make(map[string]*node, len(files))
	var size int64
	for p, n := range files {
		out[p] = &node{data: bytes.Clone(n.data), mode: n.mode, mtime: n.mtime, root: n.root}
		size += int64(len(n.data))
	}
	return out, size
}

// Snapshot saves a deep copy of the sandbox's files (filesystem mode, the
// only one: the memory provider has no processes to keep). Running or
// paused sandboxes alike; the sandbox is not changed. Handlers belong to
// the Runtime, not to a sandbox, so a sandbox created from the snapshot
// sees the same Handlers as every other; Start's background processes and
// the sandbox's env are not kept.
func (r *Runtime) Snapshot(ctx context.Context, id string, req *driver.SnapshotRequest) (driver.SnapshotInfo, error) {
	if err := r.begin(OpSnapshot, id, req.Name); err != nil {
		return driver.SnapshotInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return driver.SnapshotInfo{}, err
	}
	if req.Mode != driver.SnapshotFilesystem {
		return driver.SnapshotInfo{}, sberrors.Errorf(sberrors.FailedPrecondition, "memory: snapshot mode %q is not available (only %q)", req.Mode, driver.SnapshotFilesystem)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.get(id, false)
	if err != nil {
		return driver.SnapshotInfo{}, err
	}
	files, size := copyFiles(b.files)
	s := &memSnap{
		info: driver.SnapshotInfo{
			ID: "snap-" + newID()[len("mem-"):], Name: req.Name, Provider: Scheme, Mode: driver.SnapshotFilesystem,
			Size: size, CreatedAt: r.now(), Labels: maps.Clone(req.Labels), SourceID: id, Template: b.info.Template,
		},
		files: files,
	}
	if r.snaps == nil {
		r.snaps = map[string]*memSnap{}
	}
	r.snaps[s.info.ID] = s
	return cloneSnapInfo(s.info), nil
}

func cloneSnapInfo(in driver.SnapshotInfo) driver.SnapshotInfo {
	in.Labels = maps.Clone(in.Labels)
	in.Detail = maps.Clone(in.Detail)
	return in
}

func snapNotFound(id string) error {
	return fmt.Errorf("memory: snapshot %s: %w", id, sberrors.ErrNotFound)
}

// GetSnapshot describes a snapshot.
func (r *Runtime) GetSnapshot(_ context.Context, id string) (driver.SnapshotInfo, error) {
	if err := r.begin(OpGetSnapshot, "", id); err != nil {
		return driver.SnapshotInfo{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.snaps[id]
	if !ok {
		return driver.SnapshotInfo{}, snapNotFound(id)
	}
	return cloneSnapInfo(s.info), nil
}

// ListSnapshots pages through the snapshots sorted by creation (then id),
// filtering by labels; the page token is the position of the last one
// returned, as for List.
func (r *Runtime) ListSnapshots(_ context.Context, req *driver.ListSnapshotsRequest) ([]driver.SnapshotInfo, string, error) {
	if err := r.begin(OpListSnapshots, "", ""); err != nil {
		return nil, "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	all := make([]driver.SnapshotInfo, 0, len(r.snaps))
	for _, s := range r.snaps {
		all = append(all, s.info)
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].CreatedAt.Equal(all[j].CreatedAt) {
			return all[i].CreatedAt.Before(all[j].CreatedAt)
		}
		return all[i].ID < all[j].ID
	})
	start := 0
	if req.PageToken != "" {
		t, id, ok := parseToken(req.PageToken)
		if !ok {
			return nil, "", sberrors.Errorf(sberrors.InvalidArgument, "memory: malformed page token %q", req.PageToken)
		}
		start = sort.Search(len(all), func(i int) bool {
			return all[i].CreatedAt.After(t) || (all[i].CreatedAt.Equal(t) && all[i].ID > id)
		})
	}
	var page []driver.SnapshotInfo
	next := ""
	for _, in := range all[start:] {
		if !labelsMatch(in.Labels, req.Labels) {
			continue
		}
		if req.PageSize > 0 && len(page) == req.PageSize {
			last := page[len(page)-1]
			next = fmt.Sprintf("%d/%s", last.CreatedAt.UnixNano(), last.ID)
			break
		}
		page = append(page, cloneSnapInfo(in))
	}
	return page, next, nil
}

// DeleteSnapshot forgets a snapshot; one already gone is not an error.
// Sandboxes created from it keep their own copies.
func (r *Runtime) DeleteSnapshot(_ context.Context, id string) error {
	if err := r.begin(OpDeleteSnapshot, "", id); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.snaps, id)
	return nil
}

// snapshotFiles returns a deep copy of snapshot id's files and its
// template, for Create; r.mu is held.
func (r *Runtime) snapshotFilesLocked(id string) (map[string]*node, string, error) {
	s, ok := r.snaps[id]
	if !ok {
		return nil, "", snapNotFound(id)
	}
	files, _ := copyFiles(s.files)
	return files, s.info.Template, nil
}
