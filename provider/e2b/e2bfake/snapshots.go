package e2bfake

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/api"
)

// Snapshots and fork, as E2B serves them (e2b-dev/infra spec/openapi.yml,
// packages/api/internal/handlers/snapshot_template_create.go,
// snapshot_template_list.go, template_delete.go, sandbox_fork.go):
//
//   - POST /sandboxes/{id}/snapshots {name?, memory?} answers 201
//     {snapshotID, names}. A snapshot is a template: unnamed, its ID is
//     "<templateID>:default"; named, "<team>/<alias>:default" with names
//     ["<team>/<alias>"], and a name already taken gets a new build on the
//     same template (the old content is replaced). A paused or unknown
//     sandbox is 404 (only running sandboxes can be snapshotted).
//   - GET /snapshots?sandboxID&name&limit&nextToken lists them, newest
//     first, limit 1..100 (default 100), X-Next-Token when more follow.
//   - DELETE /templates/{snapshotID} (the tag is ignored) answers 204, an
//     unknown one 404 "template '<id>' not found".
//   - POST /sandboxes with templateID = a snapshot ID (or name, with or
//     without tag) starts a sandbox on the snapshot's files.
//   - POST /sandboxes/{id}/fork {timeout?, count?} checkpoints the sandbox
//     and starts count forks, answering 201 with one {sandbox} or {error}
//     per fork. Forks inherit the source's metadata, env vars, network
//     settings and auto-pause; a paused source is 409, an unknown one 404.
//
// The fake keeps what it can honestly keep: the backend's own snapshot
// when the backend is a driver.Snapshotter declaring the mode, otherwise a
// deep copy of the files under the sandbox's home (regular files and
// directories; symbolic links and file modes are not kept). A memory
// snapshot restores processes only where the backend's full mode does.

// Team is the team slug the fake's named snapshots are namespaced with.
const Team = "e2bfake"

// snapStore is the fake's snapshot templates.
type snapStore struct {
	mu       sync.Mutex
	byID     map[string]*snapshot // by template ID
	failFork []int                // fork children that fail in the next fork, by position
}

type snapshot struct {
	templateID, alias string
	sourceID          string
	memory            bool
	createdAt         time.Time
	// backendSnap is the backend's snapshot, when the backend took one;
	// otherwise files holds the copy.
	backendSnap string
	files       []snapFile
}

type snapFile struct {
	path string
	dir  bool
	data []byte
}

func (sn *snapshot) id() string {
	if sn.alias != "" {
		return Team + "/" + sn.alias + ":default"
	}
	return sn.templateID + ":default"
}

func (sn *snapshot) info() api.SnapshotInfo {
	out := api.SnapshotInfo{SnapshotID: sn.id(), Names: []string{}}
	if sn.alias != "" {
		out.Names = []string{Team + "/" + sn.alias}
	}
	return out
}

// FailNextFork makes the children at the given positions (0-based) of the
// next fork fail to start, each reported in its entry of the answer as a
// 500, as a fork that could not be placed is.
func (s *Server) FailNextFork(children ...int) {
	s.snaps.mu.Lock()
	defer s.snaps.mu.Unlock()
	s.snaps.failFork = slices.Clone(children)
}

// Snapshots returns the IDs of the snapshots that exist.
func (s *Server) Snapshots() []string {
	s.snaps.mu.Lock()
	defer s.snaps.mu.Unlock()
	var ids []string
	for _, sn := range s.snaps.byID {
		ids = append(ids, sn.id())
	}
	slices.Sort(ids)
	return ids
}

// aliasRE is the API's identifier rule (packages/shared/pkg/id).
var aliasRE = regexp.MustCompile(`^[a-z0-9-_]+$`)

// resolveSnapshot finds the snapshot a template reference names: its
// template ID or alias, optionally with the team namespace and a tag.
func (s *Server) resolveSnapshot(ref string) (*snapshot, string, bool) {
	ident, tag, hasTag := strings.Cut(ref, ":")
	ident = strings.TrimPrefix(ident, Team+"/")
	s.snaps.mu.Lock()
	defer s.snaps.mu.Unlock()
	for _, sn := range s.snaps.byID {
		if sn.templateID == ident || (sn.alias != "" && sn.alias == ident) {
			if hasTag && tag != "default" {
				return nil, fmt.Sprintf("tag '%s' does not exist for template '%s'", tag, ident), false
			}
			return sn, "", true
		}
	}
	return nil, fmt.Sprintf("template '%s' not found", ident), false
}

// capture saves sandbox b's state.
func (s *Server) capture(ctx context.Context, b *box, memory bool) (*snapshot, error) {
	sn := &snapshot{sourceID: b.id, memory: memory, createdAt: s.now()}
	mode := driver.SnapshotFilesystem
	if memory {
		mode = driver.SnapshotFull
	}
	if bs, ok := s.backend.(driver.Snapshotter); ok && slices.Contains(s.backend.Capabilities().SnapshotModes, mode) {
		in, err := bs.Snapshot(ctx, b.backendID, &driver.SnapshotRequest{Mode: mode})
		if err != nil {
			if in.ID != "" {
				_ = bs.DeleteSnapshot(context.WithoutCancel(ctx), in.ID)
			}
			return nil, err
		}
		sn.backendSnap = in.ID
		return sn, nil
	}
	if bs, ok := s.backend.(driver.Snapshotter); ok && memory && slices.Contains(s.backend.Capabilities().SnapshotModes, driver.SnapshotFilesystem) {
		in, err := bs.Snapshot(ctx, b.backendID, &driver.SnapshotRequest{Mode: driver.SnapshotFilesystem})
		if err != nil {
			if in.ID != "" {
				_ = bs.DeleteSnapshot(context.WithoutCancel(ctx), in.ID)
			}
			return nil, err
		}
		sn.backendSnap = in.ID
		return sn, nil
	}
	files, err := s.copyTree(ctx, b.backendID, b.home)
	if err != nil {
		return nil, err
	}
	sn.files = files
	return sn, nil
}

// copyTree reads every directory and regular file under root.
func (s *Server) copyTree(ctx context.Context, id, root string) ([]snapFile, error) {
	var out []snapFile
	var walk func(dir string) error
	walk = func(dir string) error {
		ents, err := s.backend.ReadDir(ctx, id, dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			p := e.Path
			if p == "" {
				p = path.Join(dir, e.Name())
			}
			switch {
			case e.Mode.IsDir():
				out = append(out, snapFile{path: p, dir: true})
				if err := walk(p); err != nil {
					return err
				}
			case e.Mode.IsRegular():
				rc, err := s.backend.Download(ctx, id, p)
				if err != nil {
					return err
				}
				data, err := io.ReadAll(rc)
				_ = rc.Close()
				if err != nil {
					return err
				}
				out = append(out, snapFile{path: p, data: data})
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	return out, nil
}

// restore creates a backend sandbox holding sn's state.
func (s *Server) restore(ctx context.Context, sn *snapshot, env map[string]string, lease time.Duration) (driver.Info, error) {
	if sn.backendSnap != "" {
		return s.backend.Create(ctx, &driver.CreateRequest{Env: env, Timeout: lease, FromSnapshot: sn.backendSnap})
	}
	info, err := s.backend.Create(ctx, &driver.CreateRequest{Env: env, Timeout: lease})
	if err != nil {
		return info, err
	}
	for _, f := range sn.files {
		if f.dir {
			err = s.backend.MkdirAll(ctx, info.ID, f.path)
		} else {
			err = s.backend.Upload(ctx, info.ID, f.path, bytes.NewReader(f.data))
		}
		if err != nil {
			return info, err
		}
	}
	return info, nil
}

func (s *Server) dropSnapshot(sn *snapshot) {
	if sn.backendSnap == "" {
		return
	}
	if bs, ok := s.backend.(driver.Snapshotter); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = bs.DeleteSnapshot(ctx, sn.backendSnap)
	}
}

// closeSnapshots drops every snapshot the backend holds for the fake.
func (s *Server) closeSnapshots() {
	s.snaps.mu.Lock()
	all := slices.Collect(maps.Values(s.snaps.byID))
	s.snaps.byID = nil
	s.snaps.mu.Unlock()
	for _, sn := range all {
		s.dropSnapshot(sn)
	}
}

func (c controlPlane) PostSandboxSnapshots(w http.ResponseWriter, r *http.Request, id api.SandboxID) {
	s := c.s
	var req api.SandboxSnapshotRequest
	if !decodeBody(w, r, &req) {
		return
	}
	var alias string
	if req.Name != nil {
		n := strings.TrimPrefix(*req.Name, Team+"/")
		if strings.Contains(n, "/") {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("namespace in %q does not match the team's", *req.Name))
			return
		}
		if a, tag, ok := strings.Cut(n, ":"); ok {
			if tag != "default" {
				// The fake keeps one build per template: only the default tag.
				writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid name: tag %q is not supported by the fake", tag))
				return
			}
			n = a
		}
		if !aliasRE.MatchString(n) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid name: invalid alias %q", n))
			return
		}
		alias = n
	}
	if !sandboxIDRE.MatchString(id) {
		writeError(w, http.StatusBadRequest, "Invalid sandbox ID")
		return
	}
	s.mu.Lock()
	b, ok := s.boxes[id]
	paused := ok && b.paused
	s.mu.Unlock()
	if !ok || paused {
		// Only running sandboxes are in the orchestrator's store.
		writeError(w, http.StatusNotFound, notFoundMsg(id))
		return
	}
	memory := req.Memory == nil || *req.Memory
	sn, err := s.capture(r.Context(), b, memory)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "Error creating snapshot template")
		return
	}
	sn.alias = alias
	s.snaps.mu.Lock()
	if s.snaps.byID == nil {
		s.snaps.byID = map[string]*snapshot{}
	}
	var replaced *snapshot
	if alias != "" {
		for _, old := range s.snaps.byID {
			if old.alias == alias {
				// A name taken: a new build on the same template.
				sn.templateID, replaced = old.templateID, old
			}
		}
	}
	if sn.templateID == "" {
		sn.templateID = newTemplateID()
	}
	s.snaps.byID[sn.templateID] = sn
	s.snaps.mu.Unlock()
	if replaced != nil {
		s.dropSnapshot(replaced)
	}
	writeJSON(w, http.StatusCreated, sn.info())
}

func newTemplateID() string { return newSandboxID()[1:] }

func (c controlPlane) GetSnapshots(w http.ResponseWriter, r *http.Request, params api.GetSnapshotsParams) {
	s := c.s
	limit := 100
	if params.Limit != nil {
		if *params.Limit < 1 || *params.Limit > 100 {
			writeError(w, http.StatusBadRequest, `parameter "limit" in query has an error: number must be at most 100 and at least 1`)
			return
		}
		limit = int(*params.Limit)
	}
	var after *snapCursor
	if params.NextToken != nil && *params.NextToken != "" {
		cur, err := parseSnapCursor(*params.NextToken)
		if err != nil {
			writeError(w, http.StatusBadRequest, "Invalid next token")
			return
		}
		after = &cur
	}
	var only *snapshot
	if params.Name != nil {
		sn, _, ok := s.resolveSnapshot(*params.Name)
		if !ok {
			writeJSON(w, http.StatusOK, []api.SnapshotInfo{})
			return
		}
		only = sn
	}
	s.snaps.mu.Lock()
	all := slices.Collect(maps.Values(s.snaps.byID))
	s.snaps.mu.Unlock()
	// Newest first, ties by template ID.
	slices.SortFunc(all, func(a, b *snapshot) int {
		if c := b.createdAt.Compare(a.createdAt); c != 0 {
			return c
		}
		return strings.Compare(a.templateID, b.templateID)
	})
	var page []*snapshot
	more := false
	for _, sn := range all {
		if only != nil && sn != only {
			continue
		}
		if params.SandboxID != nil && sn.sourceID != *params.SandboxID {
			continue
		}
		if after != nil && !after.before(sn) {
			continue
		}
		if len(page) == limit {
			more = true
			break
		}
		page = append(page, sn)
	}
	if more {
		last := page[len(page)-1]
		w.Header().Set("X-Next-Token", snapCursor{t: last.createdAt, id: last.templateID}.String())
	}
	out := make([]api.SnapshotInfo, 0, len(page))
	for _, sn := range page {
		out = append(out, sn.info())
	}
	writeJSON(w, http.StatusOK, out)
}

type snapCursor struct {
	t  time.Time
	id string
}

func (c snapCursor) String() string {
	return base64.URLEncoding.EncodeToString([]byte(c.t.UTC().Format(time.RFC3339Nano) + "__" + c.id))
}

// before reports whether sn comes after the cursor in newest-first order.
func (c snapCursor) before(sn *snapshot) bool {
	if !sn.createdAt.Equal(c.t) {
		return sn.createdAt.Before(c.t)
	}
	return sn.templateID > c.id
}

func parseSnapCursor(tok string) (snapCursor, error) {
	raw, err := base64.URLEncoding.DecodeString(tok)
	if err != nil {
		return snapCursor{}, err
	}
	ts, id, ok := strings.Cut(string(raw), "__")
	if !ok {
		return snapCursor{}, errors.New("no separator")
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return snapCursor{}, err
	}
	return snapCursor{t: t, id: id}, nil
}

func (c controlPlane) DeleteTemplate(w http.ResponseWriter, r *http.Request, templateID string) {
	s := c.s
	ident, _, _ := strings.Cut(templateID, ":")
	sn, msg, ok := s.resolveSnapshot(ident)
	if !ok {
		writeError(w, http.StatusNotFound, msg)
		return
	}
	s.snaps.mu.Lock()
	_, still := s.snaps.byID[sn.templateID]
	delete(s.snaps.byID, sn.templateID)
	s.snaps.mu.Unlock()
	if !still {
		writeError(w, http.StatusNotFound, fmt.Sprintf("template '%s' not found", strings.TrimPrefix(ident, Team+"/")))
		return
	}
	s.dropSnapshot(sn)
	w.WriteHeader(http.StatusNoContent)
}

// createBackend creates the backend sandbox for POST /sandboxes: from the
// snapshot templateID names, if it names one, else a fresh one.
// A fresh one gets the egress rules put in force where the backend can
// (see backendNetwork); one from a snapshot keeps the backend's network.
func (s *Server) createBackend(ctx context.Context, templateID string, env map[string]string, lease time.Duration, net backendNet) (driver.Info, error) {
	if sn, _, ok := s.resolveSnapshot(templateID); ok {
		return s.restore(ctx, sn, env, lease)
	}
	return s.backend.Create(ctx, &driver.CreateRequest{Env: env, Timeout: lease, Network: net.policy, NoNetwork: net.noNetwork, Secrets: net.secrets})
}

// knownTemplate reports whether create accepts templateID, and the 404
// message when it does not.
func (s *Server) knownTemplate(templateID string) (string, bool) {
	if slices.Contains(s.templates, templateID) {
		return "", true
	}
	_, msg, ok := s.resolveSnapshot(templateID)
	return msg, ok
}

func (c controlPlane) PostSandboxFork(w http.ResponseWriter, r *http.Request, id api.SandboxID) {
	s := c.s
	var req api.SandboxForkRequest
	if r.ContentLength != 0 {
		if !decodeBody(w, r, &req) {
			return
		}
	}
	lease := s.defaultLease
	if req.Timeout != nil {
		lease = time.Duration(*req.Timeout) * time.Second
	}
	if lease > s.maxLease {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Timeout cannot be greater than %d hours", int(s.maxLease.Hours())))
		return
	}
	count := 1
	if req.Count != nil {
		count = int(*req.Count)
	}
	switch {
	case count < 1:
		writeError(w, http.StatusBadRequest, "Count must be at least 1")
		return
	case count > 100:
		writeError(w, http.StatusBadRequest, "Count cannot be greater than 100")
		return
	case s.maxSandboxes > 0 && count >= s.maxSandboxes:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Count must be lower than the maximum number of concurrent sandboxes (%d)", s.maxSandboxes))
		return
	}
	if !sandboxIDRE.MatchString(id) {
		writeError(w, http.StatusBadRequest, "Invalid sandbox ID")
		return
	}
	s.mu.Lock()
	src, ok := s.boxes[id]
	paused := ok && src.paused
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, notFoundMsg(id))
		return
	}
	if paused {
		writeError(w, http.StatusConflict, fmt.Sprintf("Sandbox '%s' is paused and cannot be forked; resume it first", id))
		return
	}
	sn, err := s.capture(r.Context(), src, true)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "Error forking sandbox")
		return
	}
	defer s.dropSnapshot(sn)
	s.snaps.mu.Lock()
	failing := s.snaps.failFork
	s.snaps.failFork = nil
	s.snaps.mu.Unlock()
	s.mu.Lock()
	env := maps.Clone(src.env)
	meta := maps.Clone(src.metadata)
	template := src.template
	tmpl := *src
	s.mu.Unlock()
	backendLease := 24 * time.Hour
	if m := s.backend.Capabilities().MaxLease; m > 0 && m < backendLease {
		backendLease = m
	}
	results := make([]api.SandboxForkResult, count)
	var wg sync.WaitGroup
	for i := range count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail := func(code int, msg string) {
				results[i] = api.SandboxForkResult{Error: &api.Error{Code: int32(code), Message: msg}}
			}
			if slices.Contains(failing, i) {
				fail(http.StatusInternalServerError, "Failed to create sandbox")
				return
			}
			if s.maxSandboxes > 0 {
				s.mu.Lock()
				n := len(s.boxes)
				s.mu.Unlock()
				if n >= s.maxSandboxes {
					fail(http.StatusTooManyRequests, fmt.Sprintf("you have reached the maximum number of concurrent E2B sandboxes (%d). If you need more, please visit 'https://e2b.dev/docs/billing'", s.maxSandboxes))
					return
				}
			}
			info, err := s.restore(r.Context(), sn, env, backendLease)
			if err != nil {
				if info.ID != "" {
					_ = s.backend.Destroy(context.WithoutCancel(r.Context()), info.ID)
				}
				fail(http.StatusInternalServerError, "Failed to create sandbox")
				return
			}
			now := s.now()
			b := &box{
				id: newSandboxID(), backendID: info.ID, template: template, home: info.Home, version: s.envdVersion,
				env: maps.Clone(env), metadata: maps.Clone(meta), startedAt: now, endAt: now.Add(lease),
				procs: map[uint32]*proc{}, autoPause: tmpl.autoPause, internet: tmpl.internet,
				allowOut: slices.Clone(tmpl.allowOut), denyOut: slices.Clone(tmpl.denyOut),
			}
			if b.home == "" {
				b.home = tmpl.home
			}
			if tmpl.token != "" {
				b.token = randHex(32)
			}
			if tmpl.traffic != "" {
				b.traffic = randHex(32)
			}
			s.mu.Lock()
			s.boxes[b.id] = b
			s.mu.Unlock()
			sb := b.sandbox()
			results[i] = api.SandboxForkResult{Sandbox: &sb}
		}()
	}
	wg.Wait()
	writeJSON(w, http.StatusCreated, results)
}

// SnapshotKeepsMemory reports whether the snapshot (by ID or name) was
// asked to keep memory (the request's "memory", true when left out).
func (s *Server) SnapshotKeepsMemory(snapshotID string) (memory, ok bool) {
	sn, _, ok := s.resolveSnapshot(snapshotID)
	if !ok {
		return false, false
	}
	s.snaps.mu.Lock()
	defer s.snaps.mu.Unlock()
	return sn.memory, true
}
