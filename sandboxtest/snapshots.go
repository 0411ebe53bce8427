package sandboxtest

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// snapshotTests is the Snapshots group: Sandbox.Snapshot, create from a
// snapshot, Fork and the snapshot calls of Client, on every provider that
// is a driver.Snapshotter.
var snapshotTests = []test{
	{name: "RestoreOldState", needs: needsSnapshots, fn: testSnapshotRestore},
	{name: "ForkIndependent", needs: needsFork, fn: testForkIndependent},
	{name: "SurvivesDestroy", needs: needsSnapshots, fn: testSnapshotSurvivesDestroy},
	{name: "ListByLabelsPaged", needs: needsSnapshots, fn: testSnapshotList},
	{name: "DeleteThenNotFound", needs: needsSnapshots, fn: testSnapshotDelete},
	{name: "Paused", needs: needsSnapshotsAndPause, fn: testSnapshotPaused},
	{name: "CancelledForkLeavesNothing", needs: needsFork, fn: testForkCancelled},
	{name: "FullModeRefused", needs: needsSnapshots, fn: testSnapshotFullRefused},
	{name: "FullKeepsProcesses", needs: needsFullSnapshots, fn: testSnapshotFullProcesses},
	{name: "BadInput", needs: needsSnapshots, fn: testSnapshotBadInput},
	{name: "ImpossibleOrUnknownID", needs: needsSnapshots, fn: testSnapshotImpossibleID},
	{name: "SparseFile", needs: needsSnapshots, fn: testSnapshotSparse},
	{name: "ForkKeepsNoNetwork", needs: needsFork, fn: testForkNoNetwork},
}

// testForkNoNetwork checks that a fork of a sandbox without network has
// none either: Fork must not make a sandbox more open than its source.
func testForkNoNetwork(ctx context.Context, t *testing.T, s *suite) {
	if !s.caps.NetworkPolicy.DenyAll {
		t.Skip("provider cannot cut sandboxes off the network (NetworkPolicy.DenyAll)")
	}
	opts := s.labelled(nil)
	opts.NoNetwork = true
	sb, err := s.c.Create(ctx, opts)
	if sandbox.CodeOf(err) == sandbox.FailedPrecondition {
		t.Skipf("NoNetwork refused here: %v", err)
	}
	check(t, err)
	destroyAtCleanup(t, sb)
	if n := sb.Info().Network; n == nil || n.Mode != sandbox.NetworkDenyAll {
		t.Skipf("the provider does not report the source's policy (Info.Network %+v)", n)
	}
	kids, err := sb.Fork(ctx, 1, sandbox.ForkOptions{Labels: map[string]string{"sandboxtest": s.runID}})
	for _, k := range kids {
		destroyAtCleanup(t, k)
	}
	check(t, err)
	in, err := kids[0].Refresh(ctx)
	check(t, err)
	if in.Network == nil || in.Network.Mode != sandbox.NetworkDenyAll {
		t.Errorf("fork of a sandbox without network reports network %+v, want deny-all", in.Network)
	}
}

func needsSnapshots(c sandbox.Capabilities) string {
	if !c.Snapshots {
		return "provider has no snapshots (Capabilities.Snapshots=false: not a driver.Snapshotter)"
	}
	if !hasMode(c.SnapshotModes, sandbox.SnapshotFilesystem) {
		return "provider declares no filesystem snapshots (Capabilities.SnapshotModes)"
	}
	return ""
}

func needsFork(c sandbox.Capabilities) string {
	if !c.Fork {
		return "provider cannot fork (no driver.Forker nor driver.Snapshotter)"
	}
	return needsSnapshots(c)
}

// needsFullSnapshots skips where the provider declares no full mode,
// with what it says the host lacks (local names the package criu, or why
// criu cannot work there).
func needsFullSnapshots(c sandbox.Capabilities) string {
	if !c.Snapshots {
		return "provider has no snapshots (Capabilities.Snapshots=false: not a driver.Snapshotter)"
	}
	if !hasMode(c.SnapshotModes, sandbox.SnapshotFull) {
		return "provider declares no full snapshots (Capabilities.SnapshotModes " + fmt.Sprint(c.SnapshotModes) + "): " + c.SnapshotNote
	}
	return ""
}

func needsSnapshotsAndPause(c sandbox.Capabilities) string {
	if r := needsSnapshots(c); r != "" {
		return r
	}
	return needsPause(c)
}

func hasMode(ms []sandbox.SnapshotMode, m sandbox.SnapshotMode) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

// snapshot takes a snapshot of sb labelled for this run and deletes it at
// cleanup.
func (s *suite) snapshot(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, labels map[string]string) sandbox.Snapshot {
	t.Helper()
	l := map[string]string{"sandboxtest": s.runID}
	for k, v := range labels {
		l[k] = v
	}
	snap, err := sb.Snapshot(ctx, sandbox.SnapshotOptions{Name: "sandboxtest " + t.Name(), Labels: l})
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	s.deleteAtCleanup(t, snap.ID)
	if snap.ID == "" || snap.Mode != sandbox.SnapshotFilesystem || snap.SourceID != "" && snap.SourceID != sb.ID() {
		t.Fatalf("Snapshot returned %+v: want an id, mode filesystem and source %s", snap, sb.ID())
	}
	if snap.Labels["sandboxtest"] != s.runID {
		t.Errorf("snapshot labels %v lack sandboxtest=%s", snap.Labels, s.runID)
	}
	return snap
}

func (s *suite) deleteAtCleanup(t *testing.T, id string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.c.DeleteSnapshot(ctx, id); err != nil {
			t.Errorf("cleanup DeleteSnapshot(%s): %v", id, err)
		}
	})
}

// createFrom creates a sandbox from snapshot id with the suite's options
// (without their template) and destroys it at cleanup.
func (s *suite) createFrom(ctx context.Context, t *testing.T, id string) *sandbox.Sandbox {
	t.Helper()
	opts := s.labelled(nil)
	opts.Template, opts.FromSnapshot = "", id
	sb, err := s.c.Create(ctx, opts)
	if err != nil {
		t.Fatalf("Create from snapshot %s: %v", id, err)
	}
	destroyAtCleanup(t, sb)
	return sb
}

func destroyAtCleanup(t *testing.T, sb *sandbox.Sandbox) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sb.Destroy(ctx); err != nil {
			t.Errorf("cleanup Destroy(%s): %v", sb.ID(), err)
		}
	})
}

// allBytes is every byte value, NUL included, a few times over.
func allBytes() []byte {
	b := make([]byte, 0, 1024)
	for i := range 1024 {
		b = append(b, byte(i*7))
	}
	return b
}

func readString(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, p string) string {
	t.Helper()
	return string(must[[]byte](t, "ReadFile "+p)(sb.ReadFile(ctx, p)))
}

func wantGone(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, p string) {
	t.Helper()
	_, err := sb.Stat(ctx, p)
	if sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("sandbox %s: Stat(%s) = %v, want NotFound", sb.ID(), p, err)
	}
}

// writeState writes the files RestoreOldState and Paused check: text, all
// byte values, a nested file with mode 0755 and a symbolic link.
func writeState(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	t.Helper()
	check(t, sb.WriteFile(ctx, "snap/a.txt", []byte("old a\n")))
	check(t, sb.WriteFile(ctx, "snap/bin.dat", allBytes()))
	check(t, sb.WriteFile(ctx, "snap/deep/er/run.sh", []byte("echo run\n")))
	if r := sh(ctx, t, sb, "chmod 755 snap/deep/er/run.sh && ln -s a.txt snap/link"); r.ExitCode != 0 {
		t.Fatalf("chmod, ln -s: %+v", r)
	}
}

// checkState checks what writeState wrote.
func checkState(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	t.Helper()
	if got := readString(ctx, t, sb, "snap/a.txt"); got != "old a\n" {
		t.Errorf("sandbox %s: snap/a.txt = %q, want the snapshot's %q", sb.ID(), got, "old a\n")
	}
	if got := must[[]byte](t, "ReadFile bin.dat")(sb.ReadFile(ctx, "snap/bin.dat")); !bytes.Equal(got, allBytes()) {
		t.Errorf("sandbox %s: snap/bin.dat differs from the snapshot's bytes (%d bytes)", sb.ID(), len(got))
	}
	r := sh(ctx, t, sb, "stat -c %a snap/deep/er/run.sh; readlink snap/link; cat snap/link")
	if want := "755\na.txt\nold a\n"; r.ExitCode != 0 || string(r.Stdout) != want {
		t.Errorf("sandbox %s: mode and link: exit %d, %q (stderr %q), want %q", sb.ID(), r.ExitCode, r.Stdout, r.Stderr, want)
	}
}

// changeState changes what writeState wrote.
func changeState(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	t.Helper()
	check(t, sb.WriteFile(ctx, "snap/a.txt", []byte("new a\n")))
	check(t, sb.WriteFile(ctx, "snap/added.txt", []byte("added\n")))
	check(t, sb.Remove(ctx, "snap/bin.dat"))
	if r := sh(ctx, t, sb, "chmod 600 snap/deep/er/run.sh && rm snap/link"); r.ExitCode != 0 {
		t.Fatalf("chmod, rm: %+v", r)
	}
}

func testSnapshotRestore(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	writeState(ctx, t, sb)
	snap := s.snapshot(ctx, t, sb, nil)
	changeState(ctx, t, sb)
	if got, err := s.c.GetSnapshot(ctx, snap.ID); err != nil || got.ID != snap.ID {
		t.Fatalf("GetSnapshot(%s) = %+v, %v", snap.ID, got, err)
	}
	if in := sb.Info(); in.State != sandbox.StateRunning {
		t.Errorf("source state %q after Snapshot, want running", in.State)
	}
	child := s.createFrom(ctx, t, snap.ID)
	if child.ID() == sb.ID() {
		t.Fatalf("create from snapshot returned the source %s", sb.ID())
	}
	checkState(ctx, t, child)
	wantGone(ctx, t, child, "snap/added.txt")
	// The source runs on with its own changes.
	if got := readString(ctx, t, sb, "snap/a.txt"); got != "new a\n" {
		t.Errorf("source snap/a.txt = %q after the restore, want its own %q", got, "new a\n")
	}
	if r := sh(ctx, t, sb, "echo alive"); string(r.Stdout) != "alive\n" {
		t.Errorf("source after Snapshot: %+v", r)
	}
	// Writes in the new sandbox do not reach the snapshot.
	check(t, child.WriteFile(ctx, "snap/a.txt", []byte("child\n")))
	again := s.createFrom(ctx, t, snap.ID)
	if got := readString(ctx, t, again, "snap/a.txt"); got != "old a\n" {
		t.Errorf("a second sandbox from the snapshot sees %q: a child's write reached the snapshot", got)
	}
}

func testForkIndependent(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	check(t, sb.WriteFile(ctx, "fork/shared.txt", []byte("parent\n")))
	label := map[string]string{"sandboxtest": s.runID, "fork": randHex(4)}
	kids, err := sb.Fork(ctx, 4, sandbox.ForkOptions{Labels: label})
	for _, k := range kids {
		destroyAtCleanup(t, k)
	}
	if err != nil {
		t.Fatalf("Fork(4): %v", err)
	}
	if len(kids) != 4 {
		t.Fatalf("Fork(4) made %d sandboxes", len(kids))
	}
	ids := map[string]bool{sb.ID(): true}
	for i, k := range kids {
		if ids[k.ID()] {
			t.Fatalf("fork child %d has id %s, seen before", i, k.ID())
		}
		ids[k.ID()] = true
		if !k.Owned() {
			t.Errorf("fork child %s is not owned", k.ID())
		}
		if k.Info().Labels["fork"] != label["fork"] {
			t.Errorf("fork child %s labels %v, want %v", k.ID(), k.Info().Labels, label)
		}
	}
	var wg sync.WaitGroup
	for i, k := range kids {
		wg.Go(func() {
			if err := k.WriteFile(ctx, "fork/shared.txt", []byte("child "+strconv.Itoa(i)+"\n")); err != nil {
				t.Errorf("child %d write: %v", i, err)
			}
			if err := k.WriteFile(ctx, fmt.Sprintf("fork/only-%d", i), []byte("x")); err != nil {
				t.Errorf("child %d write: %v", i, err)
			}
		})
	}
	wg.Wait()
	for i, k := range kids {
		if got := readString(ctx, t, k, "fork/shared.txt"); got != "child "+strconv.Itoa(i)+"\n" {
			t.Errorf("child %d sees fork/shared.txt = %q", i, got)
		}
		for j := range kids {
			if j != i {
				wantGone(ctx, t, k, fmt.Sprintf("fork/only-%d", j))
			}
		}
	}
	if got := readString(ctx, t, sb, "fork/shared.txt"); got != "parent\n" {
		t.Errorf("parent sees fork/shared.txt = %q after its children wrote", got)
	}
	wantGone(ctx, t, sb, "fork/only-0")
	// Without KeepSnapshot, no snapshot is left behind.
	if left := s.snapshotsWith(ctx, t, label); len(left) > 0 {
		t.Errorf("Fork left snapshots %v", left)
	}
}

// snapshotsWith lists the ids of the snapshots carrying labels.
func (s *suite) snapshotsWith(ctx context.Context, t *testing.T, labels map[string]string) []string {
	t.Helper()
	var ids []string
	for sn, err := range s.c.ListSnapshots(ctx, sandbox.ListSnapshotsOptions{Labels: labels}) {
		if err != nil {
			t.Fatalf("ListSnapshots: %v", err)
		}
		ids = append(ids, sn.ID)
	}
	return ids
}

func testSnapshotSurvivesDestroy(ctx context.Context, t *testing.T, s *suite) {
	opts := s.labelled(nil)
	sb, err := s.c.Create(ctx, opts)
	check(t, err)
	check(t, sb.WriteFile(ctx, "kept.txt", []byte("kept\n")))
	snap := s.snapshot(ctx, t, sb, nil)
	check(t, sb.Destroy(ctx))
	if got, err := s.c.GetSnapshot(ctx, snap.ID); err != nil || got.ID != snap.ID {
		t.Fatalf("GetSnapshot after Destroy of its sandbox = %+v, %v", got, err)
	}
	child := s.createFrom(ctx, t, snap.ID)
	if got := readString(ctx, t, child, "kept.txt"); got != "kept\n" {
		t.Errorf("kept.txt = %q", got)
	}
}

func testSnapshotList(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	tag := randHex(4)
	want := map[string]bool{}
	var odd string
	for i := range 3 {
		l := map[string]string{"list": tag}
		if i == 1 {
			l["odd"] = "yes"
		}
		snap := s.snapshot(ctx, t, sb, l)
		want[snap.ID] = true
		if i == 1 {
			odd = snap.ID
		}
	}
	got := map[string]bool{}
	for sn, err := range s.c.ListSnapshots(ctx, sandbox.ListSnapshotsOptions{Labels: map[string]string{"list": tag}, PageSize: 1}) {
		if err != nil {
			t.Fatalf("ListSnapshots: %v", err)
		}
		if got[sn.ID] {
			t.Errorf("ListSnapshots yielded %s twice", sn.ID)
		}
		got[sn.ID] = true
		if sn.Labels["list"] != tag {
			t.Errorf("ListSnapshots yielded %s with labels %v", sn.ID, sn.Labels)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ListSnapshots by label with page size 1 = %v, want %v", got, want)
	}
	ids := s.snapshotsWith(ctx, t, map[string]string{"list": tag, "odd": "yes"})
	if len(ids) != 1 || ids[0] != odd {
		t.Errorf("ListSnapshots by two labels = %v, want [%s]", ids, odd)
	}
	// Stopping early is fine.
	for _, err := range s.c.ListSnapshots(ctx, sandbox.ListSnapshotsOptions{Labels: map[string]string{"list": tag}, PageSize: 1}) {
		check(t, err)
		break
	}
}

func testSnapshotDelete(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	snap, err := sb.Snapshot(ctx, sandbox.SnapshotOptions{Labels: map[string]string{"sandboxtest": s.runID}})
	check(t, err)
	check(t, s.c.DeleteSnapshot(ctx, snap.ID))
	_, err = s.c.GetSnapshot(ctx, snap.ID)
	wantCode(t, err, sandbox.NotFound, sandbox.ErrNotFound)
	opts := s.labelled(nil)
	opts.Template, opts.FromSnapshot = "", snap.ID
	child, err := s.c.Create(ctx, opts)
	if err == nil {
		destroyAtCleanup(t, child)
		t.Fatalf("Create from deleted snapshot %s made %s", snap.ID, child.ID())
	}
	wantCode(t, err, sandbox.NotFound, sandbox.ErrNotFound)
	if err := s.c.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Errorf("DeleteSnapshot of a deleted snapshot: %v, want nil", err)
	}
	for _, id := range s.snapshotsWith(ctx, t, map[string]string{"sandboxtest": s.runID}) {
		if id == snap.ID {
			t.Errorf("ListSnapshots still yields deleted snapshot %s", id)
		}
	}
}

func testSnapshotPaused(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	writeState(ctx, t, sb)
	check(t, sb.Pause(ctx))
	snap := s.snapshot(ctx, t, sb, nil)
	in, err := sb.Refresh(ctx)
	check(t, err)
	if in.State != sandbox.StatePaused {
		t.Errorf("state after a snapshot of a paused sandbox: %q, want paused", in.State)
	}
	check(t, sb.Resume(ctx))
	child := s.createFrom(ctx, t, snap.ID)
	checkState(ctx, t, child)
}

// testForkCancelled cancels Forks at a range of moments and checks that
// each either returned its sandboxes or left no sandbox and no snapshot
// behind (the clean-up runs in the background: it is waited for).
func testForkCancelled(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	check(t, sb.WriteFile(ctx, "f.txt", []byte("x")))
	cancelledOnce := false
	for _, d := range []time.Duration{0, 50 * time.Microsecond, 500 * time.Microsecond, 2 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond} {
		label := map[string]string{"sandboxtest": s.runID, "cancelled-fork": randHex(4)}
		fctx, cancel := context.WithCancel(ctx)
		if d == 0 {
			cancel()
		} else {
			time.AfterFunc(d, cancel)
		}
		kids, err := sb.Fork(fctx, 3, sandbox.ForkOptions{Labels: label})
		cancel()
		forkErr := err
		if err == nil {
			// It finished first: its children are the caller's.
			for _, k := range kids {
				check(t, k.Destroy(ctx))
			}
		} else {
			cancelledOnce = true
			if c := sandbox.CodeOf(err); c != sandbox.Canceled {
				t.Errorf("Fork cancelled after %v: code %v (%v), want Canceled", d, c, err)
			}
			if len(kids) != 0 {
				t.Errorf("cancelled Fork returned %d sandboxes with its error", len(kids))
			}
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			boxes := s.count(ctx, t, label)
			snaps := s.snapshotsWith(ctx, t, label)
			if len(boxes) == 0 && len(snaps) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Fork cancelled after %v (it returned %d sandboxes and error %v) left sandboxes %v and snapshots %v", d, len(kids), forkErr, boxes, snaps)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !cancelledOnce {
		t.Log("every Fork finished before its cancellation")
	}
}

func testSnapshotFullRefused(ctx context.Context, t *testing.T, s *suite) {
	if hasMode(s.caps.SnapshotModes, sandbox.SnapshotFull) {
		t.Skip("provider declares full snapshots on this host")
	}
	sb := s.create(ctx, t, nil)
	snap, err := sb.Snapshot(ctx, sandbox.SnapshotOptions{Mode: sandbox.SnapshotFull, Labels: map[string]string{"sandboxtest": s.runID}})
	if err == nil {
		s.deleteAtCleanup(t, snap.ID)
		t.Fatalf("Snapshot in mode full on a provider that does not declare it made %s", snap.ID)
	}
	wantCode(t, err, sandbox.FailedPrecondition, sandbox.ErrFailedPrecondition)
	if !strings.Contains(err.Error(), "full") {
		t.Errorf("error %q does not name the mode", err)
	}
}

// testSnapshotFullProcesses checks that a full snapshot keeps a running
// process with its memory: a shell loop counting in a variable and
// writing the count to a file goes on counting, from where it was, in a
// sandbox created from the snapshot (a filesystem copy would leave the
// count standing; a restarted loop would count from 1 again).
func testSnapshotFullProcesses(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	sh(ctx, t, sb, `mkdir -p full && nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > full/count.tmp && mv full/count.tmp full/count; sleep 0.1; done' >/dev/null 2>&1 </dev/null &`)
	count := func(sb *sandbox.Sandbox) int {
		b, err := sb.ReadFile(ctx, "full/count")
		if err != nil {
			return -1
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return -1
		}
		return n
	}
	// waitPast waits until sb's count exceeds n, always at least floor.
	waitPast := func(sb *sandbox.Sandbox, what string, floor, n int) int {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			c := count(sb)
			if c >= 0 && c < floor {
				t.Fatalf("%s: count %d went below %d: the loop started over instead of going on", what, c, floor)
			}
			if c > n {
				return c
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				t.Fatalf("%s: count stayed at %d, want past %d: the process is not running", what, c, n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	before := waitPast(sb, "source", 0, 3)
	snap, err := sb.Snapshot(ctx, sandbox.SnapshotOptions{Mode: sandbox.SnapshotFull, Labels: map[string]string{"sandboxtest": s.runID}})
	check(t, err)
	s.deleteAtCleanup(t, snap.ID)
	if snap.Mode != sandbox.SnapshotFull {
		t.Errorf("full snapshot reports mode %q", snap.Mode)
	}
	child := s.createFrom(ctx, t, snap.ID)
	waitPast(child, "sandbox from the full snapshot", before, before+5)
	// The source runs on.
	waitPast(sb, "source after the snapshot", before, count(sb)+2)
}

func testSnapshotBadInput(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	_, err := sb.Snapshot(ctx, sandbox.SnapshotOptions{Mode: "memory"})
	wantCode(t, err, sandbox.InvalidArgument)
	_, err = sb.Snapshot(ctx, sandbox.SnapshotOptions{Labels: map[string]string{"bad key": "v"}})
	wantCode(t, err, sandbox.InvalidArgument)
	_, err = s.c.Create(ctx, sandbox.CreateOptions{Template: "x", FromSnapshot: "y"})
	wantCode(t, err, sandbox.InvalidArgument)
	if !strings.Contains(err.Error(), "FromSnapshot") || !strings.Contains(err.Error(), "template") {
		t.Errorf("error %q does not name both Template and FromSnapshot", err)
	}
	_, err = sb.Fork(ctx, 0, sandbox.ForkOptions{})
	wantCode(t, err, sandbox.InvalidArgument)
	_, err = s.c.GetSnapshot(ctx, "")
	wantCode(t, err, sandbox.InvalidArgument)
	_, err = s.c.GetSnapshot(ctx, "snap-does-not-exist-"+randHex(4))
	wantCode(t, err, sandbox.NotFound, sandbox.ErrNotFound)
}

// testSnapshotSparse writes a sparse file of Harness.SnapshotSparseSize
// bytes (a hole, then a tail) and checks that a sandbox made from the
// snapshot has it byte-exact and still sparse.
func testSnapshotSparse(ctx context.Context, t *testing.T, s *suite) {
	size := s.h.SnapshotSparseSize
	if size <= 0 {
		t.Skip("Harness.SnapshotSparseSize is 0: the provider's sandboxes cannot hold a large sparse file")
	}
	sb := s.create(ctx, t, nil)
	line := fmt.Sprintf("truncate -s %d big && printf tail >> big && stat -c '%%s %%b %%B' big", size)
	r := sh(ctx, t, sb, line)
	if r.ExitCode != 0 {
		t.Fatalf("%s: %+v", line, r)
	}
	snap := s.snapshot(ctx, t, sb, nil)
	child := s.createFrom(ctx, t, snap.ID)
	r = sh(ctx, t, child, "stat -c '%s %b %B' big; tail -c 4 big; echo; head -c 16777216 big | tr -d '\\000' | wc -c")
	f := strings.Fields(string(r.Stdout))
	if r.ExitCode != 0 || len(f) != 5 {
		t.Fatalf("checking big: %+v", r)
	}
	if f[0] != strconv.FormatInt(size+4, 10) || f[3] != "tail" || f[4] != "0" {
		t.Errorf("big in the new sandbox: size %s, tail %q, %s non-zero bytes in its first 16 MiB; want %d, tail, 0", f[0], f[3], f[4], size+4)
	}
	blocks, _ := strconv.ParseInt(f[1], 10, 64)
	unit, _ := strconv.ParseInt(f[2], 10, 64)
	if used := blocks * unit; used > 64<<20 {
		t.Errorf("the copy of a %d-byte sparse file uses %d bytes on disk: its hole was filled", size, used)
	}
}

// testSnapshotImpossibleID checks the snapshot calls on ids no snapshot
// can have (file paths) and on a well-formed id no snapshot has: the first
// are InvalidArgument naming the id (never a silent success that reads as
// "deleted"), the second NotFound for Get and nil for Delete, as for a
// snapshot already deleted.
func testSnapshotImpossibleID(ctx context.Context, t *testing.T, s *suite) {
	for _, id := range []string{"../..", "/etc", "snap-../../x", "a/./b", "x/"} {
		err := s.c.DeleteSnapshot(ctx, id)
		wantCode(t, err, sandbox.InvalidArgument)
		if err != nil && !strings.Contains(err.Error(), id) {
			t.Errorf("DeleteSnapshot(%q): error %q does not name the id", id, err)
		}
		_, err = s.c.GetSnapshot(ctx, id)
		wantCode(t, err, sandbox.InvalidArgument)
		opts := s.labelled(nil)
		opts.Template, opts.FromSnapshot = "", id
		sb, err := s.c.Create(ctx, opts)
		if err == nil {
			destroyAtCleanup(t, sb)
			t.Errorf("Create from snapshot %q made %s", id, sb.ID())
			continue
		}
		wantCode(t, err, sandbox.InvalidArgument)
	}
	unknown := "snap-does-not-exist-" + randHex(4)
	_, err := s.c.GetSnapshot(ctx, unknown)
	wantCode(t, err, sandbox.NotFound, sandbox.ErrNotFound)
	if err := s.c.DeleteSnapshot(ctx, unknown); err != nil {
		t.Errorf("DeleteSnapshot of unknown %q: %v, want nil", unknown, err)
	}
}
