package driver

import (
	"context"
	"time"
)

// SnapshotMode says what a snapshot keeps.
type SnapshotMode string

// The snapshot modes.
const (
	// SnapshotFilesystem keeps the sandbox's files: its home, installed
	// packages and every other path its commands may write. Processes are
	// not kept: a sandbox created from it starts fresh on those files.
	SnapshotFilesystem SnapshotMode = "filesystem"
	// SnapshotFull keeps the files and the running processes with their
	// memory: a sandbox created from it resumes where the source was.
	SnapshotFull SnapshotMode = "full"
)

// SnapshotRequest is what the portable layer passes to
// Snapshotter.Snapshot: validated, Mode never empty, and a mode the
// provider declared in Capabilities.SnapshotModes.
type SnapshotRequest struct {
	// Name is the caller's name for the snapshot; may be empty. A provider
	// whose snapshots need a unique name makes one from it.
	Name string
	// Mode is what the snapshot keeps.
	Mode SnapshotMode
	// Labels are stored with the snapshot and filter ListSnapshots.
	Labels map[string]string
}

// SnapshotInfo describes a snapshot.
type SnapshotInfo struct {
	// ID identifies the snapshot for CreateRequest.FromSnapshot,
	// GetSnapshot and DeleteSnapshot.
	ID       string
	Name     string
	Provider string
	Mode     SnapshotMode
	// Size is the bytes it holds, or -1 when the provider does not say.
	Size      int64
	CreatedAt time.Time
	Labels    map[string]string
	// SourceID is the sandbox it was taken of, where known.
	SourceID string
	// Template is the template the source sandbox was created from, where
	// known.
	Template string
	// Detail holds provider-specific facts worth showing.
	Detail map[string]string
}

// ListSnapshotsRequest is what the portable layer passes to
// Snapshotter.ListSnapshots.
type ListSnapshotsRequest struct {
	Labels    map[string]string
	PageToken string
	PageSize  int // the most to return; 0 (or less) asks for no bound, though the provider may still page
}

// Snapshotter is implemented by providers that can save a sandbox and
// create sandboxes from the copy (CreateRequest.FromSnapshot).
//
// Snapshots outlive the sandbox they were taken of and, on a Persistent
// provider, the Runtime. A snapshot of a running sandbox is consistent:
// the provider freezes the sandbox for the copy (or guarantees the
// same), and the sandbox runs on after it. A snapshot of a paused sandbox
// is allowed and leaves it paused. A snapshot id that does not exist is
// NotFound for every method, and for Create from it.
type Snapshotter interface {
	// Snapshot saves sandbox id and returns the snapshot once it can be
	// used. If the provider made the snapshot but a later step failed, it
	// returns the SnapshotInfo (with its ID) together with the error, so
	// the portable layer can delete it.
	Snapshot(ctx context.Context, id string, req *SnapshotRequest) (SnapshotInfo, error)
	// GetSnapshot describes one snapshot.
	GetSnapshot(ctx context.Context, snapshotID string) (SnapshotInfo, error)
	// ListSnapshots returns one page of snapshots filtered by req.Labels
	// (all must match) where the provider can; the portable layer filters
	// again. An empty next token means the last page.
	ListSnapshots(ctx context.Context, req *ListSnapshotsRequest) (page []SnapshotInfo, next string, err error)
	// DeleteSnapshot deletes a snapshot. Sandboxes created from it are not
	// affected. A snapshot already gone is not an error.
	DeleteSnapshot(ctx context.Context, snapshotID string) error
}

// Forker is implemented by providers with a native fork: n new sandboxes
// from the current state of sandbox id, without a snapshot the caller
// sees. Without it the portable layer forks by Snapshot and n Creates.
type Forker interface {
	// Fork creates n sandboxes from id's current state with req's labels,
	// env, lease and resources (req.Template and req.FromSnapshot are
	// empty). It returns every sandbox it made, also on error: on a
	// partial failure the Infos of the ones made and an error (a joined
	// error with one entry per failed child), so none is orphaned. When
	// ctx ends it destroys what it had not yet returned.
	Fork(ctx context.Context, id string, n int, req *CreateRequest) ([]Info, error)
}
