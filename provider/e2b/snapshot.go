package e2b

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/sandboxkit/sandbox/internal/lostcreate"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/snapname"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/api"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Snapshots and fork.
//
// An E2B snapshot is a template built from a running sandbox
// (POST /sandboxes/{id}/snapshots): the sandbox is paused for the copy and
// resumed, so the snapshot is consistent and the sandbox runs on. Its ID
// ("<team>/<name>:default") is a template ID: Create with FromSnapshot
// starts a sandbox from it, DeleteSnapshot deletes the template. Mode full
// keeps memory (a sandbox created from it resumes its processes), mode
// filesystem only the files (it cold-boots). E2B snapshots have a name
// and nothing else, and E2B reuses the template of a name already taken
// (the old snapshot's content would be replaced), so every snapshot is
// given a unique name that also keeps SnapshotRequest.Name and Labels
// (see internal/snapname: a slug of the name, a random part, then the
// name and labels encoded); GetSnapshot and ListSnapshots read them back,
// and ListSnapshots filters by labels on the client. The name also finds
// a snapshot whose create answer was lost. A paused sandbox is resumed for
// the snapshot and paused again (E2B snapshots running sandboxes only).
// E2B reports neither a snapshot's size, its mode nor its creation time
// when listing: Size is -1, and Mode and CreatedAt are known only in the
// SnapshotInfo Snapshot returns.
//
// Fork is E2B's native fork (POST /sandboxes/{id}/fork): one checkpoint,
// n sandboxes resumed from it with the source's memory, metadata and env
// vars. E2B cannot give a fork other labels or env vars, so when the
// request asks for labels other than the source's, or for env vars, Fork
// takes a full snapshot, creates the n sandboxes from it with the
// requested labels and env, and deletes the snapshot.

func (r *Runtime) snapshotModes() []driver.SnapshotMode {
	return []driver.SnapshotMode{driver.SnapshotFilesystem, driver.SnapshotFull}
}

// Snapshot saves sandbox id as a template.
func (r *Runtime) Snapshot(ctx context.Context, id string, req *driver.SnapshotRequest) (driver.SnapshotInfo, error) {
	const op = "snapshot"
	var memory bool
	switch req.Mode {
	case driver.SnapshotFull:
		memory = true
	case driver.SnapshotFilesystem:
	default:
		return driver.SnapshotInfo{}, sberrors.Errorf(sberrors.FailedPrecondition, "e2b: snapshot mode %q: E2B has %q and %q", req.Mode, driver.SnapshotFilesystem, driver.SnapshotFull)
	}
	name, err := snapname.Encode(req.Name, req.Labels, randHex(12))
	if err != nil {
		return driver.SnapshotInfo{}, sberrors.Errorf(sberrors.InvalidArgument, "e2b: snapshot name and labels: %v", err)
	}
	body := api.SandboxSnapshotRequest{Name: &name, Memory: &memory}
	status, data, _, err := r.call(ctx, op, false, func(ctx context.Context) (*http.Response, error) {
		return r.api.PostSandboxSnapshots(ctx, id, body)
	})
	if err != nil {
		err = r.scrub(err)
		if errors.Is(err, sberrors.ErrStaleTransport) {
			return driver.SnapshotInfo{}, err
		}
		// The answer was lost: the snapshot may exist; find it by its
		// name so the caller can delete it.
		if in, ok := r.findSnapshot(name); ok {
			return in, err
		}
		return driver.SnapshotInfo{}, err
	}
	if status == http.StatusNotFound {
		// E2B snapshots running sandboxes only: a paused one is resumed
		// for the copy and paused again.
		if d, derr := r.detail(ctx, id); derr == nil && d.State == "paused" {
			return r.snapshotPaused(ctx, id, req)
		}
	}
	if status != http.StatusCreated {
		return driver.SnapshotInfo{}, r.scrub(apiErr(op, status, data))
	}
	var si api.SnapshotInfo
	if err := decode(op, data, &si); err != nil {
		if in, ok := r.findSnapshot(name); ok {
			return in, err
		}
		return driver.SnapshotInfo{}, err
	}
	in := snapshotInfo(si)
	in.Mode, in.SourceID, in.CreatedAt = req.Mode, id, time.Now()
	return in, nil
}

// snapshotPaused resumes paused sandbox id, snapshots it and pauses it
// again, also when the snapshot failed.
func (r *Runtime) snapshotPaused(ctx context.Context, id string, req *driver.SnapshotRequest) (driver.SnapshotInfo, error) {
	if _, err := r.Resume(ctx, id); err != nil {
		return driver.SnapshotInfo{}, fmt.Errorf("e2b: snapshot of paused sandbox %s: resuming it: %w", id, err)
	}
	in, err := r.Snapshot(ctx, id, req)
	if perr := r.Pause(context.WithoutCancel(ctx), id); perr != nil {
		err = errors.Join(err, fmt.Errorf("e2b: snapshot of paused sandbox %s: pausing it again: %w", id, perr))
	}
	return in, err
}

// findSnapshot looks a snapshot up by name, bounded on its own since the
// caller's context may be over.
func (r *Runtime) findSnapshot(name string) (driver.SnapshotInfo, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	in, err := r.GetSnapshot(ctx, name)
	return in, err == nil
}

func snapshotInfo(si api.SnapshotInfo) driver.SnapshotInfo {
	in := driver.SnapshotInfo{ID: si.SnapshotID, Provider: Scheme, Size: -1}
	stored := si.SnapshotID
	if len(si.Names) > 0 {
		in.Detail = map[string]string{"names": strings.Join(si.Names, ",")}
		stored = si.Names[0]
	}
	if i := strings.LastIndexByte(stored, '/'); i >= 0 {
		stored = stored[i+1:]
	}
	stored, _, _ = strings.Cut(stored, ":")
	in.Name, in.Labels, _ = snapname.Decode(stored)
	return in
}

// GetSnapshot describes one snapshot, found by its ID or name.
func (r *Runtime) GetSnapshot(ctx context.Context, snapshotID string) (driver.SnapshotInfo, error) {
	const op = "get-snapshot"
	if snapshotID == "" {
		return driver.SnapshotInfo{}, sberrors.Errorf(sberrors.InvalidArgument, "e2b: %s: empty snapshot ID", op)
	}
	one := int32(1)
	params := &api.GetSnapshotsParams{Name: &snapshotID, Limit: &one}
	page, _, err := r.snapshotPage(ctx, op, params)
	if err != nil {
		return driver.SnapshotInfo{}, err
	}
	if len(page) == 0 {
		return driver.SnapshotInfo{}, sberrors.Errorf(sberrors.NotFound, "e2b: %s: snapshot %q not found", op, snapshotID)
	}
	return page[0], nil
}

func (r *Runtime) snapshotPage(ctx context.Context, op string, params *api.GetSnapshotsParams) ([]driver.SnapshotInfo, string, error) {
	status, data, hdr, err := r.call(ctx, op, true, func(ctx context.Context) (*http.Response, error) {
		return r.api.GetSnapshots(ctx, params)
	})
	if err != nil {
		return nil, "", r.scrub(err)
	}
	if status != http.StatusOK {
		return nil, "", r.scrub(apiErr(op, status, data))
	}
	var page []api.SnapshotInfo
	if err := decode(op, data, &page); err != nil {
		return nil, "", err
	}
	out := make([]driver.SnapshotInfo, 0, len(page))
	for _, si := range page {
		out = append(out, snapshotInfo(si))
	}
	return out, hdr.Get("X-Next-Token"), nil
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

// ListSnapshots returns one page of GET /snapshots, newest first,
// filtered by req.Labels here (a page can come back short, or empty with
// a next token).
func (r *Runtime) ListSnapshots(ctx context.Context, req *driver.ListSnapshotsRequest) ([]driver.SnapshotInfo, string, error) {
	limit := int32(min(cmp.Or(max(req.PageSize, 0), 100), 100))
	params := &api.GetSnapshotsParams{Limit: &limit}
	if req.PageToken != "" {
		t := req.PageToken
		params.NextToken = &t
	}
	page, next, err := r.snapshotPage(ctx, "list-snapshots", params)
	if err != nil || len(req.Labels) == 0 {
		return page, next, err
	}
	// E2B cannot filter on labels kept in names: the page is filtered here.
	out := page[:0]
	for _, in := range page {
		if hasLabels(in.Labels, req.Labels) {
			out = append(out, in)
		}
	}
	return out, next, nil
}

// DeleteSnapshot deletes the snapshot's template; one already gone is not
// an error. E2B's DELETE /templates/{id} deletes any template, the
// caller's base templates included, so only a snapshot this SDK made is
// deleted: its name must carry the SDK's encoding (internal/snapname) and
// GET /snapshots must list it. Any other ID (a plain template, a snapshot
// made by other means) is NotFound and nothing is deleted.
func (r *Runtime) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	const op = "delete-snapshot"
	if snapshotID == "" {
		return sberrors.Errorf(sberrors.InvalidArgument, "e2b: %s: empty snapshot ID", op)
	}
	if !madeHere(snapshotID) {
		return sberrors.Errorf(sberrors.NotFound, "e2b: %s: %q is not a snapshot this SDK made (a template or a snapshot made by other means); nothing deleted", op, snapshotID)
	}
	if _, err := r.GetSnapshot(ctx, snapshotID); err != nil {
		if sberrors.CodeOf(err) == sberrors.NotFound {
			return nil // already gone
		}
		return err
	}
	status, data, _, err := r.call(ctx, op, true, func(ctx context.Context) (*http.Response, error) {
		return r.api.DeleteTemplate(ctx, snapshotID)
	})
	if err != nil {
		return r.scrub(err)
	}
	switch status {
	case http.StatusNoContent, http.StatusOK, http.StatusNotFound:
		return nil
	}
	return r.scrub(apiErr(op, status, data))
}

// madeHere reports whether snapshot ID id ("<team>/<name>:<tag>", or its
// name) names a snapshot this SDK made: its name carries snapname's
// encoding.
func madeHere(id string) bool {
	name := id
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	name, _, _ = strings.Cut(name, ":")
	_, _, ok := snapname.Decode(name)
	return ok
}

// Fork creates n sandboxes from sandbox id's current state (see the
// comment at the top of this file).
func (r *Runtime) Fork(ctx context.Context, id string, n int, req *driver.CreateRequest) ([]driver.Info, error) {
	const op = "fork"
	if n < 1 || n > 100 {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "e2b: %s: count %d: E2B forks 1 to 100 sandboxes at once", op, n)
	}
	if req.Resources != (driver.Resources{}) {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "e2b: %s: resources are set by the template; a fork has its source's", op)
	}
	src, err := r.detail(ctx, id)
	if err != nil {
		return nil, err
	}
	var have map[string]string
	if src.Metadata != nil {
		have = maps.Clone(map[string]string(*src.Metadata))
	}
	token := have[createTokenLabel]
	delete(have, createTokenLabel)
	if len(req.Env) > 0 || (req.Labels != nil && !maps.Equal(req.Labels, have)) || len(req.Options) > 0 || req.Network != nil || req.NoNetwork {
		return r.forkBySnapshot(ctx, id, n, req)
	}
	lease := req.Timeout
	if lease <= 0 {
		lease = r.leaseFor(id)
	}
	secs, count := seconds(lease), int32(n)
	started := time.Now()
	status, data, _, err := r.call(ctx, op, false, func(ctx context.Context) (*http.Response, error) {
		return r.api.PostSandboxFork(ctx, id, api.SandboxForkRequest{Timeout: &secs, Count: &count})
	})
	if err != nil {
		err = r.scrub(err)
		if !errors.Is(err, sberrors.ErrStaleTransport) {
			r.destroyLostForks(id, token, n, started)
		}
		return nil, err
	}
	if status != http.StatusCreated {
		return nil, r.scrub(apiErr(op, status, data))
	}
	var results []api.SandboxForkResult
	if err := decode(op, data, &results); err != nil {
		r.destroyLostForks(id, token, n, started)
		return nil, err
	}
	var out []driver.Info
	var errs []error
	home := r.homeFor()
	if c := r.cached(id); c != nil && c.home != "" {
		home = c.home
	}
	for i, res := range results {
		if res.Sandbox == nil {
			e := sberrors.Errorf(sberrors.Internal, "e2b: %s: child %d failed to start", op, i)
			if res.Error != nil {
				e = sberrors.Errorf(codeForStatus(int(res.Error.Code)), "e2b: %s: child %d: HTTP %d: %s", op, i, res.Error.Code, res.Error.Message)
			}
			errs = append(errs, r.scrub(e))
			continue
		}
		sb := res.Sandbox
		r.remember(sb.SandboxID, sb.EnvdAccessToken, sb.Domain, sb.EnvdVersion)
		r.rememberTraffic(sb.SandboxID, sb.TrafficAccessToken)
		r.setLease(sb.SandboxID, lease)
		tmpl := sb.TemplateID
		if sb.Alias != nil && *sb.Alias != "" {
			tmpl = *sb.Alias
		}
		out = append(out, driver.Info{
			ID: sb.SandboxID, Provider: Scheme, Template: tmpl, Labels: maps.Clone(have),
			State: driver.StateRunning, CreatedAt: started, LeaseEnd: started.Add(time.Duration(secs) * time.Second),
			Isolation: "microvm", Home: home,
			Detail: map[string]string{"templateID": sb.TemplateID, "envdVersion": sb.EnvdVersion, "forkOf": id},
		})
	}
	if len(results) != n {
		errs = append(errs, sberrors.Errorf(sberrors.Internal, "e2b: %s: asked for %d forks, E2B answered %d", op, n, len(results)))
	}
	if ctx.Err() != nil {
		// The caller is gone: nothing made may be left behind.
		for _, in := range out {
			_ = r.Destroy(context.WithoutCancel(ctx), in.ID)
		}
		return nil, errors.Join(append(errs, fmt.Errorf("e2b: %s: %w", op, ctx.Err()))...)
	}
	return out, errors.Join(errs...)
}

// destroyLostForks destroys the n forks of a fork request whose answer
// was lost: the sandboxes carrying the source's metadata token that
// started after the request was sent, other than the source. The server
// may still be starting them, so it looks again (bounded, as lostCreate)
// until it has found n. A concurrent fork of the same source in that
// window would lose its forks too.
func (r *Runtime) destroyLostForks(id, token string, n int, since time.Time) {
	if token == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gone := map[string]bool{}
	for i := 0; i <= lostcreate.Polls && len(gone) < n; i++ {
		if i > 0 {
			time.Sleep(lostcreate.Wait)
		}
		page, _, err := r.List(ctx, &driver.ListRequest{Labels: map[string]string{createTokenLabel: token}, PageSize: 100})
		if err != nil {
			continue
		}
		for _, in := range page {
			if in.ID != id && !gone[in.ID] && !in.CreatedAt.Before(since.Add(-time.Second)) {
				if r.Destroy(ctx, in.ID) == nil {
					gone[in.ID] = true
				}
			}
		}
	}
}

// forkBySnapshot forks through a full snapshot and n creates, for forks
// that need labels or env vars of their own.
func (r *Runtime) forkBySnapshot(ctx context.Context, id string, n int, req *driver.CreateRequest) ([]driver.Info, error) {
	snap, err := r.Snapshot(ctx, id, &driver.SnapshotRequest{Name: "fork-" + id, Mode: driver.SnapshotFull})
	if err != nil {
		if snap.ID != "" {
			_ = r.DeleteSnapshot(context.WithoutCancel(ctx), snap.ID)
		}
		return nil, err
	}
	defer func() { _ = r.DeleteSnapshot(context.WithoutCancel(ctx), snap.ID) }()
	infos := make([]driver.Info, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cr := *req
			cr.Template, cr.FromSnapshot = "", snap.ID
			infos[i], errs[i] = r.Create(ctx, &cr)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("e2b: fork: child %d: %w", i, errs[i])
			}
		}()
	}
	wg.Wait()
	var out []driver.Info
	for i, in := range infos {
		if in.ID == "" {
			continue
		}
		if errs[i] != nil || ctx.Err() != nil {
			// Made but not usable, or the caller is gone.
			_ = r.Destroy(context.WithoutCancel(ctx), in.ID)
			continue
		}
		out = append(out, in)
	}
	if ctx.Err() != nil {
		return nil, errors.Join(append(errs, fmt.Errorf("e2b: fork: %w", ctx.Err()))...)
	}
	return out, errors.Join(errs...)
}

var (
	_ driver.Snapshotter = (*Runtime)(nil)
	_ driver.Forker      = (*Runtime)(nil)
)
