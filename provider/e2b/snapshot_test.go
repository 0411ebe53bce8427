package e2b_test

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
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/sberrors"
)

func createWith(t *testing.T, e *env, req *driver.CreateRequest) driver.Info {
	t.Helper()
	in, err := e.rt.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = e.rt.Destroy(context.Background(), in.ID) })
	return in
}

func writeFile(t *testing.T, e *env, id, path, data string) {
	t.Helper()
	if err := e.rt.Upload(context.Background(), id, path, strings.NewReader(data)); err != nil {
		t.Fatalf("Upload %s: %v", path, err)
	}
}

func readFile(t *testing.T, e *env, id, path string) (string, error) {
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
	e := newMemoryEnv(t)
	ctx := context.Background()
	if !slices.Equal(e.rt.Capabilities().SnapshotModes, []driver.SnapshotMode{driver.SnapshotFilesystem, driver.SnapshotFull}) {
		t.Fatalf("SnapshotModes = %v", e.rt.Capabilities().SnapshotModes)
	}
	src := createWith(t, e, &driver.CreateRequest{Timeout: time.Minute})
	writeFile(t, e, src.ID, src.Home+"/state.txt", "before")
	snap, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Name: "My Env!", Mode: driver.SnapshotFilesystem})
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if snap.ID == "" || snap.Name != "My Env!" || snap.Mode != driver.SnapshotFilesystem || snap.SourceID != src.ID || snap.Size != -1 {
		t.Fatalf("SnapshotInfo = %+v", snap)
	}
	// The ID is E2B's: <team>/<unique name>:default.
	if !strings.HasPrefix(snap.ID, e2bfake.Team+"/my-env-") || !strings.HasSuffix(snap.ID, ":default") {
		t.Fatalf("snapshot ID %q: want %s/my-env-…:default", snap.ID, e2bfake.Team)
	}
	if e.fake.Count("POST /sandboxes/{id}/snapshots") != 1 {
		t.Fatalf("snapshot endpoint hit %d times", e.fake.Count("POST /sandboxes/{id}/snapshots"))
	}
	writeFile(t, e, src.ID, src.Home+"/state.txt", "after")
	// The snapshot outlives its sandbox.
	if err := e.rt.Destroy(ctx, src.ID); err != nil {
		t.Fatal(err)
	}
	child := createWith(t, e, &driver.CreateRequest{FromSnapshot: snap.ID, Labels: map[string]string{"k": "v"}, Timeout: time.Minute})
	if got, err := readFile(t, e, child.ID, child.Home+"/state.txt"); err != nil || got != "before" {
		t.Fatalf("file in sandbox from snapshot = %q, %v; want the snapshot's %q", got, err, "before")
	}
	if child.Labels["k"] != "v" {
		t.Fatalf("labels of a sandbox from a snapshot = %v", child.Labels)
	}
	got, err := e.rt.GetSnapshot(ctx, snap.ID)
	if err != nil || got.ID != snap.ID {
		t.Fatalf("GetSnapshot = %+v, %v", got, err)
	}
	if err := e.rt.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	if e.fake.Count("DELETE /templates/"+snap.ID) != 1 {
		t.Fatalf("delete went elsewhere: %v", e.fake.Snapshots())
	}
	if err := e.rt.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatalf("DeleteSnapshot of a deleted snapshot: %v", err)
	}
	if _, err := e.rt.GetSnapshot(ctx, snap.ID); !errors.Is(err, sberrors.ErrNotFound) {
		t.Fatalf("GetSnapshot after delete: %v, want NotFound", err)
	}
	in, err := e.rt.Create(ctx, &driver.CreateRequest{FromSnapshot: snap.ID, Timeout: time.Minute})
	if !errors.Is(err, sberrors.ErrNotFound) {
		_ = e.rt.Destroy(ctx, in.ID)
		t.Fatalf("Create from a deleted snapshot: %v, want NotFound", err)
	}
	// The sandbox made from it is not affected.
	if got, err := readFile(t, e, child.ID, child.Home+"/state.txt"); err != nil || got != "before" {
		t.Fatalf("after delete, file = %q, %v", got, err)
	}
}

func TestSnapshotModeAndLabels(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := context.Background()
	src := createWith(t, e, &driver.CreateRequest{Timeout: time.Minute})
	if _, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Mode: "disk"}); sberrors.CodeOf(err) != sberrors.FailedPrecondition || !strings.Contains(err.Error(), "disk") {
		t.Fatalf("unknown mode: %v", err)
	}
	// E2B snapshots have only a name: the labels are kept in it and read back.
	lab, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Name: "Lab", Mode: driver.SnapshotFull, Labels: map[string]string{"A": "b c"}})
	if err != nil {
		t.Fatalf("Snapshot with labels: %v", err)
	}
	if got, err := e.rt.GetSnapshot(ctx, lab.ID); err != nil || got.Name != "Lab" || got.Labels["A"] != "b c" || len(got.Labels) != 1 {
		t.Fatalf("GetSnapshot = %+v, %v; want the name and labels given", got, err)
	}
	if _, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFull, Labels: map[string]string{"k": strings.Repeat("v", 300)}}); sberrors.CodeOf(err) != sberrors.InvalidArgument {
		t.Fatalf("labels too long for a name: %v, want InvalidArgument", err)
	}
	if _, err := e.rt.Snapshot(ctx, "inope", &driver.SnapshotRequest{Mode: driver.SnapshotFull}); !errors.Is(err, sberrors.ErrNotFound) {
		t.Fatalf("snapshot of an unknown sandbox: %v", err)
	}
	// Unnamed snapshots get a unique name each: two never share a template.
	a, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFull})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFull})
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == b.ID {
		t.Fatalf("two snapshots share ID %q", a.ID)
	}
	if m, ok := e.fake.SnapshotKeepsMemory(a.ID); !ok || !m {
		t.Fatalf("full snapshot sent memory=%v (found %v); want true", m, ok)
	}
	c, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFilesystem})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := e.fake.SnapshotKeepsMemory(c.ID); !ok || m {
		t.Fatalf("filesystem snapshot sent memory=%v (found %v); want false", m, ok)
	}
	if page, _, err := e.rt.ListSnapshots(ctx, &driver.ListSnapshotsRequest{Labels: map[string]string{"A": "b c"}, PageSize: 10}); err != nil || len(page) != 1 || page[0].ID != lab.ID {
		t.Fatalf("list by labels = %+v, %v; want only %s", page, err, lab.ID)
	}
}

func TestSnapshotOfPausedSandbox(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := context.Background()
	src := createWith(t, e, &driver.CreateRequest{Timeout: time.Minute})
	writeFile(t, e, src.ID, src.Home+"/p.txt", "paused")
	if err := e.rt.Pause(ctx, src.ID); err != nil {
		t.Fatal(err)
	}
	snap, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFilesystem})
	if err != nil {
		t.Fatalf("Snapshot of a paused sandbox: %v", err)
	}
	t.Cleanup(func() { _ = e.rt.DeleteSnapshot(ctx, snap.ID) })
	in, err := e.rt.Get(ctx, src.ID)
	if err != nil || in.State != driver.StatePaused {
		t.Fatalf("after the snapshot the sandbox is %v, %v; want paused", in.State, err)
	}
	child := createWith(t, e, &driver.CreateRequest{FromSnapshot: snap.ID, Timeout: time.Minute})
	if got, err := readFile(t, e, child.ID, child.Home+"/p.txt"); err != nil || got != "paused" {
		t.Fatalf("file = %q, %v", got, err)
	}
}

func TestListSnapshotsPages(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := context.Background()
	src := createWith(t, e, &driver.CreateRequest{Timeout: time.Minute})
	want := map[string]bool{}
	for range 5 {
		s, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Name: "p", Mode: driver.SnapshotFilesystem})
		if err != nil {
			t.Fatal(err)
		}
		want[s.ID] = true
	}
	seen := map[string]bool{}
	tok, pages := "", 0
	for {
		page, next, err := e.rt.ListSnapshots(ctx, &driver.ListSnapshotsRequest{PageSize: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page) > 2 {
			t.Fatalf("page of %d with PageSize 2", len(page))
		}
		for _, s := range page {
			if seen[s.ID] {
				t.Fatalf("%s listed twice", s.ID)
			}
			seen[s.ID] = true
			if s.Provider != "e2b" || s.Size != -1 || s.Name != "p" {
				t.Fatalf("listed %+v", s)
			}
		}
		if next == "" {
			break
		}
		tok = next
	}
	if pages != 3 || len(seen) != 5 {
		t.Fatalf("%d pages, %d snapshots; want 3 and 5", pages, len(seen))
	}
	for id := range want {
		if !seen[id] {
			t.Fatalf("%s not listed", id)
		}
	}
	if _, _, err := e.rt.ListSnapshots(ctx, &driver.ListSnapshotsRequest{PageSize: 2, PageToken: "!!"}); sberrors.CodeOf(err) != sberrors.InvalidArgument {
		t.Fatalf("bad page token: %v", err)
	}
}

func TestForkNative(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := context.Background()
	src := createWith(t, e, &driver.CreateRequest{Labels: map[string]string{"team": "x"}, Timeout: time.Minute})
	writeFile(t, e, src.ID, src.Home+"/f.txt", "parent")
	kids, err := e.rt.Fork(ctx, src.ID, 3, &driver.CreateRequest{Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	for _, k := range kids {
		t.Cleanup(func() { _ = e.rt.Destroy(context.Background(), k.ID) })
	}
	if len(kids) != 3 || e.fake.Count("POST /sandboxes/{id}/fork") != 1 {
		t.Fatalf("%d children, fork endpoint hit %d times", len(kids), e.fake.Count("POST /sandboxes/{id}/fork"))
	}
	for i, k := range kids {
		if k.Labels["team"] != "x" {
			t.Fatalf("child labels %v: a fork has its source's", k.Labels)
		}
		writeFile(t, e, k.ID, k.Home+"/f.txt", "child"+string(rune('0'+i)))
	}
	for i, k := range kids {
		if got, err := readFile(t, e, k.ID, k.Home+"/f.txt"); err != nil || got != "child"+string(rune('0'+i)) {
			t.Fatalf("child %d sees %q, %v", i, got, err)
		}
		if lease, ok := e.fake.Lease(k.ID); !ok || time.Until(lease) < time.Minute+30*time.Second {
			t.Fatalf("child %d lease ends %v (want about 2 min from now)", i, lease)
		}
	}
	if got, _ := readFile(t, e, src.ID, src.Home+"/f.txt"); got != "parent" {
		t.Fatalf("parent sees %q", got)
	}
}

func TestForkPartialFailure(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := context.Background()
	src := createWith(t, e, &driver.CreateRequest{Timeout: time.Minute})
	e.fake.FailNextFork(1)
	kids, err := e.rt.Fork(ctx, src.ID, 3, &driver.CreateRequest{})
	for _, k := range kids {
		t.Cleanup(func() { _ = e.rt.Destroy(context.Background(), k.ID) })
	}
	if err == nil || len(kids) != 2 {
		t.Fatalf("Fork with one failing child = %d children, %v; want 2 and an error", len(kids), err)
	}
	if !strings.Contains(err.Error(), "child 1") || sberrors.CodeOf(err) != sberrors.Internal {
		t.Fatalf("error %v: want child 1's, Internal", err)
	}
	ids := e.fake.Sandboxes()
	for _, k := range kids {
		if !slices.Contains(ids, k.ID) {
			t.Fatalf("returned child %s does not exist", k.ID)
		}
	}
	if len(ids) != 3 {
		t.Fatalf("%d sandboxes exist; want the source and 2 forks", len(ids))
	}
}

func TestForkErrors(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := context.Background()
	if _, err := e.rt.Fork(ctx, "inope", 1, &driver.CreateRequest{}); !errors.Is(err, sberrors.ErrNotFound) {
		t.Fatalf("fork of unknown: %v", err)
	}
	src := createWith(t, e, &driver.CreateRequest{Timeout: time.Minute})
	if _, err := e.rt.Fork(ctx, src.ID, 0, &driver.CreateRequest{}); sberrors.CodeOf(err) != sberrors.InvalidArgument {
		t.Fatalf("count 0: %v", err)
	}
	if err := e.rt.Pause(ctx, src.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.Fork(ctx, src.ID, 1, &driver.CreateRequest{}); sberrors.CodeOf(err) != sberrors.FailedPrecondition || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("fork of paused: %v", err)
	}
}

func TestForkWithOwnLabelsGoesThroughSnapshot(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := context.Background()
	src := createWith(t, e, &driver.CreateRequest{Labels: map[string]string{"a": "1"}, Timeout: time.Minute})
	writeFile(t, e, src.ID, src.Home+"/g.txt", "g")
	kids, err := e.rt.Fork(ctx, src.ID, 2, &driver.CreateRequest{Labels: map[string]string{"a": "2"}, Env: map[string]string{"E": "x"}, Timeout: time.Minute})
	for _, k := range kids {
		t.Cleanup(func() { _ = e.rt.Destroy(context.Background(), k.ID) })
	}
	if err != nil || len(kids) != 2 {
		t.Fatalf("Fork = %d, %v", len(kids), err)
	}
	for _, k := range kids {
		got, _, err := e.rt.List(ctx, &driver.ListRequest{Labels: map[string]string{"a": "2"}, PageSize: 10})
		if err != nil || !slices.ContainsFunc(got, func(in driver.Info) bool { return in.ID == k.ID }) {
			t.Fatalf("child %s not listed with its own labels: %v %v", k.ID, got, err)
		}
		if s, err := readFile(t, e, k.ID, k.Home+"/g.txt"); err != nil || s != "g" {
			t.Fatalf("child file %q %v", s, err)
		}
	}
	if e.fake.Count("POST /sandboxes/{id}/fork") != 0 {
		t.Fatal("native fork used for forks with their own labels")
	}
	if left := e.fake.Snapshots(); len(left) != 0 {
		t.Fatalf("snapshots left behind: %v", left)
	}
}

func TestCreateFromSnapshotCancelledOrphansNothing(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := context.Background()
	src := createWith(t, e, &driver.CreateRequest{Timeout: time.Minute})
	snap, err := e.rt.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFilesystem})
	if err != nil {
		t.Fatal(err)
	}
	e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.StallResponse, Path: "POST /v2/sandboxes"})
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	in, err := e.rt.Create(cctx, &driver.CreateRequest{FromSnapshot: snap.ID, Timeout: time.Minute})
	if err == nil {
		t.Fatalf("Create survived its cancelled context: %+v", in)
	}
	if in.ID != "" {
		// The driver hands back what it made; the portable layer destroys it.
		_ = e.rt.Destroy(ctx, in.ID)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(e.fake.Sandboxes()) != 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if ids := e.fake.Sandboxes(); len(ids) != 1 || ids[0] != src.ID {
		t.Fatalf("sandboxes after a cancelled create from a snapshot: %v", ids)
	}
}

// TestForkNativeAnswerLost: the fork request reaches E2B, which makes the
// forks, but the caller gives up before the answer: Fork finds the forks
// (they carry the source's metadata) and destroys them.
func TestForkNativeAnswerLost(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := context.Background()
	src := createWith(t, e, &driver.CreateRequest{Timeout: time.Minute})
	e.fake.Inject(&e2bfake.Fault{Kind: e2bfake.StallResponse, Path: "POST /sandboxes/" + src.ID + "/fork"})
	// The caller gives up once E2B has made the forks (their answer is
	// stalled), not after a fixed time: on a loaded host the request may
	// take longer than any short bound to arrive.
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	go func() {
		for len(e.fake.Sandboxes()) < 3 && fctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	kids, err := e.rt.Fork(fctx, src.ID, 2, &driver.CreateRequest{})
	if err == nil || len(kids) != 0 {
		t.Fatalf("Fork whose answer never came = %v, %v", kids, err)
	}
	if e.fake.Count("POST /sandboxes/{id}/fork") != 1 {
		t.Fatal("the fork request did not reach the fake")
	}
	if ids := e.fake.Sandboxes(); len(ids) != 1 || ids[0] != src.ID {
		t.Fatalf("sandboxes after a fork whose answer was lost: %v (want only the source)", ids)
	}
}

// E2B's DELETE /templates/{id} deletes any template: DeleteSnapshot never
// sends it for an ID that is not a snapshot this SDK made (a base
// template, a snapshot made by other means), which is NotFound and stays.
func TestDeleteSnapshotSparesTemplatesAndForeignSnapshots(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := context.Background()
	src := createWith(t, e, &driver.CreateRequest{Timeout: time.Minute})
	// A snapshot made by other means (the E2B CLI, another SDK): its name
	// does not carry this SDK's encoding.
	st, body := rawPost(t, e, "/sandboxes/"+src.ID+"/snapshots", `{"name":"hand-made"}`)
	if st != 201 {
		t.Fatalf("POST snapshots: %d %s", st, body)
	}
	foreign := e2bfake.Team + "/hand-made:default"
	if _, err := e.rt.GetSnapshot(ctx, foreign); err != nil {
		t.Fatalf("GetSnapshot of the hand-made snapshot: %v", err)
	}
	for _, id := range []string{"base", "base:default", foreign} {
		err := e.rt.DeleteSnapshot(ctx, id)
		if !errors.Is(err, sberrors.ErrNotFound) {
			t.Errorf("DeleteSnapshot(%q) = %v, want NotFound", id, err)
		}
		ident, _, _ := strings.Cut(id, ":")
		for _, k := range []string{"DELETE /templates/" + id, "DELETE /templates/" + ident} {
			if n := e.fake.Count(k); n != 0 {
				t.Errorf("DeleteSnapshot(%q) sent %s", id, k)
			}
		}
	}
	if _, err := e.rt.GetSnapshot(ctx, foreign); err != nil {
		t.Errorf("the hand-made snapshot is gone: %v", err)
	}
	in, err := e.rt.Create(ctx, &driver.CreateRequest{Template: "base", Timeout: time.Minute})
	if err != nil {
		t.Fatalf("create from base after DeleteSnapshot(base): %v", err)
	}
	_ = e.rt.Destroy(ctx, in.ID)
}

// rawPost sends a control-plane POST to the fake as another E2B client would.
func rawPost(t *testing.T, e *env, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", e.fake.APIURL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", e.fake.APIKey())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
