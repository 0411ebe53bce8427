package daytonafake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/api"
)

// Snapshots, as Daytona serves them (daytonaio/daytona at b5a5d9e78:
// apps/api/src/sandbox/controllers/sandbox.controller.ts and
// snapshot.controller.ts, services/sandbox.service.ts
// createSnapshotFromSandbox and createFromSnapshot,
// utils/persist-snapshot-from-sandbox.util.ts):
//
//   - POST /sandbox/{idOrName}/snapshot {name, includeMemory?} answers 200
//     with the sandbox in state "snapshotting"; the copy runs in the
//     background, then the snapshot row appears (state "active") and the
//     sandbox returns to the state it had. Only a started or stopped
//     sandbox may be snapshotted (400 "Sandbox must be in started or
//     stopped state to create a snapshot"); one mid-transition is 409;
//     includeMemory is for Windows sandboxes only (400). A name already
//     taken makes the background step fail: the sandbox returns to its
//     state and no snapshot appears (the v0 runner path swallows it).
//   - GET /snapshots?page&limit&name lists the organization's snapshots and
//     the general ones, {items,total,page,totalPages}, newest first here.
//   - GET /snapshots/{idOrName}: 404 "Snapshot X not found".
//   - DELETE /snapshots/{id} takes the UUID (400 "Validation failed (uuid
//     is expected)" otherwise), answers 200 and marks it "removing"; it is
//     gone once the next request has seen it removing. A general snapshot
//     is 403.
//   - POST /sandbox {snapshot} with a name or ID no snapshot has is 400
//     "Snapshot X not found. Did you add it through the Daytona
//     Dashboard?"; one not active is 400 "Snapshot X is <state>".
//
// A snapshot is the backend's own when the backend is a
// driver.Snapshotter with filesystem mode, otherwise a deep copy of the
// regular files and directories under the sandbox's home (links and file
// modes are not kept).

// DefaultSnapshot is the general snapshot sandboxes are created from when
// a create names none.
const DefaultSnapshot = "daytonaio/sandbox:fake"

type snapStore struct {
	mu    sync.Mutex
	byID  map[string]*dsnap
	prev  map[string]string // the state a snapshotting sandbox returns to, by sandbox id
	fails int               // background snapshot steps that fail next
}

type dsnap struct {
	id, name, state, sourceID string
	createdAt                 time.Time
	size                      float32
	backendSnap               string
	files                     []snapFile
}

type snapFile struct {
	path string // relative to the source sandbox's home: a sandbox made from it may have another home
	dir  bool
	data []byte
}

// FailNextSnapshots makes the background step of the next n sandbox
// snapshots fail: the sandbox returns to its state and no snapshot
// appears, as when the runner's commit fails.
func (s *Server) FailNextSnapshots(n int) {
	s.snaps.mu.Lock()
	defer s.snaps.mu.Unlock()
	s.snaps.fails = n
}

// Snapshots returns the names of the snapshots that exist and are not
// being removed (not the general default one).
func (s *Server) Snapshots() []string {
	s.snaps.mu.Lock()
	defer s.snaps.mu.Unlock()
	var out []string
	for _, sn := range s.snaps.byID {
		if sn.state != "removing" {
			out = append(out, sn.name)
		}
	}
	slices.Sort(out)
	return out
}

func (sn *dsnap) dto() api.Snapshot {
	g, size, ref := false, sn.size, "registry.fake/"+sn.id
	upd := sn.createdAt
	return api.Snapshot{Id: sn.id, Name: sn.name, General: &g, State: api.SnapshotState(sn.state), Size: &size,
		Ref: &ref, CreatedAt: sn.createdAt, UpdatedAt: &upd}
}

// findSnapLocked finds a snapshot by ID or name.
func (s *Server) findSnapLocked(idOrName string) *dsnap {
	if sn := s.snaps.byID[idOrName]; sn != nil {
		return sn
	}
	for _, sn := range s.snaps.byID {
		if sn.name == idOrName {
			return sn
		}
	}
	return nil
}

// sweepLocked drops the snapshots a request has already seen removing.
func (s *Server) sweepLocked(seen *dsnap) {
	if seen != nil && seen.state == "removing" {
		delete(s.snaps.byID, seen.id)
		s.async(func() { s.dropSnap(seen) })
	}
}

// createSource checks the snapshot a create names and says how to make
// the backend sandbox: from a snapshot of the fake's, or fresh for the
// general default. msg is the 400 answer when it cannot.
func (s *Server) createSource(name string) (sn *dsnap, msg string) {
	if name == "" || name == DefaultSnapshot {
		return nil, ""
	}
	s.snaps.mu.Lock()
	defer s.snaps.mu.Unlock()
	sn = s.findSnapLocked(name)
	switch {
	case sn == nil:
		return nil, fmt.Sprintf("Snapshot %s not found. Did you add it through the Daytona Dashboard?", name)
	case sn.state != "active":
		defer s.sweepLocked(sn)
		return nil, fmt.Sprintf("Snapshot %s is %s", name, sn.state)
	}
	return sn, ""
}

// createBackend creates the backend sandbox, from sn when it is set.
func (s *Server) createBackend(ctx context.Context, sn *dsnap, req *driver.CreateRequest) (driver.Info, error) {
	if sn == nil {
		return s.backend.Create(ctx, req)
	}
	if sn.backendSnap != "" {
		r := *req
		r.FromSnapshot = sn.backendSnap
		return s.backend.Create(ctx, &r)
	}
	info, err := s.backend.Create(ctx, req)
	if err != nil {
		return info, err
	}
	home := info.Home
	if home == "" {
		home = "/"
	}
	for _, f := range sn.files {
		p := path.Join(home, f.path)
		if f.dir {
			err = s.backend.MkdirAll(ctx, info.ID, p)
		} else {
			err = s.backend.Upload(ctx, info.ID, p, bytes.NewReader(f.data))
		}
		if err != nil {
			_ = s.backend.Destroy(context.WithoutCancel(ctx), info.ID)
			return driver.Info{}, err
		}
	}
	return info, nil
}

func (s *Server) dropSnap(sn *dsnap) {
	if sn.backendSnap == "" {
		return
	}
	if bs, ok := s.backend.(driver.Snapshotter); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = bs.DeleteSnapshot(ctx, sn.backendSnap)
	}
}

func (s *Server) closeSnapshots() {
	s.snaps.mu.Lock()
	all := slices.Collect(maps.Values(s.snaps.byID))
	s.snaps.byID = nil
	s.snaps.mu.Unlock()
	for _, sn := range all {
		s.dropSnap(sn)
	}
}

// capture copies backend sandbox id's state into sn.
func (s *Server) capture(ctx context.Context, id, home string, sn *dsnap) error {
	if bs, ok := s.backend.(driver.Snapshotter); ok && slices.Contains(s.backend.Capabilities().SnapshotModes, driver.SnapshotFilesystem) {
		in, err := bs.Snapshot(ctx, id, &driver.SnapshotRequest{Mode: driver.SnapshotFilesystem})
		if err != nil {
			if in.ID != "" {
				_ = bs.DeleteSnapshot(context.WithoutCancel(ctx), in.ID)
			}
			return err
		}
		sn.backendSnap = in.ID
		return nil
	}
	if home == "" {
		home = "/"
	}
	var size int
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
			rel := strings.TrimPrefix(strings.TrimPrefix(p, home), "/")
			switch {
			case e.Mode.IsDir():
				sn.files = append(sn.files, snapFile{path: rel, dir: true})
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
				size += len(data)
				sn.files = append(sn.files, snapFile{path: rel, data: data})
			}
		}
		return nil
	}
	if err := walk(home); err != nil {
		return err
	}
	sn.size = float32(size) / (1 << 30)
	return nil
}

// sandboxSnapshot serves POST /sandbox/{idOrName}/snapshot.
func (s *Server) sandboxSnapshot(w http.ResponseWriter, r *http.Request, b *sbx) {
	var req api.CreateSandboxSnapshot
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		s.mu.Unlock()
		nestError(w, r, 400, "Invalid request body")
		return
	}
	if strings.TrimSpace(req.Name) == "" {
		s.mu.Unlock()
		nestError(w, r, 400, "name must be a string")
		return
	}
	if b.stored == "snapshotting" {
		s.mu.Unlock()
		nestError(w, r, http.StatusConflict, "Sandbox state change in progress")
		return
	}
	if b.stored != stateStarted && b.stored != stateStopped {
		s.mu.Unlock()
		nestError(w, r, 400, "Sandbox must be in started or stopped state to create a snapshot")
		return
	}
	if req.IncludeMemory != nil && *req.IncludeMemory {
		s.mu.Unlock()
		nestError(w, r, 400, "includeMemory is only supported for Windows sandboxes")
		return
	}
	prev := b.stored
	b.stored = "snapshotting"
	out := s.dto(b, b.stored)
	backendID, home, sbID := b.backendID, b.home, b.id
	s.mu.Unlock()
	s.snaps.mu.Lock()
	if s.snaps.prev == nil {
		s.snaps.prev = map[string]string{}
	}
	s.snaps.prev[sbID] = prev
	fail := s.snaps.fails > 0
	if fail {
		s.snaps.fails--
	}
	s.snaps.mu.Unlock()
	name := req.Name
	s.async(func() {
		sn := &dsnap{id: uuid4(), name: name, state: "active", sourceID: sbID, createdAt: s.now()}
		ctx, cancel := context.WithTimeout(s.baseCtx, 5*time.Minute)
		err := s.capture(ctx, backendID, home, sn)
		cancel()
		s.snaps.mu.Lock()
		taken := false
		for _, o := range s.snaps.byID {
			taken = taken || o.name == name
		}
		if err == nil && !fail && !taken {
			if s.snaps.byID == nil {
				s.snaps.byID = map[string]*dsnap{}
			}
			s.snaps.byID[sn.id] = sn
		} else {
			s.async(func() { s.dropSnap(sn) })
		}
		delete(s.snaps.prev, sbID)
		s.snaps.mu.Unlock()
		s.mu.Lock()
		if b.stored == "snapshotting" {
			b.stored = prev
		}
		s.mu.Unlock()
	})
	writeJSON(w, 200, out)
}

// snapshotsAPI serves /snapshots and /snapshots/{id}.
func (s *Server) snapshotsAPI(w http.ResponseWriter, r *http.Request, parts []string) {
	switch {
	case len(parts) == 1 && r.Method == http.MethodGet:
		s.listSnapshots(w, r)
	case len(parts) == 2 && r.Method == http.MethodGet:
		s.snaps.mu.Lock()
		sn := s.findSnapLocked(parts[1])
		var out api.Snapshot
		if sn != nil {
			out = sn.dto()
			s.sweepLocked(sn)
		}
		s.snaps.mu.Unlock()
		if sn == nil {
			nestError(w, r, 404, fmt.Sprintf("Snapshot %s not found", parts[1]))
			return
		}
		writeJSON(w, 200, out)
	case len(parts) == 2 && r.Method == http.MethodDelete:
		if parts[1] == DefaultSnapshot {
			nestError(w, r, 403, "You cannot delete a general snapshot")
			return
		}
		if !isUUID(parts[1]) {
			nestError(w, r, 400, "Validation failed (uuid is expected)")
			return
		}
		s.snaps.mu.Lock()
		sn := s.snaps.byID[parts[1]]
		if sn != nil {
			sn.state = "removing"
		}
		s.snaps.mu.Unlock()
		if sn == nil {
			nestError(w, r, 404, fmt.Sprintf("Snapshot %s not found", parts[1]))
			return
		}
		w.WriteHeader(200)
	default:
		nestError(w, r, http.StatusNotFound, fmt.Sprintf("Cannot %s %s", r.Method, r.URL.Path))
	}
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
	}
	return true
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, limit := 1, 100
	for _, p := range []struct {
		key      string
		dst      *int
		min, max int
	}{{"page", &page, 1, 1 << 30}, {"limit", &limit, 1, 200}} {
		if v := q.Get(p.key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < p.min || n > p.max {
				nestError(w, r, 400, fmt.Sprintf("%s must not be less than %d", p.key, p.min))
				return
			}
			*p.dst = n
		}
	}
	name := strings.ToLower(q.Get("name"))
	s.snaps.mu.Lock()
	all := slices.Collect(maps.Values(s.snaps.byID))
	items := []api.Snapshot{}
	slices.SortFunc(all, func(a, b *dsnap) int {
		if c := b.createdAt.Compare(a.createdAt); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	var match []*dsnap
	for _, sn := range all {
		if name == "" || strings.Contains(strings.ToLower(sn.name), name) {
			match = append(match, sn)
		}
	}
	for _, sn := range match[min((page-1)*limit, len(match)):min(page*limit, len(match))] {
		items = append(items, sn.dto())
	}
	s.snaps.mu.Unlock()
	// The general default snapshot is listed too, after the
	// organization's own.
	total := len(match)
	if name == "" || strings.Contains(DefaultSnapshot, name) {
		total++
		if len(items) < limit && (page-1)*limit+len(items) == len(match) {
			g, zero := true, float32(0)
			items = append(items, api.Snapshot{Id: "00000000-0000-4000-8000-000000000000", Name: DefaultSnapshot, General: &g, State: "active", Size: &zero, CreatedAt: time.Unix(0, 0).UTC()})
		}
	}
	pages := (total + limit - 1) / limit
	writeJSON(w, 200, api.PaginatedSnapshots{Items: items, Total: float32(total), Page: float32(page), TotalPages: float32(pages)})
}
