package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sandboxkit/sandbox/internal/lostcreate"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/api"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/toolbox"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Provider options understood by Create (CreateRequest.Options).
const (
	// OptImage builds the sandbox from a container image ("FROM <image>")
	// instead of a snapshot; only then do Resources apply.
	OptImage = "image"
	// OptName names the sandbox (default: its id).
	OptName = "name"
	// OptUser is the user commands run as (default "daytona").
	OptUser = "user"
	// OptTarget overrides the region for this sandbox.
	OptTarget = "target"
	// OptPublic ("true"/"false") makes preview URLs public.
	OptPublic = "public"
	// OptAutoArchive is the auto-archive interval in minutes.
	OptAutoArchive = "autoArchiveInterval"
	// OptAutoDelete is the auto-delete interval in minutes (-1 never, 0 as
	// soon as the sandbox stops).
	OptAutoDelete = "autoDeleteInterval"
)

// RecommendedAutoDeleteMinutes is an auto-delete interval (OptAutoDelete)
// for sandboxes that may leak: a sandbox stopped for an hour is deleted,
// so it stops costing storage, while one paused for a short break
// survives. It is not applied by default; see "Auto-delete" in the
// package documentation.
const RecommendedAutoDeleteMinutes = 60

// createTokenLabel is the label Create puts on every sandbox, with a
// random value, to find a sandbox whose create response was lost. It is
// left out of Info.Labels.
const createTokenLabel = "sandboxkit.create-token"

// findByToken looks for the sandbox carrying a create token (see
// lostcreate: a request the caller abandoned is looked for a little
// longer, as the server may still be acting on it). It returns "" when
// there is none (or the look-up failed).
func (r *Runtime) findByToken(caller context.Context, token string) string {
	find := func(ctx context.Context) (string, error) {
		page, _, err := r.List(ctx, &driver.ListRequest{Labels: map[string]string{createTokenLabel: token}, PageSize: 10})
		if err != nil || len(page) == 0 {
			return "", err
		}
		return page[0].ID, nil
	}
	id := lostcreate.Find(caller, find)
	if id == "" && caller.Err() != nil {
		// The server may act on the abandoned request later still: what
		// it makes is destroyed (see lostcreate.Sweeper).
		r.lost.Go(find, r.Destroy)
	}
	return id
}

// defaultHome is assumed when the toolbox cannot be asked.
const defaultHome = "/home/daytona"

// state maps a Daytona state onto the portable ones; gone is true for
// destroyed and destroying.
func state(s string) (st driver.State, gone bool) {
	switch s {
	case "started":
		return driver.StateRunning, false
	case "stopped", "stopping", "archived", "archiving", "paused", "pausing":
		return driver.StatePaused, false
	case "error", "build_failed":
		return driver.StateError, false
	case "destroyed", "destroying":
		return "", true
	default:
		return driver.StateStarting, false
	}
}

// daytonaStates lists the Daytona states of a portable state, for the
// server-side filter of List.
func daytonaStates(s driver.State) []api.SandboxState {
	switch s {
	case driver.StateRunning:
		return []api.SandboxState{"started"}
	case driver.StatePaused:
		return []api.SandboxState{"stopped", "stopping", "archived", "archiving", "paused", "pausing"}
	case driver.StateError:
		return []api.SandboxState{"error", "build_failed"}
	case driver.StateStarting:
		return []api.SandboxState{"creating", "starting", "restoring", "pending_build", "building_snapshot", "pulling_snapshot", "resizing", "resuming", "unknown"}
	}
	return nil
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func parseTime(p *string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, str(p))
	return t
}

// info converts a Sandbox DTO, remembering its toolbox URL.
func (r *Runtime) info(sb *api.Sandbox) driver.Info {
	if u := str(sb.ToolboxProxyUrl); u != "" && !r.legacy {
		r.rememberToolbox(sb.Id, u)
	}
	raw := ""
	if sb.State != nil {
		raw = string(*sb.State)
	}
	st, _ := state(raw)
	in := driver.Info{
		ID: sb.Id, Provider: Scheme, Template: str(sb.Snapshot), State: st,
		CreatedAt: parseTime(sb.CreatedAt), Isolation: "container (Daytona cloud)",
		Detail: map[string]string{"daytona.state": raw, "daytona.name": sb.Name},
	}
	if sb.Labels != nil {
		in.Labels = maps.Clone(*sb.Labels)
	}
	if in.Labels == nil {
		in.Labels = map[string]string{}
	}
	delete(in.Labels, createTokenLabel)
	if e := str(sb.ErrorReason); e != "" {
		in.Detail["daytona.errorReason"] = e
	}
	in.Network = policyOf(sb)
	if t := str(sb.Target); t != "" {
		in.Detail["daytona.target"] = t
	}
	if raw == "started" && sb.AutoStopInterval != nil && *sb.AutoStopInterval > 0 {
		if last := parseTime(sb.LastActivityAt); !last.IsZero() {
			in.LeaseEnd = last.Add(time.Duration(*sb.AutoStopInterval) * time.Minute)
		}
	}
	r.mu.Lock()
	in.Home = r.homes[sb.Id]
	r.mu.Unlock()
	return in
}

// home fills in.Home from the toolbox, best effort, for a running
// sandbox.
func (r *Runtime) home(ctx context.Context, in *driver.Info) {
	if in.Home != "" || in.State != driver.StateRunning {
		return
	}
	if h, err := r.fetchHome(ctx, in.ID); err == nil {
		in.Home = h
	}
}

// fetchHome returns the user's home directory, asking the toolbox once per
// sandbox.
func (r *Runtime) fetchHome(ctx context.Context, id string) (string, error) {
	r.mu.Lock()
	h := r.homes[id]
	r.mu.Unlock()
	if h != "" {
		return h, nil
	}
	resp, err := r.toolboxCall(ctx, id, "home", false, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		return c.GetUserHomeDir(ctx)
	}, http.StatusOK)
	if err != nil {
		return "", err
	}
	var d toolbox.Dir
	if err := decode("toolbox home", resp, &d); err != nil {
		return "", err
	}
	if !strings.HasPrefix(d.Dir, "/") {
		return "", sberrors.Errorf(sberrors.Internal, "daytona: the toolbox gave %q as the home directory", d.Dir)
	}
	r.mu.Lock()
	r.homes[id] = d.Dir
	r.mu.Unlock()
	return d.Dir, nil
}

// minutes rounds d up to whole minutes, at least 1.
func minutes(d time.Duration) int {
	m := int((d + time.Minute - 1) / time.Minute)
	return max(m, 1)
}

// Create creates a sandbox from CreateRequest.Template (a snapshot; the
// server's default when empty, or OptImage) and waits until it is started.
// The lease (req.Timeout) becomes the auto-stop interval, rounded up to
// whole minutes: the sandbox stops after that long without toolbox
// activity, and keeps its files (whatever req.AutoPause says; set
// OptAutoDelete to have stopped sandboxes deleted). Resources apply only
// with OptImage, as Daytona takes them from the snapshot otherwise.
func (r *Runtime) Create(ctx context.Context, req *driver.CreateRequest) (driver.Info, error) {
	const op = "create"
	body := api.CreateSandbox{}
	if len(req.Labels) > 0 {
		l := api.Labels(maps.Clone(req.Labels))
		body.Labels = &l
	}
	if len(req.Env) > 0 {
		e := api.Labels(maps.Clone(req.Env))
		body.Env = &e
	}
	as := minutes(req.Timeout)
	body.AutoStopInterval = &as
	ns := networkSettings(req.Network, req.NoNetwork)
	body.NetworkBlockAll, body.NetworkAllowList, body.DomainAllowList = ns.NetworkBlockAll, ns.NetworkAllowList, ns.DomainAllowList
	if r.target != "" {
		body.Target = &r.target
	}
	snap := req.Template
	if req.FromSnapshot != "" {
		snap = req.FromSnapshot // Daytona's templates are snapshots
	}
	if snap == "" {
		snap = r.snapshot
	}
	var image string
	for _, k := range slices.Sorted(maps.Keys(req.Options)) {
		v := req.Options[k]
		switch k {
		case OptImage:
			image = v
		case OptName:
			body.Name = &v
		case OptUser:
			body.User = &v
		case OptTarget:
			body.Target = &v
		case OptPublic:
			b, err := strconv.ParseBool(v)
			if err != nil {
				return driver.Info{}, sberrors.Errorf(sberrors.InvalidArgument, "daytona: option %s=%q is not a boolean", k, v)
			}
			body.Public = &b
		case OptAutoArchive, OptAutoDelete:
			n, err := strconv.Atoi(v)
			if err != nil {
				return driver.Info{}, sberrors.Errorf(sberrors.InvalidArgument, "daytona: option %s=%q is not a number of minutes", k, v)
			}
			if k == OptAutoArchive {
				body.AutoArchiveInterval = &n
			} else {
				body.AutoDeleteInterval = &n
			}
		default:
			return driver.Info{}, sberrors.Errorf(sberrors.InvalidArgument,
				"daytona: unknown provider option %q (known: image, name, user, target, public, autoArchiveInterval, autoDeleteInterval)", k)
		}
	}
	res := req.Resources
	switch {
	case image != "" && snap != "" && (req.Template != "" || req.FromSnapshot != ""):
		return driver.Info{}, sberrors.Errorf(sberrors.InvalidArgument, "daytona: set either Template (a snapshot) or the %q option, not both", OptImage)
	case image != "":
		body.BuildInfo = &api.CreateBuildInfo{DockerfileContent: "FROM " + image + "\n"}
		if res.CPUs > 0 {
			body.Cpu = &res.CPUs
		}
		if res.MemoryMiB > 0 {
			gib := (res.MemoryMiB + 1023) / 1024
			body.Memory = &gib
		}
		if res.DiskGiB > 0 {
			body.Disk = &res.DiskGiB
		}
	case res != (driver.Resources{}):
		return driver.Info{}, sberrors.Errorf(sberrors.InvalidArgument,
			"daytona: resources %+v need the %q provider option: a snapshot fixes its own resources", res, OptImage)
	default:
		if snap != "" {
			body.Snapshot = &snap
		}
	}
	// A token label finds the sandbox again if the response is lost.
	token := randHex(12)
	labels := api.Labels{}
	if body.Labels != nil {
		labels = *body.Labels
	}
	labels[createTokenLabel] = token
	body.Labels = &labels
	resp, err := r.call(ctx, op, true, func(ctx context.Context) (*http.Response, error) {
		return r.api.CreateSandbox(ctx, body)
	}, http.StatusOK, http.StatusCreated)
	var sb api.Sandbox
	if err == nil {
		if err = decode(op, resp, &sb); err != nil && errors.Is(err, sberrors.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", sberrors.ErrOutcomeUnknown, err)
		}
	}
	if err != nil {
		var he *HTTPError
		switch {
		case asHTTP(err, &he) && he.Status == http.StatusBadRequest && strings.Contains(he.Message, "failed to start"):
			// Created, but it failed while the server waited for it: the
			// answer has no id, the sandbox stays (in error) until deleted.
			return driver.Info{ID: r.findByToken(ctx, token)}, r.clean(err)
		case errors.Is(err, sberrors.ErrStaleTransport) || he != nil:
			return driver.Info{}, r.clean(snapshotMissing(err, req.FromSnapshot)) // the server did not create it
		}
		// The request may have created a sandbox whose id never came
		// back: find it by its token so that the caller can destroy it.
		return driver.Info{ID: r.findByToken(ctx, token)}, r.clean(err)
	}
	in, err := r.waitStarted(ctx, &sb)
	if err != nil {
		// The sandbox exists: hand its id back so the caller can destroy it.
		in.ID = sb.Id
		return in, r.clean(err)
	}
	r.home(ctx, &in)
	if in.Home == "" {
		in.Home = defaultHome
	}
	return in, nil
}

// waitStarted polls the sandbox until it is started, with the SDKs'
// backoff (100 ms, growing by 10% after 5 s, capped at 1 s), bounded by
// ctx. error and build_failed end the wait with the server's reason.
func (r *Runtime) waitStarted(ctx context.Context, sb *api.Sandbox) (driver.Info, error) {
	begin := time.Now()
	delay := 100 * time.Millisecond
	for {
		raw := ""
		if sb.State != nil {
			raw = string(*sb.State)
		}
		in := r.info(sb)
		switch raw {
		case "started":
			return in, nil
		case "error", "build_failed":
			return in, sberrors.Errorf(sberrors.FailedPrecondition, "daytona: sandbox %s failed to start (state %s): %s", sb.Id, raw, r.redact(str(sb.ErrorReason)))
		case "destroyed", "destroying":
			return in, sberrors.Errorf(sberrors.NotFound, "daytona: sandbox %s was deleted while starting", sb.Id)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return in, fmt.Errorf("daytona: waiting for sandbox %s to start (state %s): %w", sb.Id, raw, ctx.Err())
		case <-t.C:
		}
		if time.Since(begin) > 5*time.Second {
			delay = min(delay*11/10, time.Second)
		}
		next, err := r.getDTO(ctx, sb.Id)
		if err != nil {
			return in, err
		}
		sb = next
	}
}

func (r *Runtime) getDTO(ctx context.Context, id string) (*api.Sandbox, error) {
	const op = "get"
	resp, err := r.call(ctx, op, false, func(ctx context.Context) (*http.Response, error) {
		return r.api.GetSandbox(ctx, id)
	}, http.StatusOK)
	if err != nil {
		if sberrors.CodeOf(err) == sberrors.NotFound {
			r.forget(id)
		}
		return nil, err
	}
	var sb api.Sandbox
	if err := decode(op, resp, &sb); err != nil {
		return nil, err
	}
	if sb.State != nil && (*sb.State == "destroyed" || *sb.State == "destroying") {
		r.forget(id)
		return nil, &HTTPError{Op: op, Status: http.StatusNotFound, Message: "sandbox " + id + " is being deleted", kind: sberrors.ErrNotFound}
	}
	return &sb, nil
}

// Get returns the sandbox's Info. A destroyed or destroying sandbox is
// NotFound.
func (r *Runtime) Get(ctx context.Context, id string) (driver.Info, error) {
	sb, err := r.getDTO(ctx, id)
	if err != nil {
		return driver.Info{}, r.clean(err)
	}
	in := r.info(sb)
	r.home(ctx, &in)
	if in.Home == "" {
		in.Home = defaultHome
	}
	return in, nil
}

// List returns one page of GET /sandbox, filtered by labels (JSON
// containment) and states on the server. It accepts both the cursor page
// and the older plain array (then everything comes in one page).
func (r *Runtime) List(ctx context.Context, req *driver.ListRequest) ([]driver.Info, string, error) {
	const op = "list"
	params := &api.ListSandboxesParams{}
	if len(req.Labels) > 0 {
		b, _ := json.Marshal(req.Labels)
		s := string(b)
		params.Labels = &s
	}
	if req.PageToken != "" {
		params.Cursor = &req.PageToken
	}
	if req.PageSize > 0 {
		n := min(req.PageSize, 200)
		params.Limit = &n
	}
	var states []api.SandboxState
	for _, s := range req.States {
		states = append(states, daytonaStates(s)...)
	}
	if len(states) > 0 {
		params.States = &states
	}
	resp, err := r.call(ctx, op, false, func(ctx context.Context) (*http.Response, error) {
		return r.api.ListSandboxes(ctx, params)
	}, http.StatusOK)
	if err != nil {
		return nil, "", r.clean(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", fmt.Errorf("daytona: %s: reading the response: %w: %w", op, sberrors.ErrUnavailable, err)
	}
	var items []api.Sandbox
	next := ""
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
		err = json.Unmarshal(t, &items)
	} else {
		var page api.PaginatedSandboxes
		err = json.Unmarshal(raw, &page)
		items, next = page.Items, str(page.NextCursor)
	}
	if err != nil {
		return nil, "", fmt.Errorf("daytona: %s: decoding the response: %w: %w", op, sberrors.ErrInternal, err)
	}
	out := make([]driver.Info, 0, len(items))
	for i := range items {
		if items[i].State != nil {
			if _, gone := state(string(*items[i].State)); gone {
				continue
			}
		}
		out = append(out, r.info(&items[i]))
	}
	return out, next, nil
}

// Destroy deletes the sandbox; one that is already gone is not an error.
// While the sandbox is changing state the server answers 409: Destroy
// retries until ctx ends.
func (r *Runtime) Destroy(ctx context.Context, id string) error {
	const op = "destroy"
	delay := 200 * time.Millisecond
	for {
		resp, err := r.call(ctx, op, true, func(ctx context.Context) (*http.Response, error) {
			return r.api.DeleteSandbox(ctx, id)
		}, http.StatusOK, http.StatusNoContent)
		switch {
		case err == nil:
			resp.Body.Close()
			r.forget(id)
			return nil
		case sberrors.CodeOf(err) == sberrors.NotFound:
			r.forget(id)
			return nil
		}
		var he *HTTPError
		if !asHTTP(err, &he) || he.Status != http.StatusConflict {
			return r.clean(err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("daytona: %s: sandbox %s stays in a state change: %w", op, id, ctx.Err())
		case <-t.C:
		}
		delay = min(delay*2, 2*time.Second)
	}
}

// SetTimeout maps the lease onto Daytona's auto-stop interval: it sets the
// interval to d rounded up to whole minutes and resets the inactivity
// timer, so the sandbox stops no sooner than d from now (later if it stays
// active: toolbox calls count as activity, commands running inside do
// not).
func (r *Runtime) SetTimeout(ctx context.Context, id string, d time.Duration) error {
	const op = "set-timeout"
	resp, err := r.call(ctx, op, true, func(ctx context.Context) (*http.Response, error) {
		return r.api.SetAutostopInterval(ctx, id, minutes(d))
	}, http.StatusOK, http.StatusCreated)
	if err != nil {
		return r.clean(err)
	}
	resp.Body.Close()
	resp, err = r.call(ctx, op, true, func(ctx context.Context) (*http.Response, error) {
		return r.api.UpdateLastActivity(ctx, id)
	}, http.StatusOK, http.StatusCreated, http.StatusNoContent)
	if err != nil {
		return r.clean(err)
	}
	resp.Body.Close()
	return nil
}

// Pause stops the sandbox (Daytona has no memory-keeping pause for
// containers): running processes end, files stay. It waits until the
// sandbox is stopped. Toolbox calls on a sandbox paused through this
// Runtime fail with sberrors.ErrPaused until Resume.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	const op = "pause"
	resp, err := r.call(ctx, op, true, func(ctx context.Context) (*http.Response, error) {
		return r.api.StopSandbox(ctx, id, &api.StopSandboxParams{})
	}, http.StatusOK, http.StatusCreated)
	if err != nil {
		if sberrors.CodeOf(err) != sberrors.FailedPrecondition {
			return r.clean(err)
		}
		// "not in a stoppable state": fine if it is stopped already.
		sb, gerr := r.getDTO(ctx, id)
		if gerr != nil {
			return r.clean(gerr)
		}
		if st, _ := state(string(*sb.State)); st != driver.StatePaused {
			return r.clean(err)
		}
	} else {
		resp.Body.Close()
	}
	r.mu.Lock()
	r.paused[id] = true
	r.mu.Unlock()
	return r.clean(r.waitState(ctx, id, "stopped", "archived"))
}

// waitState polls until the sandbox's Daytona state is one of want.
func (r *Runtime) waitState(ctx context.Context, id string, want ...string) error {
	delay := 100 * time.Millisecond
	for {
		sb, err := r.getDTO(ctx, id)
		if err != nil {
			return err
		}
		raw := str((*string)(sb.State))
		if slices.Contains(want, raw) {
			return nil
		}
		if raw == "error" || raw == "build_failed" {
			return sberrors.Errorf(sberrors.FailedPrecondition, "daytona: sandbox %s is in state %s: %s", id, raw, r.redact(str(sb.ErrorReason)))
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("daytona: waiting for sandbox %s (state %s): %w", id, raw, ctx.Err())
		case <-t.C:
		}
		delay = min(delay*3/2, time.Second)
	}
}

// Resume starts a stopped or archived sandbox and waits until it is
// started. Resuming a started sandbox is not an error.
func (r *Runtime) Resume(ctx context.Context, id string) (driver.Info, error) {
	if err := r.start(ctx, id); err != nil {
		return driver.Info{}, r.clean(err)
	}
	r.mu.Lock()
	delete(r.paused, id)
	r.mu.Unlock()
	return r.Get(ctx, id)
}

// start starts the sandbox and waits for started.
func (r *Runtime) start(ctx context.Context, id string) error {
	const op = "start"
	resp, err := r.call(ctx, op, true, func(ctx context.Context) (*http.Response, error) {
		return r.api.StartSandbox(ctx, id)
	}, http.StatusOK, http.StatusCreated)
	if err != nil {
		return err
	}
	var sb api.Sandbox
	if err := decode(op, resp, &sb); err != nil {
		return err
	}
	_, err = r.waitStarted(ctx, &sb)
	return err
}
