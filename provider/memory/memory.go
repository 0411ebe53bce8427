// Package memory is an in-memory sandbox provider for unit tests, like
// gocloud's memblob or testing/fstest.MapFS. Files live in maps, shell
// lines run in a real POSIX shell interpreter over those files, commands
// can be answered by Handlers you register, every call is recorded for
// assertions, faults can be injected, and Live counts the sandboxes nothing
// has destroyed yet. It isolates nothing and starts no process: do not use
// it in production.
//
// # Commands
//
// A shell line (Command.Shell, or an argv "sh -c line [name args...]" or
// "bash -c ...") runs in mvdan.cc/sh/v3's interpreter: pipes,
// redirections, $(…), functions, control flow, globbing and the shell's
// builtins (echo, printf, test/[, cd, pwd, read, set, exit, ...) all work,
// and every file it opens, stats or lists is the sandbox's. Each simple
// command that is not a builtin goes, in order, to the Handler registered
// for its name (or base name), to a script file in the sandbox when the
// name holds a slash (no "#!" line, or one naming sh or bash), or to one of
// the utilities below; any other name exits 127 with "name: command not
// found" on stderr, as shells do. An argv without a shell goes through the
// same steps. HandleShell handlers see whole lines first.
//
// The utilities work on the sandbox's files and take the options listed
// (GNU spellings; an option not listed is refused or ignored):
//
//	cat [-] FILE...            head/tail [-n N|-N|-c N] [FILE]
//	ls [-1aAld] [PATH...]      wc [-clw] [FILE...]
//	mkdir [-p] [-m MODE] DIR   sort [-nru] [FILE...]
//	rm [-rRfd] PATH...         tee [-a] FILE...
//	rmdir DIR...               sleep N[smh]...
//	mv [-fT] SRC... DST        printenv [NAME...]
//	cp [-rRa] SRC... DST       env [-i] [K=V...] [CMD ARGS...]
//	ln -s [-fn] TARGET NAME    basename, dirname, true, false, yes
//	base64 [-d] [-w N] [FILE]   sha256sum [FILE...]
//	readlink [-f|-e|-m] [-n]   realpath [-e|-m] PATH...
//	chmod MODE|u+x,... PATH    touch FILE...
//	mktemp [-d] [-p DIR] [TEMPLATE]
//	stat [-L] [-c FORMAT] PATH (%n %s %i %h %d %a %A %F %Y %u %U ...)
//	find ROOT... EXPR: ! ( ) -a -o, -name -iname -path -type f|d|l -inum
//	     -links -size -empty -prune -mindepth -maxdepth -xdev, -print
//	     -print0 -printf -fprint -fprint0 -fprintf -exec ... ; or {} +
//	     (-printf: %p %P %f %h %s %y %Y %T@ %i %n %m %M %d %D %l %u %U)
//	grep [-rRnIFEivclqhHsZwx] [--null] [-m N] [-D skip] [--label=NAME]
//	     [--exclude-dir=PAT] [--include=PAT] [-e PAT]... [PAT] [PATH...]
//	tar -c|-x|-t [-f FILE] [-C DIR] [--exclude=PAT] [-X FILE]
//	     [--no-wildcards] [-T FILE [--null]] [PATH...]
//	sh, bash, dash [-eux] (-c LINE [NAME ARGS...] | FILE [ARGS...])
//	echo, printf, pwd, test, [ (the shell's builtins, also as an argv)
//	stty size (on an emulated terminal: see StartTerminal)
//
// These are what the module's own programs use: fsbackend's helper
// (mkdir, cat, head -c, readlink, rm, chmod, find -printf, grep, tar,
// mktemp, cd -P, pwd -P) and the conformance suite (echo, cat, printenv,
// pwd, sleep, sh), and the Daytona adapter's exec wrapper (exec N>FILE,
// stat -c %s, base64) so its fake runs over this provider. The interpreter's
// gaps are filled for scripts: "exec N<FILE", "exec N>FILE", "exec N<>FILE",
// "exec N<&-", "<&N" and ">&N" for descriptors above 2, a command's own
// "N>&-" (nothing to close: commands inherit no descriptor above 2), set -C (noclobber), and a bare return keeping the last status;
// "command -v" and "type" answer from the builtins, Handlers and utilities
// (a utility or Handler shows as /usr/bin/NAME), never the host's PATH.
// The file system has symbolic links; hard links are refused (ln without
// -s fails), so every file has a link count of 1. Each file has a stable
// inode number (kept across writes and renames) and the sandbox one device
// number, as stat -c '%d %i %h', find -printf '%D %i %n' and test X -ef Y
// see them. Permission bits are honoured for the
// sandbox's user, who owns every file (chmod 000 makes a file unreadable)
// except the read-only system directories of ReadOnlyDirs (/etc, /usr...),
// owned by root: writing there is PermissionDenied, for commands and the
// file API alike.
// There is no network. A network policy (CreateOptions.Network) is
// accepted whatever it says, recorded, reported in Info and shown to
// Handlers in Call.Network, and never enforced: Capabilities.NetworkPolicy
// declares every kind with NotEnforced set, so code can tell. Brokered
// secrets (CreateOptions.BrokeredSecrets) are accepted the same way: their
// hosts, header and placeholder are recorded, reported by Get and shown to
// Handlers in Call.Secrets; the value is dropped at Create and never
// stored, so no file, env variable or command output of a memory sandbox
// can hold it. The sandbox's env holds the placeholder, as on every
// provider.
//
// Processes, signals and /proc do not exist; the run package, which needs
// real processes, does not work over memory.
//
// # Snapshots
//
// The Runtime is a driver.Snapshotter in filesystem mode: a snapshot is a
// deep copy of a sandbox's files (bytes, modes, times, directories and
// symbolic links; inode numbers are new), taken of a running or paused
// sandbox alike, kept in the Runtime until DeleteSnapshot and outliving
// the sandbox. A sandbox created from it (CreateRequest.FromSnapshot)
// starts with a copy of those files and the snapshot's template. Handlers
// belong to the Runtime, not to a sandbox, so every sandbox sees the same
// ones; the env of the source and its background processes are not kept.
// Fork goes through the portable layer's snapshot and creates.
//
// # URLs
//
// "memory://" opens a fresh Runtime; "memory://name" opens the Runtime
// shared by every Open of that name in the process.
//
// # Directory watch and process list
//
// Watch is fed by the fake's file system itself: every change its file
// methods and its shell make is reported, as it is made, under the same
// lock. Processes lists its background processes (Start), each a handle.
package memory

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/opts"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Scheme is the URL scheme the package registers with sandbox.Open.
const Scheme = "memory"

// Home is the home directory of every memory sandbox.
const Home = "/home/user"

// ReadOnlyDirs are the system directories every memory sandbox has, empty
// and owned by root (mode 0755) as in the images of the real providers:
// the sandbox's user, and so its commands and the file API alike, can list
// them but not create, replace, rename or remove anything in them, nor
// chmod them; such a write fails with an error matching
// sberrors.ErrPermission (PermissionDenied), as on local at L2-L4, E2B and
// Daytona. Everything else is the user's.
var ReadOnlyDirs = []string{"/etc", "/usr", "/usr/bin", "/usr/local", "/usr/local/bin"}

// The operation names used by Calls and FailNext.
const (
	OpCreate     = "create"
	OpGet        = "get"
	OpList       = "list"
	OpDestroy    = "destroy"
	OpSetTimeout = "set-timeout"
	OpExec       = "exec"
	OpStart      = "start"
	OpAttach     = "attach"
	OpUpload     = "upload"
	OpDownload   = "download"
	OpStat       = "stat"
	OpReadDir    = "readdir"
	OpMkdir      = "mkdir"
	OpRemove     = "remove"
	OpRename     = "rename"
	OpPause      = "pause"
	OpResume     = "resume"
	OpSetNetwork = "set-network"
)

// Handler answers a command and returns its exit code. It writes output to
// c.Stdout and c.Stderr, reads c.Stdin, may use c.Files, and must return
// when ctx ends (the command's timeout or the caller's cancellation).
type Handler func(ctx context.Context, c *Call) int

// Call is one command as a Handler sees it.
type Call struct {
	SandboxID string
	// Args is the argv; for a shell line, the words of one simple command.
	Args []string
	// Shell is the whole line for a handler registered with HandleShell.
	Shell string
	// Positional holds $0, $1, ... of a line run as
	// ["sh", "-c", line, name, args...]; empty otherwise.
	Positional []string
	Dir        string
	Env        map[string]string
	Stdin      io.Reader
	Stdout     io.Writer
	Stderr     io.Writer
	// Files reads and writes the sandbox's files.
	Files *Files
	// Network is the sandbox's network policy as recorded when the
	// command started (nil when none was given), so that a Handler
	// standing in for a network client can act on it. The memory provider
	// itself has no network and enforces nothing.
	Network *driver.NetworkPolicy
	// Secrets are the sandbox's brokered secrets as recorded at Create:
	// Hosts, Header and Placeholder, with Value and Format empty (the
	// memory provider never keeps a value).
	Secrets []driver.BrokeredSecret

	bash bool // Shell is bash syntax
}

// Record is one recorded call to the Runtime.
type Record struct {
	Op        string
	SandboxID string
	// Path is the file path, or for exec and start the argv joined by
	// spaces or the shell line.
	Path string
	Err  error
}

type node struct {
	data  []byte // a symbolic link's target for a link
	mode  fs.FileMode
	mtime time.Time
	ino   uint64 // set on first use: see inode
	root  bool   // owned by root, not the sandbox's user (see ReadOnlyDirs)
}

type box struct {
	info      driver.Info
	env       map[string]string
	auto      bool
	rootFiles bool // the file methods act as root (WithRootFileAccess)
	files     map[string]*node
	procs     map[int]*proc
	execs     map[*liveExec]struct{} // running Execs, ended with the sandbox
	watches   map[*watch]struct{}    // running Watches (watch.go)
}

// liveExec is a running Exec. Ending its sandbox (Destroy, the end of the
// lease) ends it, as the real services end every command of a sandbox
// they stop: the Exec fails with ErrOutcomeUnknown, as a connection to a
// sandbox that went away does.
type liveExec struct {
	lost    context.CancelCauseFunc
	timer   *time.Timer
	stopped bool
}

// errSandboxEnded is the cause a running Exec is ended with when its
// sandbox ends.
var errSandboxEnded = errors.New("the sandbox ended while the command ran")

// endExecsLocked ends the running Execs of b.
func endExecsLocked(b *box) {
	for e := range b.execs {
		e.lost(errSandboxEnded)
		delete(b.execs, e)
	}
}

// trackExec registers a running Exec of sandbox id, and arms a timer that
// ends the lease (and with it the Exec) when it runs out while the Exec
// runs. stop unregisters it.
func (r *Runtime) trackExec(id string, lost context.CancelCauseFunc) (stop func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.boxes[id]
	if !ok {
		lost(errSandboxEnded)
		return func() {}
	}
	return r.trackLocked(id, b, lost)
}

// trackLocked is trackExec for sandbox b, with r.mu held.
func (r *Runtime) trackLocked(id string, b *box, lost context.CancelCauseFunc) (stop func()) {
	e := &liveExec{lost: lost}
	if b.execs == nil {
		b.execs = map[*liveExec]struct{}{}
	}
	b.execs[e] = struct{}{}
	r.armLocked(id, b, e)
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		e.stopped = true
		if e.timer != nil {
			e.timer.Stop()
		}
		delete(b.execs, e)
	}
}

// armLocked sets e's timer for the end of b's lease; when it fires, the
// leases are enforced and, if b lives on (its lease was extended), the
// timer is set again for the new end.
func (r *Runtime) armLocked(id string, b *box, e *liveExec) {
	if b.info.LeaseEnd.IsZero() {
		return
	}
	e.timer = time.AfterFunc(max(b.info.LeaseEnd.Sub(r.now()), 0), func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if e.stopped {
			return
		}
		r.expireLocked()
		if _, live := b.execs[e]; live && r.boxes[id] == b {
			r.armLocked(id, b, e)
		}
	})
}

type fault struct {
	n   int
	err error
}

// Runtime is the in-memory provider. It is safe for concurrent use.
type Runtime struct {
	now       func() time.Time
	rootFiles bool  // WithRootFileAccess
	badOpts   error // the invalid options given to New: every call fails with it

	mu       sync.Mutex
	boxes    map[string]*box
	handlers map[string]Handler
	shells   []shellHandler
	faults   map[string]*fault
	calls    []Record
	nextPID  int
	terms    map[string]*mterm // running terminals by "sandbox/terminal"
	// ended holds when the lease of each sandbox the lease ended (not
	// Destroy) ended, so that a later call on it says why it is gone;
	// at most maxEnded of them, the oldest forgotten first.
	ended      map[string]time.Time
	endedOrder []string
	snaps      map[string]*memSnap // by id (see Snapshot)
}

// maxEnded bounds Runtime.ended.
const maxEnded = 1024

type shellHandler struct {
	match func(line string) bool
	h     Handler
}

// Option configures a Runtime. New cannot fail: an option given an
// invalid value makes every call of the Runtime fail with an
// InvalidArgument error naming the option.
type Option func(*options)

// options are what the Options set.
type options struct {
	now       func() time.Time
	rootFiles bool
	bad       opts.Errors
}

// WithRootFileAccess makes the file methods (Upload, MkdirAll, Remove,
// Rename) act with root's rights, as the file daemons of some services do
// (E2B's envd writes as root and hands what it creates to the requested
// user): they write in the read-only system directories of ReadOnlyDirs,
// and what they create belongs to the sandbox's user. Commands keep the
// user's rights. It lets a fake of such a service (e2bfake) answer as the
// real daemon does.
func WithRootFileAccess() Option {
	return func(o *options) { o.rootFiles = true }
}

// WithClock sets the clock used for leases and timestamps. It must not be
// nil.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now == nil {
			o.bad.Invalid("WithClock", "nil clock")
			return
		}
		o.now = now
	}
}

// New returns an empty Runtime.
func New(opts ...Option) *Runtime {
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	return &Runtime{now: o.now, rootFiles: o.rootFiles, badOpts: o.bad.Err("memory"), boxes: map[string]*box{}, handlers: map[string]Handler{},
		faults: map[string]*fault{}, nextPID: 100}
}

var (
	namedMu sync.Mutex
	named   = map[string]*Runtime{}
)

func init() {
	driver.Register(Scheme, func(_ context.Context, u *url.URL, _ driver.OpenOptions) (driver.Runtime, error) {
		if len(u.Query()) > 0 {
			return nil, sberrors.Errorf(sberrors.InvalidArgument, "memory: URL takes no query parameters")
		}
		if u.Host == "" {
			return New(), nil
		}
		namedMu.Lock()
		defer namedMu.Unlock()
		if r, ok := named[u.Host]; ok {
			return r, nil
		}
		r := New()
		named[u.Host] = r
		return r, nil
	})
}

// Handle registers h for commands whose program (argv[0], or its base
// name) is name. It replaces a built-in of the same name.
func (r *Runtime) Handle(name string, h Handler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handlers[name] = h
}

// HandleShell registers h for shell lines for which match returns true; h
// receives the whole line in Call.Shell. Shell handlers are tried in
// registration order before the built-in shell.
func (r *Runtime) HandleShell(match func(line string) bool, h Handler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shells = append(r.shells, shellHandler{match, h})
}

// FailNext makes the next n calls of op (OpExec, OpUpload, ...) fail with
// err before doing anything; for example sberrors.ErrStaleTransport to test a
// retry path.
func (r *Runtime) FailNext(op string, n int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults[op] = &fault{n: n, err: err}
}

// Calls returns every call recorded so far, in order.
func (r *Runtime) Calls() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// CallsOf returns the recorded calls of one operation.
func (r *Runtime) CallsOf(op string) []Record {
	var out []Record
	for _, c := range r.Calls() {
		if c.Op == op {
			out = append(out, c)
		}
	}
	return out
}

// Live returns how many sandboxes exist (running or paused).
func (r *Runtime) Live() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expireLocked()
	return len(r.boxes)
}

// begin records a call and returns an injected fault, if one is due.
func (r *Runtime) begin(op, id, p string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.badOpts
	if f := r.faults[op]; err == nil && f != nil && f.n > 0 {
		f.n--
		err = f.err
	}
	r.calls = append(r.calls, Record{Op: op, SandboxID: id, Path: p, Err: err})
	r.expireLocked()
	return err
}

// expireLocked ends or pauses sandboxes whose lease ran out.
func (r *Runtime) expireLocked() {
	now := r.now()
	for id, b := range r.boxes {
		if b.info.LeaseEnd.IsZero() || now.Before(b.info.LeaseEnd) {
			continue
		}
		endExecsLocked(b)
		if b.auto {
			b.info.State = driver.StatePaused
			b.info.LeaseEnd = time.Time{}
			continue
		}
		for _, p := range b.procs {
			p.cancel()
		}
		delete(r.boxes, id)
		endWatchesLocked(b, notFound(id))
		r.tombLocked(id, b.info.LeaseEnd)
	}
}

// tombLocked records that the lease of sandbox id ended at end.
func (r *Runtime) tombLocked(id string, end time.Time) {
	if r.ended == nil {
		r.ended = map[string]time.Time{}
	}
	if len(r.endedOrder) >= maxEnded {
		delete(r.ended, r.endedOrder[0])
		r.endedOrder = r.endedOrder[1:]
	}
	r.ended[id] = end
	r.endedOrder = append(r.endedOrder, id)
}

func notFound(id string) error {
	return fmt.Errorf("memory: sandbox %s: %w", id, sberrors.ErrNotFound)
}

// get returns a sandbox; live requires it to be running.
func (r *Runtime) get(id string, live bool) (*box, error) {
	b, ok := r.boxes[id]
	if !ok {
		if end, ended := r.ended[id]; ended {
			return nil, fmt.Errorf("memory: sandbox %s: %w", id, &driver.LeaseEndedError{End: end})
		}
		return nil, notFound(id)
	}
	if live && b.info.State == driver.StatePaused {
		return nil, fmt.Errorf("memory: sandbox %s: %w", id, sberrors.ErrPaused)
	}
	return b, nil
}

// Name returns "memory".
func (r *Runtime) Name() string { return Scheme }

// Capabilities reports what the fake supports.
func (r *Runtime) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		PauseKeepsMemory: true, ServerSideLabels: true,
		Isolation: "none (in-memory fake)", DefaultLease: 5 * time.Minute, ReportsLeaseEnd: true,
		ReportsSignal: true,
		SnapshotModes: []driver.SnapshotMode{driver.SnapshotFilesystem},
		// Every policy is accepted and recorded, none enforced: there is
		// no network to enforce it on. NotEnforced says so.
		NetworkPolicy: driver.NetworkSupport{
			AllowAll: true, DenyAll: true, AllowDomains: true, AllowWildcards: true, AllowCIDRs: true,
			DenyDomains: true, DenyCIDRs: true, DenyOverAllow: true, IPv6CIDRs: true, NotEnforced: true,
			BrokeredSecrets: true,
			Note:            "the memory provider records policies without enforcing them",
		},
	}
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "mem-" + hex.EncodeToString(b[:])
}

// Create makes a sandbox with an empty home directory, or with a copy of
// the files of snapshot req.FromSnapshot (see Snapshot).
func (r *Runtime) Create(ctx context.Context, req *driver.CreateRequest) (driver.Info, error) {
	if err := r.begin(OpCreate, "", req.Template); err != nil {
		return driver.Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return driver.Info{}, err
	}
	if len(req.Options) > 0 {
		return driver.Info{}, sberrors.Errorf(sberrors.InvalidArgument, "memory: unknown provider options %v", slices.Sorted(maps.Keys(req.Options)))
	}
	now := r.now()
	tmpl := req.Template
	if tmpl == "" {
		tmpl = "default"
	}
	b := &box{
		info: driver.Info{
			ID: newID(), Provider: Scheme, Template: tmpl, Labels: maps.Clone(req.Labels),
			State: driver.StateRunning, CreatedAt: now, LeaseEnd: now.Add(req.Timeout),
			Home: Home, Isolation: "none", Network: req.Network.Clone(), Secrets: recordSecrets(req.Secrets),
		},
		env: maps.Clone(req.Env), auto: req.AutoPause, rootFiles: r.rootFiles,
		files: map[string]*node{"/": dirNode(now), "/home": dirNode(now), Home: dirNode(now), "/tmp": dirNode(now)},
		procs: map[int]*proc{},
	}
	for _, d := range ReadOnlyDirs {
		b.files[d] = &node{mode: fs.ModeDir | 0o755, mtime: now, root: true}
	}
	r.mu.Lock()
	if req.FromSnapshot != "" {
		files, tmpl, err := r.snapshotFilesLocked(req.FromSnapshot)
		if err != nil {
			r.mu.Unlock()
			return driver.Info{}, err
		}
		b.files, b.info.Template = files, tmpl
	}
	r.boxes[b.info.ID] = b
	r.mu.Unlock()
	return cloneInfo(b.info), nil
}

func dirNode(t time.Time) *node { return &node{mode: fs.ModeDir | 0o755, mtime: t} }

func cloneInfo(in driver.Info) driver.Info {
	in.Labels = maps.Clone(in.Labels)
	in.Detail = maps.Clone(in.Detail)
	in.Network = in.Network.Clone()
	in.Secrets = recordSecrets(in.Secrets)
	return in
}

// recordSecrets copies brokered secrets without their values and formats.
func recordSecrets(in []driver.BrokeredSecret) []driver.BrokeredSecret {
	if len(in) == 0 {
		return nil
	}
	out := make([]driver.BrokeredSecret, len(in))
	for i, s := range in {
		out[i] = driver.BrokeredSecret{Hosts: slices.Clone(s.Hosts), Header: s.Header, Placeholder: s.Placeholder}
	}
	return out
}

// Get returns a sandbox's Info.
func (r *Runtime) Get(_ context.Context, id string) (in driver.Info, err error) {
	err = r.boxOp(OpGet, id, "", false, func(b *box) error {
		in = cloneInfo(b.info)
		return nil
	})
	return in, err
}

// List pages through sandboxes sorted by creation, filtering by labels and
// states and leaving out req.ExcludeIDs before a page is filled; the page token is the id of the last sandbox of the previous page.
func (r *Runtime) List(_ context.Context, req *driver.ListRequest) ([]driver.Info, string, error) {
	if err := r.begin(OpList, "", ""); err != nil {
		return nil, "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	all := make([]driver.Info, 0, len(r.boxes))
	for _, b := range r.boxes {
		all = append(all, b.info)
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].CreatedAt.Equal(all[j].CreatedAt) {
			return all[i].CreatedAt.Before(all[j].CreatedAt)
		}
		return all[i].ID < all[j].ID
	})
	// The token is a position (creation time and id of the last sandbox
	// returned), so paging goes on when that sandbox is destroyed meanwhile.
	start := 0
	if req.PageToken != "" {
		t, id, ok := parseToken(req.PageToken)
		if !ok {
			return nil, "", sberrors.Errorf(sberrors.InvalidArgument, "memory: malformed page token %q", req.PageToken)
		}
		start = sort.Search(len(all), func(i int) bool {
			return all[i].CreatedAt.After(t) || (all[i].CreatedAt.Equal(t) && all[i].ID > id)
		})
	}
	var page []driver.Info
	next := ""
	for _, in := range all[start:] {
		if !labelsMatch(in.Labels, req.Labels) || (len(req.States) > 0 && !slices.Contains(req.States, in.State)) ||
			slices.Contains(req.ExcludeIDs, in.ID) {
			continue
		}
		if req.PageSize > 0 && len(page) == req.PageSize {
			last := page[len(page)-1]
			next = fmt.Sprintf("%d/%s", last.CreatedAt.UnixNano(), last.ID)
			break
		}
		page = append(page, cloneInfo(in))
	}
	return page, next, nil
}

func parseToken(tok string) (time.Time, string, bool) {
	ns, id, ok := strings.Cut(tok, "/")
	if !ok {
		return time.Time{}, "", false
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return time.Time{}, "", false
	}
	return time.Unix(0, n), id, true
}

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Destroy removes a sandbox and ends its processes; a missing one is fine.
func (r *Runtime) Destroy(_ context.Context, id string) error {
	if err := r.begin(OpDestroy, id, ""); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.boxes[id]; ok {
		for _, p := range b.procs {
			p.cancel()
		}
		endExecsLocked(b)
		endWatchesLocked(b, notFound(id))
		delete(r.boxes, id)
	}
	return nil
}

// SetTimeout sets the lease to end d from now.
func (r *Runtime) SetTimeout(_ context.Context, id string, d time.Duration) error {
	return r.boxOp(OpSetTimeout, id, d.String(), false, func(b *box) error {
		b.info.LeaseEnd = r.now().Add(d)
		return nil
	})
}

// SetNetwork records p as the sandbox's network policy: Get reports it
// and Handlers see it in Call.Network. Nothing is enforced.
func (r *Runtime) SetNetwork(_ context.Context, id string, p *driver.NetworkPolicy) error {
	return r.boxOp(OpSetNetwork, id, string(p.Mode), false, func(b *box) error {
		b.info.Network = p.Clone()
		return nil
	})
}

// Pause marks the sandbox paused: commands and file calls fail with
// sberrors.ErrPaused until Resume. Background processes keep their state.
func (r *Runtime) Pause(_ context.Context, id string) error {
	return r.boxOp(OpPause, id, "", false, func(b *box) error {
		b.info.State = driver.StatePaused
		return nil
	})
}

// Resume marks the sandbox running and gives it the default lease when its
// lease had run out.
func (r *Runtime) Resume(_ context.Context, id string) (in driver.Info, err error) {
	err = r.boxOp(OpResume, id, "", false, func(b *box) error {
		b.info.State = driver.StateRunning
		if b.info.LeaseEnd.IsZero() || !r.now().Before(b.info.LeaseEnd) {
			b.info.LeaseEnd = r.now().Add(r.Capabilities().DefaultLease)
		}
		in = cloneInfo(b.info)
		return nil
	})
	return in, err
}

func cmdText(cmd *driver.Command) string {
	if cmd.Shell != "" {
		return cmd.Shell
	}
	return strings.Join(cmd.Args, " ")
}

// newCall prepares a Call for cmd in sandbox b.
func (r *Runtime) newCall(id string, b *box, cmd *driver.Command, stdout, stderr io.Writer) *Call {
	env := map[string]string{"HOME": Home, "PATH": "/usr/local/bin:/usr/bin:/bin", "USER": "user"}
	maps.Copy(env, b.env)
	maps.Copy(env, cmd.Env)
	var stdin io.Reader = bytes.NewReader(nil)
	if cmd.Stdin != nil {
		stdin = cmd.Stdin
	}
	return &Call{SandboxID: id, Args: slices.Clone(cmd.Args), Shell: cmd.Shell, Dir: cmd.Dir, Env: env,
		Stdin: stdin, Stdout: stdout, Stderr: stderr, Files: &Files{rt: r, id: id, dir: cmd.Dir},
		Network: b.info.Network.Clone(), Secrets: recordSecrets(b.info.Secrets)}
}

// Exec runs cmd through the registered handlers or the built-in shell.
func (r *Runtime) Exec(ctx context.Context, id string, cmd *driver.Command) (driver.ExitStatus, error) {
	if err := r.begin(OpExec, id, cmdText(cmd)); err != nil {
		return driver.ExitStatus{}, err
	}
	r.mu.Lock()
	b, err := r.get(id, true)
	if err == nil {
		err = checkDir(b, cmd.Dir)
	}
	var c *Call
	var out *outPipe
	if err == nil {
		out = newOutPipe()
		c = r.newCall(id, b, cmd, out.writer(cmd.Stdout), out.writer(cmd.Stderr))
	}
	r.mu.Unlock()
	if err != nil {
		return driver.ExitStatus{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, cmd.Timeout)
	defer cancel()
	lctx, lost := context.WithCancelCause(cctx)
	defer lost(nil)
	stop := r.trackExec(id, lost)
	code := r.runTop(lctx, c)
	stop()
	out.close() // what the command wrote reaches the caller, even past ctx's end
	if ctx.Err() != nil {
		return driver.ExitStatus{ExitCode: -1}, ctx.Err()
	}
	if context.Cause(lctx) == errSandboxEnded {
		return driver.ExitStatus{ExitCode: -1}, fmt.Errorf("memory: sandbox %s: %w: %w", id, errSandboxEnded, sberrors.ErrOutcomeUnknown)
	}
	if cctx.Err() != nil {
		return driver.ExitStatus{ExitCode: -1, TimedOut: true}, nil
	}
	return driver.ExitStatus{ExitCode: code}, nil
}

// checkDir checks a command's working directory: missing is NotFound, a
// file is ErrNotDirectory, as on every provider.
func checkDir(b *box, dir string) error {
	if err := checkLength("chdir", dir); err != nil {
		return err
	}
	_, n, err := walkLocked(b, dir, true)
	switch {
	case errors.Is(err, syscall.ENOTDIR):
		return &fs.PathError{Op: "chdir", Path: dir, Err: sberrors.ErrNotDirectory}
	case err != nil || n == nil:
		return &fs.PathError{Op: "chdir", Path: dir, Err: sberrors.ErrNotFound}
	case !n.mode.IsDir():
		return &fs.PathError{Op: "chdir", Path: dir, Err: sberrors.ErrNotDirectory}
	}
	return nil
}

// runTop runs a command of Exec or Start. Its stdin goes through a pipe
// that the command's end closes, so a program reading a stdin that never
// ends (cat) returns when the command times out or is cancelled, and no
// Read of the caller's reader starts after that.
func (r *Runtime) runTop(ctx context.Context, c *Call) int {
	if in, stop := shellStdin(ctx, c.Stdin, false); in != nil {
		defer stop()
		cc := *c
		cc.Stdin = in
		c = &cc
	}
	return r.run(ctx, c)
}

// run dispatches a whole command: a shell line (through the shell
// handlers, then the interpreter) or an argv.
func (r *Runtime) run(ctx context.Context, c *Call) int {
	if c.Shell == "" && len(c.Args) == 0 {
		return 0 // sh -c ""
	}
	if c.Shell != "" {
		r.mu.Lock()
		shells := slices.Clone(r.shells)
		r.mu.Unlock()
		for _, s := range shells {
			if s.match(c.Shell) {
				return s.h(ctx, c)
			}
		}
		return r.runShell(ctx, c, c.Shell, c.bash)
	}
	return r.dispatch(ctx, c)
}

// dispatch runs one argv: a registered Handler (by name or base name), a
// script file in the sandbox for a name holding a slash, then a utility.
// Anything else exits 127 with "name: command not found", as shells do.
func (r *Runtime) dispatch(ctx context.Context, c *Call) int {
	name := c.Args[0]
	r.mu.Lock()
	h, ok := r.handlers[name]
	if !ok {
		h, ok = r.handlers[path.Base(name)]
	}
	r.mu.Unlock()
	if ok {
		return h(ctx, c)
	}
	if strings.Contains(name, "/") {
		if code, ran := r.runScriptFile(ctx, c); ran {
			return code
		}
	}
	if h, ok := utilities[path.Base(name)]; ok {
		return h(ctx, c)
	}
	fmt.Fprintf(c.Stderr, "%s: command not found\n", name)
	return 127
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// proc is a background process.
type proc struct {
	pid    int
	cancel context.CancelFunc
	done   chan struct{}
	status driver.ExitStatus
	out    *fanout
	err    *fanout
	// killedBy is the signal Signal ended the process with; 0 until then.
	killedBy syscall.Signal
	// args is the command line and started the start time, for Processes.
	args    []string
	started time.Time
}

// fanout writes to the writers currently attached to a process.
type fanout struct {
	mu sync.Mutex
	ws map[int]io.Writer
}

func (f *fanout) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.ws {
		_, _ = w.Write(p)
	}
	return len(p), nil
}

func (f *fanout) add(key int, w io.Writer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ws[key] = w
}

func (f *fanout) remove(key int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ws, key)
}

// Start runs cmd in a goroutine that ends when the handler returns, the
// process is killed, its timeout expires or the sandbox is destroyed.
func (r *Runtime) Start(_ context.Context, id string, cmd *driver.Command) (driver.ProcessHandle, error) {
	if err := r.begin(OpStart, id, cmdText(cmd)); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.get(id, true)
	if err == nil {
		err = checkDir(b, cmd.Dir)
	}
	if err != nil {
		return nil, err
	}
	r.nextPID++
	p := &proc{pid: r.nextPID, done: make(chan struct{}), args: procArgs(cmd), started: r.now(),
		out: &fanout{ws: map[int]io.Writer{0: cmd.Stdout}}, err: &fanout{ws: map[int]io.Writer{0: cmd.Stderr}}}
	var pctx context.Context
	var cancel context.CancelFunc
	if cmd.Timeout > 0 {
		pctx, cancel = context.WithTimeout(context.Background(), cmd.Timeout)
	} else {
		pctx, cancel = context.WithCancel(context.Background())
	}
	p.cancel = cancel
	c := r.newCall(id, b, cmd, p.out, p.err)
	b.procs[p.pid] = p
	// The end of the lease ends the process as it ends an Exec.
	untrack := r.trackLocked(id, b, func(error) { cancel() })
	go func() {
		defer close(p.done)
		defer cancel()
		code := r.runTop(pctx, c)
		untrack()
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case p.killedBy != 0:
			p.status = driver.ExitStatus{ExitCode: -1, Signal: p.killedBy}
		case errors.Is(pctx.Err(), context.DeadlineExceeded):
			p.status = driver.ExitStatus{ExitCode: -1, TimedOut: true}
		case pctx.Err() != nil:
			p.status = driver.ExitStatus{ExitCode: -1}
		default:
			p.status = driver.ExitStatus{ExitCode: code}
		}
		if bb, ok := r.boxes[id]; ok {
			delete(bb.procs, p.pid)
		}
	}()
	return &handle{rt: r, p: p, key: 0}, nil
}

// Attach connects to a running background process by pid.
func (r *Runtime) Attach(_ context.Context, id string, pid int, stdout, stderr io.Writer) (driver.ProcessHandle, error) {
	if err := r.begin(OpAttach, id, fmt.Sprint(pid)); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.get(id, false)
	if err != nil {
		return nil, err
	}
	p, ok := b.procs[pid]
	if !ok {
		return nil, fmt.Errorf("memory: sandbox %s: process %d: %w", id, pid, sberrors.ErrNotFound)
	}
	r.nextPID++
	key := r.nextPID
	p.out.add(key, stdout)
	p.err.add(key, stderr)
	return &handle{rt: r, p: p, key: key}, nil
}

type handle struct {
	rt   *Runtime
	p    *proc
	key  int
	once sync.Once
}

func (h *handle) PID() int { return h.p.pid }

func (h *handle) Wait(ctx context.Context) (driver.ExitStatus, error) {
	select {
	case <-h.p.done:
		h.rt.mu.Lock()
		defer h.rt.mu.Unlock()
		return h.p.status, nil
	case <-ctx.Done():
		return driver.ExitStatus{}, ctx.Err()
	}
}

func (h *handle) Signal(_ context.Context, sig syscall.Signal) error {
	select {
	case <-h.p.done:
		return nil // exited: nothing to deliver
	default:
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM || sig == syscall.SIGINT {
		h.rt.mu.Lock()
		if h.p.killedBy == 0 {
			h.p.killedBy = sig
		}
		h.rt.mu.Unlock()
		h.p.cancel()
	}
	return nil
}

func (h *handle) Close() error {
	h.once.Do(func() {
		h.p.out.remove(h.key)
		h.p.err.remove(h.key)
	})
	return nil
}
