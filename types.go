package sandbox

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

// The value types a user reads back from a Client or Sandbox belong to this
// package, not to the driver contract: the portable layer converts at its
// boundary (the unexported ...Of and toDriver helpers below), so that a
// change to package driver never changes the user's API.

// Info describes a sandbox: its id, provider, template, labels, state,
// lease end, home directory and achieved isolation.
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
	// Network is the egress policy in force as the provider reports it,
	// normalised (see NetworkPolicy); nil when the provider reports none.
	Network *NetworkPolicy
	// BrokeredSecrets lists the secrets brokered for the sandbox (see
	// BrokeredSecret): hosts, header, env name and placeholder, never the
	// value. The creating handle reports what it asked for; a handle from
	// Attach, Get or List reports what the provider tells (it may lack Env
	// and Placeholder, and a provider that keeps its rules by host and
	// header reports one entry per header).
	BrokeredSecrets []BrokeredSecretInfo
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
	if i := strings.LastIndexByte(fi.Path, '/'); i >= 0 && i < len(fi.Path)-1 {
		return fi.Path[i+1:]
	}
	return fi.Path
}

// IsDir reports whether the file is a directory.
func (fi FileInfo) IsDir() bool { return fi.Mode.IsDir() }

// FS returns fi as an fs.FileInfo.
func (fi FileInfo) FS() fs.FileInfo { return fsInfo{fi} }

// fsInfo adapts FileInfo to fs.FileInfo (its methods are named like the
// fields, so it cannot implement the interface directly).
type fsInfo struct{ fi FileInfo }

func (f fsInfo) Name() string       { return f.fi.Name() }
func (f fsInfo) Size() int64        { return f.fi.Size }
func (f fsInfo) Mode() fs.FileMode  { return f.fi.Mode }
func (f fsInfo) ModTime() time.Time { return f.fi.ModTime }
func (f fsInfo) IsDir() bool        { return f.fi.Mode.IsDir() }
func (f fsInfo) Sys() any           { return nil }

// Capabilities tells what a provider can do (Client.Capabilities).
type Capabilities struct {
	// Pause is true when Sandbox.Pause and Resume work.
	Pause bool
	// PauseKeepsMemory is true when running processes survive Pause and
	// Resume (E2B, local); false when pause is a stop (Daytona).
	PauseKeepsMemory bool
	// Processes is true when Sandbox.Start and AttachProcess work.
	Processes bool
	// Terminals is true when Sandbox.StartTerminal and AttachTerminal
	// work (the provider is a driver.TerminalRuntime).
	Terminals bool
	// AttachAcrossClients is true when a process (or terminal) started by
	// one Client can be attached by another Client in another OS process.
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
	// NetworkPolicy declares which egress policies (CreateOptions.Network)
	// the provider can enforce; NetworkPolicy.NotEnforced marks a provider
	// that only records them.
	NetworkPolicy NetworkSupport
	// NetworkUpdate is true when Sandbox.SetNetwork works.
	NetworkUpdate bool
	// Ports is true when Sandbox.Expose works.
	Ports bool
	// ReportsSignal is true when Result.Signal names the signal that ended
	// a command; false when the provider sees only an exit code (Signal is
	// then always 0 and ExitCode -1 says only that a signal ended it, if
	// the provider can tell even that).
	ReportsSignal bool
	// ReportsLeaseEnd is true when the provider tells a sandbox its lease
	// ended from one destroyed otherwise, so an error matching
	// ErrLeaseExpired is a fact; without it, that error is the portable
	// layer's best guess from the lease end the handle knew.
	ReportsLeaseEnd bool
	// Watch is true when Sandbox.Watch works.
	Watch bool
	// WatchLatency is how late Sandbox.Watch may report an event: 0 for a
	// provider told of changes as they happen, the polling interval for
	// one that polls (Daytona, docker).
	WatchLatency time.Duration
	// ProcessList is true when Sandbox.Processes works.
	ProcessList bool
	// Metrics is true when Sandbox.Metrics reports resource use (the
	// provider is a driver.MetricsReader).
	Metrics bool
	// Snapshots is true when Sandbox.Snapshot, CreateOptions.FromSnapshot
	// and the snapshot calls of Client work (a driver.Snapshotter).
	Snapshots bool
	// SnapshotModes lists the modes Sandbox.Snapshot can take on this
	// provider (and host); empty without Snapshots.
	SnapshotModes []SnapshotMode
	// SnapshotNote says what the provider offers for snapshots on this
	// host and what it lacks (local: "reflink" or "copy", and whether
	// CRIU is installed for full snapshots); empty without Snapshots.
	SnapshotNote string
	// Fork is true when Sandbox.Fork works: natively or through a
	// snapshot.
	Fork bool
	// NativeFork is true when the provider forks natively
	// (driver.Forker), without a snapshot the caller sees.
	NativeFork bool
}

// Resources requests compute for a sandbox. Zero fields take the provider's
// defaults; units follow the field names.
type Resources struct {
	CPUs      int
	MemoryMiB int
	DiskGiB   int
}

// ExposeOptions tunes Sandbox.Expose.
type ExposeOptions struct {
	// TTL asks for an endpoint that stays valid at least this long, where
	// the provider's endpoints expire (Daytona's signed preview URLs); 0
	// takes the provider's default. Providers whose endpoints live as long
	// as the sandbox ignore it.
	TTL time.Duration
	// MaxConns caps the connections the endpoint holds at once, where the
	// relay runs on this host (local); a connection beyond it is closed
	// at once. 0 takes the provider's default (local: 256). Providers
	// whose edge is a remote service (E2B, Daytona) apply its limits and
	// report none (Endpoint.MaxConns 0). Negative is InvalidArgument.
	MaxConns int
	// IdleTimeout closes a connection through which no byte moved either
	// way for this long, where the relay runs on this host (local). 0
	// takes the provider's default (local: 5 minutes). Remote edges apply
	// their own (Endpoint.IdleTimeout 0). Negative is InvalidArgument.
	IdleTimeout time.Duration
}

// Endpoint is how the host reaches a port of a sandbox (Sandbox.Expose).
//
// Header may carry an access token: treat it as a secret. String (and so
// %v) prints the URL and header names only.
//
// An endpoint is private unless Public is set: a request without Header
// (the access token in it) is refused, so that knowing or guessing the
// URL, or being another user of the host, is not enough to reach the
// port. NewRequest adds Header to a request.
type Endpoint struct {
	// Port is the port inside the sandbox.
	Port int
	// URL is the base URL (scheme and host, no trailing slash), such as
	// "http://127.0.0.1:41234" (local) or "https://8000-<id>.e2b.app".
	URL string
	// Header holds the headers every request must carry (an access
	// token); nil when none is needed.
	Header http.Header
	// Expires is when the endpoint stops working; zero means it lives as
	// long as the sandbox.
	Expires time.Time
	// Public reports that the endpoint serves requests without Header's
	// access token: anyone who can reach URL reaches the port (an E2B
	// sandbox created with public traffic, a public Daytona sandbox).
	Public bool
	// Socket, when set, is the path of a unix socket that reaches the
	// port too, carrying any protocol's bytes as they are (no header
	// needed): it and its directory are accessible to this process's user
	// only (modes 0600 and 0700). Local endpoints offer it for protocols
	// other than HTTP/1.x, whose first request could not carry Header.
	Socket string
	// MaxConns is the most connections the endpoint holds at once, and
	// IdleTimeout how long one may stay idle before it is closed, where
	// the provider enforces them on this host (local); 0 when a remote
	// edge applies its own limits.
	MaxConns    int
	IdleTimeout time.Duration

	// check is the provider's Endpoint.Check; provider and id name the
	// sandbox in Transport's errors.
	check        func(*http.Response) error
	provider, id string
}

// String describes e without header values, which may be secrets.
func (e Endpoint) String() string {
	s := fmt.Sprintf("port %d at %s", e.Port, e.URL)
	if len(e.Header) > 0 {
		s += " (headers: " + strings.Join(slices.Sorted(maps.Keys(e.Header)), ", ") + ")"
	}
	return s
}

// GoString is String, so %#v does not print header values either.
func (e Endpoint) GoString() string { return e.String() }

// NewRequest returns a request for path (such as "/index.html") on the
// endpoint, carrying e.Header. A path that does not start with "/" is
// InvalidArgument.
func (e Endpoint) NewRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	if path != "" && !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("sandbox: endpoint path %q: %w", printable(path), Errorf(InvalidArgument, "must start with /"))
	}
	req, err := http.NewRequestWithContext(ctx, method, e.URL+path, body)
	if err != nil {
		return nil, fmt.Errorf("sandbox: endpoint request: %w", err)
	}
	for k, vs := range e.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	return req, nil
}

// infoOf converts a driver's Info; the maps are copied so the driver keeps
// its own.
func infoOf(in driver.Info) Info {
	return Info{
		ID: in.ID, Provider: in.Provider, Template: in.Template, Labels: maps.Clone(in.Labels),
		State: State(in.State), CreatedAt: in.CreatedAt, LeaseEnd: in.LeaseEnd, Home: in.Home,
		Isolation: in.Isolation, Detail: maps.Clone(in.Detail), Network: networkPolicyOf(in.Network),
		BrokeredSecrets: brokeredInfoOf(in.Secrets, nil),
	}
}

// fileInfoOf converts a driver's FileInfo.
func fileInfoOf(fi driver.FileInfo) FileInfo {
	return FileInfo{Path: fi.Path, Size: fi.Size, Mode: fi.Mode, ModTime: fi.ModTime, LinkTarget: fi.LinkTarget}
}

// capabilitiesOf converts what a driver declares; the capabilities its
// interfaces show are set by capabilities.
func capabilitiesOf(d driver.Capabilities) Capabilities {
	return Capabilities{
		PauseKeepsMemory: d.PauseKeepsMemory, AttachAcrossClients: d.AttachAcrossClients,
		ServerSideLabels: d.ServerSideLabels, Persistent: d.Persistent, Isolation: d.Isolation,
		DefaultLease: d.DefaultLease, MaxLease: d.MaxLease, Network: d.Network, NetworkPolicy: d.NetworkPolicy,
		ReportsSignal: d.ReportsSignal, ReportsLeaseEnd: d.ReportsLeaseEnd, WatchLatency: d.WatchLatency,
		SnapshotModes: snapshotModesOf(d.SnapshotModes), SnapshotNote: d.SnapshotNote,
	}
}

// endpointOf converts a driver's Endpoint.
func endpointOf(e driver.Endpoint) Endpoint {
	return Endpoint{Port: e.Port, URL: e.URL, Header: e.Header.Clone(), Expires: e.Expires, Public: e.Public,
		Socket: e.Socket, MaxConns: e.MaxConns, IdleTimeout: e.IdleTimeout, check: e.Check}
}

// toDriver converts r for a CreateRequest.
func (r Resources) toDriver() driver.Resources {
	return driver.Resources{CPUs: r.CPUs, MemoryMiB: r.MemoryMiB, DiskGiB: r.DiskGiB}
}

// toDriver converts o for PortExposer.Expose.
func (o ExposeOptions) toDriver() driver.ExposeOptions {
	return driver.ExposeOptions{TTL: o.TTL, MaxConns: o.MaxConns, IdleTimeout: o.IdleTimeout}
}

// statesToDriver converts a ListOptions.States filter; nil stays nil.
func statesToDriver(states []State) []driver.State {
	if states == nil {
		return nil
	}
	out := make([]driver.State, len(states))
	for i, s := range states {
		out[i] = driver.State(s)
	}
	return out
}

// snapshotModesOf converts the snapshot modes a driver declares.
func snapshotModesOf(ms []driver.SnapshotMode) []SnapshotMode {
	if len(ms) == 0 {
		return nil
	}
	out := make([]SnapshotMode, len(ms))
	for i, m := range ms {
		out[i] = SnapshotMode(m)
	}
	return out
}
