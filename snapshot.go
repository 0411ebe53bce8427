package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

// SnapshotMode says what a snapshot keeps.
type SnapshotMode string

// The snapshot modes (Capabilities.SnapshotModes lists those a provider
// has).
const (
	// SnapshotFilesystem keeps the sandbox's files: its home, the packages
	// installed into it and every other path its commands may write.
	// Running processes are not kept: a sandbox created from it starts
	// fresh on those files. It is the default.
	SnapshotFilesystem SnapshotMode = "filesystem"
	// SnapshotFull keeps the files and the running processes with their
	// memory: a sandbox created from it resumes where the source was.
	SnapshotFull SnapshotMode = "full"
)

// SnapshotOptions configures Sandbox.Snapshot. The zero value takes a
// filesystem snapshot without name or labels.
type SnapshotOptions struct {
	// Name is a name for people; it need not be unique, and may be empty.
	Name string
	// Mode is what the snapshot keeps (default SnapshotFilesystem). A mode
	// the provider does not list in Capabilities.SnapshotModes is refused
	// with FailedPrecondition before any request.
	Mode SnapshotMode
	// Labels are stored with the snapshot, to find it by with
	// ListSnapshotsOptions.Labels; they follow the rules of
	// CreateOptions.Labels.
	Labels map[string]string
}

// Snapshot describes a saved sandbox (Sandbox.Snapshot): pass its ID to
// CreateOptions.FromSnapshot to start a sandbox from it. A snapshot lives
// until DeleteSnapshot, independently of the sandbox it was taken of.
type Snapshot struct {
	ID       string
	Name     string
	Mode     SnapshotMode
	Provider string
	// Size is the bytes the snapshot holds, or -1 when the provider does
	// not say.
	Size      int64
	CreatedAt time.Time
	Labels    map[string]string
	// SourceID is the sandbox it was taken of, and Template the template
	// that sandbox was created from, where the provider knows them.
	SourceID string
	Template string
	// Detail holds provider-specific facts worth showing (for local: how
	// the files were copied, "reflink" or "copy").
	Detail map[string]string
}

// ListSnapshotsOptions filters Client.ListSnapshots. The zero value lists
// every snapshot.
type ListSnapshotsOptions struct {
	// Labels must all be present with equal values.
	Labels map[string]string
	// PageSize is how many snapshots to fetch per provider call (default
	// 100).
	PageSize int
}

// ForkOptions configures Sandbox.Fork: the options each new sandbox is
// created with. The zero value gives each the provider's default lease.
type ForkOptions struct {
	// Labels are set on every new sandbox (and on the snapshot a fork
	// without a native fork goes through, see Sandbox.Fork).
	Labels map[string]string
	// Env and SecretEnv are set for every command of the new sandboxes,
	// as in CreateOptions; the source's environment is not carried over
	// (a snapshot keeps files, not environments).
	Env       map[string]string
	SecretEnv map[string]string
	// Timeout is each new sandbox's lease (zero: Capabilities.DefaultLease).
	Timeout time.Duration
	// AutoPause pauses instead of destroying a new sandbox at its lease end.
	AutoPause bool
	// Resources requests CPU, memory and disk for each new sandbox.
	Resources Resources
	// ProviderOptions holds provider-specific settings by key.
	ProviderOptions map[string]string
	// NoNetwork and Network set the new sandboxes' egress policy as in
	// CreateOptions. When neither is set, the new sandboxes get the
	// source's policy as the handle last saw it (Info.Network), so a fork
	// of a sandbox without network has none either; a provider that
	// reports no policy gives its default.
	NoNetwork bool
	Network   *NetworkPolicy
	// BrokeredSecrets are the new sandboxes' brokered secrets, as in
	// CreateOptions (each child gets its own placeholders). When unset,
	// a fork of a sandbox with brokered secrets carries them over if this
	// handle knows their values (it created the sandbox, or is a handle
	// Fork returned); a handle that does not (Attach) cannot give them to
	// the children, and Fork fails with FailedPrecondition rather than
	// make children with an open network where the source had its
	// secrets' enforcement point in front of it: pass them here, or set
	// NoNetwork.
	BrokeredSecrets []BrokeredSecret
	// KeepSnapshot keeps the snapshot a fork without a native fork goes
	// through; by default it is deleted once the new sandboxes exist.
	// Find a kept one with Client.ListSnapshots: it carries Labels, its
	// SourceID is the forked sandbox and its Name "fork of <id>".
	// Providers with a native fork make none.
	KeepSnapshot bool
}

// forkParallel bounds how many sandboxes a Fork creates at once.
const forkParallel = 4

// maxFork bounds Fork's n.
const maxFork = 256

// snapshotter returns the provider's Snapshotter, or the Unimplemented
// error of op.
func (c *Client) snapshotter(op, id string) (driver.Snapshotter, error) {
	sn, ok := c.rt.(driver.Snapshotter)
	if !ok {
		return nil, c.wrap(op, id, "", fmt.Errorf("sandbox: provider %s has no snapshots: %w", c.rt.Name(), ErrUnimplemented))
	}
	return sn, nil
}

// checkSnapshotID validates a snapshot id: providers spell them
// differently (local "snap-…", Docker image ids, E2B "team/name:tag"), so
// only emptiness, length, control characters and spaces are refused.
func checkSnapshotID(op, provider, id string) error {
	switch {
	case id == "":
		return invalid(op, provider, "", "snapshot id", "empty")
	case len(id) > 512:
		return invalid(op, provider, "", "snapshot id", "%d bytes, over 512", len(id))
	case hasControl(id) || slices.Contains([]byte(id), ' '):
		return invalid(op, provider, "", "snapshot id", "%q holds spaces or control characters", printable(id))
	case impossibleSnapshotID(id):
		return invalid(op, provider, "", "snapshot id", "%q cannot be a snapshot id (it reads as a file path: a leading \"/\" or a \".\", \"..\" or empty path element)", printable(id))
	}
	return nil
}

// impossibleSnapshotID reports whether id reads as a file path no
// provider's snapshot id can be: a leading or trailing "/", or a
// "/"-separated element that is empty, "." or "..". (Provider ids may hold
// "/", as E2B's "<team>/<name>:<tag>" does, but never such elements.) Such
// an id is refused rather than looked up, so a mistake is not answered
// like a snapshot already deleted.
func impossibleSnapshotID(id string) bool {
	for el := range strings.SplitSeq(id, "/") {
		if el == "" || el == "." || el == ".." {
			return true
		}
	}
	return false
}

// snapshotMode applies the default mode and checks it against what the
// provider declared.
func (c *Client) snapshotMode(op, id string, m SnapshotMode) (SnapshotMode, error) {
	name := c.rt.Name()
	m = cmp.Or(m, SnapshotFilesystem)
	if m != SnapshotFilesystem && m != SnapshotFull {
		return "", invalid(op, name, id, "snapshot mode", "%q is not %q or %q", printable(string(m)), SnapshotFilesystem, SnapshotFull)
	}
	if !slices.Contains(c.caps.SnapshotModes, m) {
		note := ""
		if c.caps.SnapshotNote != "" {
			note = " (" + c.caps.SnapshotNote + ")"
		}
		return "", &Error{Op: op, Provider: name, SandboxID: id, Code: FailedPrecondition,
			Err: fmt.Errorf("snapshot mode %q is not available on provider %s, which offers %v%s: %w", m, name, c.caps.SnapshotModes, note, ErrFailedPrecondition)}
	}
	return m, nil
}

// track registers work the Client must wait for at Close; it fails with
// ErrClosed once the Client is closed.
func (c *Client) track(op, id string) (done func(), err error) {
	if err := c.checkOpen(op, id); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, c.wrap(op, id, "", ErrClosed)
	}
	c.bg.Add(1)
	return c.bg.Done, nil
}

// later runs f in the background with a context bounded by the cleanup
// timeout; Close waits for it. The caller holds a track registration, so
// the Client's wait group is not at zero.
func (c *Client) later(f func(ctx context.Context)) {
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), c.cleanup)
		defer cancel()
		f(ctx)
	}()
}

// deleteOrphanSnapshot deletes a snapshot the caller will never see.
func (c *Client) deleteOrphanSnapshot(ctx context.Context, sn driver.Snapshotter, id string, cause error) {
	if err := sn.DeleteSnapshot(ctx, id); err != nil && CodeOf(err) != NotFound {
		c.log.Error("sandbox: could not delete a snapshot orphaned by a failed call", "provider", c.rt.Name(), "snapshot", id, "code", CodeOf(err))
		return
	}
	c.log.Info("sandbox: deleted a snapshot whose call did not complete", "provider", c.rt.Name(), "snapshot", id, "code", CodeOf(cause))
}

// Snapshot saves the sandbox and returns the snapshot, from which
// CreateOptions.FromSnapshot starts new sandboxes. A filesystem snapshot
// (the default) keeps every file the sandbox's commands may write, with
// its bytes, modes and links; a full one keeps the running processes and
// their memory too. The snapshot is consistent: the provider freezes the
// sandbox for the copy (or guarantees the same), and the sandbox runs on
// after it; a paused sandbox stays paused. The snapshot outlives the
// sandbox: delete it with Client.DeleteSnapshot.
//
// Any handle may take a snapshot, owning or not (see Owned): it reads the
// sandbox and changes nothing in it. A provider without snapshots returns
// an error matching ErrUnimplemented; a mode it lacks is FailedPrecondition
// naming the mode and those it has. If ctx ends after the provider made
// the snapshot, it is deleted in the background (bounded by
// WithCleanupTimeout; Close waits for it).
func (s *Sandbox) Snapshot(ctx context.Context, opts SnapshotOptions) (_ Snapshot, err error) {
	const op = "snapshot"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	c := s.c
	sn, err := c.snapshotter(op, s.id)
	if err != nil {
		return Snapshot{}, err
	}
	done, err := c.track(op, s.id)
	if err != nil {
		return Snapshot{}, err
	}
	defer done()
	info, err := s.snapshot(ctx, op, sn, opts)
	if err != nil {
		return Snapshot{}, err
	}
	return snapshotOf(info), nil
}

// snapshot validates opts and takes the snapshot; a snapshot made by a
// call that failed (or whose ctx ended) is deleted in the background.
func (s *Sandbox) snapshot(ctx context.Context, op string, sn driver.Snapshotter, opts SnapshotOptions) (driver.SnapshotInfo, error) {
	c, name := s.c, s.c.rt.Name()
	mode, err := c.snapshotMode(op, s.id, opts.Mode)
	if err != nil {
		return driver.SnapshotInfo{}, err
	}
	if hasControl(opts.Name) || len(opts.Name) > 256 {
		return driver.SnapshotInfo{}, invalid(op, name, s.id, "snapshot name", "%q: at most 256 bytes without control characters", printable(opts.Name))
	}
	if err := checkLabels(op, name, opts.Labels); err != nil {
		return driver.SnapshotInfo{}, err
	}
	req := &driver.SnapshotRequest{Name: opts.Name, Mode: driver.SnapshotMode(mode), Labels: maps.Clone(opts.Labels)}
	bctx, end := bound(ctx, op, c.calls.Snapshot)
	var info driver.SnapshotInfo
	err = end(c.retry(bctx, op, false, nil, func() error {
		var err error
		info, err = sn.Snapshot(bctx, s.id, req)
		return err
	}))
	if err == nil && ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	if err != nil {
		if info.ID != "" {
			c.later(func(cctx context.Context) { c.deleteOrphanSnapshot(cctx, sn, info.ID, err) })
		}
		return driver.SnapshotInfo{}, s.wrap(op, "", err)
	}
	if info.Provider == "" {
		info.Provider = name
	}
	return info, nil
}

// GetSnapshot describes the snapshot id; one that does not exist is
// NotFound.
func (c *Client) GetSnapshot(ctx context.Context, id string) (_ Snapshot, err error) {
	const op = "get-snapshot"
	ctx, tc := c.tel.start(ctx, op, "")
	defer func() { tc.end(ctx, err) }()
	sn, err := c.snapshotter(op, "")
	if err != nil {
		return Snapshot{}, err
	}
	if err := checkSnapshotID(op, c.rt.Name(), id); err != nil {
		return Snapshot{}, err
	}
	if err := c.checkOpen(op, ""); err != nil {
		return Snapshot{}, err
	}
	var info driver.SnapshotInfo
	ctx, end := bound(ctx, op, c.calls.Lookup)
	err = end(c.retry(ctx, op, true, nil, func() error {
		var err error
		info, err = sn.GetSnapshot(ctx, id)
		return err
	}))
	if err != nil {
		return Snapshot{}, c.wrap(op, "", "", fmt.Errorf("snapshot %s: %w", id, err))
	}
	if info.Provider == "" {
		info.Provider = c.rt.Name()
	}
	return snapshotOf(info), nil
}

// ListSnapshots yields the snapshots that carry all of opts.Labels,
// fetching pages as the loop advances. A failure is yielded once as the
// error, and ends the sequence. Where the provider cannot filter by
// labels, the filtering is done here.
func (c *Client) ListSnapshots(ctx context.Context, opts ListSnapshotsOptions) iter.Seq2[Snapshot, error] {
	const op = "list-snapshots"
	return func(yield func(Snapshot, error) bool) {
		name := c.rt.Name()
		sn, err := c.snapshotter(op, "")
		if err != nil {
			yield(Snapshot{}, err)
			return
		}
		if err := checkLabels(op, name, opts.Labels); err != nil {
			yield(Snapshot{}, err)
			return
		}
		if opts.PageSize < 0 {
			yield(Snapshot{}, invalid(op, name, "", "page size", "%d is negative", opts.PageSize))
			return
		}
		if err := c.checkOpen(op, ""); err != nil {
			yield(Snapshot{}, err)
			return
		}
		req := &driver.ListSnapshotsRequest{Labels: maps.Clone(opts.Labels), PageSize: cmp.Or(opts.PageSize, 100)}
		seen := map[string]bool{}
		var spent time.Duration
		for {
			var page []driver.SnapshotInfo
			var next string
			pctx, tc := c.tel.start(ctx, op, "")
			ctx, end := boundLeft(pctx, op, c.calls.Lookup, spent)
			t0 := time.Now()
			err := end(c.retry(ctx, op, true, nil, func() error {
				var err error
				page, next, err = sn.ListSnapshots(ctx, req)
				return err
			}))
			spent += time.Since(t0)
			tc.end(pctx, err)
			if err != nil {
				yield(Snapshot{}, c.wrap(op, "", "", err))
				return
			}
			for _, d := range page {
				if d.Provider == "" {
					d.Provider = name
				}
				if seen[d.ID] || !labelsMatch(d.Labels, opts.Labels) {
					continue
				}
				seen[d.ID] = true
				if !yield(snapshotOf(d), nil) {
					return
				}
			}
			if next == "" || next == req.PageToken {
				return
			}
			req.PageToken = next
		}
	}
}

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// DeleteSnapshot deletes the snapshot id. Sandboxes created from it are not
// affected. A snapshot that is already gone is not an error.
func (c *Client) DeleteSnapshot(ctx context.Context, id string) (err error) {
	const op = "delete-snapshot"
	ctx, tc := c.tel.start(ctx, op, "")
	defer func() { tc.end(ctx, err) }()
	sn, err := c.snapshotter(op, "")
	if err != nil {
		return err
	}
	if err := checkSnapshotID(op, c.rt.Name(), id); err != nil {
		return err
	}
	if err := c.checkOpen(op, ""); err != nil {
		return err
	}
	ctx, end := bound(ctx, op, c.calls.Destroy)
	err = end(c.retry(ctx, op, true, nil, func() error { return sn.DeleteSnapshot(ctx, id) }))
	if CodeOf(err) == NotFound {
		err = nil
	}
	if err != nil {
		return c.wrap(op, "", "", fmt.Errorf("snapshot %s: %w", id, err))
	}
	return nil
}

// Fork creates n new sandboxes from the sandbox's current state and
// returns them owned by the caller (see Owned), each independent of the
// others and of the source, which runs on unchanged.
//
// Where the provider has a native fork (driver.Forker) it is used; the
// new sandboxes then start from what that fork keeps (see the provider's
// documentation). Elsewhere Fork takes a snapshot (filesystem mode where
// the provider has it: the children start fresh processes on the
// source's files), creates n sandboxes from it, at most 4 at a time, and
// deletes the snapshot once they exist unless opts.KeepSnapshot is set.
//
// When some creates fail, Fork returns the sandboxes it made together
// with an error joining one error per failed child. When ctx ends, Fork
// returns ctx's error and nothing: every sandbox it made is destroyed and
// its snapshot deleted, in the background (bounded by WithCleanupTimeout;
// Close waits for it). Any handle may fork, as any may Snapshot.
func (s *Sandbox) Fork(ctx context.Context, n int, opts ForkOptions) (_ []*Sandbox, err error) {
	const op = "fork"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	c, name := s.c, s.c.rt.Name()
	if n <= 0 || n > maxFork {
		return nil, invalid(op, name, s.id, "fork count", "%d is not between 1 and %d", n, maxFork)
	}
	if opts.Timeout < 0 {
		return nil, invalid(op, name, s.id, "timeout", "%v is negative", opts.Timeout)
	}
	copts := CreateOptions{
		Labels: opts.Labels, Env: opts.Env, SecretEnv: opts.SecretEnv, Timeout: opts.Timeout,
		AutoPause: opts.AutoPause, Resources: opts.Resources, ProviderOptions: opts.ProviderOptions,
		NoNetwork: opts.NoNetwork, Network: opts.Network,
	}
	if !opts.NoNetwork && opts.Network == nil {
		copts.Network = s.Info().Network // a copy
	}
	copts.BrokeredSecrets = opts.BrokeredSecrets
	if len(opts.BrokeredSecrets) == 0 && !opts.NoNetwork && len(s.Info().BrokeredSecrets) > 0 {
		// The source runs behind the point that brokers its secrets; a
		// child without them would get the policy alone, which on some
		// providers (local's allow-all: pasta) is a network with no such
		// point in front of it. Children are never more open than their
		// source.
		s.mu.Lock()
		copts.BrokeredSecrets = slices.Clone(s.brokered)
		s.mu.Unlock()
		if len(copts.BrokeredSecrets) == 0 {
			return nil, s.wrap(op, "", fmt.Errorf("sandbox: the source has brokered secrets (Info.BrokeredSecrets) whose values this handle does not know (it did not create the sandbox): give them in ForkOptions.BrokeredSecrets, or fork with ForkOptions.NoNetwork: %w", ErrFailedPrecondition))
		}
	}
	fk, native := c.rt.(driver.Forker)
	sn, isSnap := c.rt.(driver.Snapshotter)
	if !native && !isSnap {
		return nil, s.wrap(op, "", fmt.Errorf("sandbox: provider %s has neither fork nor snapshots: %w", name, ErrUnimplemented))
	}
	req, err := c.createRequest(op, copts)
	if err != nil {
		return nil, err
	}
	secrets := append(slices.Clone(s.secrets), secretValues(opts.SecretEnv)...)
	secrets = append(secrets, brokeredValues(copts.BrokeredSecrets)...)
	slices.SortFunc(secrets, func(a, b []byte) int { return len(b) - len(a) })
	done, err := c.track(op, s.id)
	if err != nil {
		return nil, err
	}
	defer done()
	if native {
		return s.forkNative(ctx, fk, n, req, secrets, copts.BrokeredSecrets)
	}
	mode := SnapshotFilesystem
	if !slices.Contains(c.caps.SnapshotModes, mode) && len(c.caps.SnapshotModes) > 0 {
		mode = c.caps.SnapshotModes[0]
	}
	snap, err := s.snapshot(ctx, op, sn, SnapshotOptions{Name: "fork of " + s.id, Mode: mode, Labels: opts.Labels})
	if err != nil {
		return nil, err
	}
	copts.FromSnapshot = snap.ID
	made := make([]*Sandbox, n)
	errs := make([]error, n)
	sem := make(chan struct{}, forkParallel)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = s.wrap(op, "", context.Cause(ctx))
				return
			}
			defer func() { <-sem }()
			cctx, end := bound(ctx, op, c.calls.Create)
			info, _, _, err := c.create(cctx, op, copts, func(ctx context.Context, req *driver.CreateRequest) (driver.Info, bool, error) {
				info, err := c.rt.Create(ctx, req)
				return info, true, err
			})
			if err = end(err); err != nil {
				errs[i] = redactErr(fmt.Errorf("fork child %d: %w", i, err), secrets)
				return
			}
			sb := c.handle(info, secrets)
			sb.owned = true
			sb.brokered = slices.Clone(copts.BrokeredSecrets)
			made[i] = sb
		}()
	}
	wg.Wait()
	switch {
	case ctx.Err() != nil:
		// Every create has returned; an abandoned one destroys what it
		// made itself, in the background.
		cause := context.Cause(ctx)
		c.later(func(cctx context.Context) { c.deleteOrphanSnapshot(cctx, sn, snap.ID, cause) })
	case !opts.KeepSnapshot:
		dctx, end := bound(context.WithoutCancel(ctx), op, c.calls.Destroy)
		if err := end(sn.DeleteSnapshot(dctx, snap.ID)); err != nil && CodeOf(err) != NotFound {
			errs = append(errs, fmt.Errorf("deleting the fork's snapshot %s: %w", snap.ID, err))
		}
	}
	return s.forkResult(ctx, op, made, errs)
}

// forkNative forks through the provider's Forker.
func (s *Sandbox) forkNative(ctx context.Context, fk driver.Forker, n int, req *driver.CreateRequest, secrets [][]byte, brokered []BrokeredSecret) ([]*Sandbox, error) {
	const op = "fork"
	c := s.c
	bctx, end := bound(ctx, op, c.calls.Snapshot)
	infos, err := fk.Fork(bctx, s.id, n, req)
	err = end(err)
	made := make([]*Sandbox, 0, len(infos))
	for _, in := range infos {
		if in.ID == "" {
			continue
		}
		info := infoOf(in)
		if len(req.Secrets) > 0 {
			// Made with these: report them whole (with Env and
			// placeholder), as Create does, whatever the provider says.
			envs := make([]string, len(brokered))
			for i, b := range brokered {
				envs[i] = b.Env
			}
			info.BrokeredSecrets = brokeredInfoOf(req.Secrets, envs)
		}
		sb := c.handle(info, secrets)
		sb.owned = true
		sb.brokered = slices.Clone(brokered)
		made = append(made, sb)
	}
	var errs []error
	if err != nil {
		errs = append(errs, redactErr(s.wrap(op, "", err), secrets))
	}
	return s.forkResult(ctx, op, made, errs)
}

// forkResult returns the sandboxes made and the joined errors; when ctx
// ended it destroys them in the background and returns ctx's error.
func (s *Sandbox) forkResult(ctx context.Context, op string, made []*Sandbox, errs []error) ([]*Sandbox, error) {
	c := s.c
	made = slices.DeleteFunc(made, func(sb *Sandbox) bool { return sb == nil })
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		for _, sb := range made {
			id := sb.id
			c.later(func(context.Context) { c.destroyOrphan(id, cause) })
		}
		return nil, s.wrap(op, "", fmt.Errorf("sandbox: fork: %w", cause))
	}
	for _, sb := range made {
		c.tel.sandboxCreated(ctx, sb.id)
	}
	err := errors.Join(slices.DeleteFunc(errs, func(e error) bool { return e == nil })...)
	if err != nil {
		return made, s.wrap(op, "", err)
	}
	return made, nil
}

// snapshotOf converts a driver's SnapshotInfo; the maps are copied.
func snapshotOf(in driver.SnapshotInfo) Snapshot {
	return Snapshot{
		ID: in.ID, Name: in.Name, Mode: SnapshotMode(in.Mode), Provider: in.Provider, Size: in.Size,
		CreatedAt: in.CreatedAt, Labels: maps.Clone(in.Labels), SourceID: in.SourceID, Template: in.Template,
		Detail: maps.Clone(in.Detail),
	}
}
