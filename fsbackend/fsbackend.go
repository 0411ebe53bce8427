// Package fsbackend implements backend.Backend over a *sandbox.Sandbox:
// the ls, read, write, edit, glob, grep and execute tools of an agent,
// jailed to one workspace directory inside the sandbox.
//
// # Workspace
//
// Options.BaseDir names the workspace. When it is empty the backend asks
// the sandbox for $HOME once (one round trip, repeated only after a
// transport reset) and uses $HOME/workspace, or FallbackBaseDir when $HOME
// is unset, relative or "/". The directory is created on first use.
//
// # Jail
//
// Every path is mapped into the workspace element by element
// (internal/pathsafe): "report..final.md" and "[...slug]" are ordinary
// names, an absolute path is re-rooted under the workspace, and a ".."
// that would climb above it is refused with backend.CodeInvalidPath, as is
// a name longer than 255 bytes. A backslash is read as a slash
// ("dir\file.txt" is "dir/file.txt"), as models trained on Windows paths
// write them.
//
// The jail is meant to hold against an agent that uses Execute (or any
// other process in the sandbox) to rearrange the workspace under the file
// tools, not only against odd path strings:
//
//   - The workspace is pinned by device and inode at first contact: the
//     first file tool call, or the first Execute, which pins before the
//     command runs. The pin is kept by the backend and persisted in a file
//     next to the workspace (".<name>.fsbackend-pin" in its parent), outside
//     it, where no file tool reaches and a swap of the workspace does not
//     move it; a new backend instance over the same sandbox reads it. A
//     workspace later removed, or replaced by a symbolic link, by anything
//     other than a directory, by a directory another user owns, or by a
//     directory whose physical path differs from the one pinned (reached
//     through a linked parent), is refused by every tool with
//     CodeInvalidPath. A workspace removed and recreated (rm -rf and
//     mkdir, a fresh clone) as a plain directory the sandbox user owns, at
//     the physical path the pin was taken at, is pinned anew by the next
//     call of any instance, and the tools go on: recreating the workspace
//     is an ordinary thing for an agent to do, and such a directory gives
//     the tools nothing the old one did not. A pin file the sandbox cannot
//     write (a workspace whose parent is read-only, or "/") protects only
//     the instance that took it.
//   - The target is reached one element at a time from the pinned
//     directory (cd -P relative to it), and after each step the directory
//     reached must lie in the workspace and outside its metadata; symbolic
//     links are followed only while they stay inside (CodeInvalidPath
//     otherwise). A directory swapped for a link to the outside, before a
//     call or during it, leads nowhere. Listing and searching use find and
//     grep -r, which walk directories through file descriptors without
//     following links.
//   - A regular file with more than one hard link is refused by read,
//     write, edit and download unless every link is inside the workspace
//     (outside its metadata); grep and get-all pass over it (grep says so
//     in GrepResult.Skipped).
//   - A file or directory grep or glob cannot read (no permission, an I/O
//     error) is reported in GrepResult.Unreadable (and Skipped) or
//     GlobResult.Unreadable, never silently left out of the result.
//   - Named pipes, sockets and devices are refused before they are opened
//     (a read never blocks on a FIFO); a file larger than
//     Options.MaxReadBytes is refused by the whole-file reads from its
//     size, without being read, read streams only a window of its lines,
//     and grep and get-all pass over it.
//   - A read opens the file and then checks, before sending a byte, that
//     the open file is the regular file named, with one link (the kernel's
//     path of the open file, /proc/self/fd, must be the name reached); a
//     mismatch is refused ("changed while it was being opened"). A write
//     creates a new file exclusively (O_EXCL follows no link), opens the
//     file without truncating it, makes the same check, and only then
//     truncates and writes it through the open descriptor.
//
// # Two paths: the helper and the shell
//
// Where it can, the backend runs a small static program in the sandbox
// (internal/fshelper, built for linux/amd64 and linux/arm64 by go generate
// and embedded compressed) that does all of the above in the kernel: it
// holds the workspace open (O_PATH) after checking its device and inode
// against the pin, walks every path one element at a time with
// openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS) and
// O_NOFOLLOW from directories it holds, reads each link itself and walks
// its target the same way (".." pops a held directory and never climbs
// above the workspace; an absolute target must name a place under it),
// opens a file O_PATH to check it (type, links, size: no device is opened,
// no FIFO blocks) and then opens it for I/O by name in the same held
// directory with O_NOFOLLOW|O_NONBLOCK, accepting it only if it is the same
// inode. Grep and get-all read each file they report through a descriptor
// checked the same way. With the helper, no swap of a directory or a file
// for a link, at any moment, makes a tool read or write outside the
// workspace, and a rename of the workspace during a call does not matter
// (the helper works on the directory it checked); a file replaced by a
// hard link to an outside file between the check and the open is refused,
// as the open file is checked again. What remains: a command that moves a
// directory the helper holds out of the workspace during a call makes the
// helper finish that one call in it.
//
// The first file tool call in a sandbox also probes its machine and, when
// the helper is missing, is served by the shell path and then puts the
// helper under MetadataDir/bin in the workspace (one more round trip, once
// per sandbox: see internal/blobcache); the existence check is part of
// every call's script, so later calls take their usual round trips. A
// helper removed by a command is put back (a few times per backend).
// Where the helper cannot run (the memory provider, another architecture,
// a file system mounted noexec), the shell path serves every call, with
// the guarantees below.
//
// What the shell path leaves open: without /proc (the
// memory provider) the checks after the open are skipped, so a swap of the
// last element between the check and the open can redirect one read or
// write; grep and get-all check a file's link count and size a moment
// before grep or tar reads it, so a file swapped for a hard link to an
// outside file in that moment is read; and a process that renames the
// pinned workspace away and a sensitive directory it can rename into its
// place, then back, within one call, is not detected. The adversarial
// tests (adversarial_test.go) swap a directory, or the file itself, for a
// link in a loop while the tools run (200 calls per verb that reads or
// writes content) and require 0 escapes, with the helper and with the
// shell path.
//
// The helper runs with the sandbox user's rights, like any command: an
// agent allowed to execute commands can replace it, as it can read or
// change anything the sandbox user can; the jail is about the file tools.
//
// The jail protects the workspace from the file tools; it is not process
// isolation: a command run by Execute can reach whatever the sandbox can.
// Nor can it stop a process with the sandbox user's rights from editing or
// removing the pin file; a removed pin is taken again at the next first
// contact.
//
// # Round trips
//
// Each operation is one provider call, a command running one constant
// shell program with its inputs in environment variables (see script.go),
// never a shell line built from user text: Read, ReadChars, ReadBytes,
// Write, WriteBytes, Ls, Glob and Grep take one round trip, Edit two
// (read, then write), GetFiles three (archive, download, remove) however
// many files the workspace holds. Batch operations take one round trip per
// file. The first call in a sandbox may take one more, to put the helper
// there (see above). File content travels on the command's stdin and stdout, byte-exact:
// the sandbox handle's secret-value redaction applies to Execute's output,
// not to the file tools' (a file holding a secret reads back as written).
//
// # Binary files
//
// WriteBytes (and UploadFiles and SetFiles for items marked Binary or
// holding non-text data) records a binary mark in a hidden index,
// MetadataDir/binary under the workspace. A mark is keyed by the file's
// identity (device, inode, size and modification time), not by its path:
// every alias (a symbolic link, a hard link, a path through a linked
// directory) sees it, it follows a rename, and it lapses when the file is
// changed by something else than the backend or its inode is reused, after
// which the content decides (a copy made by a command is judged by its
// content). The marks persist in the sandbox and are seen by every backend
// instance over it. Read, ReadChars and Edit refuse a marked file, and any
// file whose content is not text, with backend.CodeBinaryFile; a text Write
// clears the mark. No tool reaches the metadata directory through any
// alias. The index is read by file names only, at most 1 MiB of them: a
// malformed or hostile entry is ignored with a warning on Options.Logger,
// and an index the agent broke (a file or a mode-000 directory in its
// place) is repaired by the next binary write, never an error.
//
// # Stale transports
//
// The sandbox's portable layer retries a call exactly once after a stale
// transport, after telling the reset listeners; the backend's listener
// drops its cached workspace resolution. A second stale failure is returned
// as the Go error (it matches sandbox.ErrStaleTransport), never swallowed.
//
// # Defaults
//
// In one place: the workspace is $HOME/workspace (FallbackBaseDir when
// $HOME is unusable), probed once with a command bounded by ProbeTimeout
// (10 s); a single read returns at most DefaultMaxReadBytes (32 MiB):
// larger files get CodeTooLarge from ReadChars, ReadBytes, Edit and
// downloads, while Read streams a window of lines from a file of any size; Execute is disabled unless
// Options.AllowExecute, and then bounded by DefaultExecuteTimeout (2 min)
// with DefaultMaxExecuteOutput (256 KiB) of output. The execute default is
// 2 min rather than the 30 s agent file backends often use, because the
// commands an agent runs here include package installs and test suites,
// which often take more than 30 s; a caller that wants a tighter bound
// sets Options.ExecuteTimeout. A Grep pattern is at most MaxPatternBytes
// (16 KiB) and a glob at most MaxGlobBytes; longer ones, and negative
// offsets, limits and counts, get backend.CodeInvalidArgument naming the
// argument. The Client's default bounds of provider calls
// (sandbox.CallTimeouts) and its read cap apply to every call underneath.
//
// # Requirements
//
// The sandbox image needs a POSIX sh, cat, head -c, mkdir, mktemp,
// readlink, rm, chmod, GNU find (-printf %D %i %n %l %p, -fprintf), GNU
// grep (-r, --devices=skip) and GNU tar (--exclude-from), as Debian-based
// images (E2B's and Daytona's defaults among them) provide, and /proc for
// the checks of an opened file (without /proc, as on the memory provider,
// reads and writes go by name after the checks, and the last element's
// race is open). The helper needs only a Linux kernel (openat2 from 5.6;
// openat with O_NOFOLLOW on older ones, equally safe for the single
// elements it opens) and a file system under the workspace that allows
// running programs.
package fsbackend

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"maps"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/pathsafe"
	"github.com/sandboxkit/sandbox/internal/redactcut"
	"github.com/sandboxkit/sandbox/internal/signame"
	"github.com/sandboxkit/sandbox/internal/telemetry"
)

// MetadataDir is the name of the backend's hidden directory at the root of
// the workspace.
const MetadataDir = ".fsbackend"

// FallbackBaseDir is the workspace used when Options.BaseDir is empty and
// the sandbox reports no usable $HOME.
const FallbackBaseDir = "/home/user/workspace"

// Defaults for the zero values of Options.
const (
	DefaultMaxReadBytes     = 32 << 20
	DefaultMaxExecuteOutput = 256 << 10
	DefaultExecuteTimeout   = 2 * time.Minute
	// ProbeTimeout bounds the one-time $HOME probe, whatever ctx allows:
	// it is a one-line command, and a sandbox that cannot answer it in
	// 10 s should fail the call, not hold it for the ctx's whole budget.
	ProbeTimeout = 10 * time.Second
	// MaxLineChars is the longest line text Grep returns; longer lines are
	// cut and end with "...".
	MaxLineChars = 1000
	// MaxPatternBytes is the longest Grep pattern: the pattern travels to
	// the sandbox in the command's environment, which Linux caps at
	// 128 KiB per string (and some providers quote it into one shell
	// line, up to four times longer), so a longer one is refused with
	// backend.CodeInvalidArgument rather than failing in the sandbox.
	MaxPatternBytes = 16 << 10
	// MaxGlobBytes is the longest Glob pattern (GlobRequest.Pattern,
	// GrepRequest.Glob): longer than a path can be, so no longer pattern
	// is needed; it is refused with backend.CodeInvalidArgument.
	MaxGlobBytes = 4096
)

// Options configures a FilesystemBackend. The zero value is a backend with
// the workspace at $HOME/workspace and Execute disabled.
type Options struct {
	// BaseDir is the workspace, an absolute path in the sandbox. Empty
	// means $HOME/workspace, probed once (see the package documentation).
	BaseDir string
	// AllowExecute enables Execute; without it Execute returns a result
	// with backend.CodePermissionDenied.
	AllowExecute bool
	// Env is set for commands run by Execute (not for the backend's own
	// file commands).
	Env map[string]string
	// SecretEnv is like Env, but its values are redacted from Execute's
	// output. The file tools return text as written, but Grep's cut of a
	// long line never splits a value, so that a caller redacting results
	// sees either all of one or none of it.
	SecretEnv map[string]string
	// Secrets are values that are in no command's environment but that a
	// file in the sandbox may come to hold (a brokered secret's value an
	// upstream echoed back): the file tools' cuts never split them, as
	// they never split a SecretEnv value. Redacting them from results is
	// the caller's (the sandbox handle that created the sandbox redacts
	// brokered values from Execute's output).
	Secrets []string
	// ExecuteTimeout is the default ExecuteRequest.Timeout
	// (DefaultExecuteTimeout when 0).
	ExecuteTimeout time.Duration
	// MaxExecuteOutput caps the combined output Execute returns
	// (DefaultMaxExecuteOutput when 0).
	MaxExecuteOutput int
	// MaxReadBytes caps the size of a file read in one call and of Grep's
	// raw output (DefaultMaxReadBytes when 0); larger files get
	// backend.CodeTooLarge, and Grep and GetFiles pass over them (Grep
	// lists them in GrepResult.Skipped). For Read it caps the bytes of the
	// lines returned: Read streams a window of a larger file.
	MaxReadBytes int
	// Logger receives warnings about a damaged binary index or a workspace
	// pin that could not be persisted. Nil discards them.
	Logger *slog.Logger
}

// FilesystemBackend implements backend.Backend over a sandbox. It is safe
// for concurrent use. Close it to unregister its transport-reset listener.
type FilesystemBackend struct {
	sb         *sandbox.Sandbox
	opts       Options
	unregister func()
	// redact is the sandbox handle's redaction (of the sandbox's own
	// secret values), learnt from the first command: cuts keep clear of
	// the values it finds too (see cutAt).
	redact atomic.Pointer[func([]byte) []byte]

	probeMu sync.Mutex // serializes probes
	mu      sync.Mutex // guards base and ready
	base    string     // the workspace; "" until probed
	ready   bool       // the workspace is known to exist
	pin     string     // the workspace's device and inode; "" until seen
	pinBase string     // the workspace pin belongs to
	pinPath string     // the workspace's physical path when pinned

	// The in-sandbox helper (helper.go), guarded by mu.
	helperState   int
	helperPath    string // where it is, when helperReady
	helperBase    string // the workspace helperPath was put under
	arch          string // the sandbox's machine, once probed
	helperUploads int
	helperGen     int          // bumped by each upload that made it ready
	helperRuns    atomic.Int64 // runs the helper served (for tests)
}

var _ backend.Backend = (*FilesystemBackend)(nil)

// New returns a backend over sb. It makes no call to the sandbox: the
// workspace is resolved on first use.
func New(sb *sandbox.Sandbox, opts Options) (*FilesystemBackend, error) {
	if sb == nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "fsbackend: nil sandbox")
	}
	opts.Env, opts.SecretEnv, opts.Secrets = maps.Clone(opts.Env), maps.Clone(opts.SecretEnv), slices.Clone(opts.Secrets)
	if opts.BaseDir != "" {
		if err := pathsafe.Check(opts.BaseDir); err != nil || !strings.HasPrefix(opts.BaseDir, "/") {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "fsbackend: base directory %q must be a clean absolute path", opts.BaseDir)
		}
		opts.BaseDir = path.Clean(opts.BaseDir)
	}
	if opts.MaxReadBytes <= 0 {
		opts.MaxReadBytes = DefaultMaxReadBytes
	}
	if opts.MaxExecuteOutput <= 0 {
		opts.MaxExecuteOutput = DefaultMaxExecuteOutput
	}
	if opts.ExecuteTimeout <= 0 {
		opts.ExecuteTimeout = DefaultExecuteTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	b := &FilesystemBackend{sb: sb, opts: opts, base: opts.BaseDir}
	b.unregister = sb.Client().OnTransportReset(b.dropCaches)
	return b, nil
}

// Close unregisters the backend from its Client's transport resets. It
// does not touch the sandbox.
func (b *FilesystemBackend) Close() error {
	b.unregister()
	return nil
}

// dropCaches forgets what the backend learned over the old transport: a
// probed workspace is probed again and the workspace's existence is
// checked again. The pin stays: it is about the sandbox, not the
// transport, and it is kept only for the workspace it was taken of.
func (b *FilesystemBackend) dropCaches() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.base = b.opts.BaseDir
	b.ready = false
}

// BaseDir returns the workspace directory, probing $HOME if needed.
func (b *FilesystemBackend) BaseDir(ctx context.Context) (string, error) {
	b.mu.Lock()
	base := b.base
	b.mu.Unlock()
	if base != "" {
		return base, nil
	}
	b.probeMu.Lock()
	defer b.probeMu.Unlock()
	b.mu.Lock()
	base = b.base
	b.mu.Unlock()
	if base != "" {
		return base, nil
	}
	pctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	res, err := b.sb.Exec(pctx, sandbox.Command{Args: []string{"sh", "-c", `printf '%s' "$HOME"`}, MaxOutput: 4096})
	if err != nil {
		return "", fmt.Errorf("fsbackend: probe $HOME: %w", err)
	}
	base = FallbackBaseDir
	if home := strings.TrimRight(string(res.Stdout), "/"); res.Success() && strings.HasPrefix(home, "/") && pathsafe.Check(home) == nil {
		base = path.Join(home, "workspace")
	}
	b.mu.Lock()
	if b.base == "" {
		b.base = base
	}
	base = b.base
	b.mu.Unlock()
	return base, nil
}

// jail maps an agent's path to a clean path relative to the workspace
// ("." for the root).
func jail(base, p string) (string, *backend.Error) {
	shown := p
	p = strings.ReplaceAll(p, `\`, "/")
	if p == "" {
		return ".", nil
	}
	if err := pathsafe.Check(p); err != nil {
		return "", backend.InvalidPath(printable(shown), "it holds control characters or is not UTF-8")
	}
	if base != "/" && (p == base || strings.HasPrefix(p, base+"/")) {
		p = strings.TrimPrefix(p, base)
	}
	rel, err := pathsafe.Rel(p)
	if err != nil {
		return "", backend.InvalidPath(printable(shown), "it climbs above the workspace root")
	}
	if len(rel) > maxPathBytes {
		return "", backend.InvalidPath(printable(shown), fmt.Sprintf("it is longer than %d bytes", maxPathBytes))
	}
	for e := range strings.SplitSeq(rel, "/") {
		if len(e) > maxNameBytes {
			return "", backend.InvalidPath(printable(shown), fmt.Sprintf("the name %q is longer than %d bytes", printable(e), maxNameBytes))
		}
	}
	if rel == MetadataDir || strings.HasPrefix(rel, MetadataDir+"/") {
		return "", backend.InvalidPath(printable(shown), "the name is reserved for the backend's metadata")
	}
	return rel, nil
}

// printable bounds and quotes-escapes text for a message.
func printable(s string) string { return iox.Printable(s, 200) }

// Limits of Linux file systems: a longer name or path would fail in the
// sandbox with ENAMETOOLONG.
const (
	maxNameBytes = 255
	maxPathBytes = 4000
)

// pinFile is where the workspace's pin is kept: next to the workspace,
// outside it ("" for the root, which has no outside).
func pinFile(base string) string {
	if base == "/" {
		return ""
	}
	return path.Join(path.Dir(base), "."+path.Base(base)+".fsbackend-pin")
}

// validKey reports whether s has the form of a file identity in the
// binary index, "<device>-<inode>-<size>-<mtime>".
func validKey(s string) bool {
	f := strings.Split(s, "-")
	if len(f) != 4 || len(s) > 80 {
		return false
	}
	for i, x := range f {
		if i == 3 {
			x = strings.Replace(x, ".", "", 1)
		}
		if x == "" || strings.Trim(x, "0123456789") != "" {
			return false
		}
	}
	return true
}

// indexCap is the most of the binary index the helper reads; see marks().
const indexCap = 1 << 20

// marks returns the keys of the binary index the helper reported, one
// mark= record per entry. Entries that are not well formed are ignored with
// a warning: a damaged or hostile index means "unknown", decided by content.
func (b *FilesystemBackend) marks(r *opResult) map[string]bool {
	set := map[string]bool{}
	recs := r.kv["mark"]
	total := 0
	for _, k := range recs {
		total += len("mark=") + len(k) + 1
	}
	if total >= indexCap && len(recs) > 0 {
		recs = recs[:len(recs)-1] // the last may be cut
		b.opts.Logger.Warn("fsbackend: the binary index is larger than the backend reads; marks past the limit are ignored", "limit", indexCap)
	}
	bad := 0
	for _, k := range recs {
		if validKey(k) {
			set[k] = true
		} else {
			bad++
		}
	}
	if bad > 0 {
		b.opts.Logger.Warn("fsbackend: ignored malformed entries in the binary index", "count", bad)
	}
	return set
}

// files parses the f=<links> <size> <key> <path> records of a run: the
// regular files a search or an archive covers, with their identity.
// Paths are relative to the searched directory, without "./".
type fileRec struct {
	links, size int64
	key         string
}

func files(r *opResult) map[string]fileRec {
	recs := map[string]fileRec{}
	for _, v := range r.kv["f"] {
		f := strings.SplitN(v, " ", 4)
		if len(f) != 4 {
			continue
		}
		links, err1 := strconv.ParseInt(f[0], 10, 64)
		size, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		recs[strings.TrimPrefix(f[3], "./")] = fileRec{links: links, size: size, key: f[2]}
	}
	return recs
}

// skipped reports whether a search or an archive passes over the file:
// it has other hard links, or it is larger than the backend reads.
func (b *FilesystemBackend) skipped(f fileRec) bool {
	return f.links > 1 || f.size > int64(b.opts.MaxReadBytes)
}

// opResult is what one run of opScript produced.
type opResult struct {
	code      int
	stdout    []byte
	truncated bool
	kv        map[string][]string
	errText   string // the error record, redacted and made printable
	base      string // the workspace the run was for
}

func (r *opResult) get(key string) string {
	if v := r.kv[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// run runs opScript for op in the workspace base: one round trip.
func (b *FilesystemBackend) run(ctx context.Context, base, op string, env map[string]string, stdin io.Reader, maxOut int) (*opResult, error) {
	e := map[string]string{"SBX_OP": op, "SBX_BASE": base, "SBX_META": MetadataDir, "LC_ALL": "C",
		"SBX_LIMIT": strconv.Itoa(b.opts.MaxReadBytes), "SBX_PINFILE": pinFile(base)}
	maps.Copy(e, env)
	b.mu.Lock()
	if b.pin != "" && b.pinBase == base {
		e["SBX_PIN"] = b.pin
		if b.pinPath != "" {
			e["SBX_PINPATH"] = b.pinPath
		}
	}
	b.mu.Unlock()
	gen := b.helperEnv(base, e)
	if op == "remove" {
		// The in-sandbox helper has no remove: the shell path does it,
		// with the same element-wise walk and checks.
		for _, k := range []string{"SBX_HELPER", "SBX_HELPER_PROBE", "SBX_HELPER_AMD64", "SBX_HELPER_ARM64"} {
			delete(e, k)
		}
	}
	if maxOut <= 0 {
		maxOut = b.opts.MaxReadBytes
	}
	// The file tools' output (contents, names, sizes, the helper's
	// records) must be byte-exact, so it is captured unredacted; only the
	// helper's error text is redacted (see Sandbox.ExecUnredacted).
	res, redact, err := b.sb.ExecUnredacted(ctx, sandbox.Command{Args: []string{"sh", "-c", helperWrapper + opScript}, Env: e, Stdin: stdin, MaxOutput: maxOut})
	if err != nil {
		return nil, fmt.Errorf("fsbackend: %s: %w", op, err)
	}
	if b.redact.Load() == nil {
		b.redact.Store(&redact)
	}
	if res.TimedOut {
		return nil, sandbox.Errorf(sandbox.DeadlineExceeded, "fsbackend: %s: timed out after %v", op, res.Timeout)
	}
	r := &opResult{code: res.ExitCode, stdout: res.Stdout, truncated: res.StdoutTruncated, kv: map[string][]string{}, base: base}
	for rec := range strings.SplitSeq(string(res.Stderr), "\x00") {
		if k, v, ok := strings.Cut(rec, "="); ok && k != "" && strings.Trim(k, "abcdefghijklmnopqrstuvwxyz") == "" {
			r.kv[k] = append(r.kv[k], v)
		}
	}
	r.errText = printable(string(redact([]byte(r.get("error")))))
	for _, w := range r.kv["warning"] {
		b.opts.Logger.Warn("fsbackend: "+printable(w), "op", op)
	}
	b.afterRun(ctx, base, gen, r)
	if r.code == exitReplaced {
		return r, nil
	}
	if r.code != 0 && (r.code < exitNotFound || r.code > exitWrite) {
		return nil, sandbox.Errorf(sandbox.Internal, "fsbackend: %s: the in-sandbox helper exited %d: %s", op, r.code, r.errText)
	}
	b.mu.Lock()
	b.ready = true // the helper created the workspace
	if pin := r.get("pin"); b.base == base && pin != "" && strings.Trim(pin, "0123456789-") == "" {
		b.pin, b.pinBase = pin, base
		if pb := r.get("pbase"); strings.HasPrefix(pb, "/") {
			b.pinPath = pb
		}
	}
	b.mu.Unlock()
	return r, nil
}

// pathError turns an agent-actionable exit code into a result error.
func pathError(r *opResult, shown, verb string, limit int) *backend.Error {
	switch r.code {
	case exitNotFound:
		return backend.NotFound(shown)
	case exitIsDir:
		return backend.IsDirectory(shown)
	case exitNotDir:
		return backend.NotDirectory(shown)
	case exitEscape:
		if r.get("error") == "changed while it was being opened" {
			return backend.InvalidPath(shown, "it changed while it was being opened (a directory or file was swapped); try again")
		}
		return backend.InvalidPath(shown, "it leads outside the workspace (through a symbolic link) or into the backend's metadata")
	case exitDenied:
		return backend.PermissionDenied(shown)
	case exitBinary:
		return backend.Binary(shown, verb)
	case exitReplaced:
		return backend.Errorf(backend.CodeInvalidPath, shown, "the workspace directory %s was replaced or removed since the backend first used it (%s); the file tools resume once it is a plain directory again (not a symbolic link), owned by the sandbox user, at the same place", printable(path.Clean("/"+r.base)), r.errText)
	case exitNotRegular:
		return backend.InvalidPath(shown, "it is not a regular file (a named pipe, socket or device); the file tools handle regular files and directories only")
	case exitHardLink:
		return backend.InvalidPath(shown, "it is a hard link to a file that has other names, which may lie outside the workspace; copy it with a command instead")
	case exitTooLarge:
		return backend.Errorf(backend.CodeTooLarge, shown, "'%s' is larger than %d bytes; read it in parts with a command", shown, limit)
	case exitWrite:
		return backend.Errorf(backend.CodePermissionDenied, shown, "cannot write '%s': %s", shown, r.errText)
	}
	return nil
}

func shownPath(rel string) string {
	if rel == "." {
		return "/"
	}
	return rel
}

// prepare resolves the workspace and jails p.
func (b *FilesystemBackend) prepare(ctx context.Context, p string) (base, rel string, perr *backend.Error, err error) {
	base, err = b.BaseDir(ctx)
	if err != nil {
		return "", "", nil, err
	}
	rel, perr = jail(base, p)
	return base, rel, perr, nil
}

// readFile reads a file: one round trip.
func (b *FilesystemBackend) readFile(ctx context.Context, base, rel string, text bool, verb string) (data []byte, binary bool, perr *backend.Error, err error) {
	shown := shownPath(rel)
	if rel == "." {
		return nil, false, backend.IsDirectory(shown), nil
	}
	env := map[string]string{"SBX_PATH": rel}
	if text {
		env["SBX_TEXT"] = "1"
	}
	r, err := b.run(ctx, base, "read", env, nil, b.opts.MaxReadBytes+1)
	if err != nil {
		return nil, false, nil, err
	}
	if r.code != 0 {
		return nil, false, pathError(r, shown, verb, b.opts.MaxReadBytes), nil
	}
	if r.truncated || len(r.stdout) > b.opts.MaxReadBytes {
		r.code = exitTooLarge
		return nil, false, pathError(r, shown, verb, b.opts.MaxReadBytes), nil
	}
	data = r.stdout
	binary = r.get("binary") == "1"
	if text && !backend.IsText(data) {
		return nil, binary, backend.Binary(shown, verb), nil
	}
	return data, binary, nil, nil
}

// writeFile writes a file and sets or clears its binary mark: one round trip.
func (b *FilesystemBackend) writeFile(ctx context.Context, base, rel string, data []byte, binary bool) (*backend.WriteResult, error) {
	shown := shownPath(rel)
	if rel == "." {
		return &backend.WriteResult{Path: shown, Error: backend.IsDirectory(shown)}, nil
	}
	env := map[string]string{"SBX_PATH": rel}
	if binary {
		env["SBX_BINARY"] = "1"
	}
	r, err := b.run(ctx, base, "write", env, bytes.NewReader(data), 4096)
	if err != nil {
		return nil, err
	}
	if r.code != 0 {
		return &backend.WriteResult{Path: shown, Error: pathError(r, shown, "written", b.opts.MaxReadBytes)}, nil
	}
	return &backend.WriteResult{Path: shown, Bytes: int64(len(data))}, nil
}

// Read returns a numbered window of a text file's lines. One round trip.
// A negative Offset or Limit is refused with backend.CodeInvalidArgument
// naming it; a Limit of any size (up to math.MaxInt) returns the lines
// from Offset to the end. The file may be of any size: MaxReadBytes caps
// the bytes of the lines returned, not the file. A file larger than the
// cap is streamed in the sandbox, which sends only the window and the
// line count; a window larger than the cap ends at the last whole line
// that fits (the start of a single longer line), with
// ReadResult.Truncated set. A file up to the cap must be text as a whole
// (backend.CodeBinaryFile otherwise); of a larger one, the lines returned
// must be.
func (b *FilesystemBackend) Read(ctx context.Context, req *backend.ReadRequest) (_ *backend.ReadResult, err error) {
	ctx, span := b.span(ctx, "read")
	defer func() { telemetry.End(span, err) }()
	if perr := notNegative(req.Path, "offset", req.Offset, "limit", req.Limit); perr != nil {
		return &backend.ReadResult{Error: perr}, nil
	}
	base, rel, perr, err := b.prepare(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return &backend.ReadResult{Error: perr}, nil
	}
	return b.readLines(ctx, base, rel, req.Offset, req.Limit)
}

// readLines reads a window of a text file's lines: one round trip. A file
// up to MaxReadBytes travels whole and the window is cut here; a larger one
// is streamed in the sandbox, which sends only the window's lines (at most
// MaxReadBytes of them) and the file's line count.
func (b *FilesystemBackend) readLines(ctx context.Context, base, rel string, offset, limit int) (*backend.ReadResult, error) {
	shown := shownPath(rel)
	if rel == "." {
		return &backend.ReadResult{Error: backend.IsDirectory(shown)}, nil
	}
	if limit <= 0 {
		limit = backend.DefaultReadLimit
	}
	lim := b.opts.MaxReadBytes
	from := offset + 1 // 1-based, as tail -n +N; saturating
	if offset == math.MaxInt {
		from = offset
	}
	env := map[string]string{"SBX_PATH": rel, "SBX_TEXT": "1", "SBX_LINES": "1",
		"SBX_FROM": strconv.Itoa(from),
		// More lines than bytes fit in the cap cannot be sent anyway.
		"SBX_COUNT": strconv.Itoa(min(limit, lim+1))}
	r, err := b.run(ctx, base, "read", env, nil, lim+1)
	if err != nil {
		return nil, err
	}
	if r.code != 0 {
		return &backend.ReadResult{Error: pathError(r, shown, "read as text", lim)}, nil
	}
	data := r.stdout
	if r.get("window") != "1" {
		if r.truncated || len(data) > lim {
			r.code = exitTooLarge
			return &backend.ReadResult{Error: pathError(r, shown, "read as text", lim)}, nil
		}
		if !backend.IsText(data) {
			return &backend.ReadResult{Error: backend.Binary(shown, "read as text")}, nil
		}
		window, total := backend.NumberLines(string(data), offset, limit)
		return &backend.ReadResult{Content: window, TotalLines: total}, nil
	}
	// A streamed window: the file's line count comes from the sandbox.
	total, err := strconv.Atoi(r.get("lines"))
	if err != nil || total < 0 {
		return nil, sandbox.Errorf(sandbox.Internal, "fsbackend: read: the sandbox sent no line count for %q", shown)
	}
	cut := r.truncated || len(data) > lim
	if cut {
		data = data[:min(len(data), lim)]
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			data = data[:i+1] // the whole lines that fit
		} else {
			// One line longer than the cap: its start, whole characters,
			// without a tail that may be the start of a secret value
			// (the rest of it lies past the cut, where a caller's
			// redaction cannot see it).
			data = []byte(b.dropSecretTail(string(data)))
			for len(data) > 0 && !utf8.Valid(data) {
				data = data[:len(data)-1]
			}
		}
	}
	if !backend.IsText(data) {
		return &backend.ReadResult{Error: backend.Binary(shown, "read as text")}, nil
	}
	window, _ := backend.NumberLines(string(data), 0, math.MaxInt)
	if offset > 0 && window != "" {
		// Renumber: the window's first line is line offset+1.
		var sb strings.Builder
		for i, l := range strings.Split(window, "\n") {
			if i > 0 {
				sb.WriteByte('\n')
			}
			_, text, _ := strings.Cut(l, "\t")
			fmt.Fprintf(&sb, "%6d\t%s", offset+i+1, text)
		}
		window = sb.String()
	}
	return &backend.ReadResult{Content: window, TotalLines: total, Truncated: cut}, nil
}

// ReadChars returns a window of a text file's characters. One round trip.
// A negative Offset or MaxChars is refused with
// backend.CodeInvalidArgument naming it.
func (b *FilesystemBackend) ReadChars(ctx context.Context, req *backend.ReadCharsRequest) (_ *backend.ReadCharsResult, err error) {
	ctx, span := b.span(ctx, "read_chars")
	defer func() { telemetry.End(span, err) }()
	if perr := notNegative(req.Path, "offset", req.Offset, "max chars", req.MaxChars); perr != nil {
		return &backend.ReadCharsResult{Error: perr}, nil
	}
	base, rel, perr, err := b.prepare(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return &backend.ReadCharsResult{Error: perr}, nil
	}
	data, _, perr, err := b.readFile(ctx, base, rel, true, "read as text")
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return &backend.ReadCharsResult{Error: perr}, nil
	}
	window, total := backend.CharWindow(string(data), req.Offset, req.MaxChars)
	return &backend.ReadCharsResult{Content: window, TotalChars: total}, nil
}

// ReadBytes returns a file's bytes. One round trip.
func (b *FilesystemBackend) ReadBytes(ctx context.Context, req *backend.ReadBytesRequest) (_ *backend.ReadBytesResult, err error) {
	ctx, span := b.span(ctx, "read_bytes")
	defer func() { telemetry.End(span, err) }()
	base, rel, perr, err := b.prepare(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return &backend.ReadBytesResult{Error: perr}, nil
	}
	data, binary, perr, err := b.readFile(ctx, base, rel, false, "")
	if err != nil {
		return nil, err
	}
	return &backend.ReadBytesResult{Data: data, Binary: binary, Error: perr}, nil
}

// Write writes a text file and clears its binary mark. One round trip.
func (b *FilesystemBackend) Write(ctx context.Context, req *backend.WriteRequest) (_ *backend.WriteResult, err error) {
	ctx, span := b.span(ctx, "write")
	defer func() { telemetry.End(span, err) }()
	base, rel, perr, err := b.prepare(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return &backend.WriteResult{Path: req.Path, Error: perr}, nil
	}
	return b.writeFile(ctx, base, rel, []byte(req.Content), false)
}

// WriteBytes writes a file's bytes and marks it binary. One round trip.
func (b *FilesystemBackend) WriteBytes(ctx context.Context, req *backend.WriteBytesRequest) (_ *backend.WriteResult, err error) {
	ctx, span := b.span(ctx, "write_bytes")
	defer func() { telemetry.End(span, err) }()
	base, rel, perr, err := b.prepare(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return &backend.WriteResult{Path: req.Path, Error: perr}, nil
	}
	return b.writeFile(ctx, base, rel, req.Data, true)
}

// Remove removes one file, or one symbolic link itself (never its
// target), through the same jail as Write: the parent is reached element by
// element and the name is unlinked relative to that pinned directory, so a
// parent swapped for a symbolic link meanwhile cannot lead the removal out
// of the workspace. A directory, the workspace root and the backend's
// metadata are refused; a missing file is backend.CodeFileNotFound in the
// result, not a Go error. One round trip.
func (b *FilesystemBackend) Remove(ctx context.Context, req *backend.RemoveRequest) (_ *backend.RemoveResult, err error) {
	ctx, span := b.span(ctx, "remove")
	defer func() { telemetry.End(span, err) }()
	base, rel, perr, err := b.prepare(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return &backend.RemoveResult{Path: req.Path, Error: perr}, nil
	}
	shown := shownPath(rel)
	if rel == "." {
		return &backend.RemoveResult{Path: shown, Error: backend.IsDirectory(shown)}, nil
	}
	r, err := b.run(ctx, base, "remove", map[string]string{"SBX_PATH": rel}, nil, 4096)
	if err != nil {
		return nil, err
	}
	if r.code != 0 {
		return &backend.RemoveResult{Path: shown, Error: pathError(r, shown, "removed", b.opts.MaxReadBytes)}, nil
	}
	return &backend.RemoveResult{Path: shown}, nil
}

// Edit replaces a string in a text file. Two round trips.
func (b *FilesystemBackend) Edit(ctx context.Context, req *backend.EditRequest) (_ *backend.EditResult, err error) {
	ctx, span := b.span(ctx, "edit")
	defer func() { telemetry.End(span, err) }()
	base, rel, perr, err := b.prepare(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return &backend.EditResult{Path: req.Path, Error: perr}, nil
	}
	shown := shownPath(rel)
	data, _, perr, err := b.readFile(ctx, base, rel, true, "edited")
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return &backend.EditResult{Path: shown, Error: perr}, nil
	}
	out, n, perr := backend.Replace(shown, string(data), req.OldString, req.NewString, req.ReplaceAll)
	if perr != nil {
		return &backend.EditResult{Path: shown, Error: perr}, nil
	}
	w, err := b.writeFile(ctx, base, rel, []byte(out), false)
	if err != nil {
		return nil, err
	}
	if w.Error != nil {
		return &backend.EditResult{Path: shown, Error: w.Error}, nil
	}
	return &backend.EditResult{Path: shown, Occurrences: n}, nil
}

// entry is one line of the ls and walk output.
type entry struct {
	rel   string // relative to the listed directory
	isDir bool
	size  int64
	mtime time.Time
	// denied marks a directory the walk could not open ("!d" record,
	// after the directory's own entry).
	denied bool
}

// parseEntries parses "%y%Y %s %T@ %p\0" records (paths "./name"), and
// the "!d 0 0 %p\0" records of directories a walk could not open.
func parseEntries(out []byte) []entry {
	var list []entry
	for rec := range bytes.SplitSeq(out, []byte{0}) {
		f := strings.SplitN(string(rec), " ", 4)
		if len(f) != 4 || len(f[0]) != 2 || f[3] == "" {
			continue
		}
		e := entry{rel: strings.TrimPrefix(f[3], "./"), isDir: f[0][1] == 'd', denied: f[0][0] == '!'}
		if !e.isDir {
			e.size, _ = strconv.ParseInt(f[1], 10, 64)
		}
		if sec, err := strconv.ParseFloat(f[2], 64); err == nil {
			e.mtime = time.Unix(0, int64(sec*1e9)).UTC()
		}
		list = append(list, e)
	}
	return list
}

func joinRel(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

func isMeta(rel string) bool { return rel == MetadataDir || strings.HasPrefix(rel, MetadataDir+"/") }

// Ls lists a directory. One round trip.
func (b *FilesystemBackend) Ls(ctx context.Context, req *backend.LsRequest) (_ *backend.LsResult, err error) {
	ctx, span := b.span(ctx, "ls")
	defer func() { telemetry.End(span, err) }()
	base, rel, perr, err := b.prepare(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return &backend.LsResult{Error: perr}, nil
	}
	r, err := b.run(ctx, base, "ls", map[string]string{"SBX_PATH": rel}, nil, 0)
	if err != nil {
		return nil, err
	}
	if r.code != 0 {
		return &backend.LsResult{Error: pathError(r, shownPath(rel), "listed", b.opts.MaxReadBytes)}, nil
	}
	files := []backend.FileInfo{}
	for _, e := range parseEntries(r.stdout) {
		p := joinRel(rel, e.rel)
		if isMeta(p) || e.denied {
			continue
		}
		files = append(files, backend.FileInfo{Path: p, IsDir: e.isDir, Size: e.size, ModTime: e.mtime})
	}
	sortInfo(files)
	return &backend.LsResult{Files: files}, nil
}

func sortInfo(files []backend.FileInfo) {
	slices.SortFunc(files, func(a, b backend.FileInfo) int { return strings.Compare(a.Path, b.Path) })
}

// notNegative returns the CodeInvalidArgument error for the first of the
// named values (name, value pairs) that is negative, or nil.
func notNegative(path string, nv ...any) *backend.Error {
	for i := 0; i+1 < len(nv); i += 2 {
		if v := nv[i+1].(int); v < 0 {
			return backend.InvalidArgument(printable(path), nv[i].(string), fmt.Sprintf("%d is negative", v))
		}
	}
	return nil
}

// tooLong returns the CodeInvalidArgument error for the argument named
// name when value is longer than limit bytes, or nil.
func tooLong(name, value string, limit int) *backend.Error {
	if len(value) <= limit {
		return nil
	}
	return backend.InvalidArgument("", name, fmt.Sprintf("%q is %d bytes, over the limit of %d", iox.Shorten(value, 64), len(value), limit))
}

// Glob returns the entries under a directory whose paths match a pattern.
// One round trip. A pattern over MaxGlobBytes is refused with
// backend.CodeInvalidArgument.
func (b *FilesystemBackend) Glob(ctx context.Context, req *backend.GlobRequest) (_ *backend.GlobResult, err error) {
	ctx, span := b.span(ctx, "glob")
	defer func() { telemetry.End(span, err) }()
	if perr := tooLong("glob pattern", req.Pattern, MaxGlobBytes); perr != nil {
		return &backend.GlobResult{Error: perr}, nil
	}
	if _, err := backend.MatchGlob(req.Pattern, "x"); err != nil {
		return &backend.GlobResult{Error: backend.InvalidPath(printable(req.Pattern), "the glob pattern is malformed")}, nil
	}
	base, rel, perr, err := b.prepare(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return &backend.GlobResult{Error: perr}, nil
	}
	r, err := b.run(ctx, base, "walk", map[string]string{"SBX_PATH": rel}, nil, 0)
	if err != nil {
		return nil, err
	}
	if r.code != 0 {
		return &backend.GlobResult{Error: pathError(r, shownPath(rel), "searched", b.opts.MaxReadBytes)}, nil
	}
	if r.truncated {
		shown := shownPath(rel)
		return &backend.GlobResult{Error: backend.Errorf(backend.CodeTooLarge, shown, "the listing of '%s' exceeds %d bytes; glob a smaller directory", shown, b.opts.MaxReadBytes)}, nil
	}
	files := []backend.FileInfo{}
	var unreadable []string
	for _, e := range parseEntries(r.stdout) {
		p := joinRel(rel, e.rel)
		if isMeta(p) {
			continue
		}
		if e.denied {
			unreadable = append(unreadable, p+"/")
			continue
		}
		if globMatch(req.Pattern, e.rel, p) {
			files = append(files, backend.FileInfo{Path: p, IsDir: e.isDir, Size: e.size, ModTime: e.mtime})
		}
	}
	sortInfo(files)
	slices.Sort(unreadable)
	return &backend.GlobResult{Files: files, Unreadable: slices.Compact(unreadable)}, nil
}

// globMatch matches a pattern against a path relative to the searched
// directory or to the workspace root.
func globMatch(pattern, relToDir, relToRoot string) bool {
	if ok, _ := backend.MatchGlob(pattern, relToDir); ok {
		return true
	}
	ok, _ := backend.MatchGlob(pattern, relToRoot)
	return ok
}

// Grep searches text files for a literal string or, with Regex, a
// regular expression, optionally ignoring case and with context lines
// (Before, After): one round trip whatever the options. A pattern over
// MaxPatternBytes, a regular expression that does not compile (RE2
// syntax, as Go's regexp) or that holds a newline or NUL character, a
// Glob over MaxGlobBytes and a negative MaxCount, Before or After are
// refused with backend.CodeInvalidArgument naming them, before any call
// to the sandbox. A matching line that is not text (a terminal escape,
// bytes that are not UTF-8) is returned escaped, with GrepMatch.Escaped
// set, never dropped; context lines are treated the same way, cut the
// same way (MaxLineChars, never splitting a secret value), and count
// toward the output cap but not toward MaxCount.
//
// The helper matches with Go's regexp itself. On the shell path (no
// helper: the memory provider, another architecture, a noexec file
// system) the sandbox's grep matches: with -P (PCRE) where GNU grep has
// it, which reads RE2's constructs alike, else with -E (POSIX extended),
// which lacks Perl classes such as \d and lazy repetition; the memory
// provider's grep uses Go's regexp for both. There, IgnoreCase folds
// ASCII letters only (the file tools run grep in the C locale), where
// the helper folds Unicode letters.
func (b *FilesystemBackend) Grep(ctx context.Context, req *backend.GrepRequest) (_ *backend.GrepResult, err error) {
	ctx, span := b.span(ctx, "grep")
	defer func() { telemetry.End(span, err) }()
	if perr := tooLong("pattern", req.Pattern, MaxPatternBytes); perr != nil {
		return &backend.GrepResult{Error: perr}, nil
	}
	if perr := tooLong("glob pattern", req.Glob, MaxGlobBytes); perr != nil {
		return &backend.GrepResult{Error: perr}, nil
	}
	if perr := notNegative(req.Path, "max count", req.MaxCount, "before", req.Before, "after", req.After); perr != nil {
		return &backend.GrepResult{Error: perr}, nil
	}
	if req.Regex {
		if strings.ContainsAny(req.Pattern, "\n\x00") {
			return &backend.GrepResult{Error: backend.InvalidArgument("", "pattern", fmt.Sprintf("%q holds a newline or NUL character, which no line holds; write \\n or \\x00 to match them (never found in a line)", iox.Shorten(req.Pattern, 64)))}, nil
		}
		expr := req.Pattern
		if req.IgnoreCase {
			expr = "(?i)" + expr
		}
		if _, err := regexp.Compile(expr); err != nil {
			return &backend.GrepResult{Error: backend.InvalidArgument("", "pattern", fmt.Sprintf("%q is not a valid regular expression (RE2 syntax): %v", iox.Shorten(req.Pattern, 64), err))}, nil
		}
	}
	if req.Glob != "" {
		if _, err := backend.MatchGlob(req.Glob, "x"); err != nil {
			return &backend.GrepResult{Error: backend.InvalidPath(printable(req.Glob), "the glob pattern is malformed")}, nil
		}
	}
	base, rel, perr, err := b.prepare(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return &backend.GrepResult{Error: perr}, nil
	}
	if !req.Regex && (strings.Contains(req.Pattern, "\n") || strings.ContainsRune(req.Pattern, 0)) {
		return &backend.GrepResult{Matches: []backend.GrepMatch{}}, nil // no line holds a newline
	}
	env := map[string]string{"SBX_PATH": rel, "SBX_PATTERN": req.Pattern}
	if req.MaxCount > 0 {
		// One more than asked, to tell a cut list; saturating, as
		// MaxCount may be math.MaxInt.
		env["SBX_MAX"] = strconv.Itoa(min(req.MaxCount, math.MaxInt32) + 1)
	}
	if req.Regex {
		env["SBX_REGEX"] = "1"
	}
	if req.IgnoreCase {
		env["SBX_ICASE"] = "1"
	}
	// Saturating: more context than the output cap holds lines is the
	// same as all of it.
	if req.Before > 0 {
		env["SBX_BEFORE"] = strconv.Itoa(min(req.Before, math.MaxInt32))
	}
	if req.After > 0 {
		env["SBX_AFTER"] = strconv.Itoa(min(req.After, math.MaxInt32))
	}
	r, err := b.run(ctx, base, "grep", env, nil, 0)
	if err != nil {
		return nil, err
	}
	if r.code != 0 {
		return &backend.GrepResult{Error: pathError(r, shownPath(rel), "searched", b.opts.MaxReadBytes)}, nil
	}
	isFile := r.get("kind") == "file"
	// toRoot maps a name the helper printed (relative to the searched
	// directory) to the workspace path and the path relative to the
	// searched directory.
	toRoot := func(name string) (relToDir, p string) {
		if isFile {
			return path.Base(rel), rel
		}
		relToDir = strings.TrimPrefix(name, "./")
		return relToDir, joinRel(rel, relToDir)
	}
	marks := b.marks(r)
	recs := files(r)
	var fileRec fileRec
	for _, f := range recs {
		if isFile {
			fileRec = f
		}
	}
	res := &backend.GrepResult{Matches: []backend.GrepMatch{}, Truncated: r.truncated}
	for name, f := range recs {
		relToDir, p := toRoot(name)
		if b.skipped(f) && !isMeta(p) && (req.Glob == "" || globMatch(req.Glob, relToDir, p)) {
			res.Skipped = append(res.Skipped, p)
		}
	}
	// What could not be read is reported, never silently left out: a
	// file (if the glob would keep it) or a directory, whose content is
	// unknown whatever the glob.
	for _, v := range r.kv["u"] {
		kind, name, ok := strings.Cut(v, " ")
		if !ok || (kind != "d" && kind != "f") {
			continue
		}
		relToDir, p := toRoot(name)
		if isMeta(p) {
			continue
		}
		if kind == "d" {
			p += "/"
		} else if req.Glob != "" && !globMatch(req.Glob, relToDir, p) {
			continue
		}
		res.Unreadable = append(res.Unreadable, p)
	}
	slices.Sort(res.Unreadable)
	res.Unreadable = slices.Compact(res.Unreadable)
	for _, p := range res.Unreadable {
		if !slices.Contains(res.Skipped, p) {
			res.Skipped = append(res.Skipped, p)
		}
	}
	slices.Sort(res.Skipped)
	out := r.stdout
	for len(out) > 0 {
		i := bytes.IndexByte(out, 0)
		if i < 0 {
			break
		}
		name := string(out[:i])
		out = out[i+1:]
		j := bytes.IndexByte(out, '\n')
		open := j < 0
		if open {
			j = len(out) // a line cut by the output cap
		}
		line := out[:j]
		out = out[min(j+1, len(out)):]
		// "<line>:<text>" for a match, "<line>-<text>" for a context
		// line (grep -A/-B).
		k := 0
		for k < len(line) && line[k] >= '0' && line[k] <= '9' {
			k++
		}
		if k == len(line) || (line[k] != ':' && line[k] != '-') {
			continue
		}
		isContext, text := line[k] == '-', line[k+1:]
		n, err := strconv.Atoi(string(line[:k]))
		if err != nil {
			continue
		}
		relToDir, p := toRoot(name)
		f, known := recs[strings.TrimPrefix(name, "./")]
		if isFile {
			f, known = fileRec, true
		}
		if isMeta(p) || !known || marks[f.key] || b.skipped(f) {
			continue
		}
		if req.Glob != "" && !globMatch(req.Glob, relToDir, p) {
			continue
		}
		m := backend.GrepMatch{Path: p, Line: n, Context: isContext}
		if backend.IsText(text) {
			m.Text = b.cutLine(string(text), open)
		} else {
			esc, cut := escapeLine(text)
			m.Text, m.Escaped = b.cutAt(esc, cut, open), true
		}
		res.Matches = append(res.Matches, m)
	}
	slices.SortFunc(res.Matches, func(a, b backend.GrepMatch) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return a.Line - b.Line
	})
	if req.MaxCount > 0 {
		res.Matches, res.Truncated = capMatches(res.Matches, req.MaxCount, req.After, res.Truncated)
	}
	return res, nil
}

// capMatches keeps the first max matches of a sorted list and the context
// lines of those: a context line after the last match kept is kept only
// when it is within after lines of it (the rest was the next match's).
// It reports whether matches were dropped, or truncated already was.
func capMatches(list []backend.GrepMatch, max, after int, truncated bool) ([]backend.GrepMatch, bool) {
	found := 0
	for i, m := range list {
		if m.Context {
			continue
		}
		if found++; found > max {
			list, truncated = list[:i], true
			break
		}
	}
	last := -1
	for i, m := range list {
		if !m.Context {
			last = i
		}
	}
	if last < 0 {
		return list[:0], truncated
	}
	end := last + 1
	for end < len(list) && list[end].Path == list[last].Path && list[end].Line-list[last].Line <= after {
		end++
	}
	return list[:end], truncated
}

// escapeLine renders a line that is not text: each byte of a control
// character other than tab, vertical tab, form feed and carriage return
// (C1 controls included), and each byte that is not UTF-8, is written
// \xNN; the rest is kept. It returns the whole rendering and where in it
// a cut after MaxLineChars characters of the line falls (never inside an
// escaped one); cutAt makes the cut.
func escapeLine(line []byte) (string, int) {
	var sb strings.Builder
	cut := -1
	for n := 0; len(line) > 0; n++ {
		if n == MaxLineChars {
			cut = sb.Len()
		}
		r, size := utf8.DecodeRune(line)
		switch {
		case r == utf8.RuneError && size <= 1,
			r < 0x20 && r != '\t' && r != '\v' && r != '\f' && r != '\r',
			r == 0x7f, r >= 0x80 && r <= 0x9f:
			for _, c := range line[:size] {
				fmt.Fprintf(&sb, `\x%02x`, c)
			}
		default:
			sb.Write(line[:size])
		}
		line = line[size:]
	}
	if cut < 0 {
		cut = sb.Len()
	}
	return sb.String(), cut
}

// cutLine cuts s after MaxLineChars characters, adding "..."; see cutAt.
func (b *FilesystemBackend) cutLine(s string, open bool) string {
	cut := len(s)
	n := 0
	for i := range s {
		if n == MaxLineChars {
			cut = i
			break
		}
		n++
	}
	return b.cutAt(s, cut, open)
}

// cutAt cuts s at byte cut (len(s): no cut), adding "...". The cut
// never splits a secret value (SecretEnv, Secrets, the sandbox's own as
// its handle redacts them) or a line of a multi-line one, so that
// a caller that redacts the values from results sees none of one: a value
// the cut would split is cut off whole. When the line is open (the output
// cap cut it, so more may follow), a tail that may be the start of a
// value is cut off too.
func (b *FilesystemBackend) cutAt(s string, cut int, open bool) string {
	if open {
		for i := 0; i < cut; i++ {
			if b.startsSecret(s[i:]) {
				cut = i
				break
			}
		}
	}
	for moved := true; moved; {
		moved = false
		for sv := range b.secretValues() {
			for _, v := range strings.Split(sv, "\n") { // a line holds a line of a value at most
				for at := max(0, cut-len(v)+1); v != "" && at < cut; at++ {
					if strings.HasPrefix(s[at:], v) && at+len(v) > cut {
						cut, moved = at, true
						break
					}
				}
			}
		}
	}
	if rp := b.redact.Load(); rp != nil && cut < len(s) {
		// A value of the sandbox's own (CreateOptions.SecretEnv, a
		// brokered secret), which the caller's redaction of results finds
		// but this backend was not given: the cut goes before it.
		if c := redactcut.Off([]byte(s), cut, true, *rp); c <= cut {
			cut = c
		} else {
			cut = 0 // it starts the text: cut off whole
		}
	}
	if cut < len(s) {
		return s[:cut] + "..."
	}
	return s
}

// dropSecretTail returns s without its shortest-starting tail that is a
// proper prefix of a secret value (or of a line of one), for a text
// cut at its end.
func (b *FilesystemBackend) dropSecretTail(s string) string {
	longest := 0
	for sv := range b.secretValues() {
		longest = max(longest, len(sv))
	}
	for i := max(0, len(s)-longest); i < len(s); i++ {
		if b.startsSecret(s[i:]) {
			return s[:i]
		}
	}
	return s
}

// secretValues yields the values a cut must not split: SecretEnv's and
// Secrets.
func (b *FilesystemBackend) secretValues() iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, v := range b.opts.SecretEnv {
			if !yield(v) {
				return
			}
		}
		for _, v := range b.opts.Secrets {
			if !yield(v) {
				return
			}
		}
	}
}

// startsSecret reports whether s is a non-empty proper prefix of a
// secret value or of a line of one.
func (b *FilesystemBackend) startsSecret(s string) bool {
	for sv := range b.secretValues() {
		for _, v := range strings.Split(sv, "\n") {
			if s != "" && len(s) < len(v) && strings.HasPrefix(v, s) {
				return true
			}
		}
	}
	return false
}

// Execute runs a shell command in the workspace, when Options.AllowExecute
// is set. One round trip (two on the first call over a new transport, which
// makes sure the workspace exists). A request with a Stream gets the output
// live as well, redacted like Output and serialized into one writer.
func (b *FilesystemBackend) Execute(ctx context.Context, req *backend.ExecuteRequest) (_ *backend.ExecuteResult, err error) {
	ctx, span := b.span(ctx, "execute")
	defer func() { telemetry.End(span, err) }()
	if !b.opts.AllowExecute {
		return &backend.ExecuteResult{Error: backend.Errorf(backend.CodePermissionDenied, "", "execute is disabled for this backend")}, nil
	}
	if strings.TrimSpace(req.Command) == "" {
		return &backend.ExecuteResult{Error: backend.Errorf(backend.CodeInvalidPath, "", "the command is empty")}, nil
	}
	base, err := b.BaseDir(ctx)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	ready := b.ready
	b.mu.Unlock()
	if !ready {
		// First contact: create and pin the workspace before the command
		// can rearrange it.
		r, err := b.run(ctx, base, "pin", map[string]string{"SBX_PATH": "."}, nil, 4096)
		if err != nil {
			return nil, fmt.Errorf("fsbackend: execute: create the workspace: %w", err)
		}
		if r.code != 0 {
			return &backend.ExecuteResult{Error: pathError(r, "", "", b.opts.MaxReadBytes)}, nil
		}
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = b.opts.ExecuteTimeout
	}
	limit := b.opts.MaxExecuteOutput
	cmd := sandbox.Command{
		Shell: req.Command, Dir: base, Env: b.opts.Env, SecretEnv: b.opts.SecretEnv,
		Timeout: timeout, MaxOutput: limit,
	}
	if req.Stream != nil {
		// Both streams go to one writer, which the sandbox may call from
		// two goroutines: serialize the writes.
		w := &lockedWriter{w: req.Stream}
		cmd.Stdout, cmd.Stderr = w, w
	}
	res, err := b.sb.Exec(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("fsbackend: execute: %w", err)
	}
	out := res.Stdout
	if len(res.Stderr) > 0 {
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		out = append(out, res.Stderr...)
	}
	truncated := res.StdoutTruncated || res.StderrTruncated || len(out) > limit
	if len(out) > limit {
		out = out[:limit]
	}
	xr := &backend.ExecuteResult{
		Output: strings.ToValidUTF8(string(out), "\uFFFD"), ExitCode: res.ExitCode,
		TimedOut: res.TimedOut, Truncated: truncated,
	}
	if res.Signal != 0 {
		xr.Signal = signame.Name(res.Signal)
	}
	return xr, nil
}

// lockedWriter serializes the writes of a command's two output streams
// to one writer (ExecuteRequest.Stream).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// batch runs f for each index, a few at a time (one at a time when
// sequential), and returns the first Go error.
func batch(ctx context.Context, n int, sequential bool, f func(i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		sem   = make(chan struct{}, 4)
	)
	if sequential {
		sem = make(chan struct{}, 1)
	}
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(i); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// UploadFiles writes files as bytes, one round trip each, and returns the
// results in input order. An item is marked binary when its Binary field
// is set or its data is not text.
func (b *FilesystemBackend) UploadFiles(ctx context.Context, req *backend.UploadFilesRequest) (_ *backend.UploadFilesResult, err error) {
	ctx, span := b.span(ctx, "upload_files")
	defer func() { telemetry.End(span, err) }()
	results, err := b.writeBatch(ctx, req.Files)
	if err != nil {
		return nil, err
	}
	return &backend.UploadFilesResult{Results: results}, nil
}

func (b *FilesystemBackend) writeBatch(ctx context.Context, files []backend.File) ([]backend.FileResult, error) {
	base, err := b.BaseDir(ctx)
	if err != nil {
		return nil, err
	}
	results := make([]backend.FileResult, len(files))
	// Items that name the same path, or a path and one below it, are
	// written one after the other, in input order.
	rels := make([]string, 0, len(files))
	for _, f := range files {
		if rel, perr := jail(base, f.Path); perr == nil {
			rels = append(rels, rel)
		}
	}
	err = batch(ctx, len(files), overlapping(rels), func(i int) error {
		f := files[i]
		results[i].Path = f.Path
		rel, perr := jail(base, f.Path)
		if perr != nil {
			results[i].Error = perr
			return nil
		}
		w, err := b.writeFile(ctx, base, rel, f.Data, f.Binary || !backend.IsText(f.Data))
		if err != nil {
			return err
		}
		results[i].Error = w.Error
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// overlapping reports whether two of the relative paths are equal or one
// lies below the other.
func overlapping(rels []string) bool {
	rels = slices.Clone(rels)
	slices.Sort(rels)
	for i := 1; i < len(rels); i++ {
		if rels[i] == rels[i-1] || strings.HasPrefix(rels[i], rels[i-1]+"/") {
			return true
		}
	}
	return false
}

// DownloadFiles reads files as bytes, one round trip each, and returns the
// results in input order.
func (b *FilesystemBackend) DownloadFiles(ctx context.Context, req *backend.DownloadFilesRequest) (_ *backend.DownloadFilesResult, err error) {
	ctx, span := b.span(ctx, "download_files")
	defer func() { telemetry.End(span, err) }()
	base, err := b.BaseDir(ctx)
	if err != nil {
		return nil, err
	}
	results := make([]backend.FileResult, len(req.Paths))
	err = batch(ctx, len(req.Paths), false, func(i int) error {
		results[i].Path = req.Paths[i]
		rel, perr := jail(base, req.Paths[i])
		if perr != nil {
			results[i].Error = perr
			return nil
		}
		data, _, perr, err := b.readFile(ctx, base, rel, false, "")
		if err != nil {
			return err
		}
		results[i].Data, results[i].Error = data, perr
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &backend.DownloadFilesResult{Results: results}, nil
}

// SetFiles writes a checkpoint back, one round trip per file, restoring
// binary marks; results are in input order.
func (b *FilesystemBackend) SetFiles(ctx context.Context, req *backend.SetFilesRequest) (_ *backend.SetFilesResult, err error) {
	ctx, span := b.span(ctx, "set_files")
	defer func() { telemetry.End(span, err) }()
	results, err := b.writeBatch(ctx, req.Files)
	if err != nil {
		return nil, err
	}
	return &backend.SetFilesResult{Results: results}, nil
}
