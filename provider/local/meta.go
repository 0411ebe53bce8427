//go:build linux

package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
	"golang.org/x/sys/unix"
)

// meta is what the provider records about one sandbox, in two files of
// its directory. meta.json holds what never changes (written once, before
// the sandbox shows up in List). The state file holds what does change: a
// fixed-size JSON record rewritten in place under an exclusive flock on
// that same file and read under a shared one. (Rewriting in place, rather
// than renaming a new file over the old, spares ext4's flush on
// replace-by-rename, which costs about half a millisecond per write here.)
type meta struct {
	metaStatic
	metaState
}

type metaStatic struct {
	ID        string            `json:"id"`
	Template  string            `json:"template,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Env       map[string]string `json:"env,omitempty"` // may hold secrets: the file is 0600
	CreatedAt time.Time         `json:"created_at"`
	Lease     time.Duration     `json:"lease"` // the lease granted at create, reused by Resume
	AutoPause bool              `json:"auto_pause,omitempty"`
	NoNetwork bool              `json:"no_network,omitempty"`
	Resources driver.Resources  `json:"resources"`
	Level     Level             `json:"level"` // level asked for
	// RunAs is the host uid (and gid) commands run as at L0 to L2 on a
	// root host, the sandbox's own; 0 means the host user's own.
	RunAs int `json:"run_as,omitempty"`
	// Network is what the sandbox's network is: "isolated", "host",
	// "proxy" (behind its egress proxy) or "off"; NetNote says why, when
	// not what was asked.
	Network string `json:"network,omitempty"`
	NetNote string `json:"network_note,omitempty"`
	// Disk is diskImage when the home is a loop-mounted image of
	// Resources.DiskGiB; DiskNote says why not, when DiskGiB was asked.
	Disk     string `json:"disk,omitempty"`
	DiskNote string `json:"disk_note,omitempty"`
	// Limits are the sandbox's limits, computed from the host's tables
	// and Resources at create (zero for sandboxes of older versions).
	Limits sandboxLimits `json:"limits,omitempty"`
	// EgressCA: the sandbox has brokered secrets, and trusts its egress
	// proxy's CA (the proxy's env variables name the bundle).
	EgressCA bool `json:"egress_ca,omitempty"`
}

type metaState struct {
	State    driver.State   `json:"state"`
	LeaseEnd time.Time      `json:"lease_end"`
	Achieved Level          `json:"achieved"` // level the running agent achieved
	Features features       `json:"features"`
	Why      string         `json:"why,omitempty"` // why not more than Achieved
	Cgroups  sandboxCgroups `json:"cgroups"`
	Paused   string         `json:"paused_by,omitempty"` // cgroup or signal
	AgentPID int            `json:"agent_pid,omitempty"`
	AgentAt  uint64         `json:"agent_start,omitempty"`
	NetPID   int            `json:"net_pid,omitempty"` // the sandbox's pasta, outside it
	NetAt    uint64         `json:"net_start,omitempty"`
	// Proxy: the sandbox reaches the network only through its egress
	// proxy (policy in egressFile), since Create or a SetNetwork.
	Proxy     bool   `json:"proxy,omitempty"`
	EgressPID int    `json:"egress_pid,omitempty"` // the egress proxy, outside the sandbox
	EgressAt  uint64 `json:"egress_start,omitempty"`
}

// idRE matches the ids this provider makes: "sbx-", a hex timestamp in
// microseconds (so ids sort by creation time) and random hex.
var idRE = regexp.MustCompile(`^sbx-[0-9a-f]{14}-[0-9a-f]{8}$`)

func newID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("sbx-%014x-%s", time.Now().UnixMicro(), hex.EncodeToString(b[:]))
}

const (
	keyFile   = "key" // the agent's key (keySize random bytes), 0600
	metaFile  = "meta.json"
	stateFile = "state"
	stateSize = 4096 // the state record is padded to this size
)

// agentKey returns the key of the sandbox directory dir, creating it
// when missing (a directory made before keys existed).
func agentKey(dir string) ([]byte, error) {
	p := filepath.Join(dir, keyFile)
	key, err := os.ReadFile(p)
	if err == nil && len(key) == keySize {
		return key, nil
	}
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	key = make([]byte, keySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	tmp := filepath.Join(dir, ".key")
	if err := os.WriteFile(tmp, key, 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, p); err != nil {
		return nil, err
	}
	return key, nil
}

func (r *Runtime) dir(id string) string  { return filepath.Join(r.root, id) }
func (r *Runtime) home(id string) string { return filepath.Join(r.root, id, "home") }
func (r *Runtime) sock(id string) string { return filepath.Join(r.root, id, "s") }

func notFound(r *Runtime, id string) error {
	if end, ok := r.leaseEnded(id); ok {
		return fmt.Errorf("local: sandbox %s: %w", id, &driver.LeaseEndedError{End: end})
	}
	return sberrors.Errorf(sberrors.NotFound, "local: no sandbox %s under %s: %w", id, r.root, sberrors.ErrNotFound)
}

// readStatic reads meta.json of id.
func (r *Runtime) readStatic(id string) (*meta, error) {
	if st, ok := r.static.Load(id); ok {
		return &meta{metaStatic: *st.(*metaStatic)}, nil // its id was checked when it was stored
	}
	if !idRE.MatchString(id) {
		return nil, sberrors.Errorf(sberrors.NotFound, "local: %q is not a local sandbox id (want sbx-<hex>-<hex>): %w", id, sberrors.ErrNotFound)
	}
	p := filepath.Join(r.dir(id), metaFile)
	b, err := os.ReadFile(p)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, notFound(r, id)
		}
		return nil, sberrors.Errorf(sberrors.Internal, "local: reading %s: %w", p, err)
	}
	m := &meta{}
	if err := json.Unmarshal(b, &m.metaStatic); err != nil || m.ID != id {
		if err == nil {
			err = fmt.Errorf("id %q does not match its directory", m.ID)
		}
		return nil, sberrors.Errorf(sberrors.Internal, "local: corrupt metadata %s: %v", p, err)
	}
	st := m.metaStatic // never changes: cache it
	r.static.Store(id, &st)
	return m, nil
}

// readMeta reads the metadata of id. A sandbox that does not exist is
// NotFound; an unreadable or corrupt file is Internal and names the file.
func (r *Runtime) readMeta(id string) (*meta, error) {
	return r.readMetaCtx(context.Background(), id)
}

// readMetaCtx is readMeta with the wait for the state's lock bounded by
// ctx: a snapshot or fork holds a sandbox's lock while it copies, and a
// call with a deadline must not wait past it.
func (r *Runtime) readMetaCtx(ctx context.Context, id string) (*meta, error) {
	m, err := r.readStatic(id)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(r.dir(id), stateFile)
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, notFound(r, id)
		}
		return nil, sberrors.Errorf(sberrors.Internal, "local: reading state of %s: %w", id, err)
	}
	defer f.Close()
	if err := flockCtx(ctx, f, syscall.LOCK_SH); err != nil {
		if ctx.Err() != nil {
			return nil, busy(id, err)
		}
		return nil, sberrors.Errorf(sberrors.Internal, "local: lock state of %s: %w", id, err)
	}
	// The shared lock is still taken (a snapshot or fork holds the
	// exclusive one while it copies, and a call waits for it), but the
	// record is read and decoded only when it changed since the last read
	// (statecache_linux.go).
	if st, ok := states().get(path); ok {
		m.metaState = st
		return m, nil
	}
	t, watched := states().watch(path)
	if err := r.readState(f, m); err != nil {
		return nil, err
	}
	if watched {
		// With the directory watched, the entry keeps the file open for
		// fastRunning, and notes whether a freeze record was there.
		fd, noMark := -1, false
		if t.dirWD >= 0 {
			if fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
				fd = -1
			}
			_, merr := os.Lstat(r.freezeMarkPath(id))
			noMark = errors.Is(merr, fs.ErrNotExist)
		}
		states().put(path, t, &m.metaState, fd, noMark)
	}
	return m, nil
}

// fastRunning returns the metadata of id when the state cache holds it
// with the file open, no freeze record was in its directory and the
// sandbox is not paused (stateCache.fast): an exec on a running sandbox
// then walks no path. False sends the caller the long way.
func (r *Runtime) fastRunning(id string) (*meta, bool) {
	st, ok := r.static.Load(id)
	if !ok {
		return nil, false
	}
	ms, ok := states().fast(filepath.Join(r.root, id, stateFile))
	if !ok || ms.State == driver.StatePaused {
		return nil, false
	}
	return &meta{metaStatic: *st.(*metaStatic), metaState: ms}, true
}

func (r *Runtime) readState(f *os.File, m *meta) error {
	var buf [stateSize]byte
	n, err := f.ReadAt(buf[:], 0)
	if err != nil && n == 0 {
		return sberrors.Errorf(sberrors.Internal, "local: reading state of %s: %w", m.ID, err)
	}
	b := trimState(buf[:n])
	if err := json.Unmarshal(b, &m.metaState); err != nil {
		return sberrors.Errorf(sberrors.Internal, "local: corrupt metadata %s: %v", f.Name(), err)
	}
	return nil
}

// trimState drops the padding of a state record.
func trimState(b []byte) []byte { return bytes.TrimRight(b, " \x00\n") }

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// flockCtx takes f's flock (how is LOCK_SH or LOCK_EX) at once when it is
// free, else polls until it is or ctx ends (ctx.Err() then).
func flockCtx(ctx context.Context, f *os.File, how int) error {
	err := flock(f, how|syscall.LOCK_NB)
	if err != syscall.EWOULDBLOCK {
		return err
	}
	delay := 2 * time.Millisecond
	for {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if err := flock(f, how|syscall.LOCK_NB); err != syscall.EWOULDBLOCK {
			return err
		}
		delay = min(delay*2, 50*time.Millisecond)
	}
}

// busy is the error of a call whose ctx ended while another call (a
// snapshot or fork copying the sandbox, say) held the sandbox's lock.
func busy(id string, err error) error {
	return fmt.Errorf("local: sandbox %s is busy (another call, such as a snapshot or fork, holds it): %w", id, err)
}

// locked is a sandbox's state file held under an exclusive lock, shared
// by every process using the root.
type locked struct {
	r *Runtime
	f *os.File
}

// lock takes the sandbox's exclusive lock.
func (r *Runtime) lock(id string) (*locked, error) {
	return r.lockCtx(context.Background(), id)
}

// lockCtx is lock with the wait bounded by ctx.
func (r *Runtime) lockCtx(ctx context.Context, id string) (*locked, error) {
	if !idRE.MatchString(id) {
		return nil, sberrors.Errorf(sberrors.NotFound, "local: %q is not a local sandbox id (want sbx-<hex>-<hex>): %w", id, sberrors.ErrNotFound)
	}
	return r.lockPathCtx(ctx, id)
}

// lockPath is lock for a directory name already known to be safe.
func (r *Runtime) lockPath(id string) (*locked, error) {
	return r.lockPathCtx(context.Background(), id)
}

// lockPathCtx is lockPath with the wait bounded by ctx.
func (r *Runtime) lockPathCtx(ctx context.Context, id string) (*locked, error) {
	f, err := os.OpenFile(filepath.Join(r.dir(id), stateFile), os.O_RDWR, 0)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, notFound(r, id)
		}
		return nil, fmt.Errorf("local: lock: %w", err)
	}
	if err := flockCtx(ctx, f, syscall.LOCK_EX); err != nil {
		f.Close()
		if ctx.Err() != nil {
			return nil, busy(id, err)
		}
		return nil, fmt.Errorf("local: lock: %w", err)
	}
	return &locked{r: r, f: f}, nil
}

// read reads the whole metadata while holding the lock.
func (l *locked) read(id string) (*meta, error) {
	m, err := l.r.readStatic(id)
	if err != nil {
		return nil, err
	}
	return m, l.r.readState(l.f, m)
}

// write rewrites the state record in place.
func (l *locked) write(m *meta) error {
	st := m.metaState
	st.Why = clip(st.Why, 1000)
	st.Features.Missing = clip(st.Features.Missing, 1000)
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if len(b) >= stateSize {
		return sberrors.Errorf(sberrors.Internal, "local: state of %s too large (%d bytes)", m.ID, len(b))
	}
	rec := make([]byte, stateSize)
	copy(rec, b)
	for i := len(b); i < stateSize-1; i++ {
		rec[i] = ' '
	}
	rec[stateSize-1] = '\n'
	if _, err := l.f.WriteAt(rec, 0); err != nil {
		if os.IsNotExist(err) {
			return notFound(l.r, m.ID)
		}
		return fmt.Errorf("local: writing state of %s: %w", m.ID, err)
	}
	return nil
}

func (l *locked) unlock() { _ = l.f.Close() }

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// createMeta writes the files of a new sandbox: the state file first,
// locked (and returned so), then, if static, meta.json, whose appearance
// makes the sandbox visible.
func (r *Runtime) createMeta(m *meta, static bool) (*locked, error) {
	dir := r.dir(m.ID)
	f, err := os.OpenFile(filepath.Join(dir, stateFile), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("local: writing state: %w", err)
	}
	if err := flock(f, syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("local: lock: %w", err)
	}
	l := &locked{r: r, f: f}
	if err := l.write(m); err != nil {
		l.unlock()
		return nil, err
	}
	if static {
		if err := r.writeStatic(m); err != nil {
			l.unlock()
			return nil, err
		}
	}
	return l, nil
}

// writeStatic writes meta.json (a new file: it is never replaced).
func (r *Runtime) writeStatic(m *meta) error {
	dir := r.dir(m.ID)
	b, err := json.MarshalIndent(m.metaStatic, "", "  ")
	if err == nil {
		tmp := filepath.Join(dir, ".meta.json")
		if err = os.WriteFile(tmp, b, 0o600); err == nil {
			err = os.Rename(tmp, filepath.Join(dir, metaFile))
		}
	}
	if err != nil {
		return fmt.Errorf("local: writing metadata: %w", err)
	}
	return nil
}

// info converts m to the portable Info.
func (r *Runtime) info(m *meta) driver.Info {
	home := r.home(m.ID)
	if m.Achieved >= L3 {
		home = sandboxHome
	}
	detail := map[string]string{
		"level":     m.Achieved.String(),
		"host_home": r.home(m.ID),
		"root":      r.root,
	}
	if m.Why != "" {
		detail["isolation_missing"] = m.Why
	}
	// What snapshots of it can keep here: how files are copied, and why
	// full mode is unavailable (CRIU missing, failing or not allowed).
	detail["snapshots"] = r.snapshotNote()
	if m.Paused != "" {
		detail["paused_by"] = m.Paused
	}
	detail["network"] = m.netMode()
	policy := netPolicy(m.netMode() != "off")
	switch {
	case m.Proxy:
		detail["network"] = fmt.Sprintf("proxy (own network namespace with no route out; HTTP, HTTPS and SOCKS5 through the egress proxy at 127.0.0.1:%d)", egressPort)
		detail["egress"] = "proxy"
		if c, err := readEgressConfig(r.dir(m.ID)); err == nil && c.Policy != nil {
			policy = c.Policy
		} else {
			policy = nil // unknown: never reported more open than it is
		}
	case m.Network == NetworkIsolated:
		detail["network"] = "isolated (pasta: own network namespace, host loopback unreachable)"
	}
	if m.NetNote != "" {
		detail["network_note"] = m.NetNote
	}
	switch {
	case m.Disk != "":
		detail["disk"] = fmt.Sprintf("%d GiB (ext4 image mounted on the home)", m.Resources.DiskGiB)
	case m.DiskNote != "":
		detail["disk"] = m.DiskNote
	}
	if f := m.Features; f.Landlock {
		detail["landlock"] = fmt.Sprintf("ABI %d", f.LandlockV)
	}
	if m.Features.Seccomp {
		detail["seccomp"] = "on"
	}
	detail["socket_families"] = m.Features.Sockets + ": other families (vsock, packet, alg, bluetooth...) fail with EAFNOSUPPORT"
	if m.Features.Sockets == "unix" {
		detail["socket_families"] = "unix (network off: inet, inet6 and netlink fail with EPERM, other families with EAFNOSUPPORT)"
	}
	if m.Features.Sockets == "" {
		detail["socket_families"] = "any the kernel offers (no seccomp filter applies): AF_VSOCK, which no namespace confines, reaches the host's vsock port space"
	}
	if m.Features.NoUserNS {
		detail["nested_userns"] = "blocked"
	}
	if m.Cgroups.Limits {
		detail["cgroup_limits"] = "memory,pids"
	}
	if m.Cgroups.MemMiB > 0 {
		detail["memory_max"] = fmt.Sprintf("%d MiB", m.Cgroups.MemMiB)
	}
	if m.Cgroups.Pids > 0 {
		detail["pids_max"] = strconv.Itoa(m.Cgroups.Pids)
	}
	if m.Features.NoFile > 0 {
		detail["open_files_max"] = fmt.Sprintf("%d per process", m.Features.NoFile)
	}
	if m.Limits.Basis != "" && (m.Cgroups.Pids > 0 || m.Features.NoFile > 0) {
		detail["limits_basis"] = m.Limits.Basis
	}
	if m.Limits.Note != "" {
		detail["limits_note"] = m.Limits.Note
	}
	if m.Achieved <= L1 && m.RunAs == 0 {
		detail["cgroup_escape"] = "possible: commands run as the owner of the sandbox's cgroup and can move out of it; " +
			"Destroy still ends them through the agent's process tree and the " + markerEnv + " marker"
	}
	switch {
	case m.RunAs != 0:
		detail["user"] = fmt.Sprintf("uid %d", m.RunAs)
	case m.Achieved <= L2 && os.Getuid() == 0:
		detail["user"] = "root without capabilities"
		if r.runAsWhy != "" {
			detail["user"] = r.runAsWhy
		}
	}
	return driver.Info{
		ID: m.ID, Provider: "local", Template: m.Template, Labels: maps.Clone(m.Labels),
		State: m.State, CreatedAt: m.CreatedAt, LeaseEnd: m.LeaseEnd, Home: home,
		Isolation: m.Achieved.Describe(), Detail: detail, Network: policy,
	}
}

// why explains, for an achieved level, what kept the sandbox from more.
func why(achieved Level, f features, extra ...string) string {
	var parts []string
	for _, e := range extra {
		if e != "" {
			parts = append(parts, e)
		}
	}
	if f.Missing != "" {
		parts = append(parts, f.Missing)
	}
	if achieved >= L3 && !f.Cgroup {
		parts = append(parts, "cgroup limits not applied")
	}
	return strings.Join(parts, "; ")
}

// netMode returns the sandbox's network: "isolated", "host", "proxy" (since
// Create or a SetNetwork) or "off".
// Sandboxes recorded before modes existed had the host's network unless
// NoNetwork.
func (m *meta) netMode() string {
	switch {
	case m.Proxy:
		return netProxy
	case m.NoNetwork:
		return "off"
	case m.Network != "":
		return m.Network
	}
	return NetworkHost
}
