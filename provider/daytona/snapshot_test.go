package daytona_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/sberrors"
)

func snapCreate(t *testing.T, e *env, req *driver.CreateRequest) driver.Info {
	t.Helper()
	in, err := e.rt.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = e.rt.Destroy(context.Background(), in.ID) })
	return in
}

func snapWrite(t *testing.T, e *env, id, path, data string) {
	t.Helper()
	if err := e.rt.Upload(context.Background(), id, path, strings.NewReader(data)); err != nil {
		t.Fatalf("Upload %s: %v", path, err)
	}
}

func snapRead(t *testing.T, e *env, id, path string) (string, error) {
	t.Helper()
	rc, err := e.rt.Download(context.Background(), id, path)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

func TestSnapshotCreateFromAndDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	if !slices.Equal(e.rt.Capabilities().SnapshotModes, []driver.SnapshotMode{driver.SnapshotFilesystem}) {
		t.Fatalf("SnapshotModes = %v", e.rt.Capabilities().SnapshotModes)
	}
	src := snapCreate(t, e, &driver.CreateRequest{Timeout: time.Minute})
	snapWrite(t, e, src.ID, src.Home+"/state.txt", "before")
	snap, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Name: "Dev Env", Mode: driver.SnapshotFilesystem})
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if snap.ID == "" || snap.Name != "Dev Env" || !strings.HasPrefix(snap.Detail["daytona.name"], "dev-env-") || snap.Mode != driver.SnapshotFilesystem || snap.SourceID != src.ID || snap.Detail["daytona.state"] != "active" {
		t.Fatalf("SnapshotInfo = %+v", snap)
	}
	if n := e.fake.Count("POST", "/sandbox/"+src.ID+"/snapshot"); n != 1 {
		t.Fatalf("snapshot endpoint hit %d times", n)
	}
	// The sandbox runs on after it.
	if in, err := e.rt.Get(ctx, src.ID); err != nil || in.State != driver.StateRunning {
		t.Fatalf("after the snapshot the sandbox is %v, %v", in.State, err)
	}
	snapWrite(t, e, src.ID, src.Home+"/state.txt", "after")
	if err := e.rt.Destroy(ctx, src.ID); err != nil {
		t.Fatal(err)
	}
	child := snapCreate(t, e, &driver.CreateRequest{FromSnapshot: snap.ID, Timeout: time.Minute})
	if got, err := snapRead(t, e, child.ID, child.Home+"/state.txt"); err != nil || got != "before" {
		t.Fatalf("file in the sandbox from the snapshot = %q, %v; want %q", got, err, "before")
	}
	if got, err := e.rt.GetSnapshot(ctx, snap.ID); err != nil || got.ID != snap.ID || got.Name != snap.Name {
		t.Fatalf("GetSnapshot = %+v, %v", got, err)
	}
	if err := e.rt.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	if n := e.fake.Count("DELETE", "/snapshots/"+snap.ID); n != 1 {
		t.Fatalf("DELETE /snapshots/{id} hit %d times", n)
	}
	if _, err := e.rt.GetSnapshot(ctx, snap.ID); !errors.Is(err, sberrors.ErrNotFound) {
		t.Fatalf("GetSnapshot after delete: %v, want NotFound", err)
	}
	in, err := e.rt.Create(ctx, &driver.CreateRequest{FromSnapshot: snap.ID, Timeout: time.Minute})
	if !errors.Is(err, sberrors.ErrNotFound) {
		_ = e.rt.Destroy(ctx, in.ID)
		t.Fatalf("Create from a deleted snapshot: %v, want NotFound", err)
	}
	if err := e.rt.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatalf("DeleteSnapshot again: %v", err)
	}
	if got, err := snapRead(t, e, child.ID, child.Home+"/state.txt"); err != nil || got != "before" {
		t.Fatalf("after delete, file = %q, %v", got, err)
	}
}

func TestSnapshotRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	src := snapCreate(t, e, &driver.CreateRequest{Timeout: time.Minute})
	if _, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFull}); sberrors.CodeOf(err) != sberrors.FailedPrecondition || !strings.Contains(err.Error(), "full") {
		t.Fatalf("full mode: %v", err)
	}
	if _, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFilesystem, Labels: map[string]string{"a": strings.Repeat("b", 300)}}); sberrors.CodeOf(err) != sberrors.InvalidArgument {
		t.Fatalf("labels too long to keep: %v", err)
	}
	if _, err := e.rt.Snapshot(ctx, "no-such-sandbox", &driver.SnapshotRequest{Mode: driver.SnapshotFilesystem}); !errors.Is(err, sberrors.ErrNotFound) {
		t.Fatalf("unknown sandbox: %v", err)
	}
	// The copy fails in the background: the sandbox comes back and
	// Snapshot says so instead of waiting for its bound.
	e.fake.FailNextSnapshots(1)
	start := time.Now()
	if in, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFilesystem}); err == nil || !strings.Contains(err.Error(), "was not made") {
		t.Fatalf("failed snapshot = %+v, %v", in, err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("a failed snapshot took %v to report", time.Since(start))
	}
	if left := e.fake.Snapshots(); len(left) != 0 {
		t.Fatalf("snapshots after a failed one: %v", left)
	}
}

func TestSnapshotOfStoppedSandbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	src := snapCreate(t, e, &driver.CreateRequest{Timeout: time.Minute})
	snapWrite(t, e, src.ID, src.Home+"/s.txt", "stopped")
	if err := e.rt.Pause(ctx, src.ID); err != nil {
		t.Fatal(err)
	}
	snap, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFilesystem})
	if err != nil {
		t.Fatalf("Snapshot of a stopped sandbox: %v", err)
	}
	t.Cleanup(func() { _ = e.rt.DeleteSnapshot(ctx, snap.ID) })
	if in, err := e.rt.Get(ctx, src.ID); err != nil || in.State != driver.StatePaused {
		t.Fatalf("after the snapshot: %v, %v; want paused", in.State, err)
	}
	child := snapCreate(t, e, &driver.CreateRequest{FromSnapshot: snap.ID, Timeout: time.Minute})
	if got, err := snapRead(t, e, child.ID, child.Home+"/s.txt"); err != nil || got != "stopped" {
		t.Fatalf("file = %q, %v", got, err)
	}
}

func TestListSnapshotsPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	src := snapCreate(t, e, &driver.CreateRequest{Timeout: time.Minute})
	want := map[string]bool{}
	for range 5 {
		s, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Name: "p", Mode: driver.SnapshotFilesystem})
		if err != nil {
			t.Fatal(err)
		}
		want[s.ID] = true
	}
	seen := map[string]bool{}
	tok := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		page, next, err := e.rt.ListSnapshots(ctx, &driver.ListSnapshotsRequest{PageSize: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page {
			if seen[s.ID] {
				t.Fatalf("%s listed twice", s.ID)
			}
			if !want[s.ID] {
				t.Fatalf("listed %+v, not one of ours (general snapshots are left out)", s)
			}
			seen[s.ID] = true
		}
		if next == "" {
			break
		}
		tok = next
	}
	if len(seen) != 5 {
		t.Fatalf("listed %d of 5", len(seen))
	}
	lab, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFilesystem, Labels: map[string]string{"Kind": "la b"}})
	if err != nil {
		t.Fatal(err)
	}
	if page, _, err := e.rt.ListSnapshots(ctx, &driver.ListSnapshotsRequest{PageSize: 200, Labels: map[string]string{"Kind": "la b"}}); err != nil || len(page) != 1 || page[0].ID != lab.ID || page[0].Labels["Kind"] != "la b" {
		t.Fatalf("by labels: %+v %v; want only %s", page, err, lab.ID)
	}
	if _, _, err := e.rt.ListSnapshots(ctx, &driver.ListSnapshotsRequest{PageSize: 2, PageToken: "x"}); sberrors.CodeOf(err) != sberrors.InvalidArgument {
		t.Fatalf("bad token: %v", err)
	}
}

func TestCreateFromSnapshotCancelledOrphansNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	src := snapCreate(t, e, &driver.CreateRequest{Timeout: time.Minute})
	snap, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFilesystem})
	if err != nil {
		t.Fatal(err)
	}
	// The server makes the sandbox, the answer is cut: the driver hands
	// back its id with the error, so the portable layer destroys it.
	e.fake.FailNext("POST", "/sandbox", daytonafake.FaultResetMidBody)
	in, err := e.rt.Create(ctx, &driver.CreateRequest{FromSnapshot: snap.ID, Timeout: time.Minute})
	if err == nil {
		t.Fatalf("Create with its answer cut: %+v", in)
	}
	if in.ID == "" {
		t.Fatalf("Create with its answer cut returned no id (%v): the sandbox made is orphaned: %v", err, e.fake.Sandboxes())
	}
	if err := e.rt.Destroy(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	if ids := e.fake.Sandboxes(); len(ids) != 1 || ids[0] != src.ID {
		t.Fatalf("sandboxes after a cancelled create from a snapshot: %v", ids)
	}
}

// TestSnapshotConcurrentWaitsForTheOther: Daytona answers 409 while the
// sandbox is snapshotting; the second Snapshot waits and asks again.
func TestSnapshotConcurrentWaitsForTheOther(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	src := snapCreate(t, e, &driver.CreateRequest{Timeout: time.Minute})
	snapWrite(t, e, src.ID, src.Home+"/c.txt", strings.Repeat("x", 1<<20))
	type res struct {
		in  driver.SnapshotInfo
		err error
	}
	out := make(chan res, 2)
	for range 2 {
		go func() {
			in, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFilesystem})
			out <- res{in, err}
		}()
	}
	a, b := <-out, <-out
	if a.err != nil || b.err != nil || a.in.ID == b.in.ID {
		t.Fatalf("concurrent snapshots: %+v %v / %+v %v", a.in, a.err, b.in, b.err)
	}
	if n := e.fake.Count("POST", "/snapshot"); n < 3 {
		t.Logf("the two snapshots did not collide (%d requests): the 409 path was not taken this run", n)
	}
}

// TestSnapshotCancelledLeavesNothing: a Snapshot whose ctx ends while
// Daytona makes the snapshot leaves none behind once Close returns.
func TestSnapshotCancelledLeavesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	src := snapCreate(t, e, &driver.CreateRequest{Timeout: time.Minute})
	snapWrite(t, e, src.ID, src.Home+"/c.txt", strings.Repeat("y", 1<<20))
	cut := 0
	for _, d := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond} {
		cctx, cancel := context.WithTimeout(ctx, d)
		in, err := e.rt.Snapshot(cctx, src.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFilesystem})
		cancel()
		if err == nil {
			if err := e.rt.DeleteSnapshot(ctx, in.ID); err != nil {
				t.Fatal(err)
			}
			continue
		}
		cut++
		if in.ID != "" {
			_ = e.rt.DeleteSnapshot(ctx, in.ID)
		}
	}
	if err := e.rt.Close(); err != nil { // waits for the background clean-up
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(e.fake.Snapshots()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := e.fake.Snapshots(); len(left) != 0 {
		t.Fatalf("snapshots left after %d cancelled Snapshot calls: %v", cut, left)
	}
	if cut == 0 {
		t.Log("every Snapshot finished before its deadline")
	}
}

// A Daytona snapshot is also what sandboxes start from: DeleteSnapshot
// removes only one this SDK made. A snapshot made by other means (the
// dashboard, the CLI) is NotFound and stays.
func TestDeleteSnapshotSparesForeignSnapshots(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	src := snapCreate(t, e, &driver.CreateRequest{Timeout: time.Minute})
	req, err := http.NewRequest("POST", e.fake.URL()+"/sandbox/"+src.ID+"/snapshot", strings.NewReader(`{"name":"hand-made"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.fake.APIKey())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST snapshot: %d", resp.StatusCode)
	}
	for deadline := time.Now().Add(30 * time.Second); !slices.Contains(e.fake.Snapshots(), "hand-made"); {
		if time.Now().After(deadline) {
			t.Fatalf("the hand-made snapshot never appeared: %v", e.fake.Snapshots())
		}
		time.Sleep(10 * time.Millisecond)
	}
	hand, err := e.rt.GetSnapshot(ctx, "hand-made")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"hand-made", hand.ID} {
		if err := e.rt.DeleteSnapshot(ctx, id); !errors.Is(err, sberrors.ErrNotFound) {
			t.Errorf("DeleteSnapshot(%q) = %v, want NotFound", id, err)
		}
	}
	if n := e.fake.Count("DELETE", "/snapshots/"+hand.ID); n != 0 {
		t.Errorf("DeleteSnapshot sent DELETE /snapshots/%s %d times", hand.ID, n)
	}
	if got, err := e.rt.GetSnapshot(ctx, hand.ID); err != nil || got.Detail["daytona.state"] != "active" {
		t.Errorf("the hand-made snapshot after DeleteSnapshot: %+v, %v", got, err)
	}
}
