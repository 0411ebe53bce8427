//go:build linux

package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

func init() {
	driver.Register("local", func(ctx context.Context, u *url.URL, o driver.OpenOptions) (driver.Runtime, error) {
		opts, err := optionsFromURL(u)
		if err != nil {
			return nil, err
		}
		return New(append([]Option{WithLogger(o.Logger)}, opts...)...)
	})
}

// sandboxHome is the home directory as commands see it at L3 and L4.
const sandboxHome = "/home/user"

// sandboxUID is the uid (and gid) of commands in a namespaced sandbox.
const sandboxUID = 1000

// Default resource limits, applied where a writable cgroup exists: the
// memory limit unless Resources.MemoryMiB is set, and the most pids a
// sandbox gets (fewer where the host's tables are small: see limitsFor).
const (
	defaultMemoryMiB = 2048
	defaultPids      = 4096
)

// Runtime is the local provider. It implements driver.Runtime,
// driver.Pauser, driver.ProcessRuntime and driver.Closer. Create it
// with New, or through sandbox.Open with a local:// URL.
type Runtime struct {
	config

	level   Level    // level every new sandbox gets
	missing []string // why not more than level
	cg      cgroupParents
	uid     int // host uid and gid of the sandbox user with namespaces
	gid     int
	// dropUser: commands at L0 to L2 on a root host run as a uid of
	// their sandbox's own (allocUID); runAsWhy says why root, if not.
	dropUser bool
	runAsWhy string
	pasta    string // path of the user-space network stack, "" when not installed
	// inotifyWatches, when not 0, is the share of inotify watches each
	// new agent gets in place of inotifyShare's: a test lowers it so that
	// a tree beyond the share need not have tens of thousands of
	// directories.
	inotifyWatches uint64
	// leaseGrace is the agents' leaseGrace; a test shortens it.
	leaseGrace time.Duration
	mkfs       string // path of mkfs.ext4, for disk quotas

	spMu sync.Mutex
	sp   *spawner

	static sync.Map // id → *metaStatic, the part of the metadata that never changes

	// ended holds when the lease of each sandbox this Runtime destroyed at
	// its lease end ended, so that a later call on it says why it is gone
	// (driver.LeaseEndedError); at most maxEnded, the oldest forgotten first.
	endedMu    sync.Mutex
	ended      map[string]time.Time
	endedOrder []string

	connMu sync.Mutex
	idle   map[string][]net.Conn // idle agent connections kept by Exec

	ports portForwards // Expose's listeners

	pool     chan *meta    // started sandboxes ready to take (WithWarmPool)
	poolWake chan struct{} // asks poolLoop to refill
	poolDone chan struct{} // closed when poolLoop has ended

	snaps snapFacts // what the host offers for snapshots, probed on first use

	closeOnce sync.Once
	stop      chan struct{}
	reaped    chan struct{}
}

// probeMu guards the process-wide probe results, keyed by the highest
// level tried (the host does not change while the process runs).
var (
	probeMu    sync.Mutex
	probeCache = map[Level]probeResult{}
)

type probeResult struct {
	level   Level
	missing []string
}

// New returns a local Runtime. It creates the root if needed, checks that
// it is writable, and probes once per process which isolation level the
// host gives by running the real set-up.
func New(opts ...Option) (*Runtime, error) {
	r := &Runtime{config: defaultConfig(), stop: make(chan struct{}), reaped: make(chan struct{}), leaseGrace: leaseGrace}
	if err := r.config.apply(opts); err != nil {
		return nil, err
	}
	if r.force == nil {
		if v := os.Getenv("SANDBOX_LOCAL_ISOLATION"); v != "" {
			l, err := ParseLevel(v)
			if err != nil {
				return nil, fmt.Errorf("SANDBOX_LOCAL_ISOLATION: %w", err)
			}
			r.force = &l
		}
	}
	if r.root == "" {
		root, err := defaultRoot()
		if err != nil {
			return nil, err
		}
		r.root = root
	}
	root, err := filepath.Abs(r.root)
	if err != nil {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "local: root %q: %v", r.root, err)
	}
	r.root = root
	if err := r.checkRoot(); err != nil {
		return nil, err
	}
	r.uid, r.gid = os.Getuid(), os.Getgid()
	if r.uid == 0 {
		// Never run sandboxed code as the host's root, not even mapped.
		r.uid, r.gid = 65534, 65534
	}
	r.cg = detectCgroups()
	want := L4
	if r.force != nil {
		want = *r.force
	}
	res := r.probe(want)
	r.level, r.missing = res.level, res.missing
	if r.force != nil && r.level < *r.force {
		return nil, &IsolationError{Want: *r.force, Got: r.level, Missing: r.missing}
	}
	if r.level < r.min {
		return nil, &IsolationError{Want: r.min, Got: r.level, Missing: r.missing}
	}
	if r.level < L3 && r.force == nil {
		r.log.Warn("sandbox/local: degraded isolation", "level", r.level.Describe(), "missing", strings.Join(r.missing, "; "))
	}
	r.setRunAs()
	r.pasta, r.mkfs = lookPasta(), lookMkfs()
	r.sweep()
	r.sweepSnapshots()
	go r.reaper()
	if r.warm > 0 && r.level >= L2 {
		r.pool, r.poolWake, r.poolDone = make(chan *meta, r.warm), make(chan struct{}, 1), make(chan struct{})
		go r.poolLoop()
	}
	return r, nil
}

// systemRoot is the default root directory of a root host: below
// directories every user may search, so that the unprivileged users L0 to
// L2 commands run as reach their homes (a root's cache directory, under
// /root, is closed to them).
const systemRoot = "/var/lib/sandboxkit/local"

// defaultRoot returns the root directory used without WithRoot:
// systemRoot for root, <user cache dir>/sandboxkit/local for anyone else.
func defaultRoot() (string, error) {
	if os.Getuid() == 0 {
		parent := filepath.Dir(systemRoot)
		if err := os.Mkdir(parent, 0o711); err == nil {
			_ = os.Chmod(parent, 0o711) // whatever the umask
		} else if !errors.Is(err, fs.ErrExist) {
			return "", sberrors.Errorf(sberrors.PermissionDenied, "local: cannot create %s: %w (use WithRoot)", parent, err)
		}
		return systemRoot, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", sberrors.Errorf(sberrors.FailedPrecondition, "local: no root directory: %v (use WithRoot)", err)
	}
	return filepath.Join(cache, "sandboxkit", "local"), nil
}

// setRunAs decides which host user runs commands at L0 to L2: on a root
// host, a uid of each sandbox's own (allocUID), provided such a user can
// reach the sandboxes' homes (every directory above the root must be
// searchable by anyone).
func (r *Runtime) setRunAs() {
	if os.Getuid() != 0 || r.level > L2 {
		return
	}
	if r.asRoot {
		r.runAsWhy = "root without capabilities (WithCommandsAsRoot)"
		return
	}
	if dir, ok := searchable(filepath.Dir(r.root), uidBase, uidBase); !ok {
		r.runAsWhy = fmt.Sprintf("root without capabilities: an unprivileged user cannot search %s, above the root directory; choose a root below searchable directories", dir)
		r.log.Warn("sandbox/local: commands run as root", "why", r.runAsWhy)
		return
	}
	if err := os.Chmod(r.root, 0o711); err != nil {
		r.runAsWhy = fmt.Sprintf("root without capabilities: %v", err)
		return
	}
	r.dropUser = true
}

// searchable reports whether uid (with the single group gid) may search
// dir and every directory above it, or names the first it may not.
func searchable(dir string, uid, gid int) (string, bool) {
	for d := dir; ; d = filepath.Dir(d) {
		var st syscall.Stat_t
		if err := syscall.Stat(d, &st); err != nil {
			return d, false
		}
		bit := uint32(0o001)
		switch {
		case int(st.Uid) == uid:
			bit = 0o100
		case int(st.Gid) == gid:
			bit = 0o010
		}
		if st.Mode&bit == 0 {
			return d, false
		}
		if d == "/" || d == "." {
			return "", true
		}
	}
}

func (r *Runtime) checkRoot() error {
	if err := os.MkdirAll(r.root, 0o700); err != nil {
		return sberrors.Errorf(sberrors.PermissionDenied, "local: cannot create root %s: %w", r.root, err)
	}
	f, err := os.CreateTemp(r.root, ".probe-write-*")
	if err != nil {
		return sberrors.Errorf(sberrors.PermissionDenied, "local: root %s is not writable: %w", r.root, err)
	}
	f.Close()
	os.Remove(f.Name())
	if n := len(r.sock(newID())); n >= 108 {
		return sberrors.Errorf(sberrors.InvalidArgument, "local: root %s is too long (%d bytes) for the unix socket paths under it (max 107); choose a shorter root", r.root, n)
	}
	return nil
}

// Name returns "local".
func (r *Runtime) Name() string { return "local" }

// Capabilities reports the provider's facts; Isolation is the level new
// sandboxes get on this host.
func (r *Runtime) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		PauseKeepsMemory: true, AttachAcrossClients: true,
		ServerSideLabels: true, Persistent: true, Isolation: r.level.Describe(),
		DefaultLease: r.lease, Network: true, ReportsSignal: true, ReportsLeaseEnd: true,
		NetworkPolicy: netSupport(r.allowAll(), r.level >= L2, r.level >= L3),
		SnapshotModes: []driver.SnapshotMode{driver.SnapshotFilesystem}, SnapshotNote: r.snapshotNote(),
	}
}

// allowAll reports whether a sandbox can get the network without a
// proxy: by default, or (NetworkNone) when its policy is allow-all (see
// networkFor).
func (r *Runtime) allowAll() bool {
	return r.level <= L1 || r.network == NetworkHost || r.level >= L3 && r.pasta != ""
}

// Level returns the isolation level new sandboxes get, and why not more.
func (r *Runtime) Level() (Level, []string) { return r.level, slices.Clone(r.missing) }

// Root returns the directory that holds the sandboxes.
func (r *Runtime) Root() string { return r.root }

func (r *Runtime) spawner() (*spawner, error) {
	r.spMu.Lock()
	defer r.spMu.Unlock()
	select {
	case <-r.stop:
		return nil, sberrors.ErrClosed
	default:
	}
	if r.sp != nil && r.sp.alive() {
		return r.sp, nil
	}
	if r.sp != nil {
		_ = r.sp.close()
	}
	sp, err := startSpawner()
	if err != nil {
		return nil, err
	}
	r.sp = sp
	return sp, nil
}

// dropSpawner forgets sp, which died, so that the next spawner call starts
// a new one.
func (r *Runtime) dropSpawner(sp *spawner) {
	r.spMu.Lock()
	defer r.spMu.Unlock()
	if r.sp == sp {
		_ = sp.close()
		r.sp = nil
	}
}

// Close stops the lease reaper and the spawner. Sandboxes and their agents
// live on until destroyed or their lease ends.
func (r *Runtime) Close() error {
	r.closeOnce.Do(func() {
		close(r.stop)
		<-r.reaped
		if r.poolDone != nil {
			<-r.poolDone
		}
		r.dropConns("")
		r.ports.drop("", true)
		r.spMu.Lock()
		if r.sp != nil {
			_ = r.sp.close()
			r.sp = nil
		}
		r.spMu.Unlock()
	})
	return nil
}

// lookPasta finds pasta (Debian package passt); a variable for tests.
var lookPasta = func() string {
	p, err := exec.LookPath("pasta")
	if err != nil {
		return ""
	}
	return p
}

// networkFor decides the network of a new sandbox: "off", "host",
// "isolated" or, for a policy with lists or brokered secrets, "proxy", with a note saying why when it is not what was asked.
func (r *Runtime) networkFor(req *driver.CreateRequest) (mode, note string, err error) {
	want := r.network
	for k, v := range req.Options {
		if k != "network" {
			return "", "", sberrors.Errorf(sberrors.InvalidArgument, "local: unknown provider option %q (known: network)", k)
		}
		if v != NetworkIsolated && v != NetworkHost {
			return "", "", sberrors.Errorf(sberrors.InvalidArgument, "local: provider option network=%q: want %q or %q (for no network, set CreateOptions.NoNetwork)", v, NetworkIsolated, NetworkHost)
		}
		want = v
	}
	if needsProxy(req.Network, len(req.Secrets)) {
		switch {
		case r.level < L3:
			return "", "", errNoProxyNet(r)
		case want == NetworkHost && req.Options["network"] == NetworkHost:
			return "", "", sberrors.Errorf(sberrors.FailedPrecondition, "local: network policy with entries or brokered secrets cannot be enforced on the host's network (provider option network=host): leave the option out")
		}
		return netProxy, "", nil
	}
	if req.NoNetwork {
		return "off", "", nil
	}
	if want == NetworkNone {
		if req.Network == nil || req.Network.Mode != driver.NetworkAllowAll {
			if r.level < L2 {
				return "", "", sberrors.Errorf(sberrors.FailedPrecondition, "local: network none (WithNetwork) needs isolation L2 or higher to keep a sandbox off the network; this Runtime gives %s", r.level.Describe())
			}
			return "off", "no network: this Runtime gives none to a sandbox whose create asks for no network policy (WithNetwork(NetworkNone))", nil
		}
		want = "" // an explicit allow-all: what the Runtime would give by default
	}
	defer func() {
		// An explicit allow-all must not come out cut off: say why not.
		if err == nil && mode == "off" && req.Network != nil && req.Network.Mode == driver.NetworkAllowAll {
			mode, err = "", sberrors.Errorf(sberrors.FailedPrecondition, "local: network policy allow-all cannot be had here: %s", note)
		}
	}()
	switch want {
	case NetworkHost:
		return NetworkHost, "the host's network, as asked: the host's loopback services are reachable", nil
	case NetworkIsolated:
		if r.level < L3 {
			return "", "", sberrors.Errorf(sberrors.FailedPrecondition, "local: an isolated network needs namespaces (isolation L3 or higher); this Runtime gives %s", r.level.Describe())
		}
		if r.pasta == "" {
			return "", "", sberrors.Errorf(sberrors.FailedPrecondition, "local: an isolated network needs pasta, which is not installed (Debian package passt: apt-get install passt)")
		}
		return NetworkIsolated, "", nil
	}
	switch {
	case r.level <= L1:
		return NetworkHost, "L0 and L1 do not isolate the network: the host's loopback services are reachable", nil
	case r.level == L2:
		return "off", "an isolated network needs namespaces (isolation L3 or higher); ask for network=host to share the host's", nil
	case r.pasta == "":
		return "off", "no user-space network stack: install the Debian package passt for an isolated network, or ask for network=host", nil
	}
	return NetworkIsolated, "", nil
}

// agentConfig returns the agent configuration for a sandbox at level l
// with network mode netMode.
func (r *Runtime) agentConfigFor(id string, l Level, netMode string) agentConfig {
	c := agentConfig{Home: r.home(id), HostHome: r.home(id), HostTmp: filepath.Join(r.dir(id), "tmp"), Hostname: "sandbox",
		NoNetwork: netMode == "off", LeaseGrace: int64(r.leaseGrace)}
	if l >= L3 {
		c.Namespaces, c.Home = true, sandboxHome
		c.NewNet = netMode != NetworkHost
	}
	if l == L2 || l == L4 {
		c.Landlock, c.Seccomp = true, true
	}
	// L3 has no Landlock nor the full filter, but the address families
	// are filtered all the same: AF_VSOCK is not network-namespaced.
	c.SocketFilter = l == L3
	return c
}

// probe finds the best level up to want by starting real agents.
func (r *Runtime) probe(want Level) probeResult {
	if want <= L1 {
		return probeResult{level: want}
	}
	probeMu.Lock()
	defer probeMu.Unlock()
	if res, ok := probeCache[want]; ok {
		return res
	}
	res := r.probeUncached(want)
	probeCache[want] = res
	return res
}

func (r *Runtime) probeUncached(want Level) probeResult {
	var missing []string
	try := func(l Level) (features, error) {
		id := newID()
		dir := r.dir(".probe-" + id)
		home := filepath.Join(dir, "home")
		defer os.RemoveAll(dir)
		if err := os.MkdirAll(home, 0o755); err != nil {
			return features{}, err
		}
		_ = os.MkdirAll(filepath.Join(dir, "tmp"), 0o700)
		_ = os.Chown(home, r.uid, r.gid)
		key, err := agentKey(dir)
		if err != nil {
			return features{}, err
		}
		sp, err := r.spawner()
		if err != nil {
			return features{}, err
		}
		cfg := r.agentConfigFor(id, l, NetworkHost)
		cfg.HostHome, cfg.HostTmp, cfg.Key = home, filepath.Join(dir, "tmp"), key
		if !cfg.Namespaces {
			cfg.Home = home
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sock := filepath.Join(dir, "s")
		resp, err := sp.spawn(ctx, &spawnReq{Sock: sock, Home: home, HostUID: r.uid, HostGID: r.gid, Config: cfg})
		if err != nil {
			return resp.Features, err
		}
		defer func() {
			_ = agentCall(ctx, sock, &request{Op: "shutdown"})
			waitGone(ctx, resp.PID, resp.Start)
		}()
		st, err := agentExec(ctx, sock, &request{Op: "exec", Args: []string{"/bin/sh", "-c", "true"}, Env: agentEnv, Timeout: int64(10 * time.Second)}, nil, discard{}, discard{})
		if err != nil {
			return resp.Features, fmt.Errorf("exec through the agent: %w", err)
		}
		if st.ExitCode != 0 {
			return resp.Features, fmt.Errorf("exec through the agent: exit %d", st.ExitCode)
		}
		return resp.Features, nil
	}
	if want >= L3 {
		f, err := try(want)
		if err == nil {
			f.Cgroup = r.cg.limits()
			got := f.level()
			if want == L4 && got == L3 {
				// Namespaces work; say what L4 lacked.
				if f.Missing != "" {
					missing = append(missing, f.Missing)
				}
			}
			if want == L4 && !r.cg.limits() {
				missing = append(missing, r.cg.Why)
				got = min(got, L3)
			}
			if want == L4 && got == L4 {
				return probeResult{level: L4, missing: missing}
			}
			return probeResult{level: min(got, want), missing: missing}
		}
		missing = append(missing, "namespaces: "+err.Error())
	}
	f, err := try(L2)
	if err != nil {
		missing = append(missing, "landlock+seccomp: "+err.Error())
		return probeResult{level: L1, missing: missing}
	}
	if f.level() < L2 {
		missing = append(missing, f.Missing)
		return probeResult{level: L1, missing: missing}
	}
	return probeResult{level: L2, missing: missing}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// waitGone waits (bounded by ctx) until pid has exited.
func waitGone(ctx context.Context, pid int, start uint64) {
	for procAlive(pid, start) {
		if sleepCtx(ctx, 500*time.Microsecond) != nil {
			return
		}
	}
}

// Create makes the sandbox's directory and metadata and, at L2 and above,
// starts its agent. The one provider option is "network" ("isolated" or
// "host", see WithNetwork); any other key is InvalidArgument.
func (r *Runtime) Create(ctx context.Context, req *driver.CreateRequest) (driver.Info, error) {
	netMode, netNote, err := r.networkFor(req)
	if err != nil {
		return driver.Info{}, err
	}
	if req.Template != "" && req.Template != "default" {
		return driver.Info{}, sberrors.Errorf(sberrors.InvalidArgument, "local: unknown template %q: the local provider runs the host's /usr and /etc (template \"\" or \"default\")", req.Template)
	}
	if req.NoNetwork && r.level < L2 {
		return driver.Info{}, sberrors.Errorf(sberrors.FailedPrecondition,
			"local: NoNetwork needs isolation L2 or higher (a network namespace or seccomp); this Runtime gives %s", r.level.Describe())
	}
	select {
	case <-r.stop:
		return driver.Info{}, sberrors.ErrClosed
	default:
	}
	var src *restoreSrc
	if req.FromSnapshot != "" {
		snap, err := r.readSnap(req.FromSnapshot)
		if err != nil {
			return driver.Info{}, err
		}
		src = r.snapSource(snap)
	} else if m := r.takePooled(req, netMode); m != nil {
		r.preconnect(ctx, m)
		return r.info(m), nil
	}
	return r.create(ctx, req, src, netMode, netNote)
}

// create makes a sandbox whose writable files start as copies of src's
// (nil: empty).
func (r *Runtime) create(ctx context.Context, req *driver.CreateRequest, src *restoreSrc, netMode, netNote string) (driver.Info, error) {
	if src != nil {
		cp := *req
		cp.Template = src.template
		req = &cp
	}
	id := newID()
	info := driver.Info{ID: id, Provider: "local"}
	tr := newTrace()
	defer tr.print(id)
	ctx = withTrace(ctx, tr)
	m, l, err := r.createDirs(ctx, id, req, netMode, netNote, true)
	if err != nil {
		return driver.Info{}, err
	}
	defer l.unlock()
	if src != nil {
		if err := r.restoreHome(ctx, m, src); err != nil {
			_ = l.write(m)
			return info, snapRestoreErr(ctx, src.what, err)
		}
	}
	if r.level >= L2 {
		if err := r.startAgent(ctx, m); err != nil {
			_ = l.write(m) // record the cgroups, so Destroy removes them
			return info, err
		}
	}
	if src != nil {
		if err := r.restoreTmp(ctx, m, src); err != nil {
			_ = l.write(m)
			return info, snapRestoreErr(ctx, src.what, err)
		}
	}
	m.State = driver.StateRunning
	if err := l.write(m); err != nil {
		return info, err
	}
	tr.mark("write-state")
	if m.Achieved < r.min {
		return info, &IsolationError{Want: r.min, Got: m.Achieved, Missing: []string{m.Why}}
	}
	r.preconnect(ctx, m)
	tr.mark("preconnect")
	in := r.info(m)
	tr.mark("info")
	return in, nil
}

// preconnect opens a connection to a new agent for the first exec, so the
// agent accepts it while the caller prepares that exec.
func (r *Runtime) preconnect(ctx context.Context, m *meta) {
	if m.AgentPID == 0 {
		return
	}
	if c, err := dial(ctx, r.sock(m.ID)); err == nil {
		r.keepConn(m.ID, c)
	}
}

// abandonDir removes the directory of a sandbox whose creation failed,
// and ends the reservation of its user (uid; 0 for none).
func (r *Runtime) abandonDir(dir string, uid int) {
	_ = os.RemoveAll(dir)
	r.releaseUID(uid)
}

// createDirs makes the directories, cgroups (at L2 and above) and metadata
// of a new sandbox, and returns it locked, in state starting.
func (r *Runtime) createDirs(ctx context.Context, id string, req *driver.CreateRequest, netMode, netNote string, visible bool) (*meta, *locked, error) {
	tr := traceFrom(ctx)
	dir := r.dir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, nil, sberrors.Errorf(sberrors.Internal, "local: create %s: %w", dir, err)
	}
	for _, d := range []string{r.home(id), filepath.Join(dir, "tmp")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			os.RemoveAll(dir)
			return nil, nil, sberrors.Errorf(sberrors.Internal, "local: create %s: %w", d, err)
		}
	}
	_ = os.Chmod(r.home(id), 0o755)
	if r.level >= L3 && os.Getuid() == 0 {
		_ = os.Chown(r.home(id), r.uid, r.gid)
	}
	runAs := 0
	if r.dropUser && r.level <= L2 {
		// The commands' user, the sandbox's own, may pass through the
		// directory (not list it) to its home and temporary directory,
		// which no other sandbox's user may enter; the key, the socket and
		// the metadata stay the host user's alone (0600).
		var err error
		runAs, err = r.allocUID(id)
		if err == nil {
			err = os.Chmod(dir, 0o711)
		}
		for _, d := range []string{r.home(id), filepath.Join(dir, "tmp")} {
			if err == nil {
				err = os.Chown(d, runAs, runAs)
			}
			if err == nil {
				err = os.Chmod(d, 0o700)
			}
		}
		if err != nil {
			r.abandonDir(dir, runAs)
			return nil, nil, sberrors.Errorf(sberrors.Internal, "local: create %s: %w", dir, err)
		}
	}
	tr.mark("dirs")
	if _, err := agentKey(dir); err != nil {
		r.abandonDir(dir, runAs)
		return nil, nil, sberrors.Errorf(sberrors.Internal, "local: create %s: agent key: %w", dir, err)
	}
	disk, diskNote := "", ""
	if req.Resources.DiskGiB > 0 {
		if diskNote = r.diskUnsupported(r.level); diskNote == "" {
			if err := r.makeDisk(ctx, dir, req.Resources.DiskGiB, r.uid, r.gid); err != nil {
				unmountDisk(dir)
				r.abandonDir(dir, runAs)
				return nil, nil, sberrors.Errorf(sberrors.Internal, "local: create %s: disk of %d GiB: %w", dir, req.Resources.DiskGiB, err)
			}
			disk = diskImage
		}
	}
	tr.mark("key+disk")
	egressCA := false
	if netMode == netProxy {
		ec := &egressConfig{Policy: req.Network.Clone(), Secrets: req.Secrets, Hosts: r.egressHosts, Roots: r.egressRoots, Dial: r.egressDial}
		if ec.Policy == nil {
			ec.Policy = &driver.NetworkPolicy{Mode: driver.NetworkAllowAll}
		}
		if err := writeEgressConfig(dir, ec); err != nil {
			unmountDisk(dir)
			r.abandonDir(dir, runAs)
			return nil, nil, sberrors.Errorf(sberrors.Internal, "local: create %s: egress proxy configuration: %w", dir, err)
		}
		egressCA = len(req.Secrets) > 0
	}
	now := r.now().UTC()
	m := &meta{
		metaStatic: metaStatic{
			ID: id, Template: req.Template, Labels: maps.Clone(req.Labels), Env: maps.Clone(req.Env),
			CreatedAt: now, Lease: req.Timeout, AutoPause: req.AutoPause, NoNetwork: req.NoNetwork,
			Resources: req.Resources, Level: r.level, RunAs: runAs, Network: netMode, NetNote: netNote,
			Disk: disk, DiskNote: diskNote, Limits: limitsFor(req.Resources.MemoryMiB, req.Resources.CPUs),
			EgressCA: egressCA,
		},
		metaState: metaState{
			State: driver.StateStarting, LeaseEnd: now.Add(req.Timeout),
			Achieved: r.level, Why: strings.Join(r.missing, "; "), Proxy: netMode == netProxy,
		},
	}
	if r.level >= L2 {
		// At L0 and L1 the cgroups are made with the agent, on first use.
		r.makeCgroups(m)
	}
	tr.mark("cgroups")
	l, err := r.createMeta(m, visible)
	if err != nil {
		r.destroyDir(context.Background(), m)
		return nil, nil, err
	}
	tr.mark("meta")
	return m, l, nil
}

// makeCgroups creates the sandbox's cgroups (where a writable hierarchy
// exists) with its limits, and records them in m.
func (r *Runtime) makeCgroups(m *meta) {
	if m.Limits.Pids == 0 {
		m.Limits = limitsFor(m.Resources.MemoryMiB, m.Resources.CPUs) // made by an older version
	}
	m.Cgroups = r.cg.create(m.ID, m.Limits.MemMiB, m.Limits.Pids, m.Limits.CPUs)
	if m.Level == L4 && !m.Cgroups.Limits {
		m.Achieved, m.Why = L3, why(L3, features{}, m.Why)
	}
}

// startAgent starts the agent of m (the caller holds the sandbox's lock or
// owns the sandbox exclusively) and records it in m (not written).
func (r *Runtime) startAgent(ctx context.Context, m *meta) error {
	sp, err := r.spawner()
	if err != nil {
		return err
	}
	if m.Cgroups.V2 == "" && len(m.Cgroups.V1) == 0 {
		r.makeCgroups(m)
	}
	netMode := m.netMode()
	cfg := r.agentConfigFor(m.ID, m.Level, netMode)
	pasta := ""
	if cfg.NewNet && netMode == NetworkIsolated {
		if pasta = r.pasta; pasta == "" {
			return sberrors.Errorf(sberrors.FailedPrecondition, "local: sandbox %s has an isolated network, which needs pasta: install the Debian package passt", m.ID)
		}
	}
	if procAlive(m.NetPID, m.NetAt) {
		_ = syscall.Kill(m.NetPID, syscall.SIGKILL) // the stack of a previous agent
	}
	if procAlive(m.EgressPID, m.EgressAt) {
		_ = syscall.Kill(m.EgressPID, syscall.SIGKILL) // the proxy of a previous agent
	}
	if m.Level == L0 {
		cfg.HostTmp = os.TempDir()
	}
	key, err := agentKey(r.dir(m.ID))
	if err != nil {
		return sberrors.Errorf(sberrors.Internal, "local: sandbox %s: agent key: %w", m.ID, err)
	}
	if err := r.ensureDisk(m); err != nil {
		return sberrors.Errorf(sberrors.Internal, "local: sandbox %s: mounting its disk: %w", m.ID, err)
	}
	cfg.Key, cfg.UID, cfg.GID = key, m.RunAs, m.RunAs
	cfg.NoFile = m.Limits.NoFile
	cfg.InotifyWatches = r.inotifyWatches
	// For an agent that cannot read meta.json (a root host's uid 65534).
	// A pooled sandbox's AutoPause is known only once adopted: such an
	// agent leaves its lease to the Runtimes.
	cfg.AutoPause = m.AutoPause || strings.HasPrefix(m.ID, "pool-")
	req := &spawnReq{
		State: filepath.Join(r.dir(m.ID), stateFile),
		Sock:  r.sock(m.ID), Home: r.home(m.ID), Log: filepath.Join(r.dir(m.ID), "agent.log"),
		HostUID: r.uid, HostGID: r.gid, CgroupV2: m.Cgroups.V2, CgroupV1: m.Cgroups.v1Dirs(), Config: cfg,
		Pasta: pasta,
	}
	if netMode == netProxy {
		req.Egress, req.EgressCA = r.dir(m.ID), m.EgressCA
	}
	tr := traceFrom(ctx)
	req.Trace = tr != nil
	req.Ahead = r.pool == nil
	tr.mark("agent-req")
	resp, err := sp.spawn(ctx, req)
	tr.add("spawner:", resp.Trace)
	tr.mark("spawned")
	if errors.Is(err, errSpawnerGone) && ctx.Err() == nil {
		// The spawner died (killed, or crashed): start another and try
		// once more. An agent the dead one may have started listens on a
		// socket path the new one replaces, and ends with the sandbox.
		r.dropSpawner(sp)
		if sp, err = r.spawner(); err == nil {
			resp, err = sp.spawn(ctx, req)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return sberrors.Errorf(sberrors.Internal, "local: starting the sandbox agent at %s: %v", m.Level, err)
	}
	m.AgentPID, m.AgentAt = resp.PID, resp.Start
	m.NetPID, m.NetAt = resp.NetPID, resp.NetStart
	m.EgressPID, m.EgressAt = resp.EgressPID, resp.EgressStart
	f := resp.Features
	f.Cgroup = m.Cgroups.Limits
	got := f.level()
	if m.Level <= L1 {
		got = m.Level
	}
	m.Features = f
	m.Achieved = min(got, m.Level)
	m.Why = why(m.Achieved, f, strings.Join(r.missing, "; "))
	if m.Achieved < m.Level {
		r.log.Warn("sandbox/local: sandbox got less isolation than probed", "id", m.ID, "level", m.Achieved, "why", m.Why)
	}
	return nil
}

// Get returns the sandbox's Info, enforcing its lease first.
func (r *Runtime) Get(ctx context.Context, id string) (driver.Info, error) {
	m, err := r.readMetaCtx(ctx, id)
	if err != nil {
		return driver.Info{}, err
	}
	r.thawStale(ctx, m, true)
	m, err = r.enforceLease(ctx, m)
	if err != nil {
		return driver.Info{}, err
	}
	return r.info(m), nil
}

// List returns the sandboxes under the root, sorted by creation, filtered
// by labels and states, without those of req.ExcludeIDs (left out before
// the page is filled, so a page holds other matches). A sandbox with corrupt metadata is skipped (and
// logged); Get on it reports the corruption.
func (r *Runtime) List(ctx context.Context, req *driver.ListRequest) ([]driver.Info, string, error) {
	ents, err := os.ReadDir(r.root)
	if err != nil {
		return nil, "", sberrors.Errorf(sberrors.Internal, "local: list %s: %w", r.root, err)
	}
	var out []driver.Info
	for _, e := range ents {
		id := e.Name()
		if !e.IsDir() || !idRE.MatchString(id) || (req.PageToken != "" && id <= req.PageToken) || slices.Contains(req.ExcludeIDs, id) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, "", err
		}
		m, err := r.readMeta(id)
		if err != nil {
			if sberrors.CodeOf(err) != sberrors.NotFound {
				r.log.Warn("sandbox/local: skipping sandbox", "id", id, "err", err)
			}
			continue
		}
		if m, err = r.enforceLease(ctx, m); err != nil {
			continue
		}
		if !labelsMatch(m.Labels, req.Labels) || (len(req.States) > 0 && !slices.Contains(req.States, m.State)) {
			continue
		}
		out = append(out, r.info(m))
		if req.PageSize > 0 && len(out) == req.PageSize {
			return out, id, nil
		}
	}
	return out, "", nil
}

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// enforceLease destroys (or, with AutoPause, pauses) a sandbox whose lease
// ended. A destroyed sandbox yields NotFound.
func (r *Runtime) enforceLease(ctx context.Context, m *meta) (*meta, error) {
	if r.now().Before(m.LeaseEnd) || (m.AutoPause && m.State == driver.StatePaused) {
		return m, nil
	}
	if m.AutoPause {
		if err := r.Pause(ctx, m.ID); err != nil {
			return m, nil
		}
		if m2, err := r.readMeta(m.ID); err == nil {
			return m2, nil
		}
		return m, nil
	}
	r.log.Info("sandbox/local: lease ended, destroying", "id", m.ID)
	// Recorded first: a call that finds the sandbox half gone while it is
	// destroyed (a command whose agent it just killed) must hear why.
	r.tomb(m.ID, m.LeaseEnd)
	if err := r.Destroy(ctx, m.ID); err != nil {
		r.untomb(m.ID)
		r.log.Warn("sandbox/local: destroying an expired sandbox failed", "id", m.ID, "err", err)
		return m, nil
	}
	return nil, fmt.Errorf("local: sandbox %s: %w", m.ID, &driver.LeaseEndedError{End: m.LeaseEnd})
}

// maxEnded bounds Runtime.ended.
const maxEnded = 1024

// tomb records that the lease of sandbox id ended at end.
func (r *Runtime) tomb(id string, end time.Time) {
	r.endedMu.Lock()
	defer r.endedMu.Unlock()
	if r.ended == nil {
		r.ended = map[string]time.Time{}
	}
	if _, ok := r.ended[id]; ok {
		return
	}
	if len(r.endedOrder) >= maxEnded {
		delete(r.ended, r.endedOrder[0])
		r.endedOrder = r.endedOrder[1:]
	}
	r.ended[id] = end
	r.endedOrder = append(r.endedOrder, id)
}

// untomb forgets what tomb recorded for id, when the sandbox lives on.
func (r *Runtime) untomb(id string) {
	r.endedMu.Lock()
	defer r.endedMu.Unlock()
	if _, ok := r.ended[id]; !ok {
		return
	}
	delete(r.ended, id)
	r.endedOrder = slices.DeleteFunc(r.endedOrder, func(s string) bool { return s == id })
}

// leaseEnded returns when the lease of sandbox id ended, when this
// Runtime destroyed it for that.
func (r *Runtime) leaseEnded(id string) (time.Time, bool) {
	r.endedMu.Lock()
	defer r.endedMu.Unlock()
	end, ok := r.ended[id]
	return end, ok
}

func (r *Runtime) reaper() {
	defer close(r.reaped)
	t := time.NewTicker(r.reapEach)
	defer t.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-r.stop:
				return
			case <-t.C:
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		go func() {
			select {
			case <-r.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		// Sandboxes left frozen by a snapshot or fork whose process died
		// (this Runtime's start included) are thawed.
		r.thawStaleAll(ctx)
		if !first {
			_, _, _ = r.List(ctx, &driver.ListRequest{})
		}
		cancel()
	}
}

// Destroy kills every process of the sandbox and removes its directory
// and cgroups. A sandbox that is already gone is not an error.
func (r *Runtime) Destroy(ctx context.Context, id string) error {
	if !idRE.MatchString(id) {
		return nil
	}
	l, err := r.lockCtx(ctx, id)
	if err != nil && sberrors.CodeOf(err) != sberrors.NotFound {
		return err
	}
	var m *meta
	if l != nil {
		m, _ = l.read(id)
	}
	if m == nil {
		// Corrupt or half-created: still remove what is there.
		m = &meta{metaStatic: metaStatic{ID: id}}
	}
	r.static.Delete(id)
	r.dropConns(id)
	states().forget(filepath.Join(r.dir(id), stateFile))
	// Hide the sandbox first, so that no call starts anything in it; its
	// endpoints go after, so that an Expose racing this either made its
	// endpoint before (dropped here) or finds the sandbox gone once it has
	// (and drops it itself).
	trash := filepath.Join(r.root, ".trash-"+id)
	err = os.Rename(r.dir(id), trash)
	r.ports.drop(id, false)
	if l != nil {
		l.unlock()
	}
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return sberrors.Errorf(sberrors.Internal, "local: destroy %s: %w", id, err)
	}
	r.killAll(ctx, m, filepath.Join(trash, "s"))
	return r.removeTree(ctx, m, trash)
}

// destroyDir removes a sandbox that never fully started.
func (r *Runtime) destroyDir(ctx context.Context, m *meta) {
	r.killAll(ctx, m, r.sock(m.ID))
	_ = r.removeTree(ctx, m, r.dir(m.ID))
}

// killAll ends every process of the sandbox. With a pid namespace (L3,
// L4) the agent's death ends them all. Below, the agent is a subreaper,
// so every process a command left behind (after setsid, or a double
// fork) is still its descendant: they are killed from here, with the
// processes of the sandbox's cgroups and those carrying its marker
// (SANDBOXKIT_ID in their environment), until none is left; the agent
// goes last, and a final sweep catches what was reparented as it died.
func (r *Runtime) killAll(ctx context.Context, m *meta, sock string) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	alive := procAlive(m.AgentPID, m.AgentAt)
	flat := m.Achieved < L3
	if flat {
		killSandboxProcs(kctx, m, alive)
	}
	m.Cgroups.kill(kctx)
	if alive {
		_ = syscall.Kill(m.AgentPID, syscall.SIGKILL)
		waitGone(kctx, m.AgentPID, m.AgentAt)
	}
	if procAlive(m.NetPID, m.NetAt) {
		_ = syscall.Kill(m.NetPID, syscall.SIGKILL)
		waitGone(kctx, m.NetPID, m.NetAt)
	}
	if procAlive(m.EgressPID, m.EgressAt) {
		_ = syscall.Kill(m.EgressPID, syscall.SIGKILL)
		waitGone(kctx, m.EgressPID, m.EgressAt)
	}
	if flat {
		killSandboxProcs(kctx, m, false)
	}
}

// killSandboxProcs SIGKILLs, until none is left alive (or ctx ends), the
// agent's descendants (when withAgent), the processes of the sandbox's
// cgroups but the agent, and the processes marked with its id.
func killSandboxProcs(ctx context.Context, m *meta, withAgent bool) {
	for {
		var pids []int
		if withAgent && procAlive(m.AgentPID, m.AgentAt) {
			pids = descendants(m.AgentPID)
		}
		pids = append(pids, m.Cgroups.procs()...)
		pids = append(pids, markedProcs(m.ID)...)
		n := 0
		for _, pid := range pids {
			if pid != m.AgentPID && pid != os.Getpid() && procAlive(pid, 0) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				n++
			}
		}
		if m.Paused != "" {
			// Frozen processes die once thawed; stopped ones die at once.
			_, _ = m.Cgroups.freeze(ctx, false)
		}
		if n == 0 || sleepCtx(ctx, time.Millisecond) != nil {
			return
		}
	}
}

// markerEnv names the environment variable that marks every command of a
// sandbox below L3 with the sandbox's id, so that Destroy finds processes
// that left both the agent's tree and the sandbox's cgroup.
const markerEnv = "SANDBOXKIT_ID"

// markedProcs lists the processes whose initial environment carries the
// marker of sandbox id (those this process may read: its own user's, or
// every one as root).
func markedProcs(id string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(markerEnv + "=" + id)
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for kv := range bytes.SplitSeq(b, []byte{0}) {
			if bytes.Equal(kv, want) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

func (r *Runtime) removeTree(ctx context.Context, m *meta, dir string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var errs []error
	if err := m.Cgroups.remove(rctx); err != nil {
		errs = append(errs, err)
	}
	unmountDisk(dir)
	uid := -1
	if fi, err := os.Stat(filepath.Join(dir, "home")); err == nil {
		uid = int(fi.Sys().(*syscall.Stat_t).Uid)
	}
	defer r.releaseUID(uid)
	if err := os.RemoveAll(dir); err != nil {
		// Sandboxed code may have left directories without write permission.
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o700)
			}
			return nil
		})
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return sberrors.Errorf(sberrors.Internal, "local: destroy %s: %w", m.ID, err)
	}
	return nil
}

// SetTimeout makes the lease end d from now.
func (r *Runtime) SetTimeout(ctx context.Context, id string, d time.Duration) error {
	return r.update(id, func(m *meta) error {
		m.LeaseEnd = r.now().UTC().Add(d)
		return nil
	})
}

// update applies f to the metadata of id under its lock and writes it.
func (r *Runtime) update(id string, f func(*meta) error) error {
	l, err := r.lock(id)
	if err != nil {
		return err
	}
	defer l.unlock()
	m, err := l.read(id)
	if err != nil {
		return err
	}
	if err := f(m); err != nil {
		return err
	}
	return l.write(m)
}

// Pause freezes every process of the sandbox: cgroup v2 cgroup.freeze,
// else the v1 freezer, else SIGSTOP through the agent.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	return r.update(id, func(m *meta) error {
		if m.State == driver.StatePaused {
			return nil
		}
		ok, err := m.Cgroups.freeze(ctx, true)
		switch {
		case err != nil:
			_, _ = m.Cgroups.freeze(context.WithoutCancel(ctx), false)
			return sberrors.Errorf(sberrors.Internal, "local: pause %s: %w", id, err)
		case ok:
			m.Paused = "cgroup"
		default:
			m.Paused = "signal"
			if procAlive(m.AgentPID, m.AgentAt) {
				if err := agentCall(ctx, r.sock(id), &request{Op: "stop"}); err != nil {
					return sberrors.Errorf(sberrors.Internal, "local: pause %s: %w", id, err)
				}
			}
		}
		m.State = driver.StatePaused
		return nil
	})
}

// Resume thaws a paused sandbox. A sandbox whose lease ended while paused
// gets a fresh lease of its original length.
func (r *Runtime) Resume(ctx context.Context, id string) (driver.Info, error) {
	var out *meta
	err := r.update(id, func(m *meta) error {
		out = m
		if m.State != driver.StatePaused {
			// Running, but maybe left frozen by a snapshot or fork
			// whose process died: thaw it.
			r.thawStaleLocked(ctx, m)
			return nil
		}
		switch m.Paused {
		case "signal":
			if procAlive(m.AgentPID, m.AgentAt) {
				if err := agentCall(ctx, r.sock(id), &request{Op: "cont"}); err != nil {
					return sberrors.Errorf(sberrors.Internal, "local: resume %s: %w", id, err)
				}
			}
		default:
			if _, err := m.Cgroups.freeze(ctx, false); err != nil {
				return sberrors.Errorf(sberrors.Internal, "local: resume %s: %w", id, err)
			}
		}
		m.State, m.Paused = driver.StateRunning, ""
		if now := r.now().UTC(); !m.LeaseEnd.After(now) {
			lease := m.Lease
			if lease <= 0 {
				lease = r.lease
			}
			m.LeaseEnd = now.Add(lease)
		}
		return nil
	})
	if err != nil {
		return driver.Info{}, err
	}
	return r.info(out), nil
}

// HostPIDs returns the host pids of every process of the sandbox, its
// agent included, for monitoring (CPU and memory accounting, for example).
func (r *Runtime) HostPIDs(ctx context.Context, id string) ([]int, error) {
	m, err := r.readMeta(id)
	if err != nil {
		return nil, err
	}
	pids := m.Cgroups.procs()
	if len(pids) == 0 && procAlive(m.AgentPID, m.AgentAt) {
		pids = append([]int{m.AgentPID}, descendants(m.AgentPID)...)
	}
	slices.Sort(pids)
	return pids, nil
}

// errPaused is the error of a call a paused sandbox refuses.
func errPaused(id string) error {
	return fmt.Errorf("local: sandbox %s: %w (resume it first)", id, sberrors.ErrPaused)
}

// running reads the metadata of id and fails when the sandbox is paused.
func (r *Runtime) running(ctx context.Context, id string) (*meta, error) {
	if m, ok := r.fastRunning(id); ok {
		return m, nil
	}
	m, err := r.readMetaCtx(ctx, id)
	if err != nil {
		return nil, err
	}
	r.thawStale(ctx, m, false)
	if m.State == driver.StatePaused {
		return nil, errPaused(id)
	}
	return m, nil
}
