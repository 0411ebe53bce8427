package daytonafake

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/api"
)

// Stored states (the derived ones appear only in responses).
const (
	stateCreating  = "creating"
	stateStarted   = "started"
	stateStopped   = "stopped"
	stateArchived  = "archived"
	stateDestroyed = "destroyed"
	stateError     = "error"
)

// sbx is one fake sandbox.
type sbx struct {
	id, name, snapshot, user, target  string
	env, labels                       map[string]string
	public, netBlock                  bool
	netAllow, domainAllow             string
	cpu, mem, disk                    int
	stored                            string
	errorReason                       string
	failState                         string
	autoStop, autoArchive, autoDelete int
	created, updated, activity        time.Time
	seq                               int64
	polls                             int // GETs left in "creating"
	backendID, home                   string
	previewToken                      string  // preview.go; "" until a preview URL is asked for
	sampler                           sampler // metrics.go; guarded by smu

	smu      sync.Mutex
	sessions map[string]*session
	ptys     map[string]*ptySession // pty.go
}

func (b *sbx) killSessions() {
	b.killPtys()
	b.smu.Lock()
	defer b.smu.Unlock()
	for _, se := range b.sessions {
		se.kill()
	}
	b.sessions = map[string]*session{}
}

const isoMillis = "2006-01-02T15:04:05.000Z"

// dto renders b with the given (possibly derived) state.
func (s *Server) dto(b *sbx, state string) api.Sandbox {
	st := api.SandboxState(state)
	cpu, mem, disk, gpu := float64(b.cpu), float64(b.mem), float64(b.disk), 0.0
	env, labels := api.Labels(maps.Clone(b.env)), api.Labels(maps.Clone(b.labels))
	org, pub, nb := "org-fake", b.public, b.netBlock
	as, aa, ad := b.autoStop, b.autoArchive, b.autoDelete
	created, updated, act := b.created.UTC().Format(isoMillis), b.updated.UTC().Format(isoMillis), b.activity.UTC().Format(isoMillis)
	out := api.Sandbox{
		Id: b.id, Name: b.name, OrganizationId: &org, Snapshot: &b.snapshot, User: &b.user,
		Env: &env, Labels: &labels, Public: &pub, NetworkBlockAll: &nb, Target: &b.target,
		Cpu: &cpu, Memory: &mem, Disk: &disk, Gpu: &gpu, State: &st,
		AutoStopInterval: &as, AutoArchiveInterval: &aa, AutoDeleteInterval: &ad,
		CreatedAt: &created, UpdatedAt: &updated, LastActivityAt: &act,
	}
	if b.netAllow != "" {
		v := b.netAllow
		out.NetworkAllowList = &v
	}
	if b.domainAllow != "" {
		v := b.domainAllow
		out.DomainAllowList = &v
	}
	if b.errorReason != "" {
		r := b.errorReason
		out.ErrorReason = &r
	}
	if !s.noProxyURL {
		u := s.ToolboxURL()
		out.ToolboxProxyUrl = &u
	}
	return out
}

// tickLocked applies the transitions that happen with time: the end of
// "creating", auto-stop, auto-archive and auto-delete.
func (s *Server) tickLocked(b *sbx) {
	now := s.now()
	switch b.stored {
	case stateStarted:
		if b.autoStop > 0 && now.Sub(b.activity) >= time.Duration(b.autoStop)*time.Minute {
			b.stored, b.updated = stateStopped, b.activity.Add(time.Duration(b.autoStop)*time.Minute)
			s.async(b.killSessions)
			if b.autoDelete == 0 {
				b.stored = stateDestroyed
				s.async(func() { s.destroyBackend(b) })
			}
		}
	case stateStopped:
		if b.autoDelete > 0 && now.Sub(b.updated) >= time.Duration(b.autoDelete)*time.Minute {
			b.stored = stateDestroyed
			s.async(func() { s.destroyBackend(b) })
		} else if b.autoArchive > 0 && now.Sub(b.updated) >= time.Duration(b.autoArchive)*time.Minute {
			b.stored = stateArchived
		}
	}
}

// async runs f on a goroutine that Close waits for.
func (s *Server) async(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// lookupLocked finds a live sandbox by id, then by name.
func (s *Server) lookupLocked(idOrName string) *sbx {
	b := s.sandboxes[idOrName]
	if b == nil {
		for _, c := range s.sandboxes {
			if c.name == idOrName && c.stored != stateDestroyed {
				b = c
				break
			}
		}
	}
	if b == nil {
		return nil
	}
	s.tickLocked(b)
	if b.stored == stateDestroyed {
		return nil
	}
	return b
}

// api serves the main API.
func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	if !s.bearer(r) {
		nestError(w, r, http.StatusUnauthorized, "Invalid credentials")
		return
	}
	p := strings.TrimPrefix(r.URL.Path, "/api")
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case p == "/config" && r.Method == http.MethodGet:
		writeJSON(w, 200, map[string]any{"proxyToolboxUrl": s.ToolboxURL(), "defaultSnapshot": "daytonaio/sandbox:fake", "maxAutoArchiveInterval": 43200})
	case p == "/sandbox" && r.Method == http.MethodPost:
		s.create(w, r)
	case p == "/sandbox" && r.Method == http.MethodGet:
		s.list(w, r)
	case parts[0] == "snapshots":
		s.snapshotsAPI(w, r, parts) // snapshots.go
	case len(parts) >= 2 && parts[0] == "sandbox":
		s.sandboxOp(w, r, parts[1], parts[2:])
	default:
		nestError(w, r, http.StatusNotFound, fmt.Sprintf("Cannot %s %s", r.Method, r.URL.Path))
	}
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSandbox
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		nestError(w, r, 400, "Invalid request body")
		return
	}
	if (req.Cpu != nil || req.Memory != nil || req.Disk != nil) && req.BuildInfo == nil {
		nestError(w, r, 400, "Cannot specify Sandbox resources when using a snapshot")
		return
	}
	if req.BuildInfo != nil && req.Snapshot != nil {
		nestError(w, r, 400, "Cannot specify a snapshot when using a build info entry")
		return
	}
	for name, v := range map[string]*int{"Auto-stop": req.AutoStopInterval, "Auto-archive": req.AutoArchiveInterval} {
		if v != nil && *v < 0 {
			nestError(w, r, 400, name+" interval must be non-negative")
			return
		}
	}
	var source *dsnap
	if req.BuildInfo == nil {
		var msg string
		if source, msg = s.createSource(str(req.Snapshot)); msg != "" {
			nestError(w, r, 400, msg)
			return
		}
	}
	now := s.now()
	b := &sbx{
		id: uuid4(), user: "daytona", target: "us", snapshot: DefaultSnapshot,
		env: map[string]string{}, labels: map[string]string{},
		cpu: 1, mem: 1, disk: 3, autoStop: 15, autoArchive: 10080, autoDelete: -1,
		created: now, updated: now, activity: now, sessions: map[string]*session{},
	}
	b.name = b.id
	set := func(dst *string, v *string) {
		if v != nil && *v != "" {
			*dst = *v
		}
	}
	set(&b.name, req.Name)
	set(&b.user, req.User)
	set(&b.target, req.Target)
	set(&b.snapshot, req.Snapshot)
	if req.BuildInfo != nil {
		b.snapshot = ""
	}
	if req.Env != nil {
		b.env = maps.Clone(*req.Env)
	}
	if req.Labels != nil {
		b.labels = maps.Clone(*req.Labels)
	}
	b.public = req.Public != nil && *req.Public
	b.netBlock = req.NetworkBlockAll != nil && *req.NetworkBlockAll
	if msg := checkAllowLists(req.NetworkAllowList, req.DomainAllowList); msg != "" {
		nestError(w, r, 400, msg)
		return
	}
	b.netAllow, b.domainAllow = str(req.NetworkAllowList), str(req.DomainAllowList)
	for dst, v := range map[*int]*int{&b.cpu: req.Cpu, &b.mem: req.Memory, &b.disk: req.Disk, &b.autoStop: req.AutoStopInterval, &b.autoArchive: req.AutoArchiveInterval, &b.autoDelete: req.AutoDeleteInterval} {
		if v != nil {
			*dst = *v
		}
	}
	if b.autoArchive == 0 || b.autoArchive > 43200 {
		b.autoArchive = 43200
	}
	if b.cpu > 4 || b.mem > 8 || b.disk > 10 {
		nestError(w, r, 400, fmt.Sprintf("CPU request %d exceeds maximum allowed per sandbox (4)", b.cpu))
		return
	}
	s.mu.Lock()
	for _, o := range s.sandboxes {
		if o.name == b.name && o.stored != stateDestroyed {
			s.mu.Unlock()
			nestError(w, r, http.StatusConflict, fmt.Sprintf("Sandbox with name %s already exists", b.name))
			return
		}
	}
	fail := s.nextFail
	s.nextFail = nil
	s.order++
	b.seq = s.order
	b.stored, b.polls = stateCreating, s.createPolls
	s.sandboxes[b.id] = b
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(s.baseCtx, 2*time.Minute)
	defer cancel()
	breq := &driver.CreateRequest{
		Env: maps.Clone(b.env), Labels: map[string]string{"daytonafake": b.id},
		Timeout: 24 * time.Hour, NoNetwork: b.netBlock,
	}
	if p := b.allowList(); p != nil && s.enforcesLists() {
		breq.Network = p
	}
	info, err := s.createBackend(ctx, source, breq)
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.stored == stateDestroyed {
		// Deleted while it was being created: the delete wins, and the
		// backend sandbox made meanwhile is freed.
		if err == nil {
			s.async(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_ = s.backend.Destroy(ctx, info.ID)
			})
		}
		writeJSON(w, 200, s.dto(b, stateDestroyed))
		return
	}
	switch {
	case err != nil:
		b.stored, b.errorReason = stateError, "failed to create the container: "+err.Error()
	case fail != nil:
		b.backendID, b.home = info.ID, info.Home
		b.failState, b.errorReason = fail.state, fail.reason
		if b.polls == 0 {
			b.stored = fail.state
		}
	default:
		b.backendID, b.home = info.ID, info.Home
		if b.polls == 0 {
			b.stored = stateStarted
		}
	}
	if b.stored == stateError || b.stored == "build_failed" {
		// The real server waits for started and reports the failure.
		nestError(w, r, 400, "Sandbox failed to start: "+b.errorReason)
		return
	}
	writeJSON(w, 200, s.dto(b, b.stored))
}

type listCursor struct {
	Seq int64  `json:"sortValue"`
	ID  string `json:"id"`
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var want map[string]string
	if l := q.Get("labels"); l != "" {
		if err := json.Unmarshal([]byte(l), &want); err != nil {
			nestError(w, r, 400, "Invalid labels JSON format")
			return
		}
	}
	states := append(q["states"], q["states[]"]...)
	limit := 100
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 200 {
			nestError(w, r, 400, "limit must not be greater than 200, limit must not be less than 1")
			return
		}
		limit = n
	}
	var after *listCursor
	if c := q.Get("cursor"); c != "" {
		raw, err := base64.StdEncoding.DecodeString(c)
		after = &listCursor{}
		if err != nil || json.Unmarshal(raw, after) != nil {
			nestError(w, r, 400, "Invalid cursor")
			return
		}
	}
	s.mu.Lock()
	var all []*sbx
	for _, b := range s.sandboxes {
		s.tickLocked(b)
		if b.stored == stateDestroyed {
			continue
		}
		if len(states) > 0 && !slices.Contains(states, b.stored) {
			continue
		}
		ok := true
		for k, v := range want {
			if b.labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			all = append(all, b)
		}
	}
	// Newest first, ties broken by id (the real default sorts by
	// lastActivityAt; creation order keeps pages stable in tests).
	slices.SortFunc(all, func(a, b *sbx) int {
		if a.seq != b.seq {
			return int(b.seq - a.seq)
		}
		return strings.Compare(b.id, a.id)
	})
	if s.legacyList {
		out := make([]api.Sandbox, 0, len(all))
		for _, b := range all {
			out = append(out, s.dto(b, b.stored))
		}
		s.mu.Unlock()
		writeJSON(w, 200, out)
		return
	}
	items := make([]api.Sandbox, 0, limit)
	var next *string
	for _, b := range all {
		if after != nil && (b.seq > after.Seq || (b.seq == after.Seq && b.id >= after.ID)) {
			continue
		}
		if len(items) == limit {
			last := items[len(items)-1]
			raw, _ := json.Marshal(listCursor{Seq: s.sandboxes[last.Id].seq, ID: last.Id})
			c := base64.StdEncoding.EncodeToString(raw)
			next = &c
			break
		}
		items = append(items, s.dto(b, b.stored))
	}
	s.mu.Unlock()
	writeJSON(w, 200, map[string]any{"items": items, "nextCursor": next})
}

// sandboxOp serves /sandbox/{idOrName}[/...].
func (s *Server) sandboxOp(w http.ResponseWriter, r *http.Request, idOrName string, rest []string) {
	notFound := func() {
		nestError(w, r, 404, fmt.Sprintf("Sandbox with ID or name %s not found", idOrName))
	}
	s.mu.Lock()
	b := s.lookupLocked(idOrName)
	if b == nil {
		s.mu.Unlock()
		notFound()
		return
	}
	now := s.now()
	op := r.Method + " " + strings.Join(rest, "/")
	if len(rest) == 2 && r.Method == http.MethodPost {
		op = "POST " + rest[0] + "/*"
	}
	if len(rest) == 3 && rest[0] == "ports" && rest[2] == "preview-url" {
		op = r.Method + " ports/*/preview-url"
	}
	switch op {
	case "POST snapshot":
		s.sandboxSnapshot(w, r, b) // snapshots.go; unlocks s.mu
	case "GET ":
		if b.stored == stateCreating {
			if b.polls > 0 {
				b.polls--
			}
			// Still creating until the POST made the backend sandbox.
			if b.polls == 0 && b.backendID != "" {
				if b.failState != "" {
					b.stored = b.failState
				} else {
					b.stored = stateStarted
				}
			}
			st := b.stored
			out := s.dto(b, st)
			s.mu.Unlock()
			writeJSON(w, 200, out)
			return
		}
		out := s.dto(b, b.stored)
		s.mu.Unlock()
		writeJSON(w, 200, out)
	case "DELETE ":
		if b.stored == stateCreating && b.polls > 0 {
			// Time passes with each request: the create moves on.
			b.polls--
			s.mu.Unlock()
			nestError(w, r, 409, "Sandbox state change in progress")
			return
		}
		b.stored = stateDestroyed
		b.name = fmt.Sprintf("DESTROYED_%s_%d", b.name, now.UnixMilli())
		out := s.dto(b, "destroying")
		d := api.SandboxDesiredState("destroyed")
		out.DesiredState = &d
		s.mu.Unlock()
		s.destroyBackend(b)
		writeJSON(w, 200, out)
	case "POST start":
		switch b.stored {
		case stateStarted:
		case stateStopped, stateArchived:
			b.stored, b.updated, b.activity = stateStarted, now, now
		case stateError, "build_failed":
			s.mu.Unlock()
			nestError(w, r, 400, "Sandbox is in an errored state")
			return
		default:
			s.mu.Unlock()
			nestError(w, r, 409, "Sandbox state change in progress")
			return
		}
		out := s.dto(b, b.stored)
		s.mu.Unlock()
		writeJSON(w, 200, out)
	case "POST stop":
		if b.stored != stateStarted {
			s.mu.Unlock()
			nestError(w, r, 400, "Sandbox is not in a stoppable state")
			return
		}
		b.stored, b.updated = stateStopped, now
		st := "stopping"
		if b.autoDelete == 0 {
			b.stored, st = stateDestroyed, "destroying"
		}
		out := s.dto(b, st)
		s.mu.Unlock()
		b.killSessions()
		if b.stored == stateDestroyed {
			s.destroyBackend(b)
		}
		writeJSON(w, 200, out)
	case "POST archive":
		if b.stored != stateStopped {
			s.mu.Unlock()
			nestError(w, r, 400, "Sandbox is not stopped")
			return
		}
		b.stored = stateArchived
		out := s.dto(b, "archiving")
		s.mu.Unlock()
		writeJSON(w, 200, out)
	case "PUT labels":
		var req api.SandboxLabels
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			s.mu.Unlock()
			nestError(w, r, 400, "labels must be an object")
			return
		}
		b.labels = maps.Clone(req.Labels)
		out := s.dto(b, b.stored)
		s.mu.Unlock()
		writeJSON(w, 200, out)
	case "POST network-settings":
		var req api.NetworkSettings
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			s.mu.Unlock()
			nestError(w, r, 400, "Invalid request body")
			return
		}
		if msg := checkAllowLists(req.NetworkAllowList, req.DomainAllowList); msg != "" {
			s.mu.Unlock()
			nestError(w, r, 400, msg)
			return
		}
		// A field sent replaces the stored one; one left out is kept.
		if req.NetworkBlockAll != nil {
			b.netBlock = *req.NetworkBlockAll
		}
		if req.NetworkAllowList != nil {
			b.netAllow = *req.NetworkAllowList
		}
		if req.DomainAllowList != nil {
			b.domainAllow = *req.DomainAllowList
		}
		b.updated = now
		out := s.dto(b, b.stored)
		backendID, pol := b.backendID, b.policy()
		s.mu.Unlock()
		if ns, ok := s.backend.(driver.NetworkSetter); ok && backendID != "" && s.enforcesLists() {
			// The new settings are in force when the answer comes, as
			// on the service; a backend that cannot change them says so.
			if err := ns.SetNetwork(r.Context(), backendID, pol); err != nil {
				nestError(w, r, 500, "failed to apply the network settings: "+err.Error())
				return
			}
		}
		writeJSON(w, 200, out)
	case "POST autostop/*", "POST autoarchive/*", "POST autodelete/*":
		n, err := strconv.Atoi(rest[1])
		if err != nil {
			s.mu.Unlock()
			nestError(w, r, 400, "Validation failed (numeric string is expected)")
			return
		}
		switch rest[0] {
		case "autostop":
			if n < 0 {
				s.mu.Unlock()
				nestError(w, r, 400, "Auto-stop interval must be non-negative")
				return
			}
			b.autoStop = n
		case "autoarchive":
			if n < 0 {
				s.mu.Unlock()
				nestError(w, r, 400, "Auto-archive interval must be non-negative")
				return
			}
			if n == 0 || n > 43200 {
				n = 43200
			}
			b.autoArchive = n
		default:
			b.autoDelete = n
		}
		out := s.dto(b, b.stored)
		s.mu.Unlock()
		writeJSON(w, http.StatusCreated, out)
	case "POST last-activity":
		b.activity = now
		s.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	case "GET ports/*/preview-url":
		s.mu.Unlock()
		s.previewLink(w, r, b, rest[1])
	case "GET toolbox-proxy-url":
		s.mu.Unlock()
		if b.id != idOrName {
			notFound()
			return
		}
		writeJSON(w, 200, map[string]string{"url": s.ToolboxURL()})
	default:
		s.mu.Unlock()
		nestError(w, r, 404, fmt.Sprintf("Cannot %s %s", r.Method, r.URL.Path))
	}
}

// maxNetworkAllow is how many entries networkAllowList may hold.
const maxNetworkAllow = 10

var hostLabelRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// checkAllowLists validates networkAllowList (comma-separated IPv4
// addresses and CIDRs, at most 10) and domainAllowList (comma-separated
// host names) as the API does; it returns the 400 message, or "".
func checkAllowLists(netList, domains *string) string {
	if netList != nil {
		var n []string
		for _, e := range strings.Split(*netList, ",") {
			if e = strings.TrimSpace(e); e != "" {
				n = append(n, e)
			}
		}
		if len(n) > maxNetworkAllow {
			return fmt.Sprintf("Network allow list cannot contain more than %d networks", maxNetworkAllow)
		}
		for _, e := range n {
			p, err := netip.ParsePrefix(e)
			if err != nil {
				if a, aerr := netip.ParseAddr(e); aerr == nil {
					p, err = netip.PrefixFrom(a, 32), nil
				}
			}
			if err != nil || !p.Addr().Is4() {
				return fmt.Sprintf("Invalid network allow list entry: %q. Must be an IPv4 address or IPv4 CIDR", e)
			}
		}
	}
	if domains != nil {
		for _, e := range strings.Split(*domains, ",") {
			if e = strings.TrimSpace(e); e == "" {
				continue
			}
			ok := len(e) <= 253
			for _, l := range strings.Split(e, ".") {
				ok = ok && hostLabelRE.MatchString(l)
			}
			if !ok {
				return fmt.Sprintf("Invalid domain allow list entry: %q", e)
			}
		}
	}
	return ""
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// allowList is the backend policy of b's networkAllowList and
// domainAllowList: nil when both are empty (the backend's network) or
// networkBlockAll is set (no network).
func (b *sbx) allowList() *driver.NetworkPolicy {
	if b.netBlock || b.netAllow == "" && b.domainAllow == "" {
		return nil
	}
	p := &driver.NetworkPolicy{Mode: driver.NetworkAllowList}
	for _, e := range strings.Split(b.netAllow, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil {
			e = netip.PrefixFrom(a, a.BitLen()).String()
		} else if pf, err := netip.ParsePrefix(e); err == nil {
			e = pf.Masked().String()
		}
		p.AllowCIDRs = append(p.AllowCIDRs, e)
	}
	for _, e := range strings.Split(b.domainAllow, ",") {
		if e = strings.ToLower(strings.TrimSpace(e)); e != "" {
			p.AllowDomains = append(p.AllowDomains, e)
		}
	}
	return p
}

// policy is the backend policy of b's network settings.
func (b *sbx) policy() *driver.NetworkPolicy {
	switch {
	case b.netBlock:
		return &driver.NetworkPolicy{Mode: driver.NetworkDenyAll}
	case b.allowList() != nil:
		return b.allowList()
	}
	return &driver.NetworkPolicy{Mode: driver.NetworkAllowAll}
}

// enforcesLists reports whether the backend enforces allow-lists of
// domains and CIDRs (the local provider with its egress proxy does):
// only then are networkAllowList and domainAllowList put in force on it;
// elsewhere they are recorded only.
func (s *Server) enforcesLists() bool {
	ns := s.backend.Capabilities().NetworkPolicy
	return ns.AllowDomains && ns.AllowCIDRs && !ns.NotEnforced
}
