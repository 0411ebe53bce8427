package daytonafake_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/provider/local/localtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// raw is a bare HTTP client on the fake: these tests check the wire
// protocol itself, not the adapter.
type raw struct {
	t    *testing.T
	f    *daytonafake.Server
	hc   *http.Client
	key  string
	vers string
}

func newRaw(t *testing.T, opts ...daytonafake.Option) *raw {
	// No network unless asked for: nothing here reaches beyond the host.
	be, err := localtest.Offline(local.WithRoot(t.TempDir()))
	if err != nil {
		t.Fatalf("local.New: %v", err)
	}
	t.Cleanup(func() { _ = be.Close() })
	f := daytonafake.New(be, opts...)
	t.Cleanup(f.Close)
	hc := f.Client()
	t.Cleanup(hc.CloseIdleConnections)
	return &raw{t: t, f: f, hc: hc, key: f.APIKey()}
}

func (r *raw) do(method, u string, body io.Reader, ctype string) (int, http.Header, []byte) {
	r.t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		r.t.Fatal(err)
	}
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	if r.vers != "" {
		req.Header.Set("X-Daytona-SDK-Version", r.vers)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func (r *raw) json(method, u string, in any) (int, map[string]any) {
	r.t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	st, _, b := r.do(method, u, body, "application/json")
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return st, out
}

func (r *raw) create(labels map[string]string) string {
	r.t.Helper()
	st, sb := r.json("POST", r.f.URL()+"/sandbox", map[string]any{"labels": labels})
	if st != 200 || sb["state"] != "started" {
		r.t.Fatalf("create: %d %v", st, sb)
	}
	return sb["id"].(string)
}

func (r *raw) tb(id string) string { return r.f.ToolboxURL() + "/" + id }

func TestAuthAndErrorShapes(t *testing.T) {
	t.Parallel()
	r := newRaw(t)
	key := r.key
	r.key = "dtn_wrong"
	st, body := r.json("GET", r.f.URL()+"/sandbox", nil)
	if st != 401 || body["error"] != "Unauthorized" || body["statusCode"] != 401.0 || body["path"] != "/api/sandbox" {
		t.Errorf("main API 401: %d %v", st, body)
	}
	st, body = r.json("GET", r.f.ToolboxURL()+"/x/version", nil)
	if st != 401 || body["code"] != "UNAUTHORIZED" || body["method"] != "GET" {
		t.Errorf("toolbox 401: %d %v", st, body)
	}
	r.key = key
	st, body = r.json("GET", r.f.URL()+"/sandbox/nope", nil)
	if st != 404 || body["message"] != "Sandbox with ID or name nope not found" {
		t.Errorf("404: %d %v", st, body)
	}
	id := r.create(nil)
	// File errors come with an empty body.
	st, _, b := r.do("GET", r.tb(id)+"/files/download?path=nope", nil, "")
	if st != 404 || len(b) != 0 {
		t.Errorf("missing download: %d %q", st, b)
	}
	st, _, b = r.do("GET", r.tb(id)+"/files?path=nope", nil, "")
	if st != 404 || len(b) != 0 {
		t.Errorf("missing list: %d %q", st, b)
	}
}

func TestStatusQuirks(t *testing.T) {
	t.Parallel()
	r := newRaw(t)
	id := r.create(map[string]string{"a": "1"})
	for _, p := range []string{"autostop/5", "autoarchive/0", "autodelete/-1"} {
		if st, sb := r.json("POST", r.f.URL()+"/sandbox/"+id+"/"+p, nil); st != 201 || sb["id"] != id {
			t.Errorf("POST %s: %d %v, want 201 and a Sandbox", p, st, sb)
		}
	}
	if _, sb := r.json("GET", r.f.URL()+"/sandbox/"+id, nil); sb["autoArchiveInterval"] != 43200.0 {
		t.Errorf("autoarchive 0 should mean the maximum: %v", sb["autoArchiveInterval"])
	}
	st, sb := r.json("PUT", r.f.URL()+"/sandbox/"+id+"/labels", map[string]any{"labels": map[string]string{"b": "2"}})
	if st != 200 || sb["id"] != id || fmt.Sprint(sb["labels"]) != "map[b:2]" {
		t.Errorf("PUT labels: %d %v, want the full Sandbox with labels replaced", st, sb)
	}
	if st, _ := r.json("POST", r.f.URL()+"/sandbox/"+id+"/autostop/-1", nil); st != 400 {
		t.Errorf("negative autostop: %d", st)
	}
	name := "named-" + id[:8]
	if st, _ := r.json("POST", r.f.URL()+"/sandbox", map[string]any{"name": name}); st != 200 {
		t.Fatalf("named create: %d", st)
	}
	if st, body := r.json("POST", r.f.URL()+"/sandbox", map[string]any{"name": name}); st != 409 || !strings.Contains(fmt.Sprint(body["message"]), "already exists") {
		t.Errorf("duplicate name: %d %v", st, body)
	}
	if st, _ := r.json("POST", r.f.URL()+"/sandbox", map[string]any{"cpu": 2}); st != 400 {
		t.Errorf("resources with a snapshot: %d, want 400", st)
	}
}

func TestLifecycleStates(t *testing.T) {
	t.Parallel()
	r := newRaw(t)
	id := r.create(nil)
	if st, sb := r.json("POST", r.f.URL()+"/sandbox/"+id+"/stop", nil); st != 200 || sb["state"] != "stopping" {
		t.Errorf("stop: %d %v", st, sb["state"])
	}
	if _, sb := r.json("GET", r.f.URL()+"/sandbox/"+id, nil); sb["state"] != "stopped" {
		t.Errorf("after stop: %v", sb["state"])
	}
	st, body := r.json("POST", r.tb(id)+"/process/execute", map[string]any{"command": "true"})
	if st != 400 || !strings.Contains(fmt.Sprint(body["message"]), "Is the Sandbox started?") || body["code"] != "BAD_REQUEST" {
		t.Errorf("toolbox on stopped: %d %v", st, body)
	}
	if st, _ := r.json("POST", r.f.URL()+"/sandbox/"+id+"/stop", nil); st != 400 {
		t.Errorf("second stop: %d, want 400", st)
	}
	if st, sb := r.json("POST", r.f.URL()+"/sandbox/"+id+"/archive", nil); st != 200 || sb["state"] != "archiving" {
		t.Errorf("archive: %d %v", st, sb["state"])
	}
	if st, body := r.json("GET", r.tb(id)+"/version", nil); st != 404 || !strings.Contains(fmt.Sprint(body["message"]), "container not found") {
		t.Errorf("toolbox on archived: %d %v", st, body)
	}
	if st, sb := r.json("POST", r.f.URL()+"/sandbox/"+id+"/start", nil); st != 200 || sb["state"] != "started" {
		t.Errorf("start: %d %v", st, sb["state"])
	}
	if st, sb := r.json("DELETE", r.f.URL()+"/sandbox/"+id, nil); st != 200 || sb["state"] != "destroying" || !strings.HasPrefix(fmt.Sprint(sb["name"]), "DESTROYED_") {
		t.Errorf("delete: %d %v", st, sb)
	}
	if st, _ := r.json("GET", r.f.URL()+"/sandbox/"+id, nil); st != 404 {
		t.Errorf("get after delete: %d", st)
	}
	// Auto-stop fires after the interval without toolbox activity.
	id = r.create(nil)
	r.f.Advance(16 * time.Minute)
	if _, sb := r.json("GET", r.f.URL()+"/sandbox/"+id, nil); sb["state"] != "stopped" {
		t.Errorf("after 16 idle minutes: %v, want stopped", sb["state"])
	}
}

func TestCreatePollsAndFailure(t *testing.T) {
	t.Parallel()
	r := newRaw(t, daytonafake.WithCreatePolls(2))
	st, sb := r.json("POST", r.f.URL()+"/sandbox", map[string]any{})
	if st != 200 || sb["state"] != "creating" {
		t.Fatalf("create: %d %v", st, sb["state"])
	}
	id := sb["id"].(string)
	_, sb = r.json("GET", r.f.URL()+"/sandbox/"+id, nil)
	_, sb2 := r.json("GET", r.f.URL()+"/sandbox/"+id, nil)
	if sb["state"] != "creating" || sb2["state"] != "started" {
		t.Errorf("polls: %v then %v", sb["state"], sb2["state"])
	}
	r.f.FailNextCreate("build_failed", "no space left")
	_, sb = r.json("POST", r.f.URL()+"/sandbox", map[string]any{})
	id = sb["id"].(string)
	r.json("GET", r.f.URL()+"/sandbox/"+id, nil)
	if _, sb = r.json("GET", r.f.URL()+"/sandbox/"+id, nil); sb["state"] != "build_failed" || sb["errorReason"] != "no space left" {
		t.Errorf("failed create: %v", sb)
	}
}

func TestListPagesAndFilters(t *testing.T) {
	t.Parallel()
	r := newRaw(t)
	for i := range 5 {
		r.create(map[string]string{"g": "x", "n": fmt.Sprint(i % 2)})
	}
	r.create(map[string]string{"g": "y"})
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		q := url.Values{"labels": {`{"g":"x"}`}, "limit": {"2"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		st, page := r.json("GET", r.f.URL()+"/sandbox?"+q.Encode(), nil)
		if st != 200 || pages > 5 {
			t.Fatalf("page %d: %d %v", pages, st, page)
		}
		for _, it := range page["items"].([]any) {
			seen[it.(map[string]any)["id"].(string)] = true
		}
		if page["nextCursor"] == nil {
			break
		}
		cursor = page["nextCursor"].(string)
	}
	if len(seen) != 5 {
		t.Errorf("pages held %d sandboxes, want 5", len(seen))
	}
	_, page := r.json("GET", r.f.URL()+"/sandbox?"+url.Values{"labels": {`{"g":"x","n":"1"}`}}.Encode(), nil)
	if n := len(page["items"].([]any)); n != 2 {
		t.Errorf("AND of labels: %d, want 2", n)
	}
	if st, _ := r.json("GET", r.f.URL()+"/sandbox?labels=%7Bbad", nil); st != 400 {
		t.Errorf("bad labels JSON: %d", st)
	}
	_, page = r.json("GET", r.f.URL()+"/sandbox?states=stopped", nil)
	if n := len(page["items"].([]any)); n != 0 {
		t.Errorf("state filter: %d stopped", n)
	}
}

func TestLegacyList(t *testing.T) {
	t.Parallel()
	r := newRaw(t, daytonafake.WithLegacyList())
	r.create(nil)
	st, _, b := r.do("GET", r.f.URL()+"/sandbox", nil, "")
	if st != 200 || !bytes.HasPrefix(b, []byte("[")) {
		t.Errorf("legacy list: %d %s", st, b)
	}
}

func TestExecuteLikeTheDaemon(t *testing.T) {
	t.Parallel()
	r := newRaw(t)
	id := r.create(nil)
	// The command is fed on stdin: cat swallows the rest of the script.
	st, out := r.json("POST", r.tb(id)+"/process/execute", map[string]any{"command": "cat\necho after"})
	if st != 200 || out["result"] != "echo after" {
		t.Errorf("stdin-fed command: %d %v", st, out)
	}
	// Merged in write order, and not binary-safe.
	_, out = r.json("POST", r.tb(id)+"/process/execute", map[string]any{"command": `printf 'a\377'; printf b >&2; exit 3`})
	if res := out["result"]; res != "a\uFFFDb" || out["exitCode"] != 3.0 {
		t.Errorf("merged output: %q exit %v", out["result"], out["exitCode"])
	}
	_, out = r.json("POST", r.tb(id)+"/process/execute", map[string]any{"command": "echo $X", "envs": map[string]string{"X": "y"}, "cwd": "."})
	if out["result"] != "y\n" {
		t.Errorf("envs: %v", out)
	}
	if st, out := r.json("POST", r.tb(id)+"/process/execute", map[string]any{"command": "true", "envs": map[string]string{"1X": "y"}}); st != 400 || out["code"] != "BAD_REQUEST" {
		t.Errorf("bad env name: %d %v", st, out)
	}
	if _, out := r.json("POST", r.tb(id)+"/process/execute", map[string]any{"command": "true", "cwd": "/no/such/dir"}); out["exitCode"] != -1.0 {
		t.Errorf("bad cwd: %v", out)
	}
	// A timeout kills the command and drops its output.
	st, out = r.json("POST", r.tb(id)+"/process/execute", map[string]any{"command": "echo lost; sleep 30", "timeout": 1})
	if st != 408 || out["code"] != "REQUEST_TIMEOUT" || strings.Contains(fmt.Sprint(out), "lost") {
		t.Errorf("timeout: %d %v", st, out)
	}
}

func TestFilesLikeTheDaemon(t *testing.T) {
	t.Parallel()
	r := newRaw(t)
	id := r.create(nil)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	w, _ := mw.CreateFormFile("file", "x")
	w.Write([]byte("hello"))
	mw.Close()
	// Relative paths resolve against the daemon's working directory.
	dir := "w"
	st, _, _ := r.do("POST", r.tb(id)+"/files/upload?path="+dir+"/a", bytes.NewReader(body.Bytes()), mw.FormDataContentType())
	if st != 200 {
		t.Fatalf("upload: %d", st)
	}
	st, h, b := r.do("GET", r.tb(id)+"/files/download?path="+dir+"/a", nil, "")
	if st != 200 || string(b) != "hello" || !strings.HasPrefix(h.Get("Content-Disposition"), "attachment") {
		t.Errorf("download: %d %q %v", st, b, h)
	}
	req, _ := http.NewRequest("GET", r.tb(id)+"/files/download?path="+dir+"/a", nil)
	req.Header.Set("Authorization", "Bearer "+r.key)
	req.Header.Set("Range", "bytes=2-")
	resp, err := r.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 206 || string(b) != "llo" {
		t.Errorf("range: %d %q", resp.StatusCode, b)
	}
	if st, _, b := r.do("GET", r.tb(id)+"/files/download?path="+dir, nil, ""); st != 400 || len(b) != 0 {
		t.Errorf("download of a dir: %d %q", st, b)
	}
	if st, _, _ := r.do("POST", r.tb(id)+"/files/folder?path="+dir+"/new&mode=0755", nil, ""); st != 201 {
		t.Errorf("folder: %d", st)
	}
	if st, _, _ := r.do("POST", r.tb(id)+"/files/folder?path="+dir+"/new&mode=0755", nil, ""); st != 201 {
		t.Errorf("folder again: %d", st)
	}
	// Every /files/folder failure is 400 with an empty body, a file in
	// the way and a place the daemon's user may not write alike.
	for _, p := range []string{dir + "/a/sub", "/usr/daytonafake-" + id} {
		if st, _, b := r.do("POST", r.tb(id)+"/files/folder?path="+p+"&mode=0755", nil, ""); st != 400 || len(b) != 0 {
			t.Errorf("folder %s: %d %q, want 400 with an empty body", p, st, b)
		}
	}
	if st, _, _ := r.do("POST", r.tb(id)+"/files/move?source="+dir+"/a&destination="+dir+"/new", nil, ""); st != 409 {
		t.Errorf("move onto existing: %d, want 409", st)
	}
	if st, _, _ := r.do("DELETE", r.tb(id)+"/files?path="+dir, nil, ""); st != 400 {
		t.Errorf("delete non-empty dir without recursive: %d", st)
	}
	if st, _, _ := r.do("DELETE", r.tb(id)+"/files?path="+dir+"&recursive=true", nil, ""); st != 204 {
		t.Errorf("recursive delete: %d", st)
	}
}

func TestSessionsSplitByVersion(t *testing.T) {
	t.Parallel()
	r := newRaw(t)
	id := r.create(nil)
	if st, _ := r.json("POST", r.tb(id)+"/process/session", map[string]string{"sessionId": "s"}); st != 201 {
		t.Fatalf("create session: %d", st)
	}
	if st, _ := r.json("POST", r.tb(id)+"/process/session", map[string]string{"sessionId": "s"}); st != 409 {
		t.Errorf("duplicate session: %d", st)
	}
	st, out := r.json("POST", r.tb(id)+"/process/session/s/exec", map[string]any{"command": "echo o; echo e >&2"})
	if st != 200 || (out["output"] != "o\ne\n" && out["output"] != "e\no\n") || out["stdout"] != nil {
		t.Errorf("no version: %d %v", st, out)
	}
	r.vers = "0.190.0"
	st, out = r.json("POST", r.tb(id)+"/process/session/s/exec", map[string]any{"command": "echo o; echo e >&2", "runAsync": true})
	if st != 202 || out["cmdId"] == nil {
		t.Fatalf("async: %d %v", st, out)
	}
	cid := out["cmdId"].(string)
	for range 100 {
		if _, c := r.json("GET", r.tb(id)+"/process/session/s/command/"+cid, nil); c["exitCode"] != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, logs := r.json("GET", r.tb(id)+"/process/session/s/command/"+cid+"/logs", nil)
	if logs["stdout"] != "o\n" || logs["stderr"] != "e\n" || !strings.Contains(fmt.Sprint(logs["output"]), "\x01\x01\x01") {
		t.Errorf("split logs: %q", logs)
	}
	r.vers = ""
	_, _, text := r.do("GET", r.tb(id)+"/process/session/s/command/"+cid+"/logs", nil, "")
	if string(text) != "o\ne\n" && string(text) != "e\no\n" {
		t.Errorf("plain logs: %q", text)
	}
	if st, out := r.json("POST", r.tb(id)+"/process/session/nope/exec", map[string]any{"command": "true"}); st != 500 || !strings.Contains(fmt.Sprint(out["message"]), "session not found") {
		t.Errorf("exec in unknown session: %d %v", st, out)
	}
	if st, _ := r.json("DELETE", r.tb(id)+"/process/session/s", nil); st != 204 {
		t.Errorf("delete session: %d", st)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	r := newRaw(t)
	id := r.create(nil)
	r.f.FailNext("GET", "/version", daytonafake.Fault502)
	if st, _, b := r.do("GET", r.tb(id)+"/version", nil, ""); st != 502 || len(b) != 0 {
		t.Errorf("502: %d %q", st, b)
	}
	r.f.FailNext("", "/sandbox", daytonafake.Fault429)
	if st, h, _ := r.do("GET", r.f.URL()+"/sandbox", nil, ""); st != 429 || h.Get("Retry-After-authenticated") == "" {
		t.Errorf("429: %d %v", st, h)
	}
	r.f.FailNext("GET", "/version", daytonafake.FaultResetMidBody)
	req, _ := http.NewRequest("GET", r.tb(id)+"/version", nil)
	req.Header.Set("Authorization", "Bearer "+r.key)
	if resp, err := r.hc.Do(req); err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Error("reset mid-body: read the whole body")
		}
	}
	if st, _, _ := r.do("GET", r.tb(id)+"/version", nil, ""); st != 200 {
		t.Errorf("after the fault: %d", st)
	}
}
