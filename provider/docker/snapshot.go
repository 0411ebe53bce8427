package docker

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Snapshots.
//
// A snapshot is the engine's commit of the container to an image: its
// file system (everything written since the image it was created from),
// not its processes. The engine pauses the container for the commit, so
// the copy is consistent, and resumes it after; a paused sandbox stays
// paused. The snapshot's ID is the image ID ("sha256:…"); CreateRequest
// .FromSnapshot creates a sandbox from it with this Runtime's isolation
// settings (user, home, limits, runtime, network), as any Create.
//
// Ownership follows the containers' rule: the image is tagged
// snapshotRepo:<HMAC of its ID under the owner key>, which only a holder
// of the key can make, and every call checks that tag. An image without it
// (any other image, whatever labels it copied) is NotFound for
// GetSnapshot, Create and DeleteSnapshot, and is never removed;
// ListSnapshots leaves it out.
//
// DeleteSnapshot removes the owner tag. With no other tag and no
// container using it, the engine then deletes the image; while sandboxes
// made from it (or snapshots of them, whose images build on it) exist, the
// engine keeps its layers until they are gone, and the snapshot no longer
// exists for this provider (GetSnapshot, Create from it: NotFound).
// `docker image prune` frees such layers once they are unused.
//
// Full mode (processes and memory) is not offered. It would go through
// the engine's checkpoint API (runc and CRIU), which the engine serves
// only in experimental mode (dockerd --experimental) and which needs CRIU
// on the engine's host; a Snapshot in mode full is FailedPrecondition
// saying which of those this engine lacks (asking it with a Ping), and
// Capabilities.SnapshotNote says the same once a Ping has answered.
// Where the engine has the API, restoring its checkpoint into a new
// container (ContainerStart with a checkpoint of another container) is
// what is not built, and the error says that instead.

// snapshotRepo is the repository of the owner tag of every snapshot image.
const snapshotRepo = "sandboxkit-snapshot"

// Labels on snapshot images (the image also carries the labels of the
// container it was committed from, which are ignored).
const (
	labelSnapshot     = "dev.sandboxkit.snapshot" // "1"
	labelSnapName     = "dev.sandboxkit.snapshot.name"
	labelSnapSource   = "dev.sandboxkit.snapshot.source"
	labelSnapTemplate = "dev.sandboxkit.snapshot.template"
	labelSnapCreated  = "dev.sandboxkit.snapshot.created" // Unix nanoseconds
	labelSnapPrefix   = "dev.sandboxkit.snapshot.label."
	// labelKeys, on a container, lists its user labels (JSON): a container
	// created from a snapshot image inherits the image's labels, among them
	// the user labels of the container committed, which are not its own.
	labelKeys = "dev.sandboxkit.label-keys"
)

// snapshotOwnerDomain separates this MAC from the containers' one.
const snapshotOwnerDomain = "sandboxkit/docker/snapshot-owner/v1\x00"

func snapshotTag(key []byte, imageID string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(snapshotOwnerDomain))
	m.Write([]byte(imageID))
	return snapshotRepo + ":" + hex.EncodeToString(m.Sum(nil))
}

func snapshotModes() []driver.SnapshotMode {
	return []driver.SnapshotMode{driver.SnapshotFilesystem}
}

// What the engine's last Ping said of its experimental mode.
const (
	engineUnknown int32 = iota
	engineStable
	engineExperimental
)

// fullMissing says what full snapshots lack on this engine, as far as its
// last Ping tells.
func (r *Runtime) fullMissing() string {
	switch r.experimental.Load() {
	case engineStable:
		return "it needs the engine's checkpoint API, which the engine at " + r.host + " serves only in experimental mode (dockerd --experimental, with CRIU, Debian package criu, on the engine's host), and this engine runs without it"
	case engineExperimental:
		return "the engine at " + r.host + " runs in experimental mode with its checkpoint API, but this provider does not restore engine checkpoints into new containers yet"
	}
	return "it needs the engine's checkpoint API, served only in experimental mode (dockerd --experimental, with CRIU, Debian package criu, on the engine's host)"
}

// Snapshot commits sandbox id to an image owned by this provider.
func (r *Runtime) Snapshot(ctx context.Context, id string, req *driver.SnapshotRequest) (driver.SnapshotInfo, error) {
	const op = "snapshot"
	if req.Mode != driver.SnapshotFilesystem {
		if r.experimental.Load() == engineUnknown {
			if err := r.Ping(ctx); err != nil {
				return driver.SnapshotInfo{}, err
			}
		}
		return driver.SnapshotInfo{}, fmt.Errorf("docker: snapshot mode %q (processes and memory) is unavailable: %s; mode %q is available: %w", req.Mode, r.fullMissing(), driver.SnapshotFilesystem, sberrors.ErrFailedPrecondition)
	}
	key, err := r.ownerKey()
	if err != nil {
		return driver.SnapshotInfo{}, err
	}
	if err := r.owns(ctx, id); err != nil {
		return driver.SnapshotInfo{}, err
	}
	ci, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return driver.SnapshotInfo{}, r.wrap(ctx, op, err)
	}
	created := time.Now()
	labels := map[string]string{
		labelSnapshot: "1", labelSnapName: req.Name, labelSnapSource: id,
		labelSnapCreated: strconv.FormatInt(created.UnixNano(), 10),
	}
	if ci.Container.Config != nil {
		labels[labelSnapTemplate] = ci.Container.Config.Labels[labelTemplate]
	}
	for k, v := range req.Labels {
		labels[labelSnapPrefix+k] = v
	}
	// The engine pauses a running container for the commit (and only
	// then resumes it): the copy is consistent, a paused sandbox stays
	// paused.
	res, err := r.cli.ContainerCommit(ctx, id, client.ContainerCommitOptions{
		Config:  &container.Config{Labels: labels},
		Comment: "sandboxkit snapshot of " + id,
	})
	if err != nil {
		// An untagged image a cancelled commit may leave is dangling:
		// not this provider's, and `docker image prune` removes it.
		return driver.SnapshotInfo{}, r.wrap(ctx, op, err)
	}
	info := driver.SnapshotInfo{ID: res.ID, Name: req.Name, Provider: Scheme, Mode: driver.SnapshotFilesystem,
		Size: -1, CreatedAt: created, Labels: maps.Clone(req.Labels), SourceID: id, Template: labels[labelSnapTemplate]}
	if info.Labels == nil {
		info.Labels = map[string]string{}
	}
	if _, err := r.cli.ImageTag(ctx, client.ImageTagOptions{Source: res.ID, Target: snapshotTag(key, res.ID)}); err != nil {
		// Not tagged, so not this provider's: remove it here.
		_, _ = r.cli.ImageRemove(context.WithoutCancel(ctx), res.ID, client.ImageRemoveOptions{})
		return driver.SnapshotInfo{}, r.wrap(ctx, op+": tagging the image", err)
	}
	if got, err := r.GetSnapshot(ctx, res.ID); err == nil {
		info.Size = got.Size
	}
	return info, nil
}

// ownedImage inspects the image snapshotID and checks it is a snapshot of
// this provider's.
func (r *Runtime) ownedImage(ctx context.Context, op, snapshotID string) (image.InspectResponse, error) {
	key, err := r.ownerKey()
	if err != nil {
		return image.InspectResponse{}, err
	}
	notFound := fmt.Errorf("docker: %s: no snapshot %s on the engine at %s: %w", op, shortID(snapshotID), r.host, sberrors.ErrNotFound)
	if snapshotID == "" {
		return image.InspectResponse{}, fmt.Errorf("docker: %s: empty snapshot ID: %w", op, sberrors.ErrInvalidArgument)
	}
	if !strings.HasPrefix(snapshotID, "sha256:") {
		// Only an image ID names a snapshot: a tag could be moved.
		return image.InspectResponse{}, notFound
	}
	img, err := r.cli.ImageInspect(ctx, snapshotID)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return image.InspectResponse{}, notFound
		}
		return image.InspectResponse{}, r.wrap(ctx, op, err)
	}
	if img.ID != snapshotID || !slices.Contains(img.RepoTags, snapshotTag(key, img.ID)) {
		return image.InspectResponse{}, notFound
	}
	return img.InspectResponse, nil
}

func snapshotInfo(id string, labels map[string]string, size int64) driver.SnapshotInfo {
	in := driver.SnapshotInfo{ID: id, Name: labels[labelSnapName], Provider: Scheme, Mode: driver.SnapshotFilesystem,
		Size: size, Labels: map[string]string{}, SourceID: labels[labelSnapSource], Template: labels[labelSnapTemplate]}
	if ns, err := strconv.ParseInt(labels[labelSnapCreated], 10, 64); err == nil {
		in.CreatedAt = time.Unix(0, ns)
	}
	for k, v := range labels {
		if name, ok := strings.CutPrefix(k, labelSnapPrefix); ok {
			in.Labels[name] = v
		}
	}
	return in
}

// GetSnapshot describes a snapshot of this provider's.
func (r *Runtime) GetSnapshot(ctx context.Context, snapshotID string) (driver.SnapshotInfo, error) {
	img, err := r.ownedImage(ctx, "get snapshot", snapshotID)
	if err != nil {
		return driver.SnapshotInfo{}, err
	}
	var labels map[string]string
	if img.Config != nil {
		labels = img.Config.Labels
	}
	return snapshotInfo(img.ID, labels, img.Size), nil
}

// ListSnapshots returns one page of this provider's snapshots, oldest
// first, filtered by labels on the engine. The page token is the sort key
// of the last snapshot returned.
func (r *Runtime) ListSnapshots(ctx context.Context, req *driver.ListSnapshotsRequest) ([]driver.SnapshotInfo, string, error) {
	key, err := r.ownerKey()
	if err != nil {
		return nil, "", err
	}
	f := client.Filters{}
	f.Add("reference", snapshotRepo)
	f.Add("label", labelSnapshot+"=1")
	for k, v := range req.Labels {
		f.Add("label", labelSnapPrefix+k+"="+v)
	}
	res, err := r.cli.ImageList(ctx, client.ImageListOptions{Filters: f})
	if err != nil {
		return nil, "", r.wrap(ctx, "list snapshots", err)
	}
	items := res.Items
	sortKey := func(s image.Summary) string {
		return fmt.Sprintf("%020s/%s", s.Labels[labelSnapCreated], s.ID)
	}
	slices.SortFunc(items, func(a, b image.Summary) int { return strings.Compare(sortKey(a), sortKey(b)) })
	start := 0
	if req.PageToken != "" {
		start, _ = slices.BinarySearchFunc(items, req.PageToken, func(s image.Summary, tok string) int { return strings.Compare(sortKey(s), tok) })
		if start < len(items) && sortKey(items[start]) == req.PageToken {
			start++
		}
	}
	var page []driver.SnapshotInfo
	next := ""
	for i := start; i < len(items); i++ {
		s := items[i]
		if !slices.Contains(s.RepoTags, snapshotTag(key, s.ID)) {
			continue // not this provider's: left out, and left alone
		}
		if req.PageSize > 0 && len(page) == req.PageSize {
			next = sortKey(items[i-1])
			break
		}
		page = append(page, snapshotInfo(s.ID, s.Labels, s.Size))
	}
	return page, next, nil
}

// DeleteSnapshot removes the snapshot's owner tag (see the comment at the
// top of this file); one already gone is not an error (nor is an image
// labelled as a snapshot with no owner tag of any key: one deleted whose
// layers the engine keeps), any other image (another key's snapshot
// included) is NotFound, and nothing but this provider's tag is ever
// removed.
func (r *Runtime) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	const op = "delete snapshot"
	key, err := r.ownerKey()
	if err != nil {
		return err
	}
	if strings.HasPrefix(snapshotID, "sha256:") {
		if _, err := r.cli.ImageInspect(ctx, snapshotID); cerrdefs.IsNotFound(err) {
			return nil // gone
		}
	}
	if _, err := r.ownedImage(ctx, op, snapshotID); err != nil {
		// A snapshot already deleted whose image the engine keeps for the
		// sandboxes made from it has lost its tag but not its labels: it
		// is gone for this provider, and nothing is removed either way.
		if img, ierr := r.cli.ImageInspect(ctx, snapshotID); ierr == nil && img.Config != nil && img.Config.Labels[labelSnapshot] == "1" && errors.Is(err, sberrors.ErrNotFound) &&
			!slices.ContainsFunc(img.RepoTags, func(t string) bool { return strings.HasPrefix(t, snapshotRepo+":") }) {
			return nil
		}
		return err
	}
	// Force untags an image a container still uses instead of refusing;
	// it never removes an image by ID here, only this provider's tag.
	_, err = r.cli.ImageRemove(ctx, snapshotTag(key, snapshotID), client.ImageRemoveOptions{Force: true, PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return r.wrap(ctx, op, err)
	}
	return nil
}

// hasLabels reports whether have holds every label of want.
func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// userLabelKeys is the labelKeys value for labels.
func userLabelKeys(labels map[string]string) string {
	b, _ := json.Marshal(slices.Sorted(maps.Keys(labels)))
	return string(b)
}

var _ driver.Snapshotter = (*Runtime)(nil)
