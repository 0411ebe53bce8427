package e2b

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sandboxkit/sandbox/internal/lostcreate"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/wire"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/api"
	"github.com/sandboxkit/sandbox/sberrors"
)

// call runs one control-plane request and returns the status and body
// (bounded). Transport failures are classified; idempotent says whether
// an unknown outcome may be reported as plain Unavailable.
func (r *Runtime) call(ctx context.Context, op string, idempotent bool, do func(context.Context) (*http.Response, error)) (int, []byte, http.Header, error) {
	tctx, a := trace(ctx)
	resp, err := do(tctx)
	if err != nil {
		return 0, nil, nil, wire.Classify(ctx, "e2b: "+op, a, r.counting, !idempotent, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return 0, nil, nil, fmt.Errorf("e2b: %s: %w", op, ctxErr)
		}
		if idempotent {
			return 0, nil, nil, sberrors.Errorf(sberrors.Unavailable, "e2b: %s: reading response: %v", op, err)
		}
		return 0, nil, nil, fmt.Errorf("e2b: %s: %w: reading response: %v", op, sberrors.ErrOutcomeUnknown, err)
	}
	return resp.StatusCode, body, resp.Header, nil
}

func decode(op string, body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return sberrors.Errorf(sberrors.Internal, "e2b: %s: malformed response: %v", op, err)
	}
	return nil
}

// Create creates a sandbox from req.Template (default "base"), or from the
// snapshot req.FromSnapshot, with the lease req.Timeout, always sent (E2B
// would otherwise use 300 s on the v2 route, 15 s on the older one), with
// POST /v2/sandboxes or, on a server without it, POST /sandboxes.
func (r *Runtime) Create(ctx context.Context, req *driver.CreateRequest) (driver.Info, error) {
	const op = "create"
	body := api.NewSandbox{TemplateID: req.Template}
	if req.FromSnapshot != "" {
		// A snapshot is a template: its ID is the template to start.
		body.TemplateID = req.FromSnapshot
	}
	if body.TemplateID == "" {
		body.TemplateID = r.cfg.template
	}
	lease := req.Timeout
	if lease <= 0 {
		lease = defaultLease
	}
	secs := seconds(lease)
	body.Timeout = &secs
	secure := true
	internet, allowOut, denyOut := egress(req.Network, req.NoNetwork)
	body.Secure, body.AllowInternetAccess = &secure, &internet
	if req.AutoPause {
		t := true
		body.AutoPause = &t
	}
	name, err := sandboxName(req)
	if err != nil {
		return driver.Info{}, err
	}
	var publicTraffic *bool
	for _, k := range slices.Sorted(maps.Keys(req.Options)) {
		if k == OptName {
			continue
		}
		v := req.Options[k]
		b, err := strconv.ParseBool(v)
		if err != nil {
			return driver.Info{}, sberrors.Errorf(sberrors.InvalidArgument, "e2b: provider option %s=%q is not a boolean", k, v)
		}
		switch k {
		case "auto_resume":
			body.AutoResume = &api.SandboxAutoResumeConfig{Enabled: b}
		case "secure":
			body.Secure = &b
		case OptPublicTraffic:
			publicTraffic = &b
		default:
			return driver.Info{}, sberrors.Errorf(sberrors.InvalidArgument, "e2b: unknown provider option %q (known: auto_resume, secure, public_traffic, name)", k)
		}
	}
	// User ports are private unless asked otherwise: E2B then answers with
	// a traffic access token, which Expose's endpoints carry. E2B allows
	// that only for secure sandboxes.
	switch {
	case publicTraffic == nil && *body.Secure:
		f := false
		body.Network = &api.SandboxNetworkConfig{AllowPublicTraffic: &f}
	case publicTraffic != nil && !*publicTraffic:
		if !*body.Secure {
			return driver.Info{}, sberrors.Errorf(sberrors.InvalidArgument, "e2b: provider option public_traffic=false needs secure=true (E2B restricts traffic to secure sandboxes only)")
		}
		body.Network = &api.SandboxNetworkConfig{AllowPublicTraffic: publicTraffic}
	}
	if allowOut != nil || denyOut != nil {
		if body.Network == nil {
			body.Network = &api.SandboxNetworkConfig{}
		}
		body.Network.AllowOut, body.Network.DenyOut = allowOut, denyOut
	}
	if rules := rulesOf(req.Secrets); rules != nil {
		if body.Network == nil {
			body.Network = &api.SandboxNetworkConfig{}
		}
		body.Network.Rules = rules
	}
	if req.Resources != (driver.Resources{}) {
		return driver.Info{}, sberrors.Errorf(sberrors.InvalidArgument, "e2b: resources are set by the template; build a template with %+v", req.Resources)
	}
	// A token in the metadata finds the sandbox again if the answer is
	// lost; Info.Labels never show it.
	token := randHex(12)
	labels := maps.Clone(req.Labels)
	if name != "" {
		if labels == nil {
			labels = map[string]string{}
		}
		labels[NameLabel] = name
	}
	meta := api.SandboxMetadata(maps.Clone(labels))
	if meta == nil {
		meta = api.SandboxMetadata{}
	}
	meta[createTokenLabel] = token
	body.Metadata = &meta
	if len(req.Env) > 0 {
		e := api.EnvVars(maps.Clone(req.Env))
		body.EnvVars = &e
	}
	started := time.Now()
	// The v2 create has no secure field: it secures every sandbox.
	v2 := api.NewSandboxV2{
		TemplateID: body.TemplateID, Timeout: body.Timeout, AutoPause: body.AutoPause, AutoResume: body.AutoResume,
		AllowInternetAccess: body.AllowInternetAccess, Network: body.Network, Metadata: body.Metadata, EnvVars: body.EnvVars,
	}
	status, data, _, err := r.versioned(ctx, op, false, &r.routes.create, func(ctx context.Context) (*http.Response, error) {
		return r.api.PostV2Sandboxes(ctx, v2)
	}, func(ctx context.Context) (*http.Response, error) {
		return r.api.PostSandboxes(ctx, body)
	})
	if err != nil {
		if errors.Is(err, sberrors.ErrStaleTransport) {
			return driver.Info{}, r.scrub(err) // the server cannot have acted
		}
		return r.lostCreate(ctx, token, r.scrub(err))
	}
	if status != http.StatusCreated {
		return driver.Info{}, r.scrub(apiErr(op, status, data))
	}
	var sb api.Sandbox
	if err := decode(op, data, &sb); err != nil {
		return r.lostCreate(ctx, token, err)
	}
	c := r.remember(sb.SandboxID, sb.EnvdAccessToken, sb.Domain, sb.EnvdVersion)
	r.rememberTraffic(sb.SandboxID, sb.TrafficAccessToken)
	r.setLease(sb.SandboxID, lease)
	info := driver.Info{
		ID: sb.SandboxID, Provider: Scheme, Template: body.TemplateID, Labels: labels,
		State: driver.StateRunning, CreatedAt: started, LeaseEnd: started.Add(time.Duration(secs) * time.Second),
		Isolation: "microvm", Detail: map[string]string{"templateID": sb.TemplateID, "envdVersion": sb.EnvdVersion},
		Network: policyOf(&internet, body.Network), Secrets: reportedSecrets(req.Secrets),
	}
	home, err := r.home(ctx, sb.SandboxID, c)
	if err != nil {
		return info, r.scrub(err)
	}
	info.Home = home
	return info, nil
}

// OptName is the provider option that names a sandbox (the same key as
// daytona.OptName). Surrounding spaces are trimmed; an empty name sets
// nothing.
const OptName = "name"

// NameLabel is the metadata label a sandbox's name is kept in.
const NameLabel = "name"

// sandboxName returns the name req asks for, refusing one that disagrees
// with a "name" label of req.Labels.
func sandboxName(req *driver.CreateRequest) (string, error) {
	name := strings.TrimSpace(req.Options[OptName])
	if l, ok := req.Labels[NameLabel]; ok && name != "" && l != name {
		return "", sberrors.Errorf(sberrors.InvalidArgument, "e2b: provider option %s=%q disagrees with the label %s=%q", OptName, name, NameLabel, l)
	}
	if len(name) > 256 || strings.ContainsFunc(name, unicode.IsControl) {
		return "", sberrors.Errorf(sberrors.InvalidArgument, "e2b: provider option %s: at most 256 bytes without control characters", OptName)
	}
	return name, nil
}

// createTokenLabel is the metadata key Create puts on every sandbox, with
// a random value, to find a sandbox whose create answer was lost. It is
// left out of Info.Labels.
const createTokenLabel = "sandboxkit.create-token"

// lostCreate handles a create whose answer never came (cut, dropped, or
// the caller's ctx ended while the server acted): it looks the sandbox up
// by its token (see lostcreate). While ctx lives, a sandbox found is
// adopted (its Info returned, nil error); otherwise its id comes back
// with err, so the portable layer destroys it.
func (r *Runtime) lostCreate(ctx context.Context, token string, err error) (driver.Info, error) {
	find := func(lctx context.Context) (string, error) { return r.findByToken(lctx, token) }
	id := lostcreate.Find(ctx, find)
	if id == "" {
		if ctx.Err() != nil {
			// The server may act on the abandoned request later still:
			// what it makes is destroyed (see lostcreate.Sweeper).
			r.lost.Go(find, r.Destroy)
		}
		return driver.Info{}, err
	}
	if ctx.Err() == nil {
		if in, gerr := r.Get(ctx, id); gerr == nil && in.State == driver.StateRunning {
			return in, nil
		}
	}
	return driver.Info{ID: id}, err
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// findByToken looks for the sandbox carrying a create token, bounded by
// ctx (lostCreate's own, since the caller's may be over). It returns ""
// and a nil error when there is none, and the error of a failed look-up.
func (r *Runtime) findByToken(ctx context.Context, token string) (string, error) {
	page, _, err := r.List(ctx, &driver.ListRequest{Labels: map[string]string{createTokenLabel: token}, PageSize: 10})
	if err != nil {
		return "", err
	}
	if len(page) == 0 {
		return "", nil
	}
	return page[0].ID, nil
}

// home asks envd where "~" is for the configured user.
func (r *Runtime) home(ctx context.Context, id string, c *conn) (string, error) {
	if c.home != "" {
		return c.home, nil
	}
	e, err := r.statEntry(ctx, id, c, "~")
	if err != nil {
		return "", err
	}
	home := e.GetPath()
	if home == "" {
		// envd before 0.1.x answered Stat with the name and type only.
		home = r.homeFor()
	}
	// The home is its user's: its owner and group are who the sandbox's
	// user is, for the file methods' permission check (access.go).
	r.setHome(id, home, e.GetOwner(), e.GetGroup())
	return home, nil
}

// detail fetches GET /sandboxes/{id} and remembers the envd token.
func (r *Runtime) detail(ctx context.Context, id string) (api.SandboxDetail, error) {
	const op = "get"
	var d api.SandboxDetail
	status, data, _, err := r.call(ctx, op, true, func(ctx context.Context) (*http.Response, error) {
		return r.api.GetSandbox(ctx, id)
	})
	if err != nil {
		return d, r.scrub(err)
	}
	if status != http.StatusOK {
		if status == http.StatusNotFound {
			r.forget(id)
		}
		return d, r.scrub(apiErr(op, status, data))
	}
	if err := decode(op, data, &d); err != nil {
		return d, err
	}
	r.remember(id, d.EnvdAccessToken, d.Domain, d.EnvdVersion)
	return d, nil
}

func (r *Runtime) info(id, template, alias string, meta *api.SandboxMetadata, state api.SandboxState, started, end time.Time, envd string) driver.Info {
	in := driver.Info{
		ID: id, Provider: Scheme, Template: template, State: driver.StateRunning,
		CreatedAt: started, LeaseEnd: end, Isolation: "microvm", Home: r.homeFor(),
		Detail: map[string]string{"templateID": template, "envdVersion": envd},
	}
	if alias != "" {
		in.Template = alias
	}
	if meta != nil {
		in.Labels = maps.Clone(map[string]string(*meta))
		delete(in.Labels, createTokenLabel)
	}
	switch state {
	case "running":
	case "paused":
		in.State = driver.StatePaused
	default:
		// An empty state, or one newer than this client, says nothing
		// about whether the sandbox runs.
		in.State = driver.StateUnknown
		in.Detail["state"] = string(state)
	}
	if c := r.cached(id); c != nil && c.home != "" {
		in.Home = c.home
	}
	return in
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Get returns the sandbox's Info.
func (r *Runtime) Get(ctx context.Context, id string) (driver.Info, error) {
	d, err := r.detail(ctx, id)
	if err != nil {
		return driver.Info{}, err
	}
	in := r.info(d.SandboxID, d.TemplateID, deref(d.Alias), d.Metadata, d.State, d.StartedAt, d.EndAt, d.EnvdVersion)
	in.Network = policyOf(d.AllowInternetAccess, d.Network)
	in.Secrets = secretsOf(d.Network)
	if c := r.cached(id); c != nil && c.home == "" && in.State == driver.StateRunning {
		if home, err := r.home(ctx, id, c); err == nil {
			in.Home = home
		}
	}
	return in, nil
}

// metadataQuery encodes a label filter as E2B expects: a query string of
// escaped keys and values, itself escaped again as one parameter.
func metadataQuery(labels map[string]string) string {
	inner := url.Values{}
	for k, v := range labels {
		inner.Set(url.QueryEscape(k), url.QueryEscape(v))
	}
	return inner.Encode()
}

// List returns one page of GET /v2/sandboxes.
func (r *Runtime) List(ctx context.Context, req *driver.ListRequest) ([]driver.Info, string, error) {
	const op = "list"
	params := &api.GetV2SandboxesParams{}
	if len(req.Labels) > 0 {
		m := metadataQuery(req.Labels)
		params.Metadata = &m
	}
	var states []api.SandboxState
	unknown := slices.Contains(req.States, driver.StateUnknown)
	for _, s := range req.States {
		switch s {
		case driver.StateRunning:
			states = append(states, "running")
		case driver.StatePaused:
			states = append(states, "paused")
		}
	}
	if len(req.States) > 0 && len(states) == 0 && !unknown {
		return nil, "", nil // E2B has no sandboxes in the other states
	}
	if len(states) > 0 && !unknown { // a state E2B cannot filter on: the caller filters
		params.State = &states
	}
	limit := int32(min(cmp.Or(max(req.PageSize, 0), 100), 100))
	params.Limit = &limit
	if req.PageToken != "" {
		t := req.PageToken
		params.NextToken = &t
	}
	status, data, hdr, err := r.call(ctx, op, true, func(ctx context.Context) (*http.Response, error) {
		return r.api.GetV2Sandboxes(ctx, params)
	})
	if err != nil {
		return nil, "", r.scrub(err)
	}
	if status != http.StatusOK {
		return nil, "", r.scrub(apiErr(op, status, data))
	}
	var page []api.ListedSandbox
	if err := decode(op, data, &page); err != nil {
		return nil, "", err
	}
	out := make([]driver.Info, 0, len(page))
	for _, l := range page {
		out = append(out, r.info(l.SandboxID, l.TemplateID, deref(l.Alias), l.Metadata, l.State, l.StartedAt, l.EndAt, l.EnvdVersion))
	}
	return out, hdr.Get("X-Next-Token"), nil
}

// Destroy kills the sandbox; a sandbox that is already gone is not an error.
func (r *Runtime) Destroy(ctx context.Context, id string) error {
	const op = "destroy"
	status, data, _, err := r.call(ctx, op, true, func(ctx context.Context) (*http.Response, error) {
		return r.api.DeleteSandbox(ctx, id)
	})
	if err != nil {
		return r.scrub(err)
	}
	switch status {
	case http.StatusNoContent, http.StatusOK, http.StatusNotFound:
		r.forget(id)
		return nil
	}
	return r.scrub(apiErr(op, status, data))
}

// SetTimeout makes the lease end d from now. E2B sets the end exactly (it
// would shorten too), so the portable layer calls it only to extend.
func (r *Runtime) SetTimeout(ctx context.Context, id string, d time.Duration) error {
	const op = "set-timeout"
	status, data, _, err := r.call(ctx, op, true, func(ctx context.Context) (*http.Response, error) {
		return r.api.PostSandboxTimeout(ctx, id, api.TimeoutRequest{Timeout: seconds(d)})
	})
	if err != nil {
		return r.scrub(err)
	}
	if status == http.StatusNotFound {
		// E2B answers 404 for a paused sandbox too.
		if d, err := r.detail(ctx, id); err == nil && d.State == "paused" {
			return fmt.Errorf("e2b: %s: %w", op, pausedErr(id))
		}
	}
	if status != http.StatusNoContent && status != http.StatusOK {
		return r.scrub(apiErr(op, status, data))
	}
	r.setLease(id, d)
	return nil
}

// Pause pauses the sandbox with its memory, so processes survive. Pausing
// a paused sandbox is not an error.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	const op = "pause"
	keep := true
	status, data, _, err := r.call(ctx, op, true, func(ctx context.Context) (*http.Response, error) {
		return r.api.PostSandboxPause(ctx, id, api.PauseRequest{Memory: &keep})
	})
	if err != nil {
		return r.scrub(err)
	}
	switch status {
	case http.StatusNoContent, http.StatusOK:
		return nil
	case http.StatusConflict:
		// Already paused is success; a transition in progress is not.
		if d, err := r.detail(ctx, id); err == nil && d.State == "paused" {
			return nil
		}
	}
	return r.scrub(apiErr(op, status, data))
}

// Resume resumes a paused sandbox with connect (201): POST
// /v2/sandboxes/{id}/connect or, on a server without it, POST
// /sandboxes/{id}/connect. A running sandbox
// is left alone: connect would renew its lease, and Resume of a running
// sandbox does nothing. The lease sent is the last one this Runtime asked
// for the sandbox (its CreateOptions.Timeout, or the last SetTimeout), so
// a sandbox created for an hour comes back with an hour, as on the local
// provider, not with the 5 minutes E2B's SDKs send by default. A sandbox
// this Runtime has not created or extended (one created by another
// process) gets those 5 minutes: call SetTimeout after Resume to set its
// lease. E2B refuses a lease above the plan's maximum here (SetTimeout
// clamps it silently), so a refused lease is retried at the Hobby plan's
// 1 h, then at 5 minutes.
func (r *Runtime) Resume(ctx context.Context, id string) (driver.Info, error) {
	const op = "resume"
	in, err := r.Get(ctx, id)
	if err != nil || in.State != driver.StatePaused {
		return in, err
	}
	leases := []time.Duration{r.leaseFor(id)}
	if leases[0] > hobbyMaxLease {
		leases = append(leases, hobbyMaxLease)
	}
	if leases[len(leases)-1] > defaultLease {
		leases = append(leases, defaultLease)
	}
	var status int
	var data []byte
	for _, lease := range leases {
		secs := seconds(lease)
		status, data, _, err = r.versioned(ctx, op, true, &r.routes.connect, func(ctx context.Context) (*http.Response, error) {
			return r.api.PostV2SandboxConnect(ctx, id, api.ConnectSandboxV2{Timeout: &secs})
		}, func(ctx context.Context) (*http.Response, error) {
			return r.api.PostSandboxConnect(ctx, id, api.ConnectSandbox{Timeout: secs})
		})
		if err != nil {
			return driver.Info{}, r.scrub(err)
		}
		if status != http.StatusBadRequest {
			break
		}
	}
	if status != http.StatusOK && status != http.StatusCreated {
		return driver.Info{}, r.scrub(apiErr(op, status, data))
	}
	var sb api.Sandbox
	if err := decode(op, data, &sb); err != nil {
		return driver.Info{}, err
	}
	r.remember(id, sb.EnvdAccessToken, sb.Domain, sb.EnvdVersion)
	r.rememberTraffic(id, sb.TrafficAccessToken)
	return r.Get(ctx, id)
}
