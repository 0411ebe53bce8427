package daytona

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/snapname"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/api"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Snapshots.
//
// A Daytona snapshot of a sandbox (POST /sandbox/{id}/snapshot) is an
// image of its file system that Create takes as a template
// (CreateRequest.FromSnapshot, or Template, since Daytona's templates are
// snapshots). Daytona makes it in the background: the sandbox is
// "snapshotting" (its container committed, so the copy is consistent)
// and returns to the state it had; the snapshot then appears, "active".
// Snapshot waits for both, polling with the same backoff as Create, for
// at most SnapshotWait and never beyond ctx. A started sandbox runs on
// after it, a stopped (paused) one stays stopped. Only the file system is
// kept: Daytona keeps memory for Windows sandboxes only, so the one mode
// is SnapshotFilesystem. Daytona snapshots have a name and no labels, and
// names are unique in an organization, so each snapshot is given a
// unique name that also keeps SnapshotRequest.Name and Labels (see
// internal/snapname); GetSnapshot and ListSnapshots read them back, and
// ListSnapshots filters by labels on the client.
// ListSnapshots lists the organization's snapshots, not Daytona's general
// ones (which cannot be deleted). A snapshot whose wait was cut short by
// ctx may still appear later, under the name SnapshotInfo.ID then holds;
// DeleteSnapshot takes that name too.
//
// Daytona's fork (POST /sandbox/{id}/fork) is not used: it forks VM
// sandboxes only, one per request, and is experimental; Sandbox.Fork on
// Daytona takes a snapshot and creates the forks from it.

// SnapshotWait bounds how long Snapshot waits for Daytona to finish a
// snapshot.
const SnapshotWait = 15 * time.Minute

// Snapshot snapshots sandbox id and waits until the snapshot is active.
func (r *Runtime) Snapshot(ctx context.Context, id string, req *driver.SnapshotRequest) (driver.SnapshotInfo, error) {
	const op = "snapshot"
	if req.Mode != driver.SnapshotFilesystem {
		return driver.SnapshotInfo{}, sberrors.Errorf(sberrors.FailedPrecondition, "daytona: snapshot mode %q: Daytona keeps only the file system (%q)", req.Mode, driver.SnapshotFilesystem)
	}
	name, err := snapname.Encode(req.Name, req.Labels, randHex(6))
	if err != nil {
		return driver.SnapshotInfo{}, sberrors.Errorf(sberrors.InvalidArgument, "daytona: snapshot name and labels: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, SnapshotWait)
	defer cancel()
	var resp *http.Response
	for attempt := 0; ; attempt++ {
		resp, err = r.call(wctx, op, true, func(ctx context.Context) (*http.Response, error) {
			return r.api.CreateSandboxSnapshot(ctx, id, api.CreateSandboxSnapshot{Name: name})
		}, http.StatusOK, http.StatusCreated)
		var he *HTTPError
		if err == nil || attempt == 3 || !asHTTP(err, &he) || he.Status != http.StatusConflict {
			break
		}
		// 409: a transition (another snapshot, most often) is under
		// way; the sandbox is waited for and asked again.
		if werr := r.waitSettled(wctx, id); werr != nil {
			return driver.SnapshotInfo{}, r.clean(werr)
		}
	}
	if err != nil {
		if errors.Is(err, sberrors.ErrStaleTransport) {
			return driver.SnapshotInfo{}, r.clean(err)
		}
		var he *HTTPError
		if asHTTP(err, &he) {
			return driver.SnapshotInfo{}, r.clean(err)
		}
		// The answer was lost: the snapshot may be under way.
		r.dropLater(id, name)
		return driver.SnapshotInfo{ID: name, Name: req.Name}, r.clean(err)
	}
	var sb api.Sandbox
	if err := decode(op, resp, &sb); err != nil {
		r.dropLater(id, name)
		return driver.SnapshotInfo{ID: name, Name: req.Name}, r.clean(err)
	}
	in, err := r.waitSnapshot(wctx, id, name)
	if err != nil {
		if in.ID == "" {
			in = driver.SnapshotInfo{ID: name, Name: req.Name}
		}
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
			// Daytona goes on making it: it is deleted once made.
			r.dropLater(id, name)
		}
		return in, r.clean(err)
	}
	in.Mode, in.SourceID = driver.SnapshotFilesystem, id
	in.Template = str(sb.Snapshot)
	return in, nil
}

// waitSnapshot polls the snapshot name until it is active and sandbox id
// has left "snapshotting". A sandbox that left it with no snapshot made
// means the snapshot failed.
func (r *Runtime) waitSnapshot(ctx context.Context, id, name string) (driver.SnapshotInfo, error) {
	begin := time.Now()
	delay := 100 * time.Millisecond
	var in driver.SnapshotInfo
	for {
		sn, err := r.getSnapshot(ctx, "snapshot", name)
		missing := sberrors.CodeOf(err) == sberrors.NotFound
		if err != nil && !missing {
			return in, err
		}
		active := false
		if err == nil {
			in = snapshotInfo(sn)
			switch sn.State {
			case "error", "build_failed":
				return in, sberrors.Errorf(sberrors.Internal, "daytona: snapshot %s failed (state %s): %s", name, sn.State, r.redact(str(sn.ErrorReason)))
			case "active":
				active = true
			}
		}
		sb, err := r.getDTO(ctx, id)
		switch {
		case sberrors.CodeOf(err) == sberrors.NotFound:
			sb = nil // deleted meanwhile: the snapshot decides
		case err != nil:
			return in, err
		}
		busy := sb != nil && sb.State != nil && *sb.State == "snapshotting"
		switch {
		case active && !busy:
			return in, nil
		case missing && !busy:
			// Looked up once more: the snapshot row is written just
			// before the sandbox leaves snapshotting.
			if _, err := r.getSnapshot(ctx, "snapshot", name); err == nil {
				continue
			}
			if err := ctx.Err(); err != nil {
				// The caller gave up meanwhile, and a server may drop a
				// snapshot whose request was abandoned: the outcome is
				// the cancellation's, not a failure of the snapshot.
				return in, fmt.Errorf("daytona: snapshot %s of sandbox %s was not made: %w", name, id, err)
			}
			return in, sberrors.Errorf(sberrors.Internal, "daytona: snapshot %s of sandbox %s was not made (the sandbox is %s again)", name, id, stateText(sb))
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return in, fmt.Errorf("daytona: waiting for snapshot %s of sandbox %s: %w", name, id, ctx.Err())
		case <-t.C:
		}
		if time.Since(begin) > 5*time.Second {
			delay = min(delay*11/10, time.Second)
		}
	}
}

// waitSettled waits, bounded by ctx, until sandbox id is in no
// transition (started, stopped or any state that is not changing).
func (r *Runtime) waitSettled(ctx context.Context, id string) error {
	delay := 100 * time.Millisecond
	for {
		sb, err := r.getDTO(ctx, id)
		if err != nil {
			return err
		}
		switch stateText(sb) {
		case "snapshotting", "forking", "starting", "stopping", "creating", "restoring", "resizing", "pausing", "resuming", "archiving":
		default:
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("daytona: snapshot: waiting for sandbox %s to settle: %w", id, ctx.Err())
		case <-t.C:
		}
		delay = min(delay*11/10, time.Second)
	}
}

// dropLater deletes, in the background, the snapshot name of sandbox id
// that a Snapshot gave up waiting for, once Daytona has made it (or the
// sandbox has left "snapshotting" without it), so that none is left
// behind; bounded by dropWait. Close waits for it.
func (r *Runtime) dropLater(id, name string) {
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), dropWait)
		defer cancel()
		// The request may not have reached Daytona's worker yet: a
		// snapshot neither made nor under way is looked for a while
		// longer (dropGrace) before it is given up.
		grace := time.Now().Add(dropGrace)
		for ctx.Err() == nil {
			sn, err := r.getSnapshot(ctx, "snapshot", name)
			if err == nil && sn.State != "pending" && sn.State != "building" && sn.State != "pulling" {
				break // made (or failed): delete it
			}
			if sberrors.CodeOf(err) == sberrors.NotFound {
				sb, gerr := r.getDTO(ctx, id)
				if (gerr != nil || stateText(sb) != "snapshotting") && time.Now().After(grace) {
					return
				}
			}
			t := time.NewTimer(200 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		_ = r.DeleteSnapshot(ctx, name)
	}()
}

// dropGrace is how long dropLater looks for a snapshot that is neither
// made nor under way.
const dropGrace = 5 * time.Second

// dropWait bounds dropLater.
const dropWait = 2 * time.Minute

func stateText(sb *api.Sandbox) string {
	if sb == nil || sb.State == nil {
		return "gone"
	}
	return string(*sb.State)
}

func snapshotInfo(sn api.Snapshot) driver.SnapshotInfo {
	in := driver.SnapshotInfo{
		ID: sn.Id, Provider: Scheme, Mode: driver.SnapshotFilesystem, Size: -1,
		CreatedAt: sn.CreatedAt, Detail: map[string]string{"daytona.state": string(sn.State), "daytona.name": sn.Name},
	}
	in.Name, in.Labels, _ = snapname.Decode(sn.Name)
	if sn.Size != nil {
		in.Size = int64(float64(*sn.Size) * (1 << 30))
	}
	if sn.Ref != nil {
		in.Detail["daytona.ref"] = *sn.Ref
	}
	return in
}

func (r *Runtime) getSnapshot(ctx context.Context, op, idOrName string) (api.Snapshot, error) {
	var sn api.Snapshot
	if idOrName == "" {
		return sn, sberrors.Errorf(sberrors.InvalidArgument, "daytona: %s: empty snapshot ID", op)
	}
	resp, err := r.call(ctx, op, false, func(ctx context.Context) (*http.Response, error) {
		return r.api.GetSnapshot(ctx, idOrName)
	}, http.StatusOK)
	if err != nil {
		return sn, err
	}
	if err := decode(op, resp, &sn); err != nil {
		return sn, err
	}
	return sn, nil
}

// GetSnapshot describes a snapshot, by its ID or name. One being removed
// is NotFound.
func (r *Runtime) GetSnapshot(ctx context.Context, snapshotID string) (driver.SnapshotInfo, error) {
	const op = "get-snapshot"
	sn, err := r.getSnapshot(ctx, op, snapshotID)
	if err != nil {
		return driver.SnapshotInfo{}, r.clean(err)
	}
	if sn.State == "removing" {
		return driver.SnapshotInfo{}, sberrors.Errorf(sberrors.NotFound, "daytona: %s: snapshot %s is being removed", op, snapshotID)
	}
	return snapshotInfo(sn), nil
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

// ListSnapshots returns one page of GET /snapshots: the organization's
// snapshots, newest first (Daytona's general snapshots are left out),
// filtered by req.Labels here, so a page can come back short or empty
// with a next token. The page token is Daytona's page number.
func (r *Runtime) ListSnapshots(ctx context.Context, req *driver.ListSnapshotsRequest) ([]driver.SnapshotInfo, string, error) {
	const op = "list-snapshots"
	page := 1
	if req.PageToken != "" {
		n, err := strconv.Atoi(req.PageToken)
		if err != nil || n < 1 {
			return nil, "", sberrors.Errorf(sberrors.InvalidArgument, "daytona: %s: page token %q is not one this provider gave", op, req.PageToken)
		}
		page = n
	}
	limit := min(cmp.Or(max(req.PageSize, 0), 200), 200)
	sort, order := api.GetAllSnapshotsParamsSort("createdAt"), api.GetAllSnapshotsParamsOrder("desc")
	params := &api.GetAllSnapshotsParams{Page: &page, Limit: &limit, Sort: &sort, Order: &order}
	resp, err := r.call(ctx, op, false, func(ctx context.Context) (*http.Response, error) {
		return r.api.GetAllSnapshots(ctx, params)
	}, http.StatusOK)
	if err != nil {
		return nil, "", r.clean(err)
	}
	var p api.PaginatedSnapshots
	if err := decode(op, resp, &p); err != nil {
		return nil, "", r.clean(err)
	}
	out := make([]driver.SnapshotInfo, 0, len(p.Items))
	for _, sn := range p.Items {
		if (sn.General != nil && *sn.General) || sn.State == "removing" {
			continue
		}
		in := snapshotInfo(sn)
		if hasLabels(in.Labels, req.Labels) {
			out = append(out, in)
		}
	}
	next := ""
	if float32(page) < p.TotalPages {
		next = strconv.Itoa(page + 1)
	}
	return out, next, nil
}

// DeleteSnapshot removes a snapshot, by its ID or (as Snapshot may hand
// back) its name; one already gone is not an error. Only a snapshot this
// SDK made (its name carries internal/snapname's encoding) is removed: a
// Daytona snapshot is also what sandboxes are created from (the
// organization's base images), so any other one is NotFound and stays.
func (r *Runtime) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	const op = "delete-snapshot"
	if snapshotID == "" {
		return sberrors.Errorf(sberrors.InvalidArgument, "daytona: %s: empty snapshot ID", op)
	}
	// Daytona deletes by UUID only: a name is looked up first.
	sn, err := r.getSnapshot(ctx, op, snapshotID)
	switch {
	case sberrors.CodeOf(err) == sberrors.NotFound:
		return nil
	case err != nil:
		return r.clean(err)
	case sn.State == "removing":
		return nil
	}
	if _, _, ok := snapname.Decode(sn.Name); !ok {
		return sberrors.Errorf(sberrors.NotFound, "daytona: %s: %q is not a snapshot this SDK made (its name %q does not carry the SDK's encoding); nothing deleted", op, snapshotID, sn.Name)
	}
	_, err = r.call(ctx, op, false, func(ctx context.Context) (*http.Response, error) {
		return r.api.RemoveSnapshot(ctx, sn.Id)
	}, http.StatusOK, http.StatusNoContent)
	if sberrors.CodeOf(err) == sberrors.NotFound {
		return nil
	}
	return r.clean(err)
}

// snapshotMissing turns Create's 400 for a snapshot that does not exist
// (or is being removed) into NotFound, as the contract has it.
func snapshotMissing(err error, snapshot string) error {
	var he *HTTPError
	if snapshot == "" || !asHTTP(err, &he) || he.Status != http.StatusBadRequest {
		return err
	}
	m := he.Message
	if strings.HasPrefix(m, "Snapshot ") && (strings.Contains(m, " not found") || strings.HasSuffix(m, " is removing")) {
		return fmt.Errorf("daytona: create from snapshot %q: %w: %w", snapshot, sberrors.ErrNotFound, err)
	}
	return err
}

var _ driver.Snapshotter = (*Runtime)(nil)
