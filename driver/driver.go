// Package driver is the contract a sandbox provider implements: the
// Runtime interface, its optional interfaces (Pauser, ProcessRuntime,
// TransportResetter, KeyedCreator, Closer) and the request and result types
// they exchange with the portable layer. It is to package sandbox what
// gocloud.dev/blob/driver is to blob: application code holds a
// *sandbox.Client and never calls a driver directly, and providers import
// this package and package sberrors, never package sandbox.
//
// The portable layer owns the policy (validation, defaults, output caps,
// redaction of the caller's secrets, the single retry after a stale
// transport, error wrapping); a driver receives resolved values: a
// Command's Timeout is always set, its Env already holds the secret values,
// and its Stdout and Stderr are the portable layer's writers. A driver
// still scrubs its own credentials (API keys, tokens) from its errors.
//
// Package drivertest checks a Runtime against this contract.
package driver

import (
	"context"
	"io"
	"io/fs"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox/sberrors"
)

// Runtime is the contract a provider implements. Application code should
// not call it directly: use sandbox.Client and sandbox.Sandbox, which validate input, apply
// defaults, cap output, wrap errors into *sberrors.Error and retry once after a
// stale transport, the same way for every provider.
//
// Codes and sentinels named below (NotFound, ErrNotFound, ErrPaused, ...)
// are those of package sberrors.
//
// Contract for every method:
//   - ctx bounds the call; when it ends, the call returns promptly with
//     ctx.Err() (wrapped) and any remote work it started is ended.
//   - ids, paths and requests have been validated by the portable layer:
//     ids are non-empty, paths are absolute, clean and free of control
//     characters, request pointers are non-nil.
//   - a sandbox that does not exist yields an error for which CodeOf
//     returns NotFound (wrap ErrNotFound); a paused sandbox that cannot
//     serve the call yields one that matches ErrPaused.
//   - ErrStaleTransport may be returned only when the provider cannot have
//     acted on the request (see its doc); ErrOutcomeUnknown when it may have.
//   - errors never contain API keys, access tokens or signed URLs.
//   - file paths name the sandbox's file system as its commands see it,
//     with their permissions: a place the sandbox's user may not write is
//     PermissionDenied, for the file methods as for a command. A provider
//     that serves less (see its doc) answers PermissionDenied elsewhere.
//   - the same bad input gets the same Code and sentinel on every
//     provider (sandboxtest's Files/ErrorTable and Exec/ErrorTable): a
//     missing path is NotFound (matching fs.ErrNotExist), a directory where
//     a file is expected ErrIsDirectory, a file where a directory is
//     expected (also as a parent, or as Command.Dir) ErrNotDirectory, a
//     missing Command.Dir NotFound.
//
// Optional features are separate interfaces discovered by type assertion
// ([Pauser], [ProcessRuntime], [TransportResetter], [Closer],
// [KeyedCreator], [PortExposer], [NetworkSetter], [Snapshotter], [Forker],
// [TerminalRuntime], [Watcher], [ProcessLister]); Capabilities declares only what their
// presence cannot show.
type Runtime interface {
	// Name returns the provider's name, such as "local" or "e2b".
	Name() string

	// Capabilities returns the facts about this provider that the presence
	// of a method cannot show. It must be cheap and constant.
	Capabilities() Capabilities

	// Create creates and starts a sandbox and returns its Info once it is
	// ready to execute commands. If the provider created the sandbox but a
	// later step failed, Create returns the Info (with its ID) together
	// with the error, so the portable layer can destroy it.
	Create(ctx context.Context, req *CreateRequest) (Info, error)

	// Get returns the current Info of a sandbox, or a NotFound error.
	Get(ctx context.Context, id string) (Info, error)

	// List returns one page of sandboxes, filtered by req.Labels (all must
	// match) and req.States (any may match) where the provider can filter;
	// the portable layer filters again, so a provider may return a superset.
	// req.ExcludeIDs are left out where the provider can, likewise.
	// An empty next token means the last page; a page may be empty while
	// the next token is not.
	List(ctx context.Context, req *ListRequest) (page []Info, next string, err error)

	// Destroy ends a sandbox and everything in it. A sandbox that is already
	// gone is not an error: Destroy returns nil.
	Destroy(ctx context.Context, id string) error

	// SetTimeout sets the sandbox's lease to end d from now. The portable
	// layer calls it only to extend a lease.
	SetTimeout(ctx context.Context, id string, d time.Duration) error

	// Exec runs cmd to completion. cmd.Stdout and cmd.Stderr are non-nil and
	// receive output as it is produced (split, byte-exact); cmd.Stdin is nil
	// when the command's stdin must be closed (empty). cmd.Timeout is > 0
	// and must be enforced by the provider (sent on the wire where the
	// provider has one): when it expires the command's whole process tree is
	// ended and Exec returns ExitStatus{TimedOut: true} with a nil error.
	// A non-zero exit is an ExitStatus, not an error; a missing program is
	// exit code 127.
	//
	// A transport failure is always an error, never an ExitStatus: the
	// status describes only a command the provider saw end. (Some SDKs fold
	// transport failures into results, so callers retried when a result's
	// text carried a stale-transport marker; this contract forbids that, so the portable layer's single
	// retry looks at errors only and no Result can hide a dead transport.)
	//
	// The output rule: when Exec returns a nil error, every byte the command
	// wrote to stdout and stderr has been written to cmd.Stdout and
	// cmd.Stderr, in order per stream, and the ExitStatus is the one the
	// provider observed. A provider that lost output, could not fetch it, or
	// did not see the exit (a stalled or broken connection) returns an error
	// (ErrOutcomeUnknown or Unavailable, say), never a short output with a
	// nil error; TimedOut with a nil error only when cmd.Timeout ended the
	// command. Output a descendant writes after the command exited, while
	// it keeps the streams open, may be cut off after a grace the provider
	// documents, but never output written before the exit. Once Exec
	// returned, every Read of cmd.Stdin fails (the portable layer closes
	// it, abandoning a Read in progress): a goroutine copying it ends then.
	// cmd.Stdin is also an io.Closer that does the same at once: a driver
	// that joins its stdin copy before returning closes it first, once the
	// command ended, since a Read of the caller's reader may never return.
	Exec(ctx context.Context, id string, cmd *Command) (ExitStatus, error)

	// Upload writes the bytes of r to path, creating missing parent
	// directories and replacing an existing file atomically: the bytes go
	// to a temporary name in path's directory, renamed over path after the
	// last byte. On any failure (r fails, ctx ends, the transport breaks)
	// path is left as it was, the temporary file is removed, and nothing is
	// written on the call's behalf once it has returned. An error of r is
	// returned wrapped. It streams: it must not hold the whole content in
	// memory. path naming a directory yields an error matching
	// ErrIsDirectory, a parent that is a file ErrNotDirectory, a place the
	// sandbox's user may not write PermissionDenied.
	Upload(ctx context.Context, id, path string, r io.Reader) error

	// Download opens path for streaming. A missing file is NotFound, a
	// directory matches ErrIsDirectory. The caller closes the reader; the
	// reader's reads fail once ctx ends.
	Download(ctx context.Context, id, path string) (io.ReadCloser, error)

	// Stat describes path, following symbolic links as os.Stat does. A
	// missing path is NotFound.
	Stat(ctx context.Context, id, path string) (FileInfo, error)

	// ReadDir lists the entries of the directory path, sorted by name,
	// without following symbolic links (as os.ReadDir). A file is
	// ErrNotDirectory, a missing path NotFound.
	ReadDir(ctx context.Context, id, path string) ([]FileInfo, error)

	// MkdirAll creates path and any missing parents; existing directories
	// are not an error, an existing file is (ErrNotDirectory).
	MkdirAll(ctx context.Context, id, path string) error

	// Remove removes path, and everything below it when it is a directory.
	// A missing path is NotFound.
	Remove(ctx context.Context, id, path string) error

	// Rename moves oldPath to newPath, replacing a file at newPath.
	Rename(ctx context.Context, id, oldPath, newPath string) error
}

// Pauser is implemented by providers that can pause and resume sandboxes.
// Capabilities.PauseKeepsMemory says whether running processes survive.
type Pauser interface {
	// Pause freezes the sandbox. Pausing a paused sandbox is not an error.
	Pause(ctx context.Context, id string) error
	// Resume thaws a paused sandbox and returns its Info. Resuming a
	// running sandbox is not an error.
	Resume(ctx context.Context, id string) (Info, error)
}

// ProcessRuntime is implemented by providers that run background processes
// which outlive the call that started them.
type ProcessRuntime interface {
	// Start starts cmd and returns once it runs. ctx bounds only the start:
	// the process lives until it exits, is killed, hits cmd.Timeout (0 means
	// no limit for a background process) or the sandbox ends. Output goes to
	// cmd.Stdout and cmd.Stderr (non-nil) until the handle is closed; a
	// non-nil cmd.Stdin is copied to the process and its stdin closed at EOF.
	Start(ctx context.Context, id string, cmd *Command) (ProcessHandle, error)
	// Attach connects to a running process by pid, possibly from another
	// OS process than the one that started it. Output produced after the
	// attach goes to stdout and stderr (non-nil). A pid that does not exist
	// is NotFound.
	Attach(ctx context.Context, id string, pid int, stdout, stderr io.Writer) (ProcessHandle, error)
}

// ProcessHandle is a driver's handle on one background process.
type ProcessHandle interface {
	// PID identifies the process within its sandbox.
	PID() int
	// Wait blocks until the process exits (or ctx ends) and returns its
	// status; all output has been written when it returns. It must be safe
	// to call from several goroutines at once, each bounded by its own ctx.
	Wait(ctx context.Context) (ExitStatus, error)
	// Signal sends sig to the process (and its process group, where the
	// provider has them). Once the process has exited it returns nil and
	// sends nothing, promptly: the process is ended, so a cleanup Kill,
	// or one that races the exit, is no error. ErrNotFound is for a
	// sandbox or pid the provider does not know.
	Signal(ctx context.Context, sig syscall.Signal) error
	// Close releases the handle and its streams without ending the process.
	Close() error
}

// TransportResetter is implemented by providers whose transport (HTTP
// connections, tunnels, tokens) can go stale. The portable layer calls
// ResetTransport before its single retry after ErrStaleTransport.
type TransportResetter interface {
	ResetTransport() error
}

// KeyedCreator is implemented by providers that can make Client.GetOrCreate
// create at most one sandbox per key across OS processes (and across
// Clients of one process), where a single Client's single-flight cannot
// reach.
type KeyedCreator interface {
	// CreateKeyed returns the sandbox for key: one that already exists for
	// it (created false; it may be starting or paused) or one it creates
	// with req (created true). key is 32 lowercase hex digits derived from
	// the template and labels; req.Labels carry the labels. Two calls with
	// one key, in any processes, must not both end with created true and
	// different sandboxes that both survive. Like Create, on an error after
	// the provider made the sandbox it returns that sandbox's Info (with
	// created true) so the caller can destroy it; a sandbox it did not
	// create is never returned with an error.
	CreateKeyed(ctx context.Context, key string, req *CreateRequest) (info Info, created bool, err error)
}

// Closer is implemented by providers that hold resources (a spawner process,
// connections). Client.Close calls it.
type Closer interface {
	Close() error
}

// Capabilities are facts about a provider that method presence cannot show.
// Whether it pauses, runs background processes or exposes ports is whether
// the Runtime implements Pauser, ProcessRuntime or PortExposer: the
// portable layer derives those from the type assertions
// (sandbox.Client.Capabilities), so they are not declared here. A fact
// about an optional feature may be declared only by a Runtime that has it
// (package drivertest fails one that contradicts its interfaces).
type Capabilities struct {
	// PauseKeepsMemory is true when running processes survive Pause and
	// Resume (E2B, local); false when pause is a stop (Daytona). Only a
	// Pauser may declare it.
	PauseKeepsMemory bool
	// AttachAcrossClients is true when a process started by one Client can
	// be attached by another Client in another OS process. Only a
	// ProcessRuntime may declare it.
	AttachAcrossClients bool
	// ServerSideLabels is true when List filters by labels on the provider;
	// false when the provider returns everything and filtering is local.
	ServerSideLabels bool
	// Persistent is true when sandboxes outlive the Client (a new process
	// can Get and List them).
	Persistent bool
	// Isolation names what separates a sandbox from its host, such as
	// "microvm" or "L3 namespaces" or "none (in-memory fake)".
	Isolation string
	// DefaultLease is the lease a sandbox gets when CreateOptions.Timeout is 0.
	DefaultLease time.Duration
	// MaxLease is the longest lease the provider accepts; 0 means no limit.
	MaxLease time.Duration
	// Network is true when sandboxes can reach the network.
	Network bool
	// NetworkPolicy declares which egress policies the provider can put in
	// force (see NetworkSupport).
	NetworkPolicy NetworkSupport
	// ReportsSignal is true when ExitStatus.Signal names the signal that
	// ended a command; false when the provider sees only an exit code and
	// cannot tell a signal from, say, exit 137 (Signal is then always 0).
	ReportsSignal bool
	// ReportsLeaseEnd is true when the provider tells a sandbox its lease
	// ended from one destroyed otherwise: Get, Exec and process Wait on a
	// sandbox the provider ended at its lease end fail with an error
	// matching sberrors.ErrLeaseExpired (a *LeaseEndedError), and a plain
	// NotFound means that something else destroyed it. Without it, the
	// portable layer guesses from the lease end the handle knew.
	ReportsLeaseEnd bool
	// SnapshotModes lists the snapshot modes a Snapshotter can take on
	// this host; a mode not in it is refused before any request. Only a
	// Snapshotter may declare it.
	SnapshotModes []SnapshotMode
	// SnapshotNote, for a Snapshotter, says what the host offers for
	// snapshots and what it lacks (such as the package a missing mode
	// needs); the portable layer quotes it when it refuses a mode.
	SnapshotNote string
	// WatchLatency, for a Watcher, is how late an event may be reported:
	// 0 for a provider told of changes as they happen, the polling
	// interval for one that polls. Only a Watcher may declare it.
	WatchLatency time.Duration
}

// LeaseEndedError is the error of a call on a sandbox that the provider
// destroyed because its lease ended at End. It matches
// sberrors.ErrLeaseExpired and sberrors.ErrNotFound (Code NotFound). Providers that
// declare Capabilities.ReportsLeaseEnd return it, wrapped with their
// prefix, for such a sandbox.
type LeaseEndedError struct {
	// End is when the lease ended.
	End time.Time
}

// Error says when the lease ended.
func (e *LeaseEndedError) Error() string {
	return "the lease ended at " + e.End.UTC().Format(time.RFC3339) + " and the provider destroyed it"
}

// Unwrap returns sberrors.ErrLeaseExpired and sberrors.ErrNotFound: the
// sandbox is gone, as for any other end.
func (e *LeaseEndedError) Unwrap() []error {
	return []error{sberrors.ErrLeaseExpired, sberrors.ErrNotFound}
}

// State is the lifecycle state of a sandbox.
type State string

// The states. Providers map their own states onto these.
const (
	StateStarting State = "starting"
	StateRunning  State = "running"
	StatePaused   State = "paused" // paused, stopped or archived: Resume brings it back
	StateError    State = "error"
	// StateUnknown is a state the provider reported that this library does
	// not know (or none at all); Info.Detail["state"] holds what it said.
	// It is never taken for running: a later look-up may tell more.
	StateUnknown State = "unknown"
)

// Info describes a sandbox.
type Info struct {
	ID        string
	Provider  string
	Template  string
	Labels    map[string]string
	State     State
	CreatedAt time.Time
	// LeaseEnd is when the provider will end (or pause) the sandbox unless
	// the lease is extended; zero when unknown or unlimited.
	LeaseEnd time.Time
	// Home is the home directory as commands in the sandbox see it; relative
	// file paths are resolved against it.
	Home string
	// Isolation is what this sandbox achieved (see Capabilities.Isolation).
	Isolation string
	// Detail holds provider-specific facts worth showing (for example why a
	// local sandbox got a lower isolation level).
	Detail map[string]string
	// Network is the egress policy in force as the provider reports it;
	// nil when it reports none.
	Network *NetworkPolicy
	// Secrets are the brokered secrets in force as the provider reports
	// them: Hosts, Header and, where known, Placeholder. Value and Format
	// are always empty: a driver never reports a secret's value, and the
	// portable layer drops it if one does.
	Secrets []BrokeredSecret
}

// Resources requests compute for a sandbox. Zero fields take the provider's
// defaults; units follow the field names.
type Resources struct {
	CPUs      int
	MemoryMiB int
	DiskGiB   int
}

// CreateRequest is what the portable layer passes to Runtime.Create:
// CreateOptions after validation and defaults.
type CreateRequest struct {
	Template  string
	Labels    map[string]string
	Env       map[string]string // includes the secret env values
	Timeout   time.Duration     // lease; > 0
	AutoPause bool              // pause instead of destroy when the lease ends
	Resources Resources
	// NoNetwork cuts the sandbox off from the network. It is true whenever
	// Network is in NetworkDenyAll mode, so a driver that knows only
	// NoNetwork still cuts it off.
	NoNetwork bool
	// Network is the egress policy, validated, normalised and checked
	// against Capabilities.NetworkPolicy; nil means the provider's default
	// (the network NoNetwork says).
	Network *NetworkPolicy
	// Secrets are the brokered secrets (see BrokeredSecret); empty unless
	// Capabilities.NetworkPolicy.BrokeredSecrets is declared.
	Secrets []BrokeredSecret
	// FromSnapshot, when set, is the ID of the snapshot (see Snapshotter)
	// the sandbox is created from; Template is then empty.
	FromSnapshot string
	// Options carries provider-specific settings by key (documented by
	// each provider); unknown keys are an InvalidArgument error.
	Options map[string]string
}

// ListRequest is what the portable layer passes to Runtime.List.
type ListRequest struct {
	Labels    map[string]string
	States    []State
	PageToken string
	PageSize  int // the most to return; 0 (or less) asks for no bound, though the provider may still page
	// ExcludeIDs are sandboxes the caller already knows and wants left
	// out. A provider that can leave them out before it fills a page
	// does (so a page holds other matches); one that cannot may return
	// them, and the portable layer filters again. Either way a page is
	// never the last (an empty next token) while matches that are not
	// excluded remain: a page emptied by exclusion still carries the
	// next token.
	ExcludeIDs []string
}

// ExitStatus is how a command ended.
type ExitStatus struct {
	// ExitCode is the command's exit code, or -1 when it was ended by a
	// signal or a timeout.
	ExitCode int
	// TimedOut is true when Command.Timeout ended the command.
	TimedOut bool
	// Signal is the signal that ended the command, when the provider can
	// tell (Capabilities.ReportsSignal); ExitCode is then -1. It is 0
	// when the command exited, when the provider cannot tell a signal
	// from an exit code, and when TimedOut is set: the signal a provider
	// sends to end a timed-out command is not reported, so TimedOut stays
	// the one mark of a timeout. The number is Linux's, as the sandbox
	// sees it, whatever the host.
	Signal syscall.Signal
}

// FileInfo describes a file in a sandbox. Its FS method adapts it to fs.FileInfo.
type FileInfo struct {
	// Path is the absolute path in the sandbox.
	Path    string
	Size    int64
	Mode    fs.FileMode // type bits and permissions
	ModTime time.Time
	// LinkTarget is the target of a symbolic link, when the provider reports it.
	LinkTarget string
}

// Name returns the last element of Path.
func (fi FileInfo) Name() string {
	for i := len(fi.Path) - 1; i >= 0; i-- {
		if fi.Path[i] == '/' {
			if i == len(fi.Path)-1 {
				return fi.Path
			}
			return fi.Path[i+1:]
		}
	}
	return fi.Path
}

// IsDir reports whether the file is a directory.
func (fi FileInfo) IsDir() bool { return fi.Mode.IsDir() }

// fileInfo adapts FileInfo to fs.FileInfo (its methods are named like the
// fields, so it cannot implement the interface directly).
type fileInfo struct{ fi FileInfo }

func (f fileInfo) Name() string       { return f.fi.Name() }
func (f fileInfo) Size() int64        { return f.fi.Size }
func (f fileInfo) Mode() fs.FileMode  { return f.fi.Mode }
func (f fileInfo) ModTime() time.Time { return f.fi.ModTime }
func (f fileInfo) IsDir() bool        { return f.fi.Mode.IsDir() }
func (f fileInfo) Sys() any           { return nil }

// FS returns fi as an fs.FileInfo.
func (fi FileInfo) FS() fs.FileInfo { return fileInfo{fi} }
