package docker

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// keepAlive is the container's main process under the engine's init: it
// only keeps the container running; commands arrive through exec.
var keepAlive = []string{"/bin/sh", "-c", "while :; do sleep 3600; done"}

// Create creates and starts a container from req.Template (or the default
// image). See the package doc for what it configures.
func (r *Runtime) Create(ctx context.Context, req *driver.CreateRequest) (driver.Info, error) {
	const op = "create"
	image := req.Template
	if req.FromSnapshot != "" {
		// Only this provider's snapshot images: another image ID is
		// NotFound here as for GetSnapshot.
		if _, err := r.ownedImage(ctx, op, req.FromSnapshot); err != nil {
			return driver.Info{}, err
		}
		image = req.FromSnapshot
	}
	if image == "" {
		image = r.image
	}
	if image == "" {
		return driver.Info{}, fmt.Errorf("docker: create: no image: set CreateOptions.Template, ?image= or SANDBOX_DOCKER_IMAGE: %w", sberrors.ErrInvalidArgument)
	}
	if len(req.Options) > 0 {
		return driver.Info{}, fmt.Errorf("docker: create: unknown provider options %q (the docker provider has none): %w", slices.Sorted(maps.Keys(req.Options)), sberrors.ErrInvalidArgument)
	}
	for k := range req.Env {
		if !envNameRE.MatchString(k) {
			return driver.Info{}, fmt.Errorf("docker: create: environment variable name %q is not a shell name: %w", k, sberrors.ErrInvalidArgument)
		}
	}
	// Before the container exists: it must get its owner name.
	key, err := r.ownerKey()
	if err != nil {
		return driver.Info{}, err
	}
	img, err := r.cli.ImageInspect(ctx, image)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return driver.Info{}, fmt.Errorf("docker: create: image %q is not on the engine at %s (build or pull it first; this provider never pulls): %w", image, r.host, sberrors.ErrNotFound)
		}
		return driver.Info{}, r.wrap(ctx, op, err)
	}
	user, home := r.user, r.home
	imgUser, imgDir := "", ""
	if img.Config != nil {
		imgUser, imgDir = img.Config.User, img.Config.WorkingDir
	}
	if user == "" {
		user = imgUser
		if isRoot(user) {
			user = DefaultUser
		}
	}
	if home == "" {
		if user == imgUser && imgDir != "" && imgDir != "/" {
			home = imgDir
		} else {
			home = DefaultHome
		}
	}
	mem, cpus := req.Resources.MemoryMiB, req.Resources.CPUs
	if mem <= 0 {
		mem = DefaultMemoryMiB
	} else if mem < minMemoryMiB {
		return driver.Info{}, fmt.Errorf("docker: Resources.MemoryMiB %d is below the engine's minimum memory limit, %d MiB: %w", mem, minMemoryMiB, sberrors.ErrInvalidArgument)
	}
	if cpus <= 0 {
		ncpu, err := r.engineCPUs(ctx)
		if err != nil {
			return driver.Info{}, err
		}
		cpus = min(DefaultCPUs, ncpu)
	}
	leaseEnd := time.Now().Add(req.Timeout).Truncate(time.Second).Add(time.Second)
	token := newToken()
	labels := map[string]string{
		labelManaged: "1", labelTemplate: image, labelUser: user, labelCreate: token, labelHome: home,
		labelLease:  strconv.FormatInt(leaseEnd.Unix(), 10),
		labelMemory: strconv.Itoa(mem), labelCPUs: strconv.Itoa(cpus), labelPids: strconv.FormatInt(r.pids, 10),
	}
	if req.AutoPause {
		labels[labelAutoPause] = "1"
	} else if req.FromSnapshot != "" {
		labels[labelAutoPause] = "0" // over the snapshot image's own
	}
	for k, v := range req.Labels {
		labels[labelPrefix+k] = v
	}
	labels[labelKeys] = userLabelKeys(req.Labels)
	netMode := r.network
	if req.NoNetwork {
		netMode = "none"
	}
	proxied := needsProxy(req.Network, len(req.Secrets), netMode)
	env := req.Env
	if proxied {
		// Behind the egress proxy: the none network, whose only way
		// out is the proxy on the sandbox's loopback.
		if err := r.proxyUsable(); err != nil {
			what := "brokered secrets"
			if req.Network != nil {
				what = "network policy " + string(req.Network.Mode)
			}
			return driver.Info{}, fmt.Errorf("docker: create: %s needs the egress proxy (network policy with domain or CIDR entries, allow-all without a network to join, or brokered secrets), which cannot run here: %v: %w", what, err, sberrors.ErrFailedPrecondition)
		}
		netMode = "none"
		pol := req.Network
		if pol == nil {
			// Secrets without a policy: the provider's default network,
			// through the proxy.
			pol = &driver.NetworkPolicy{Mode: driver.NetworkAllowAll}
			if r.network == "none" {
				pol.Mode = driver.NetworkDenyAll
			}
		}
		labels[labelPolicy] = policyLabel(pol)
		labels[labelProxy] = "1"
		if len(req.Secrets) > 0 {
			labels[labelProxy] = "ca"
		}
		env = proxyEnv(len(req.Secrets) > 0)
		maps.Copy(env, req.Env) // the caller's own variables win
	} else if p := req.Network; p != nil && p.Mode == driver.NetworkAllowAll && netMode == "none" {
		return driver.Info{}, fmt.Errorf("docker: create: network policy allow-all needs a network to join (?network=); this Runtime joins none: %w", sberrors.ErrFailedPrecondition)
	}
	labels[labelNetwork] = netMode
	yes := true
	pids := r.pids
	hc := &container.HostConfig{
		NetworkMode: container.NetworkMode(netMode),
		Init:        &yes,
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"},
		Runtime:     r.runtime,
		Resources: container.Resources{
			PidsLimit: &pids,
			NanoCPUs:  int64(cpus) * 1e9,
			Memory:    int64(mem) << 20,
			// Swap equal to the memory limit: no swap, so the limit holds.
			MemorySwap: int64(mem) << 20,
		},
	}
	if req.Resources.DiskGiB > 0 {
		// Only some storage drivers (overlay2 on xfs with pquota, btrfs,
		// zfs) accept a size; elsewhere the engine refuses the container,
		// which Create reports.
		hc.StorageOpt = map[string]string{"size": strconv.Itoa(req.Resources.DiskGiB) + "G"}
	}
	cfg := &container.Config{
		Image: image, Entrypoint: keepAlive[:1], Cmd: keepAlive[1:],
		User: user, WorkingDir: home, Labels: labels,
	}
	// Where Create extracts its files: the root, or each volume.
	dests := []string{"/"}
	if r.readOnly {
		hc.ReadonlyRootfs = true
		dests = writableDirs(home)
		cfg.Volumes = map[string]struct{}{}
		for _, d := range dests {
			cfg.Volumes[d] = struct{}{}
		}
	} else if r.runtime == "runsc" {
		// runsc mounts its own tmpfs on /tmp unless the container has a
		// mount there, and the engine's archive endpoint (Stat,
		// Download) cannot see into it: a volume keeps one view.
		cfg.Volumes = map[string]struct{}{"/tmp": {}}
	}
	created, err := r.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cfg, HostConfig: hc, Name: namePrefix + token})
	if err != nil {
		if ctx.Err() != nil {
			// The engine may have created it as ctx ended: find it by
			// its create token and remove it, so nothing is orphaned; in
			// the background, so Create returns promptly (Close waits).
			r.bg.Add(1)
			go func() {
				defer r.bg.Done()
				r.removeByToken(token)
			}()
		}
		return driver.Info{}, r.wrap(ctx, op, err)
	}
	// This Runtime made it: it may clean it up even if the rename below
	// fails. The owner name proves it to every other Runtime with the key.
	r.owned.Store(created.ID, time.Now())
	if _, err := r.cli.ContainerRename(ctx, created.ID, client.ContainerRenameOptions{NewName: ownerName(key, created.ID)}); err != nil {
		return driver.Info{ID: created.ID, Provider: Scheme}, r.wrap(ctx, op+": naming the container", err)
	}
	info := driver.Info{ID: created.ID, Provider: Scheme, Template: image, Labels: maps.Clone(req.Labels), State: driver.StateStarting, Home: home, LeaseEnd: leaseEnd, Isolation: r.isolation()}
	if info.Labels == nil {
		info.Labels = map[string]string{}
	}
	info.Network = &driver.NetworkPolicy{Mode: driver.NetworkAllowAll}
	if netMode == "none" {
		info.Network.Mode = driver.NetworkDenyAll
	}
	if p := policyOf(labels); p != nil {
		info.Network = p
	}
	entries := initEntries(user, home, leaseEnd, env)
	for _, d := range dests {
		if _, err := r.cli.CopyToContainer(ctx, created.ID, client.CopyToContainerOptions{
			DestinationPath: d, Content: tarOf(d, entries),
		}); err != nil {
			return info, r.wrap(ctx, op+": writing "+d, err)
		}
	}
	if _, err := r.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return info, r.wrap(ctx, op+": start", err)
	}
	if proxied {
		// Before Create returns, so before any command runs.
		ec := &egressConfig{Policy: policyOf(labels), Secrets: req.Secrets, Hosts: r.egressHosts, Roots: r.egressRoots, Dial: r.egressDial}
		if err := r.attachProxy(ctx, created.ID, ec, len(req.Secrets) > 0); err != nil {
			return info, err
		}
	}
	info.State = driver.StateRunning
	info.CreatedAt = time.Now()
	if got, err := r.Get(ctx, created.ID); err == nil {
		info = got
	} else if ctx.Err() != nil {
		return info, r.wrap(ctx, op, err)
	}
	return info, nil
}

// namePrefix starts the name of every container Create makes: followed by
// the create token until the engine has chosen the id, then by the owner
// MAC (ownerName).
const namePrefix = "sandboxkit-"

// removeByToken removes the container a cancelled Create may have made, on
// its own deadline (the caller's ctx has ended). It is the container named
// after the create token and carrying it as a label: names are unique on
// an engine, and the token was random and unseen before that container
// existed, so no other container can be that one.
func (r *Runtime) removeByToken(token string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := client.Filters{}
	f.Add("label", labelCreate+"="+token)
	f.Add("name", namePrefix+token)
	// A create still in flight on the engine shows up a moment later.
	for range 3 {
		res, err := r.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		if err == nil {
			for _, c := range res.Items {
				if !slices.Contains(c.Names, "/"+namePrefix+token) {
					continue
				}
				_ = r.removeContainer(ctx, c.ID)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// tarEntry is one file or directory of an archive Create extracts.
type tarEntry struct {
	name     string // absolute
	dir      bool
	mode     int64
	uid, gid int
	mtime    time.Time
	body     []byte
}

// initEntries are the files Create extracts into the container before it
// starts: the state directory with the lease file (its modification time
// is the lease's end), the create-time environment (readable only by the
// sandbox's user, so secret values stay out of `docker inspect`), the
// markers and process directories; and the home directory, owned by a
// numeric user, with its parents.
func initEntries(user, home string, leaseEnd time.Time, env map[string]string) []tarEntry {
	uid, gid, numeric := numericIDs(user)
	now := time.Now()
	es := []tarEntry{
		{name: stateDir, dir: true, mode: 0o755, mtime: now},
		{name: stateDir + "/lease", mode: 0o644, mtime: leaseEnd},
		// Markers of timed-out commands: written by the sandbox's user.
		{name: stateDir + "/t", dir: true, mode: 0o1777, mtime: now},
		// Background processes: one directory each, made by the user.
		{name: stateDir + "/p", dir: true, mode: 0o1777, mtime: now},
	}
	// A named user cannot be resolved here: the env file is then
	// world-readable inside the container (still not in inspect).
	envEntry := tarEntry{name: stateDir + "/env", mode: 0o444, mtime: now, body: envFile(env)}
	if numeric {
		envEntry.mode, envEntry.uid, envEntry.gid = 0o400, uid, gid
	}
	es = append(es, envEntry)
	if numeric {
		for _, d := range parents(home) {
			es = append(es, tarEntry{name: d, dir: true, mode: 0o755, mtime: now})
		}
		es = append(es, tarEntry{name: home, dir: true, mode: 0o755, uid: uid, gid: gid, mtime: now})
	}
	return es
}

// tarOf streams the entries below base (not base itself) as an archive
// to extract at base.
func tarOf(base string, entries []tarEntry) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		var err error
		for _, e := range entries {
			rel := strings.TrimPrefix(e.name, strings.TrimSuffix(base, "/")+"/")
			if rel == e.name || rel == "" {
				continue // not below base
			}
			h := &tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: e.mtime, Size: int64(len(e.body))}
			if e.dir {
				h.Typeflag, h.Name, h.Size = tar.TypeDir, rel+"/", 0
			}
			if err = tw.WriteHeader(h); err != nil {
				break
			}
			if _, err = tw.Write(e.body); err != nil {
				break
			}
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// writableDirs are the volumes of a sandbox whose root file system is
// read-only: the state directory, /tmp and the home directory's parent
// (so Create can make the home directory with its owner; the home itself
// when its parent is /). Each volume starts as a copy of the image's
// directory.
func writableDirs(home string) []string {
	dirs := []string{stateDir, "/tmp"}
	h := path.Dir(home)
	if h == "/" {
		h = home
	}
	if h != "/tmp" && !strings.HasPrefix(h, "/tmp/") && h != stateDir {
		dirs = append(dirs, h)
	}
	return dirs
}

// parents returns the proper ancestors of an absolute path, outermost
// first, without "/".
func parents(p string) []string {
	var out []string
	for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
		out = append([]string{d}, out...)
	}
	return out
}

// envFile is the shell text the exec wrapper sources: each variable is set
// unless the command's own environment names it in __sbx_keep.
func envFile(env map[string]string) []byte {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&b, "case \" $__sbx_keep \" in *\" %s \"*) ;; *) %s=%s; export %s;; esac\n", k, k, shellQuote(env[k]), k)
	}
	return []byte(b.String())
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Get returns the sandbox's Info; a container this provider did not create
// (one without the owner name for its id: see the package doc) is
// NotFound. A sandbox whose lease ended is destroyed (or paused, with
// AutoPause) here, lazily, as the reaper would.
func (r *Runtime) Get(ctx context.Context, id string) (driver.Info, error) {
	info, err := r.inspect(ctx, id)
	if err != nil {
		return driver.Info{}, err
	}
	if info, expired, err := r.enforceLease(ctx, info); expired || err != nil {
		return info, err
	}
	return info, nil
}

// inspect reads a container this provider made into an Info, with its
// lease; any other is NotFound. It lists the container rather than
// inspecting it: the engine's list takes no lock on the container, where
// an inspect waits behind an exec the runtime could not start in a
// container being paused, until the container is resumed.
func (r *Runtime) inspect(ctx context.Context, id string) (driver.Info, error) {
	f := client.Filters{}
	f.Add("id", id)
	f.Add("label", labelManaged+"=1")
	res, err := r.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return driver.Info{}, r.wrap(ctx, "get", err)
	}
	for _, c := range res.Items {
		if c.ID == id {
			if _, ok := r.owned.Load(id); !ok {
				key, err := r.ownerKey()
				if err != nil {
					return driver.Info{}, err
				}
				if !proven(key, c) {
					break
				}
				r.owned.Store(id, time.Now())
			}
			info := r.info(c.ID, c.Labels, c.State, time.Unix(c.Created, 0))
			info.LeaseEnd = r.leaseEnd(ctx, c.ID, c.Labels)
			return info, nil
		}
	}
	return driver.Info{}, r.notFound(id)
}

// info builds an Info from a container's labels and state.
func (r *Runtime) info(id string, labels map[string]string, status container.ContainerState, created time.Time) driver.Info {
	info := driver.Info{ID: id, Provider: Scheme, Template: labels[labelTemplate], Labels: map[string]string{},
		State: mapState(status), CreatedAt: created, Home: labels[labelHome], Isolation: r.isolation(),
		Detail: map[string]string{"status": string(status), "user": labels[labelUser], "autopause": labels[labelAutoPause]}}
	// The limits set at Create (`docker update` could change them since).
	for k, l := range map[string]string{"memory_mib": labelMemory, "cpus": labelCPUs, "pids_limit": labelPids} {
		if v, ok := labels[l]; ok {
			info.Detail[k] = v
		}
	}
	switch n := labels[labelNetwork]; {
	case policyOf(labels) != nil:
		info.Network = policyOf(labels)
	case n == "none":
		info.Network = &driver.NetworkPolicy{Mode: driver.NetworkDenyAll}
	case n != "":
		info.Network = &driver.NetworkPolicy{Mode: driver.NetworkAllowAll}
	}
	if labels[labelProxy] != "" {
		// Behind the egress proxy (see egress.go).
		info.Detail["egress"] = "proxy"
	}
	var keys []string
	own := json.Unmarshal([]byte(labels[labelKeys]), &keys) == nil
	for k, v := range labels {
		if name, ok := strings.CutPrefix(k, labelPrefix); ok && (!own || slices.Contains(keys, name)) {
			// A container from a snapshot inherits the labels of the
			// one committed: only its own (labelKeys) are shown.
			info.Labels[name] = v
		}
	}
	if sec, err := strconv.ParseInt(labels[labelLease], 10, 64); err == nil {
		info.LeaseEnd = time.Unix(sec, 0)
	}
	return info
}

// leaseEnd reads the lease from the lease file's modification time,
// falling back to the label set at Create.
func (r *Runtime) leaseEnd(ctx context.Context, id string, labels map[string]string) time.Time {
	st, err := r.cli.ContainerStatPath(ctx, id, client.ContainerStatPathOptions{Path: stateDir + "/lease"})
	if err == nil && !st.Stat.Mtime.IsZero() {
		return st.Stat.Mtime
	}
	sec, _ := strconv.ParseInt(labels[labelLease], 10, 64)
	return time.Unix(sec, 0)
}

func mapState(s container.ContainerState) driver.State {
	switch s {
	case container.StateRunning:
		return driver.StateRunning
	case container.StatePaused, container.StateExited:
		return driver.StatePaused
	case container.StateCreated, container.StateRestarting:
		return driver.StateStarting
	}
	return driver.StateError
}

// enforceLease ends (or pauses) a sandbox whose lease has passed. It
// reports expired when the sandbox is gone.
func (r *Runtime) enforceLease(ctx context.Context, info driver.Info) (driver.Info, bool, error) {
	if info.LeaseEnd.IsZero() || time.Now().Before(info.LeaseEnd) {
		return info, false, nil
	}
	if info.Detail["autopause"] == "1" {
		if info.State == driver.StateRunning {
			if err := r.Pause(ctx, info.ID); err != nil {
				return info, false, err
			}
			info.State = driver.StatePaused
		}
		return info, false, nil
	}
	if err := r.Destroy(ctx, info.ID); err != nil {
		return info, false, err
	}
	return driver.Info{}, true, fmt.Errorf("docker: sandbox %s: its lease ended at %s and it was destroyed: %w", info.ID, info.LeaseEnd.UTC().Format(time.RFC3339), sberrors.ErrNotFound)
}

// List returns the sandboxes this provider created, filtered by labels on
// the engine, oldest first, one page at a time. A container carrying the
// labels without the owner name for its id is left out, and left alone.
func (r *Runtime) List(ctx context.Context, req *driver.ListRequest) ([]driver.Info, string, error) {
	// Without the key nothing can be proven: say why, rather than list
	// nothing.
	owner, err := r.ownerKey()
	if err != nil {
		return nil, "", err
	}
	f := client.Filters{}
	f.Add("label", labelManaged+"=1")
	for k, v := range req.Labels {
		f.Add("label", labelPrefix+k+"="+v)
	}
	for _, s := range req.States {
		switch s {
		case driver.StateRunning:
			f.Add("status", "running")
		case driver.StatePaused:
			f.Add("status", "paused", "exited")
		case driver.StateStarting:
			f.Add("status", "created", "restarting")
		case driver.StateError:
			f.Add("status", "dead", "removing")
		}
	}
	res, err := r.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, "", r.wrap(ctx, "list", err)
	}
	items := res.Items
	key := func(c container.Summary) string { return fmt.Sprintf("%020d/%s", c.Created, c.ID) }
	slices.SortFunc(items, func(a, b container.Summary) int { return strings.Compare(key(a), key(b)) })
	start := 0
	if req.PageToken != "" {
		start, _ = slices.BinarySearchFunc(items, req.PageToken, func(c container.Summary, tok string) int { return strings.Compare(key(c), tok) })
		if start < len(items) && key(items[start]) == req.PageToken {
			start++
		}
	}
	var page []driver.Info
	next := ""
	for i := start; i < len(items); i++ {
		if req.PageSize > 0 && len(page) == req.PageSize {
			next = key(items[i-1])
			break
		}
		c := items[i]
		if !proven(owner, c) {
			continue // not this provider's: left out, and left alone
		}
		info := r.info(c.ID, c.Labels, c.State, time.Unix(c.Created, 0))
		info.LeaseEnd = r.leaseEnd(ctx, c.ID, c.Labels)
		if !hasLabels(info.Labels, req.Labels) {
			continue // matched an inherited label only (see labelKeys)
		}
		info, gone, err := r.enforceLease(ctx, info)
		if gone {
			continue
		}
		if err != nil && ctx.Err() != nil {
			return nil, "", err
		}
		page = append(page, info)
	}
	return page, next, nil
}

// Destroy removes the container and its anonymous volumes; a container
// already gone is not an error.
func (r *Runtime) Destroy(ctx context.Context, id string) error {
	if _, err := r.inspect(ctx, id); err != nil {
		if errors.Is(err, sberrors.ErrNotFound) {
			return nil
		}
		return err
	}
	r.gates.Delete(id)
	if err := r.removeContainer(ctx, id); err != nil {
		return r.wrap(ctx, "destroy", err)
	}
	// Its egress helper ends with the container's process; ended here
	// as well, so that Destroy returns with nothing of it left.
	stopEgress(id)
	r.owned.Delete(id)
	return nil
}

// removeAttempts bounds removeContainer's tries of one container.
const removeAttempts = 10

// removeContainer force-removes a container and its anonymous volumes. A
// container already gone is not an error. Two refusals are tried again
// (about 5 s in all, within ctx): a removal already in progress elsewhere
// is waited out, so that the container is gone when this returns (one
// still in progress at the end is left to whoever started it); and a root
// filesystem the engine could not delete yet ("failed to remove root
// filesystem ... directory not empty"): an engine that deletes the
// container's layer while its own clean-up of the stopped container still
// has it mounted leaves the container dead, and a second removal deletes
// it, where giving up would leave it behind.
func (r *Runtime) removeContainer(ctx context.Context, id string) error {
	first := r.removeDelay
	if first == 0 {
		first = 50 * time.Millisecond
	}
	delay := first
	for attempt := 1; ; attempt++ {
		_, err := r.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err == nil || cerrdefs.IsNotFound(err) {
			return nil
		}
		inProgress := cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress")
		if !inProgress && !strings.Contains(err.Error(), "failed to remove root filesystem") {
			return err
		}
		if attempt == removeAttempts {
			if inProgress {
				return nil
			}
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay = min(2*delay, 20*first) // 1 s
	}
}

// SetTimeout moves the lease's end to d from now: the lease file's
// modification time, so every client sees it.
func (r *Runtime) SetTimeout(ctx context.Context, id string, d time.Duration) error {
	if _, err := r.inspect(ctx, id); err != nil {
		return err
	}
	end := time.Now().Add(d).Truncate(time.Second).Add(time.Second)
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "lease", Mode: 0o644, ModTime: end})
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	_, err := r.cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: stateDir, Content: pr})
	pr.Close()
	return r.wrap(ctx, "set timeout", err)
}

// execGate keeps a Runtime's exec starts and its Pause of one container
// apart. Docker 20.10's containerd shim holds its task lock while `runc
// exec` waits for the new process's runc init; an init that joined the
// container's cgroup just before the freeze stays frozen, so the shim never
// answers again, not even the Resume that would thaw it. Hence no exec may
// be between ExecCreate and a running process while Pause runs.
type execGate struct {
	mu      sync.RWMutex // exec starts hold it for reading, Pause for writing
	pmu     sync.Mutex
	pending map[string]pendingExec // started execs not yet known to run
}

// pendingExec is an exec whose process may still be starting.
type pendingExec struct {
	abandoned time.Time // set when its caller gave up on the start
}

// startGrace is how long Pause waits for an exec whose start request
// failed on the client side (it may or may not have reached the engine).
const startGrace = 5 * time.Second

// maxStartWait bounds Pause's wait for execs still starting.
const maxStartWait = 30 * time.Second

func (r *Runtime) gate(id string) *execGate {
	g, _ := r.gates.LoadOrStore(id, &execGate{pending: map[string]pendingExec{}})
	return g.(*execGate)
}

// startExec creates an exec and starts it with its streams attached,
// holding the container's gate for reading across both, so a Pause of this
// Runtime waits for it. The exec stays pending (Pause waits until the
// engine reports its process) until the caller calls done, once its stream
// ended.
func (r *Runtime) startExec(ctx context.Context, id string, opts client.ExecCreateOptions) (att client.ExecAttachResult, execID string, done func(), err error) {
	// Nothing runs in a container this provider did not make.
	if err := r.owns(ctx, id); err != nil {
		return att, "", nil, err
	}
	g := r.gate(id)
	g.mu.RLock()
	defer g.mu.RUnlock()
	res, err := r.cli.ExecCreate(ctx, id, opts)
	if err != nil {
		return att, "", nil, err
	}
	g.pmu.Lock()
	g.pending[res.ID] = pendingExec{}
	g.pmu.Unlock()
	done = func() {
		g.pmu.Lock()
		delete(g.pending, res.ID)
		g.pmu.Unlock()
	}
	att, err = r.cli.ExecAttach(ctx, res.ID, client.ExecAttachOptions{TTY: opts.TTY, ConsoleSize: opts.ConsoleSize})
	if err != nil {
		// The start request may have reached the engine: Pause still
		// checks this exec, for a while.
		g.pmu.Lock()
		if _, ok := g.pending[res.ID]; ok {
			g.pending[res.ID] = pendingExec{abandoned: time.Now()}
		}
		g.pmu.Unlock()
		return att, "", nil, err
	}
	return att, res.ID, done, nil
}

// waitStarts waits, with the gate held for writing, until every pending
// exec of the container has a process (the engine reports its pid only
// after the runtime started it), has ended, or was abandoned long enough
// ago. It gives up after maxStartWait rather than risk the engine's hang.
func (r *Runtime) waitStarts(ctx context.Context, g *execGate) error {
	deadline := time.Now().Add(maxStartWait)
	for delay := 2 * time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		g.pmu.Lock()
		ids := slices.Collect(maps.Keys(g.pending))
		g.pmu.Unlock()
		left := 0
		for _, e := range ids {
			res, err := r.cli.ExecInspect(ctx, e, client.ExecInspectOptions{})
			if ctx.Err() != nil {
				return fmt.Errorf("docker: pause: waiting for an exec to start: %w", ctx.Err())
			}
			g.pmu.Lock()
			p, ok := g.pending[e]
			switch {
			case !ok:
			case err != nil && cerrdefs.IsNotFound(err), err == nil && res.PID != 0,
				!p.abandoned.IsZero() && time.Since(p.abandoned) > startGrace:
				delete(g.pending, e)
			default:
				left++
			}
			g.pmu.Unlock()
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("docker: pause: %d exec(s) into the sandbox still starting after %s; not pausing, as the engine would hang: %w", left, maxStartWait, sberrors.ErrUnavailable)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("docker: pause: waiting for an exec to start: %w", ctx.Err())
		case <-time.After(delay):
		}
	}
}

// Pause freezes every process of the sandbox (the engine's pause: memory
// is kept). Pausing a paused sandbox is not an error.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	info, err := r.inspect(ctx, id)
	if err != nil {
		return err
	}
	if info.State == driver.StatePaused {
		return nil
	}
	// No exec of this Runtime starts while the container freezes, and
	// those whose start is in flight are waited for (see execGate).
	g := r.gate(id)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := r.waitStarts(ctx, g); err != nil {
		return err
	}
	_, err = r.cli.ContainerPause(ctx, id, client.ContainerPauseOptions{})
	if err != nil && strings.Contains(err.Error(), "already paused") {
		return nil
	}
	return r.wrap(ctx, "pause", err)
}

// Resume thaws a paused sandbox, or starts a stopped one (after an engine
// restart, say).
func (r *Runtime) Resume(ctx context.Context, id string) (driver.Info, error) {
	info, err := r.inspect(ctx, id)
	if err != nil {
		return driver.Info{}, err
	}
	switch info.Detail["status"] {
	case string(container.StatePaused):
		if _, err := r.cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{}); err != nil && !strings.Contains(err.Error(), "is not paused") {
			return driver.Info{}, r.wrap(ctx, "resume", err)
		}
	case string(container.StateExited), string(container.StateCreated):
		if _, err := r.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
			return driver.Info{}, r.wrap(ctx, "resume", err)
		}
		if p := info.Network; p != nil && info.Detail["egress"] != "" {
			// The helper ended with the container's process: another
			// for the new one, with the recorded policy. Brokered
			// secrets' values were kept nowhere but in the old helper:
			// their hosts now get the placeholders, never a value.
			stopEgress(id)
			if err := r.attachProxy(ctx, id, &egressConfig{Policy: p, Hosts: r.egressHosts, Roots: r.egressRoots, Dial: r.egressDial}, false); err != nil {
				return driver.Info{}, err
			}
		}
	}
	return r.inspect(ctx, id)
}

// reaper ends sandboxes whose lease passed, every reapEvery, until Close.
// Several clients may reap at once: removing a removed container is not an
// error.
func (r *Runtime) reaper() {
	defer r.reaperWG.Done()
	t := time.NewTicker(reapEvery)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(r.ctx, reapEvery)
		tok, since, seen := "", time.Now(), map[string]bool{}
		for {
			// List enforces the leases of what it lists.
			page, next, err := r.List(ctx, &driver.ListRequest{PageSize: 100, PageToken: tok})
			if err != nil {
				break
			}
			for _, info := range page {
				seen[info.ID] = true
			}
			if next == "" {
				r.forgetGone(since, seen)
				break
			}
			tok = next
		}
		cancel()
	}
}
