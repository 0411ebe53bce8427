//go:build linux

package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Snapshots (filesystem mode) are copies of what a sandbox's commands may
// write: its home (on its disk image too, where it has one) and its
// temporary directory (the private $TMPDIR at L0 to L2, the /tmp tmpfs
// at L3 and L4 while the agent runs). Each is a directory
// <root>/snapshots/<id> holding meta.json, "home" and "tmp", made under a
// temporary name and renamed into place once complete, so it survives
// the Runtime and the program, and neither List nor the reaper of
// sandboxes ever touches it. The copy is taken with the sandbox frozen
// (the cgroup freezer Pause uses, else SIGSTOP through the agent) and
// thawed after, unless it was paused. Files are reflinked (FICLONE) where
// the root's file system clones (XFS, btrfs, bcachefs), else copied with
// their holes kept; modes, owners, times, symbolic and hard links go with
// them. Full mode (processes and memory) is not offered: see fullMissing
// for what the host lacks (CRIU, Debian package criu, and a restore of
// the checkpoint into a new sandbox).

// snapDir is the directory under the root that holds the snapshots.
const snapDir = "snapshots"

// snapRE matches the snapshot ids this provider makes.
var snapRE = regexp.MustCompile(`^snap-[0-9a-f]{14}-[0-9a-f]{8}$`)

// snapMeta is a snapshot's meta.json.
type snapMeta struct {
	Info driver.SnapshotInfo `json:"info"`
	// UID is the host uid owning the source sandbox's files (its user);
	// a sandbox made from the snapshot gets them as its own user's.
	UID int `json:"uid"`
	// Tmp says the snapshot holds the sandbox's temporary directory.
	Tmp bool `json:"tmp,omitempty"`
}

func (r *Runtime) snapRoot() string          { return filepath.Join(r.root, snapDir) }
func (r *Runtime) snapPath(id string) string { return filepath.Join(r.root, snapDir, id) }
func snapNotFound(id string) error {
	return fmt.Errorf("local: snapshot %s: %w", id, sberrors.ErrNotFound)
}
func newSnapID() string                          { return "snap-" + strings.TrimPrefix(newID(), "sbx-") }
func (r *Runtime) snapMetaPath(id string) string { return filepath.Join(r.snapPath(id), metaFile) }

// snapFacts is what the host offers for snapshots, probed once.
type snapFacts struct {
	once    sync.Once
	reflink bool
}

func (r *Runtime) snapFacts() *snapFacts {
	f := &r.snaps
	f.once.Do(func() {
		// The snapshots live on the root's file system: probe there,
		// without making their directory before the first snapshot.
		f.reflink = reflinks(r.root)
	})
	return f
}

// criuFacts is what the host offers for full snapshots: whether CRIU is
// installed and whether `criu check` passes on this kernel. The host does
// not change under a program, so it is probed once per process, on first
// use, with a time bound (see probeCRIU).
type criuFacts struct {
	path string // "" when not installed
	// checkErr is why `criu check` failed ("" when it passed).
	checkErr string
	// capsMissing names the capabilities CRIU needs to checkpoint another
	// user's processes that this process lacks (a container's bounding
	// set often drops CAP_SYS_RESOURCE; `criu check` passes without it,
	// a dump then fails reading the processes' rlimits).
	capsMissing []string
}

var (
	criuOnce  sync.Once
	criuProbe criuFacts
)

// criuCheckTimeout bounds the `criu check` probe.
const criuCheckTimeout = 20 * time.Second

// criuCacheFile, under a Runtime's root, keeps the outcome of `criu check`
// for the criu binary and the boot it was run on: the check costs about
// 0.3 s, which every program's first Client would otherwise pay.
const criuCacheFile = ".criu-check.json"

// criuCache is criuCacheFile's content.
type criuCache struct {
	Key      string `json:"key"`
	CheckErr string `json:"check_err"`
}

// probeCRIU returns what the host offers for full snapshots, probing once
// per process (the outcome of `criu check` is reused from root's cache
// while the binary and the boot are the same).
func (r *Runtime) probeCRIU() criuFacts {
	criuOnce.Do(func() {
		path, _ := exec.LookPath("criu")
		criuProbe = criuFacts{path: path}
		if path != "" {
			key := criuKey(path)
			cache := filepath.Join(r.root, criuCacheFile)
			var c criuCache
			if b, err := os.ReadFile(cache); err == nil && json.Unmarshal(b, &c) == nil && key != "" && c.Key == key {
				criuProbe.checkErr = c.CheckErr
			} else {
				criuProbe = checkCRIU(path, criuCheckTimeout)
				if key != "" && !strings.HasPrefix(criuProbe.checkErr, "did not finish") {
					writeCRIUCache(cache, criuCache{Key: key, CheckErr: criuProbe.checkErr})
				}
			}
		}
		criuProbe.capsMissing = criuCaps(effectiveCaps())
	})
	return criuProbe
}

// criuKey identifies the criu binary at path (its real path, size and
// modification time) on this boot, or "" when it cannot be told.
func criuKey(path string) string {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	fi, err := os.Stat(real)
	if err != nil {
		return ""
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s %d %d %s", real, fi.Size(), fi.ModTime().UnixNano(), strings.TrimSpace(string(boot)))
}

// writeCRIUCache writes the cache atomically; a failure only costs the
// next program a probe.
func writeCRIUCache(path string, c criuCache) {
	b, err := json.Marshal(c)
	if err != nil {
		return
	}
	tmp := path + ".tmp-" + strconv.Itoa(os.Getpid())
	if os.WriteFile(tmp, b, 0o600) != nil {
		_ = os.Remove(tmp)
		return
	}
	if os.Rename(tmp, path) != nil {
		_ = os.Remove(tmp)
	}
}

// effectiveCaps returns this process's effective capability set (CapEff
// of /proc/self/status), or 0 when it cannot be read.
func effectiveCaps() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return n
		}
	}
	return 0
}

// criuCaps names the capabilities in eff that CRIU needs and are missing:
// CAP_SYS_PTRACE and CAP_SYS_RESOURCE, and CAP_SYS_ADMIN or
// CAP_CHECKPOINT_RESTORE.
func criuCaps(eff uint64) []string {
	has := func(c uint) bool { return eff&(1<<c) != 0 }
	var miss []string
	if !has(unix.CAP_SYS_ADMIN) && !has(unix.CAP_CHECKPOINT_RESTORE) {
		miss = append(miss, "CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE")
	}
	if !has(unix.CAP_SYS_PTRACE) {
		miss = append(miss, "CAP_SYS_PTRACE")
	}
	if !has(unix.CAP_SYS_RESOURCE) {
		miss = append(miss, "CAP_SYS_RESOURCE")
	}
	return miss
}

// checkCRIU runs `path check` (nothing when path is ""), bounded by
// timeout.
func checkCRIU(path string, timeout time.Duration) criuFacts {
	f := criuFacts{path: path}
	if path == "" {
		return f
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "check")
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	switch {
	case ctx.Err() != nil:
		f.checkErr = fmt.Sprintf("did not finish within %v", timeout)
	case err != nil:
		f.checkErr = criuCheckReason(string(out), err)
	}
	return f
}

// criuCheckReason is the first error `criu check` printed (its lines
// read "Error (file:line): what"), else the way it ended; bounded.
func criuCheckReason(out string, err error) string {
	why := ""
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if _, rest, ok := strings.Cut(line, "Error ("); ok {
			if _, msg, ok := strings.Cut(rest, "): "); ok {
				why = msg
				break
			}
		}
		if why == "" && line != "" {
			why = line
		}
	}
	if why == "" {
		why = err.Error()
	}
	return clipMiddle(why, 200)
}

// fullMissing says why this host cannot take full snapshots of a sandbox:
// what is missing, for the FailedPrecondition, Capabilities and Detail.
// Restoring a checkpoint into a new sandbox (its processes with their
// ids, inside the new sandbox's namespaces and under its agent) is not
// built on any isolation level, so even where CRIU runs the answer names
// that; where CRIU does not run, it names what is missing first.
func fullMissing(f criuFacts) string {
	switch {
	case f.path == "":
		return "CRIU is not installed (Debian package criu)"
	case f.checkErr != "":
		return "CRIU at " + f.path + " does not work on this kernel (criu check: " + f.checkErr + "; a newer criu may)"
	case len(f.capsMissing) > 0:
		return "CRIU at " + f.path + " needs capabilities this process lacks: " + strings.Join(f.capsMissing, ", ")
	}
	return "CRIU at " + f.path + " passes criu check, but this provider does not restore checkpointed processes into a new sandbox at any isolation level yet"
}

// snapshotNote says what the host offers, for Capabilities and Detail.
func (r *Runtime) snapshotNote() string {
	f := r.snapFacts()
	how := "files copied with their holes kept (the root's file system does not reflink)"
	if f.reflink {
		how = "files reflinked (copy-on-write)"
	}
	return "filesystem snapshots: " + how + "; mode full (processes and memory) unavailable: " + fullMissing(r.probeCRIU())
}

// uidOf returns the host uid that owns the files of sandbox m's user.
func (r *Runtime) uidOf(m *meta) int {
	switch {
	case m.RunAs != 0:
		return m.RunAs
	case m.Level >= L3:
		return r.uid
	}
	return os.Getuid()
}

// tmpOf returns the host path of sandbox m's temporary directory, or ""
// when it has none on the host (L3 and L4 without a running agent: the
// tmpfs went with it).
func (r *Runtime) tmpOf(m *meta) string {
	if m.Achieved >= L3 || m.Level >= L3 {
		if procAlive(m.AgentPID, m.AgentAt) {
			return "/proc/" + strconv.Itoa(m.AgentPID) + "/root/tmp"
		}
		return ""
	}
	return filepath.Join(r.dir(m.ID), "tmp")
}

// Snapshot copies the sandbox's writable files, frozen, into a new
// snapshot. A paused sandbox stays paused; a running one runs on.
func (r *Runtime) Snapshot(ctx context.Context, id string, req *driver.SnapshotRequest) (driver.SnapshotInfo, error) {
	if req.Mode != driver.SnapshotFilesystem {
		return driver.SnapshotInfo{}, sberrors.Errorf(sberrors.FailedPrecondition,
			"local: snapshot mode %q (processes and memory) is unavailable: %s; mode %q is available", req.Mode, fullMissing(r.probeCRIU()), driver.SnapshotFilesystem)
	}
	if !idRE.MatchString(id) {
		return driver.SnapshotInfo{}, notFound(r, id)
	}
	facts := r.snapFacts()
	l, err := r.lock(id)
	if err != nil {
		return driver.SnapshotInfo{}, err
	}
	defer l.unlock()
	m, err := l.read(id)
	if err != nil {
		return driver.SnapshotInfo{}, err
	}
	if m.State != driver.StatePaused {
		thaw, err := r.freezeFor(ctx, m)
		if err != nil {
			return driver.SnapshotInfo{}, err
		}
		defer thaw()
	}
	sid := newSnapID()
	tmp := filepath.Join(r.snapRoot(), ".tmp-"+sid)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return driver.SnapshotInfo{}, sberrors.Errorf(sberrors.Internal, "local: snapshot of %s: %w", id, err)
	}
	ok := false
	defer func() {
		if !ok {
			removeAll(tmp)
		}
	}()
	cp := newCopier(-1, -1)
	if err := os.Mkdir(filepath.Join(tmp, "home"), 0o700); err != nil {
		return driver.SnapshotInfo{}, sberrors.Errorf(sberrors.Internal, "local: snapshot of %s: %w", id, err)
	}
	src := r.tmpOf(m)
	roots := [][2]string{{r.home(id), "~"}, {filepath.Join(tmp, "home"), "~"}, {filepath.Join(tmp, "tmp"), "/tmp"}}
	if src != "" {
		roots = append(roots, [2]string{src, "/tmp"})
	}
	if err := cp.tree(ctx, r.home(id), filepath.Join(tmp, "home")); err != nil {
		return driver.SnapshotInfo{}, snapErr(ctx, id, err, roots...)
	}
	sm := snapMeta{UID: r.uidOf(m)}
	if src != "" {
		if err := os.Mkdir(filepath.Join(tmp, "tmp"), 0o700); err != nil {
			return driver.SnapshotInfo{}, sberrors.Errorf(sberrors.Internal, "local: snapshot of %s: %w", id, err)
		}
		if err := cp.tree(ctx, src, filepath.Join(tmp, "tmp")); err != nil {
			return driver.SnapshotInfo{}, snapErr(ctx, id, err, roots...)
		}
		sm.Tmp = true
	}
	how := "copy"
	if cp.reflinked > 0 || (facts.reflink && cp.copied == 0) {
		how = "reflink"
	}
	sm.Info = driver.SnapshotInfo{
		ID: sid, Name: req.Name, Provider: "local", Mode: driver.SnapshotFilesystem, Size: diskUsage(tmp),
		CreatedAt: r.now().UTC(), Labels: maps.Clone(req.Labels), SourceID: id, Template: m.Template,
		Detail: map[string]string{
			"copy": how, "files_reflinked": strconv.Itoa(cp.reflinked), "files_copied": strconv.Itoa(cp.copied),
			"kept": keptWhat(sm.Tmp), "full_mode": "unavailable: " + fullMissing(r.probeCRIU()),
		},
	}
	b, err := json.MarshalIndent(sm, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(tmp, metaFile), b, 0o600)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = os.Rename(tmp, r.snapPath(sid))
	}
	if err != nil {
		return driver.SnapshotInfo{}, snapErr(ctx, id, err, [2]string{r.root, "the root"})
	}
	ok = true
	return sm.Info, nil
}

func keptWhat(tmp bool) string {
	if tmp {
		return "home and temporary directory"
	}
	return "home (the temporary directory, a tmpfs, went with the agent)"
}

// snapErr classifies a failed copy. Its text names the file by its path
// in the sandbox (roots maps host directories to what the sandbox calls
// them), never the host's, and is bounded in length: a path the sandbox
// made can be thousands of characters long.
func snapErr(ctx context.Context, id string, err error, roots ...[2]string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	msg := copyErrText(err, roots)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("local: snapshot of %s: %w (%s)", id, sberrors.ErrNotFound, msg)
	}
	return sberrors.Errorf(sberrors.Internal, "local: snapshot of %s: %s", id, msg)
}

// copyErrText is err's text with the path of a *fs.PathError rewritten
// from a host path under one of roots ({host dir, sandbox name}) to the
// sandbox's, clipped in the middle; a path under none is left out.
func copyErrText(err error, roots [][2]string) string {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		s := err.Error()
		for _, r := range roots {
			s = strings.ReplaceAll(s, r[0], r[1])
		}
		return clipMiddle(s, 300)
	}
	p := ""
	for _, r := range roots {
		if rel, ok := strings.CutPrefix(pe.Path, r[0]); ok && (rel == "" || rel[0] == '/') {
			p = r[1] + rel
			break
		}
	}
	if p == "" {
		return pe.Op + ": " + pe.Err.Error()
	}
	return pe.Op + " " + clipMiddle(p, 200) + ": " + pe.Err.Error()
}

// clipMiddle shortens s to about n bytes, keeping its start and end.
func clipMiddle(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n/3] + "…" + s[len(s)-(n-n/3):]
}

// freezeMark names the file, in a sandbox's directory, that records a
// freeze for a snapshot or fork while it lasts: "<pid> <start> <how>" of
// the process that froze the sandbox (its start time in clock ticks, so a
// reused pid is not taken for it) and how ("cgroup" or "signal"). It is
// written before the freeze and removed after the thaw, so that when that
// process dies in between (SIGKILL, OOM, a crash), any Runtime on the root
// sees that the freeze has no owner left and thaws the sandbox (see
// thawStale) instead of leaving it frozen for good.
const freezeMark = "frozen"

// freezeOwner is what a freezeMark file records.
type freezeOwner struct {
	pid   int
	start uint64
	how   string
}

func (r *Runtime) freezeMarkPath(id string) string { return filepath.Join(r.dir(id), freezeMark) }

// writeFreezeMark records that this process freezes sandbox id, how.
func (r *Runtime) writeFreezeMark(id, how string) error {
	pid := os.Getpid()
	p := r.freezeMarkPath(id)
	tmp := p + ".tmp-" + strconv.Itoa(pid)
	b := fmt.Appendf(nil, "%d %d %s\n", pid, procStart(pid), how)
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// readFreezeMark reads sandbox id's freeze record. has is false when
// there is none; a record that does not parse (a write cut short) has an
// owner no process matches.
func (r *Runtime) readFreezeMark(id string) (o freezeOwner, has bool) {
	b, err := os.ReadFile(r.freezeMarkPath(id))
	if err != nil {
		return o, !errors.Is(err, os.ErrNotExist)
	}
	f := strings.Fields(string(b))
	if len(f) == 3 {
		o.pid, _ = strconv.Atoi(f[0])
		o.start, _ = strconv.ParseUint(f[1], 10, 64)
		o.how = f[2]
	}
	return o, true
}

// frozen reports whether the sandbox's cgroup is frozen or freezing.
func (sc sandboxCgroups) frozen() bool {
	if sc.V2 != "" {
		if b, err := os.ReadFile(sc.V2 + "/cgroup.freeze"); err == nil && strings.TrimSpace(string(b)) == "1" {
			return true
		}
	}
	if fz := sc.V1["freezer"]; fz != "" {
		if b, err := os.ReadFile(fz + "/freezer.state"); err == nil && strings.TrimSpace(string(b)) != "THAWED" {
			return true
		}
	}
	return false
}

// freezeFor freezes sandbox m for a copy and returns what thaws it. The
// caller holds m's lock until it has thawed. The freeze is recorded first
// (freezeMark), so that it outlives no process that made it.
func (r *Runtime) freezeFor(ctx context.Context, m *meta) (thaw func(), err error) {
	if err := r.writeFreezeMark(m.ID, "cgroup"); err != nil {
		return nil, sberrors.Errorf(sberrors.Internal, "local: freezing %s for a snapshot: %w", m.ID, err)
	}
	unmark := func() { _ = os.Remove(r.freezeMarkPath(m.ID)) }
	ok, err := m.Cgroups.freeze(ctx, true)
	if err != nil {
		_, _ = m.Cgroups.freeze(context.WithoutCancel(ctx), false)
		unmark()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, sberrors.Errorf(sberrors.Internal, "local: freezing %s for a snapshot: %w", m.ID, err)
	}
	if ok {
		return func() {
			_, _ = m.Cgroups.freeze(context.WithoutCancel(ctx), false)
			unmark()
		}, nil
	}
	if !procAlive(m.AgentPID, m.AgentAt) {
		unmark()
		return func() {}, nil // no process: nothing writes
	}
	if err := r.writeFreezeMark(m.ID, "signal"); err != nil {
		unmark()
		return nil, sberrors.Errorf(sberrors.Internal, "local: stopping %s for a snapshot: %w", m.ID, err)
	}
	cont := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = agentCall(cctx, r.sock(m.ID), &request{Op: "cont"})
	}
	if err := agentCall(ctx, r.sock(m.ID), &request{Op: "stop"}); err != nil {
		cont() // the agent may have stopped some before failing
		unmark()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, sberrors.Errorf(sberrors.Internal, "local: stopping %s for a snapshot: %w", m.ID, err)
	}
	return func() { cont(); unmark() }, nil
}

// thawStale thaws sandbox m when a freeze for a snapshot or fork outlived
// the process that made it: its freezeMark names a process gone, or, with
// full (the reaper, Get, Resume), its cgroup is frozen while its state
// is not paused. The check without a stale record costs a failed open
// (and with full, a read of the cgroup's freeze state); the thaw itself
// happens under the sandbox's lock, which every freeze holds while it
// lasts, so it never undoes a live snapshot's freeze nor a Pause.
func (r *Runtime) thawStale(ctx context.Context, m *meta, full bool) {
	o, has := r.readFreezeMark(m.ID)
	switch {
	case has && procAlive(o.pid, o.start):
		return // a live snapshot or fork: it thaws when done
	case has:
	case full && m.State != driver.StatePaused && m.Cgroups.frozen():
	default:
		return
	}
	l, err := r.lockCtx(ctx, m.ID)
	if err != nil {
		return
	}
	defer l.unlock()
	lm, err := l.read(m.ID)
	if err != nil {
		return
	}
	r.thawStaleLocked(ctx, lm)
	*m = *lm
}

// thawStaleLocked is thawStale's work, with m's lock held: no freeze of a
// live snapshot can be under way, so a freeze record is stale, and so is
// a frozen cgroup unless the sandbox is paused.
func (r *Runtime) thawStaleLocked(ctx context.Context, m *meta) {
	o, has := r.readFreezeMark(m.ID)
	if has && procAlive(o.pid, o.start) && o.pid != os.Getpid() {
		return // cannot be with the lock held; never undo a live freeze
	}
	if m.State == driver.StatePaused {
		// Paused since: the pause owns the freeze now.
		if has {
			_ = os.Remove(r.freezeMarkPath(m.ID))
		}
		return
	}
	if !has && !m.Cgroups.frozen() {
		return
	}
	r.log.Warn("sandbox/local: thawing a sandbox left frozen by an interrupted snapshot or fork", "id", m.ID)
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, _ = m.Cgroups.freeze(tctx, false)
	if has && o.how == "signal" && procAlive(m.AgentPID, m.AgentAt) {
		_ = agentCall(tctx, r.sock(m.ID), &request{Op: "cont"})
	}
	if has {
		_ = os.Remove(r.freezeMarkPath(m.ID))
	}
}

// thawStaleAll runs thawStale (full) on every sandbox under the root: at
// the Runtime's start and on each pass of its reaper.
func (r *Runtime) thawStaleAll(ctx context.Context) {
	ents, err := os.ReadDir(r.root)
	if err != nil {
		return
	}
	for _, e := range ents {
		if ctx.Err() != nil {
			return
		}
		if !e.IsDir() || !idRE.MatchString(e.Name()) {
			continue
		}
		if m, err := r.readMeta(e.Name()); err == nil {
			r.thawStale(ctx, m, true)
		}
	}
}

// readSnap reads a snapshot's meta.json.
func (r *Runtime) readSnap(id string) (*snapMeta, error) {
	if !snapRE.MatchString(id) {
		return nil, snapNotFound(id)
	}
	b, err := os.ReadFile(r.snapMetaPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, snapNotFound(id)
	}
	if err != nil {
		return nil, sberrors.Errorf(sberrors.Internal, "local: snapshot %s: %w", id, err)
	}
	var sm snapMeta
	if err := json.Unmarshal(b, &sm); err != nil {
		return nil, sberrors.Errorf(sberrors.Internal, "local: snapshot %s: corrupt metadata: %v", id, err)
	}
	return &sm, nil
}

// GetSnapshot describes a snapshot.
func (r *Runtime) GetSnapshot(_ context.Context, id string) (driver.SnapshotInfo, error) {
	sm, err := r.readSnap(id)
	if err != nil {
		return driver.SnapshotInfo{}, err
	}
	return sm.Info, nil
}

// ListSnapshots pages through the snapshots in id order (which is
// creation order); the token is the last id returned.
func (r *Runtime) ListSnapshots(ctx context.Context, req *driver.ListSnapshotsRequest) ([]driver.SnapshotInfo, string, error) {
	ents, err := os.ReadDir(r.snapRoot())
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", sberrors.Errorf(sberrors.Internal, "local: list snapshots: %w", err)
	}
	var out []driver.SnapshotInfo
	for _, e := range ents {
		id := e.Name()
		if !e.IsDir() || !snapRE.MatchString(id) || (req.PageToken != "" && id <= req.PageToken) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, "", err
		}
		sm, err := r.readSnap(id)
		if err != nil {
			if sberrors.CodeOf(err) != sberrors.NotFound {
				r.log.Warn("sandbox/local: skipping snapshot", "id", id, "err", err)
			}
			continue
		}
		if !labelsMatch(sm.Info.Labels, req.Labels) {
			continue
		}
		out = append(out, sm.Info)
		if req.PageSize > 0 && len(out) == req.PageSize {
			return out, id, nil
		}
	}
	return out, "", nil
}

// DeleteSnapshot removes a snapshot; one already gone is not an error.
func (r *Runtime) DeleteSnapshot(_ context.Context, id string) error {
	if !snapRE.MatchString(id) {
		return nil
	}
	trash := filepath.Join(r.snapRoot(), ".trash-"+id+"-"+strconv.Itoa(os.Getpid()))
	if err := os.Rename(r.snapPath(id), trash); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return sberrors.Errorf(sberrors.Internal, "local: delete snapshot %s: %w", id, err)
	}
	if err := removeAll(trash); err != nil {
		return sberrors.Errorf(sberrors.Internal, "local: delete snapshot %s: %w", id, err)
	}
	return nil
}

// removeAll removes dir, making read-only directories in it writable
// first when that is what stopped it.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// sweepSnapshots removes what interrupted snapshots and deletes left.
func (r *Runtime) sweepSnapshots() {
	ents, err := os.ReadDir(r.snapRoot())
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if (strings.HasPrefix(name, ".tmp-") || strings.HasPrefix(name, ".trash-")) && !young(filepath.Join(r.snapRoot(), name)) {
			_ = removeAll(filepath.Join(r.snapRoot(), name))
		}
	}
}

// restoreSrc is where a new sandbox's writable files are copied from: a
// snapshot, or a live sandbox being forked.
type restoreSrc struct {
	what      string // "snapshot <id>" or "sandbox <id>", for errors
	home, tmp string // host paths; tmp "" when there is none
	uid       int    // the host uid of the source's user
	template  string
}

// snapSource is the restore source of snapshot sm.
func (r *Runtime) snapSource(sm *snapMeta) *restoreSrc {
	src := &restoreSrc{what: "snapshot " + sm.Info.ID, home: filepath.Join(r.snapPath(sm.Info.ID), "home"), uid: sm.UID, template: sm.Info.Template}
	if sm.Tmp {
		src.tmp = filepath.Join(r.snapPath(sm.Info.ID), "tmp")
	}
	return src
}

// restoreHome fills the new sandbox m's home (and, below L3, its
// temporary directory) from src, before its agent starts.
func (r *Runtime) restoreHome(ctx context.Context, m *meta, src *restoreSrc) error {
	cp := newCopier(src.uid, r.uidOf(m))
	if err := cp.tree(ctx, src.home, r.home(m.ID)); err != nil {
		return err
	}
	if src.tmp != "" && m.Level < L3 {
		return cp.tree(ctx, src.tmp, filepath.Join(r.dir(m.ID), "tmp"))
	}
	return nil
}

// restoreTmp fills the /tmp of a new sandbox m at L3 or L4 from src,
// once its agent runs.
func (r *Runtime) restoreTmp(ctx context.Context, m *meta, src *restoreSrc) error {
	if src.tmp == "" || m.Level < L3 {
		return nil
	}
	dst := r.tmpOf(m)
	if dst == "" {
		return nil
	}
	cp := newCopier(src.uid, r.uidOf(m))
	if os.Getuid() == 0 {
		// The tmpfs belongs to the sandbox's user namespace, where the
		// host's root has no uid: files are made as the sandbox's user.
		do, stop := asWorker(&creds{uid: r.uid, gid: r.gid})
		defer stop()
		cp.do = do
	}
	return cp.tree(ctx, src.tmp, dst)
}

// forkParallel bounds how many children Fork makes at once: the copies
// share one disk.
const forkParallel = 4

// Fork makes n sandboxes whose writable files start as copies of sandbox
// id's, copied straight from it while it is frozen (no snapshot in
// between, so each byte is copied once per child). A paused sandbox stays
// paused, a running one runs on. It returns every sandbox it made; a
// child that failed is destroyed and its error joined; when ctx ends, it
// destroys them all. A child of a sandbox behind its egress proxy is
// behind its own, whatever policy it gets, never on pasta.
func (r *Runtime) Fork(ctx context.Context, id string, n int, req *driver.CreateRequest) ([]driver.Info, error) {
	netMode, netNote, err := r.networkFor(req)
	if err != nil {
		return nil, err
	}
	if req.NoNetwork && r.level < L2 {
		return nil, sberrors.Errorf(sberrors.FailedPrecondition,
			"local: NoNetwork needs isolation L2 or higher (a network namespace or seccomp); this Runtime gives %s", r.level.Describe())
	}
	select {
	case <-r.stop:
		return nil, sberrors.ErrClosed
	default:
	}
	if !idRE.MatchString(id) {
		return nil, notFound(r, id)
	}
	l, err := r.lock(id)
	if err != nil {
		return nil, err
	}
	defer l.unlock()
	m, err := l.read(id)
	if err != nil {
		return nil, err
	}
	if m.netMode() == netProxy && netMode == NetworkIsolated {
		// The source runs behind its egress proxy (an allow-all put there
		// by SetNetwork, or brokered secrets the caller did not pass on):
		// its children do too, with their own policy, rather than get
		// pasta, which filters no private range. A child is never more
		// open than its source.
		r2 := *req
		if r2.Network == nil {
			r2.Network = &driver.NetworkPolicy{Mode: driver.NetworkAllowAll}
		}
		req, netMode, netNote = &r2, netProxy, ""
	}
	if m.State != driver.StatePaused {
		thaw, err := r.freezeFor(ctx, m)
		if err != nil {
			return nil, err
		}
		defer thaw()
	}
	src := &restoreSrc{what: "sandbox " + id, home: r.home(id), tmp: r.tmpOf(m), uid: r.uidOf(m), template: m.Template}
	infos := make([]driver.Info, n)
	errs := make([]error, n)
	sem := make(chan struct{}, forkParallel)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			in, err := r.create(ctx, req, src, netMode, netNote)
			if err != nil {
				if in.ID != "" {
					_ = r.Destroy(context.WithoutCancel(ctx), in.ID)
				}
				errs[i] = fmt.Errorf("local: fork child %d of %s: %w", i, id, err)
				return
			}
			infos[i] = in
		})
	}
	wg.Wait()
	var made []driver.Info
	for _, in := range infos {
		if in.ID != "" {
			made = append(made, in)
		}
	}
	if ctx.Err() != nil {
		for _, in := range made {
			_ = r.Destroy(context.WithoutCancel(ctx), in.ID)
		}
		return nil, ctx.Err()
	}
	return made, errors.Join(errs...)
}

// snapRestoreErr classifies a failed restore: the snapshot deleted
// meanwhile is NotFound.
func snapRestoreErr(ctx context.Context, id string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("local: create from snapshot %s: %w (%v)", id, sberrors.ErrNotFound, err)
	}
	return sberrors.Errorf(sberrors.Internal, "local: create from snapshot %s: %v", id, err)
}
