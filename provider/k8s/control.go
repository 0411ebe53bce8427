package k8s

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	sandboxv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

const (
	// createdByValue marks the claims this provider made, under the
	// created-by label the official clients set (agents.x-k8s.io/created-by).
	createdByValue = "sandboxkit"
	// templateAnnotation records the template a claim was made for.
	templateAnnotation = "sandboxkit.dev/template"
	// pollInterval is how often Create and Resume look at a claim while
	// they wait for it to become Ready.
	pollInterval = 100 * time.Millisecond
)

// claims returns the SandboxClaim client of the namespace.
func (r *Runtime) claims() interface {
	Get(context.Context, string, metav1.GetOptions) (*extv1beta1.SandboxClaim, error)
} {
	return r.ext.ExtensionsV1beta1().SandboxClaims(r.cfg.namespace)
}

// apiErr turns an API server error into the library's codes.
func apiErr(op, name string, err error) error {
	var code sberrors.Code
	switch {
	case k8serrors.IsNotFound(err):
		return errorf("%s %s: %w", op, name, sberrors.ErrNotFound)
	case k8serrors.IsAlreadyExists(err):
		code = sberrors.AlreadyExists
	case k8serrors.IsInvalid(err), k8serrors.IsBadRequest(err):
		code = sberrors.InvalidArgument
	case k8serrors.IsForbidden(err), k8serrors.IsUnauthorized(err):
		code = sberrors.PermissionDenied
	case k8serrors.IsConflict(err):
		code = sberrors.FailedPrecondition
	case k8serrors.IsTooManyRequests(err):
		code = sberrors.ResourceExhausted
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errorf("%s %s: %w", op, name, err)
	case k8serrors.IsServiceUnavailable(err), k8serrors.IsServerTimeout(err), k8serrors.IsTimeout(err):
		code = sberrors.Unavailable
	default:
		var se k8serrors.APIStatus
		if errors.As(err, &se) {
			code = sberrors.Internal
		} else {
			code = sberrors.Unavailable // the API server could not be reached
		}
	}
	return errorf("%s %s: %w", op, name, sberrors.Errorf(code, "%v", err))
}

// poolFor finds the warm pool a claim for template names.
func (r *Runtime) poolFor(ctx context.Context, template string) (string, error) {
	if template == "" {
		if r.cfg.warmPool != "" {
			return r.cfg.warmPool, nil
		}
		template = r.cfg.template
	}
	if template == "" {
		return "", sberrors.Errorf(sberrors.InvalidArgument, "k8s: no template: set CreateOptions.Template or the URL's template= or warm_pool=")
	}
	pools, err := r.ext.ExtensionsV1beta1().SandboxWarmPools(r.cfg.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", apiErr("list warm pools in", r.cfg.namespace, err)
	}
	var names []string
	for _, p := range pools.Items {
		if p.Spec.TemplateRef.Name == template {
			names = append(names, p.Name)
		}
	}
	if len(names) == 0 {
		return "", sberrors.Errorf(sberrors.FailedPrecondition,
			"k8s: no SandboxWarmPool in namespace %s references SandboxTemplate %q: a claim names a warm pool (create one; replicas: 0 is a cold start)", r.cfg.namespace, template)
	}
	slices.Sort(names)
	return names[0], nil
}

// checkLabels refuses labels the API server would refuse, naming them.
func checkLabels(l map[string]string) error {
	for k, v := range l {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return sberrors.Errorf(sberrors.InvalidArgument, "k8s: label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return sberrors.Errorf(sberrors.InvalidArgument, "k8s: label %q value %q: %s", k, v, strings.Join(errs, "; "))
		}
		if strings.HasPrefix(k, "agents.x-k8s.io/") {
			return sberrors.Errorf(sberrors.InvalidArgument, "k8s: label key %q: the agents.x-k8s.io/ prefix belongs to agent-sandbox", k)
		}
	}
	return nil
}

func newClaimName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "sbk-" + hex.EncodeToString(b[:])
}

// Create claims a sandbox from the warm pool of req.Template and waits
// until the claim is Ready, bounded by ctx and the ready timeout. A claim
// that does not become Ready is deleted and the error carries the reason
// of its Ready condition; a claim whose Create was cancelled is deleted
// in the background.
func (r *Runtime) Create(ctx context.Context, req *driver.CreateRequest) (driver.Info, error) {
	if req.AutoPause {
		return driver.Info{}, sberrors.Errorf(sberrors.Unimplemented, "k8s: AutoPause: a SandboxClaim's shutdown deletes its sandbox; it cannot suspend it")
	}
	if req.FromSnapshot != "" {
		return driver.Info{}, sberrors.Errorf(sberrors.Unimplemented, "k8s: snapshots are not part of agent-sandbox v1beta1")
	}
	if req.NoNetwork || req.Network != nil || len(req.Secrets) > 0 {
		return driver.Info{}, sberrors.Errorf(sberrors.Unimplemented, "k8s: network policy is the SandboxTemplate's (spec.networkPolicy), not a per-sandbox setting")
	}
	if req.Resources != (driver.Resources{}) {
		return driver.Info{}, sberrors.Errorf(sberrors.Unimplemented, "k8s: resources are the SandboxTemplate's (its pod template), not a per-sandbox setting")
	}
	for k := range req.Options {
		return driver.Info{}, sberrors.Errorf(sberrors.InvalidArgument, "k8s: unknown provider option %q (none are known)", k)
	}
	if err := checkLabels(req.Labels); err != nil {
		return driver.Info{}, err
	}
	pool, err := r.poolFor(ctx, req.Template)
	if err != nil {
		return driver.Info{}, err
	}
	template := req.Template
	if template == "" {
		template = r.cfg.template
	}
	lbl := maps.Clone(req.Labels)
	if lbl == nil {
		lbl = map[string]string{}
	}
	lbl[sandboxv1beta1.CreatedByLabel] = createdByValue
	var env []extv1beta1.EnvVar
	for _, k := range slices.Sorted(maps.Keys(req.Env)) {
		env = append(env, extv1beta1.EnvVar{Name: k, Value: req.Env[k]})
	}
	shutdown := metav1.NewTime(time.Now().Add(req.Timeout).Truncate(time.Second))
	claim := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        newClaimName(),
			Namespace:   r.cfg.namespace,
			Labels:      lbl,
			Annotations: map[string]string{templateAnnotation: template},
		},
		Spec: extv1beta1.SandboxClaimSpec{
			WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: pool},
			Lifecycle: &extv1beta1.Lifecycle{
				ShutdownTime:   &shutdown,
				ShutdownPolicy: extv1beta1.ShutdownPolicyDeleteForeground,
			},
			Env: env,
		},
	}
	made, err := r.ext.ExtensionsV1beta1().SandboxClaims(r.cfg.namespace).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		if ctx.Err() != nil {
			// The request may have reached the API server: delete the
			// claim by its name, which this Create chose.
			r.deleteInBackground(claim.Name)
			return driver.Info{}, errorf("create claim %s: %w", claim.Name, ctx.Err())
		}
		return driver.Info{}, apiErr("create claim in", r.cfg.namespace, err)
	}
	wctx, cancel := context.WithTimeout(ctx, r.cfg.ready)
	defer cancel()
	info, err := r.waitReady(wctx, made.Name)
	if err == nil {
		info, err = r.withHome(wctx, info)
		if err == nil {
			return info, nil
		}
	}
	if ctx.Err() != nil {
		r.deleteInBackground(made.Name)
		return driver.Info{ID: made.Name, Provider: Scheme}, errorf("create %s: %w", made.Name, ctx.Err())
	}
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	derr := r.Destroy(dctx, made.Name)
	dcancel()
	if derr != nil {
		r.cfg.log.Warn("k8s: deleting a claim that did not become Ready failed", "claim", made.Name, "err", derr)
		return driver.Info{ID: made.Name, Provider: Scheme}, err
	}
	return driver.Info{}, err
}

// deleteInBackground deletes a claim a cancelled Create left, bounded by
// cleanupTimeout; Close waits for it.
func (r *Runtime) deleteInBackground(name string) {
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := r.Destroy(ctx, name); err != nil {
			r.cfg.log.Warn("k8s: deleting the claim of a cancelled create failed", "claim", name, "err", err)
		}
	}()
}

// waitReady polls the claim until its Ready condition is True and it has
// an address, or ctx ends (the error then says the last Ready reason).
func (r *Runtime) waitReady(ctx context.Context, name string) (driver.Info, error) {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	last := "no Ready condition yet"
	for {
		c, err := r.claims().Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			if c.DeletionTimestamp != nil {
				return driver.Info{}, errorf("claim %s is being deleted: %w", name, sberrors.ErrNotFound)
			}
			cond := meta.FindStatusCondition(c.Status.Conditions, string(sandboxv1beta1.SandboxConditionReady))
			if cond != nil {
				last = fmt.Sprintf("Ready=%s reason %s: %s", cond.Status, cond.Reason, cond.Message)
			}
			if cond != nil && cond.Status == metav1.ConditionTrue && len(c.Status.SandboxStatus.PodIPs) > 0 {
				return r.info(c), nil
			}
			if finished := meta.FindStatusCondition(c.Status.Conditions, string(sandboxv1beta1.SandboxConditionFinished)); finished != nil && finished.Status == metav1.ConditionTrue {
				return driver.Info{}, errorf("claim %s: its pod finished (%s: %s): %w", name, finished.Reason, finished.Message, sberrors.ErrUnavailable)
			}
		case k8serrors.IsNotFound(err):
			return driver.Info{}, errorf("claim %s was deleted while it was starting: %w", name, sberrors.ErrNotFound)
		case ctx.Err() == nil:
			last = "get: " + err.Error()
		}
		select {
		case <-ctx.Done():
			code := sberrors.DeadlineExceeded
			if errors.Is(ctx.Err(), context.Canceled) {
				code = sberrors.Canceled
			}
			return driver.Info{}, errorf("claim %s did not become Ready (%s): %w", name, last, sberrors.Errorf(code, "%v", ctx.Err()))
		case <-t.C:
		}
	}
}

// info maps a claim to an Info.
func (r *Runtime) info(c *extv1beta1.SandboxClaim) driver.Info {
	in := driver.Info{
		ID:        c.Name,
		Provider:  Scheme,
		Template:  c.Annotations[templateAnnotation],
		CreatedAt: c.CreationTimestamp.Time,
		Isolation: r.Capabilities().Isolation,
		Detail:    map[string]string{"warm_pool": c.Spec.WarmPoolRef.Name},
	}
	in.Labels = maps.Clone(c.Labels)
	delete(in.Labels, sandboxv1beta1.CreatedByLabel)
	if in.Labels == nil {
		in.Labels = map[string]string{}
	}
	if c.Spec.Lifecycle != nil && c.Spec.Lifecycle.ShutdownTime != nil {
		in.LeaseEnd = c.Spec.Lifecycle.ShutdownTime.Time
	}
	if n := c.Status.SandboxStatus.Name; n != "" {
		in.Detail["sandbox"] = n
	}
	if fqdn := c.Status.SandboxStatus.ServiceFQDN; fqdn != "" {
		in.Detail["service"] = fqdn
	}
	r.mu.Lock()
	in.Home = r.roots[c.Name]
	r.mu.Unlock()
	if in.Home == "" {
		in.Home = r.cfg.root
	}
	cond := meta.FindStatusCondition(c.Status.Conditions, string(sandboxv1beta1.SandboxConditionReady))
	finished := meta.FindStatusCondition(c.Status.Conditions, string(sandboxv1beta1.SandboxConditionFinished))
	switch {
	case cond != nil && cond.Status == metav1.ConditionTrue && len(c.Status.SandboxStatus.PodIPs) > 0:
		in.State = driver.StateRunning
	case cond != nil && cond.Reason == sandboxv1beta1.SandboxReasonSuspended:
		in.State = driver.StatePaused
	case finished != nil && finished.Status == metav1.ConditionTrue:
		in.State = driver.StateError
		in.Detail["reason"] = finished.Reason
	case cond != nil && (cond.Reason == "SandboxMissing" || cond.Reason == sandboxv1beta1.SandboxReasonDependenciesNotReady) && c.Status.SandboxStatus.Name != "" && len(c.Status.SandboxStatus.PodIPs) == 0:
		// The claim had a sandbox whose pod is gone: degraded, not starting.
		in.State = driver.StateError
		in.Detail["reason"] = cond.Reason
	case cond == nil || cond.Status != metav1.ConditionTrue:
		in.State = driver.StateStarting
		if cond != nil {
			in.Detail["reason"] = cond.Reason
		}
	}
	return in
}

// claim returns a live claim of this provider or a NotFound error; a
// claim that expired (its shutdown time passed) yields a LeaseEndedError.
func (r *Runtime) claim(ctx context.Context, id string) (*extv1beta1.SandboxClaim, error) {
	c, err := r.claims().Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		return nil, apiErr("sandbox", id, err)
	}
	if c.DeletionTimestamp != nil || c.Labels[sandboxv1beta1.CreatedByLabel] != createdByValue {
		return nil, errorf("sandbox %s: %w", id, sberrors.ErrNotFound)
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, string(sandboxv1beta1.SandboxConditionReady)); cond != nil &&
		cond.Reason == extv1beta1.ClaimExpiredReason && c.Spec.Lifecycle != nil && c.Spec.Lifecycle.ShutdownTime != nil {
		return nil, errorf("sandbox %s: %w", id, &driver.LeaseEndedError{End: c.Spec.Lifecycle.ShutdownTime.Time})
	}
	return c, nil
}

// Get returns the Info of the claim id.
func (r *Runtime) Get(ctx context.Context, id string) (driver.Info, error) {
	c, err := r.claim(ctx, id)
	if err != nil {
		return driver.Info{}, err
	}
	return r.withHome(ctx, r.info(c))
}

// withHome fills in.Home for a running sandbox from its sandboxd's root.
func (r *Runtime) withHome(ctx context.Context, in driver.Info) (driver.Info, error) {
	if in.Home != "" || in.State != driver.StateRunning {
		return in, nil
	}
	ep, err := r.endpoint(ctx, in.ID)
	if err != nil {
		return in, err
	}
	in.Home = ep.root
	return in, nil
}

// List lists this provider's claims by a label selector of req.Labels,
// a page at a time (the API server's limit and continue token).
func (r *Runtime) List(ctx context.Context, req *driver.ListRequest) ([]driver.Info, string, error) {
	if err := checkLabels(req.Labels); err != nil {
		return nil, "", err
	}
	sel := labels.Set(maps.Clone(req.Labels))
	if sel == nil {
		sel = labels.Set{}
	}
	sel[sandboxv1beta1.CreatedByLabel] = createdByValue
	// A token "after:NAME" continues a listing the API server did not
	// page (it ignored the limit, as some aggregated servers and the
	// client-go fakes do): the page is cut here, by name.
	after, local := strings.CutPrefix(req.PageToken, "after:")
	opts := metav1.ListOptions{LabelSelector: sel.String(), Limit: int64(max(req.PageSize, 0))}
	if !local {
		opts.Continue = req.PageToken
	} else {
		opts.Limit = 0
	}
	list, err := r.ext.ExtensionsV1beta1().SandboxClaims(r.cfg.namespace).List(ctx, opts)
	if err != nil {
		return nil, "", apiErr("list claims in", r.cfg.namespace, err)
	}
	items := list.Items
	next := list.Continue
	bounded := req.PageSize > 0
	if local || (bounded && len(items) > req.PageSize) {
		slices.SortFunc(items, func(a, b extv1beta1.SandboxClaim) int { return strings.Compare(a.Name, b.Name) })
		if local {
			i, _ := slices.BinarySearchFunc(items, after, func(c extv1beta1.SandboxClaim, n string) int { return strings.Compare(c.Name, n) })
			for i < len(items) && items[i].Name <= after {
				i++
			}
			items = items[i:]
		}
		next = ""
		if bounded && len(items) > req.PageSize {
			items = items[:req.PageSize]
			next = "after:" + items[len(items)-1].Name
		}
	}
	out := make([]driver.Info, 0, len(items))
	for i := range items {
		c := &items[i]
		if c.DeletionTimestamp != nil || slices.Contains(req.ExcludeIDs, c.Name) {
			continue
		}
		in := r.info(c)
		if len(req.States) > 0 && !slices.Contains(req.States, in.State) {
			continue
		}
		out = append(out, in)
	}
	return out, next, nil
}

// Destroy deletes the claim with foreground propagation, so the claim
// stays (with a deletion timestamp) until its Sandbox and pod are gone.
// A claim already gone is not an error.
func (r *Runtime) Destroy(ctx context.Context, id string) error {
	fg := metav1.DeletePropagationForeground
	err := r.ext.ExtensionsV1beta1().SandboxClaims(r.cfg.namespace).Delete(ctx, id, metav1.DeleteOptions{PropagationPolicy: &fg})
	r.forget(id)
	if err != nil && !k8serrors.IsNotFound(err) {
		return apiErr("delete claim", id, err)
	}
	return nil
}

// SetTimeout moves the claim's shutdown time to d from now, never earlier
// than it is.
func (r *Runtime) SetTimeout(ctx context.Context, id string, d time.Duration) error {
	for range 5 {
		c, err := r.claim(ctx, id)
		if err != nil {
			return err
		}
		end := metav1.NewTime(time.Now().Add(d).Truncate(time.Second))
		if c.Spec.Lifecycle == nil {
			c.Spec.Lifecycle = &extv1beta1.Lifecycle{ShutdownPolicy: extv1beta1.ShutdownPolicyDeleteForeground}
		}
		if old := c.Spec.Lifecycle.ShutdownTime; old != nil && !end.After(old.Time) {
			return nil
		}
		c.Spec.Lifecycle.ShutdownTime = &end
		_, err = r.ext.ExtensionsV1beta1().SandboxClaims(r.cfg.namespace).Update(ctx, c, metav1.UpdateOptions{})
		if k8serrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return apiErr("extend lease of", id, err)
		}
		return nil
	}
	return errorf("extend lease of %s: %w", id, sberrors.Errorf(sberrors.Unavailable, "the claim kept changing under the update"))
}

// setMode sets the operating mode of the claim's Sandbox.
func (r *Runtime) setMode(ctx context.Context, id string, mode sandboxv1beta1.SandboxOperatingMode) (*extv1beta1.SandboxClaim, error) {
	c, err := r.claim(ctx, id)
	if err != nil {
		return nil, err
	}
	name := c.Status.SandboxStatus.Name
	if name == "" {
		return nil, errorf("sandbox %s has no Sandbox bound yet: %w", id, sberrors.ErrFailedPrecondition)
	}
	sbs := r.agents.AgentsV1beta1().Sandboxes(r.cfg.namespace)
	for range 5 {
		sb, err := sbs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, apiErr("sandbox of", id, err)
		}
		if sb.Spec.OperatingMode == mode || (sb.Spec.OperatingMode == "" && mode == sandboxv1beta1.SandboxOperatingModeRunning) {
			return c, nil
		}
		sb.Spec.OperatingMode = mode
		_, err = sbs.Update(ctx, sb, metav1.UpdateOptions{})
		if k8serrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return nil, apiErr("set operating mode of", id, err)
		}
		return c, nil
	}
	return nil, errorf("set operating mode of %s: %w", id, sberrors.Errorf(sberrors.Unavailable, "the Sandbox kept changing under the update"))
}

// Pause sets the Sandbox's operating mode to Suspended: the controller
// ends the pod and keeps its volumes. Pause returns once the claim no
// longer reports Ready, bounded by ctx.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	if _, err := r.setMode(ctx, id, sandboxv1beta1.SandboxOperatingModeSuspended); err != nil {
		return err
	}
	r.forgetConns(id)
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		c, err := r.claim(ctx, id)
		if err != nil {
			return err
		}
		if r.info(c).State == driver.StatePaused {
			return nil
		}
		select {
		case <-ctx.Done():
			return errorf("pause %s: %w", id, ctx.Err())
		case <-t.C:
		}
	}
}

// Resume sets the Sandbox's operating mode to Running and waits until the
// claim is Ready again, bounded by ctx and the ready timeout.
func (r *Runtime) Resume(ctx context.Context, id string) (driver.Info, error) {
	if _, err := r.setMode(ctx, id, sandboxv1beta1.SandboxOperatingModeRunning); err != nil {
		return driver.Info{}, err
	}
	r.forgetConns(id)
	wctx, cancel := context.WithTimeout(ctx, r.cfg.ready)
	defer cancel()
	in, err := r.waitReady(wctx, id)
	if err != nil {
		return in, err
	}
	return r.withHome(wctx, in)
}
