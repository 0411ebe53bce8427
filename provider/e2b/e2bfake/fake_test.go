package e2bfake_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"

	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/process"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/process/processconnect"
	"github.com/sandboxkit/sandbox/provider/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type rawFake struct {
	*e2bfake.Server
	t *testing.T
}

func start(t *testing.T, opts ...e2bfake.Option) *rawFake {
	f := e2bfake.New(memory.New(), opts...)
	t.Cleanup(f.Close)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	return &rawFake{f, t}
}

// do sends a raw request and returns status, headers and body.
func (f *rawFake) do(method, u string, hdr map[string]string, body []byte) (int, http.Header, []byte) {
	f.t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

type created struct {
	SandboxID       string `json:"sandboxID"`
	EnvdAccessToken string `json:"envdAccessToken"`
}

// create creates a sandbox from body, with a 10-minute lease unless body
// names one: the API's default (15 s) is shorter than a test can take on a
// loaded host, and a sandbox ended mid-test answers 502.
func (f *rawFake) create(body string) created {
	f.t.Helper()
	if !strings.Contains(body, `"timeout"`) {
		body = `{"timeout":600,` + strings.TrimPrefix(body, "{")
	}
	return f.createAsSent(body)
}

// createAsSent creates a sandbox from body as it is.
func (f *rawFake) createAsSent(body string) created {
	f.t.Helper()
	st, _, b := f.do("POST", f.APIURL()+"/sandboxes", map[string]string{"X-API-Key": f.APIKey(), "Content-Type": "application/json"}, []byte(body))
	if st != http.StatusCreated {
		f.t.Fatalf("create: %d %s", st, b)
	}
	var c created
	if err := json.Unmarshal(b, &c); err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *rawFake) envdHeaders(c created) map[string]string {
	return map[string]string{"E2b-Sandbox-Id": c.SandboxID, "E2b-Sandbox-Port": "49983", "X-Access-Token": c.EnvdAccessToken}
}

func TestControlPlaneAuthAndDefaults(t *testing.T) {
	f := start(t)
	st, _, b := f.do("POST", f.APIURL()+"/sandboxes", nil, []byte(`{"templateID":"base"}`))
	want := `{"code":401,"message":"Invalid API key, please visit https://e2b.dev/docs/api-key for more information."}`
	if st != 401 || strings.TrimSpace(string(b)) != want {
		t.Fatalf("no key: %d %s", st, b)
	}
	key := map[string]string{"X-API-Key": f.APIKey()}
	st, _, b = f.do("POST", f.APIURL()+"/sandboxes", key, []byte(`{"templateID":"base","timeout":0}`))
	if st != 400 || !strings.Contains(string(b), "Timeout must be greater than 0") {
		t.Fatalf("timeout 0: %d %s", st, b)
	}
	before := time.Now()
	c := f.createAsSent(`{"templateID":"base"}`)
	end, _ := f.Lease(c.SandboxID)
	if d := end.Sub(before); d < 14*time.Second || d > 16*time.Second {
		t.Fatalf("default lease %v, want 15s", d)
	}
	st, _, b = f.do("GET", f.APIURL()+"/sandboxes/inope0000000000000000", key, nil)
	want = `{"code":404,"message":"Sandbox \"inope0000000000000000\" doesn't exist or you don't have access to it"}`
	if st != 404 || strings.TrimSpace(string(b)) != want {
		t.Fatalf("missing: %d %s", st, b)
	}
	st, _, _ = f.do("POST", f.APIURL()+"/sandboxes/"+c.SandboxID+"/pause", key, nil)
	if st != 204 {
		t.Fatalf("pause: %d", st)
	}
	st, _, b = f.do("POST", f.APIURL()+"/sandboxes/"+c.SandboxID+"/pause", key, nil)
	if st != 409 || !strings.Contains(string(b), "is already paused") {
		t.Fatalf("second pause: %d %s", st, b)
	}
	// A paused sandbox refuses envd traffic with the proxy's 502.
	st, _, b = f.do("POST", f.SandboxURL()+"/filesystem.Filesystem/Stat", f.envdHeaders(c), []byte(`{"path":"/"}`))
	want = `{"code":502,"message":"The sandbox was not found","sandboxId":"` + c.SandboxID + `"}`
	if st != 502 || strings.TrimSpace(string(b)) != want {
		t.Fatalf("paused envd: %d %s", st, b)
	}
	st, _, _ = f.do("POST", f.APIURL()+"/sandboxes/"+c.SandboxID+"/connect", key, []byte(`{"timeout":60}`))
	if st != 201 {
		t.Fatalf("connect to paused: %d, want 201", st)
	}
	st, _, _ = f.do("POST", f.APIURL()+"/sandboxes/"+c.SandboxID+"/connect", key, []byte(`{"timeout":60}`))
	if st != 200 {
		t.Fatalf("connect to running: %d, want 200", st)
	}
}

func TestListEncodingAndTokens(t *testing.T) {
	f := start(t)
	f.create(`{"templateID":"base","metadata":{"a&b":"c=d"}}`)
	f.create(`{"templateID":"base","metadata":{"a&b":"other"}}`)
	key := map[string]string{"X-API-Key": f.APIKey()}
	inner := url.Values{}
	inner.Set(url.QueryEscape("a&b"), url.QueryEscape("c=d"))
	q := url.Values{"metadata": {inner.Encode()}, "limit": {"1"}}
	st, hdr, b := f.do("GET", f.APIURL()+"/v2/sandboxes?"+q.Encode(), key, nil)
	if st != 200 || strings.Count(string(b), "sandboxID") != 1 || hdr.Get("X-Next-Token") != "" || hdr.Get("X-Total-Running") != "1" {
		t.Fatalf("filtered list: %d %v %s", st, hdr, b)
	}
	st, hdr, _ = f.do("GET", f.APIURL()+"/v2/sandboxes?limit=1", key, nil)
	if st != 200 || hdr.Get("X-Next-Token") == "" {
		t.Fatalf("first page: %d %v", st, hdr)
	}
	st, hdr, b = f.do("GET", f.APIURL()+"/v2/sandboxes?limit=1&nextToken="+hdr.Get("X-Next-Token"), key, nil)
	if st != 200 || hdr.Get("X-Next-Token") != "" || strings.Count(string(b), "sandboxID") != 1 {
		t.Fatalf("last page: %d %v %s", st, hdr, b)
	}
	st, _, b = f.do("GET", f.APIURL()+"/v2/sandboxes?nextToken=garbage!", key, nil)
	if st != 400 || !strings.Contains(string(b), "Invalid next token") {
		t.Fatalf("bad token: %d %s", st, b)
	}
	st, _, _ = f.do("GET", f.APIURL()+"/v2/sandboxes?metadata=novalue", key, nil)
	if st != 400 {
		t.Fatalf("bad metadata: %d", st)
	}
}

func TestEnvdAuthAndRouting(t *testing.T) {
	f := start(t)
	c := f.create(`{"templateID":"base","secure":true}`)
	h := f.envdHeaders(c)
	h["X-Access-Token"] = "wrong"
	st, _, b := f.do("POST", f.SandboxURL()+"/process.Process/List", h, []byte(`{}`))
	want := `{"code":401,"message":"unauthorized access, please provide a valid access token or method signing if supported"}`
	if st != 401 || strings.TrimSpace(string(b)) != want {
		t.Fatalf("wrong token: %d %s", st, b)
	}
	st, _, b = f.do("GET", f.SandboxURL()+"/files?path=/x", map[string]string{"E2b-Sandbox-Id": c.SandboxID, "E2b-Sandbox-Port": "49983"}, nil)
	if st != 401 || !strings.Contains(string(b), "missing signature query parameter") {
		t.Fatalf("files without token: %d %s", st, b)
	}
	st, _, b = f.do("GET", f.SandboxURL()+"/health", map[string]string{"E2b-Sandbox-Id": c.SandboxID}, nil)
	if st != 400 || !strings.Contains(string(b), "Missing header: E2b-Sandbox-Port") {
		t.Fatalf("one routing header: %d %s", st, b)
	}
	h = f.envdHeaders(c)
	st, _, b = f.do("POST", f.SandboxURL()+"/process.Process/List", map[string]string{
		"E2b-Sandbox-Id": c.SandboxID, "E2b-Sandbox-Port": "49983", "X-Access-Token": c.EnvdAccessToken,
		"Content-Type": "application/json", "Authorization": "Basic bm9ib2R5Og=="}, []byte(`{}`))
	if st != 401 || !strings.Contains(string(b), `invalid username: 'nobody'`) {
		t.Fatalf("unknown user: %d %s", st, b)
	}
	// Routing by host, as the proxy does for <port>-<id>.<domain>.
	req, _ := http.NewRequest("GET", f.SandboxURL()+"/health", nil)
	req.Host = "49983-" + c.SandboxID + ".sandbox.test"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("host routing: %d", resp.StatusCode)
	}
	// Downloads are gzip-encoded when asked, as envd does.
	up := map[string]string{"Content-Type": "application/octet-stream"}
	for k, v := range h {
		up[k] = v
	}
	st, _, _ = f.do("POST", f.SandboxURL()+"/files?path=/tmp/z", up, []byte("zzzz"))
	if st != 200 {
		t.Fatalf("octet-stream upload: %d", st)
	}
	h["Accept-Encoding"] = "gzip"
	st, hdr, _ := f.do("GET", f.SandboxURL()+"/files?path=/tmp/z", h, nil)
	if st != 200 || hdr.Get("Content-Encoding") != "gzip" {
		t.Fatalf("gzip download: %d %v", st, hdr)
	}
}

// frames splits a Connect streaming body into its JSON messages and the
// end-stream message.
func frames(t *testing.T, b []byte) (msgs []string, end string) {
	t.Helper()
	for len(b) >= 5 {
		flags, n := b[0], binary.BigEndian.Uint32(b[1:5])
		if uint64(n) > uint64(len(b)-5) {
			t.Fatalf("not a Connect stream: a frame of %d bytes in %d: %.200q", n, len(b)-5, b)
		}
		msg := string(b[5 : 5+n])
		b = b[5+n:]
		if flags&2 != 0 {
			end = msg
		} else {
			msgs = append(msgs, msg)
		}
	}
	return msgs, end
}

func envelope(msg string) []byte {
	out := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(out[1:5], uint32(len(msg)))
	copy(out[5:], msg)
	return out
}

func TestStartWireFormat(t *testing.T) {
	f := start(t, e2bfake.WithDefaultCommandTimeout(300*time.Millisecond))
	c := f.create(`{"templateID":"base"}`)
	h := f.envdHeaders(c)
	h["Content-Type"] = "application/connect+json"
	st, _, b := f.do("POST", f.SandboxURL()+"/process.Process/Start", h, envelope(`{"process":{"cmd":"true"},"stdin":false}`))
	msgs, end := frames(t, b)
	if st != 200 || len(msgs) != 2 || !strings.Contains(msgs[0], `"start":{"pid":`) {
		t.Fatalf("start stream: %d %q", st, msgs)
	}
	// Exit code 0 is omitted, as proto-JSON does.
	var ev struct {
		Event struct {
			End map[string]any `json:"end"`
		} `json:"event"`
	}
	if err := json.Unmarshal([]byte(msgs[1]), &ev); err != nil {
		t.Fatal(err)
	}
	if _, has := ev.Event.End["exitCode"]; has || ev.Event.End["exited"] != true || ev.Event.End["status"] != "exit status 0" || end != "{}" {
		t.Fatalf("end: %s / %s", msgs[1], end)
	}
	// stdin is open when not mentioned: cat waits until the default
	// command timeout ends it, without an end event.
	_, _, b = f.do("POST", f.SandboxURL()+"/process.Process/Start", h, envelope(`{"process":{"cmd":"cat"}}`))
	msgs, end = frames(t, b)
	if len(msgs) != 1 || !strings.Contains(end, "deadline_exceeded") {
		t.Fatalf("cat with open stdin: %q / %s", msgs, end)
	}
	// A bad cwd is refused before any start event.
	_, _, b = f.do("POST", f.SandboxURL()+"/process.Process/Start", h, envelope(`{"process":{"cmd":"true","cwd":"/nope"}}`))
	msgs, end = frames(t, b)
	if len(msgs) != 0 || !strings.Contains(end, "invalid_argument") || !strings.Contains(end, "cwd '/nope' does not exist") {
		t.Fatalf("bad cwd: %q / %s", msgs, end)
	}
}

func TestProcessInputAndSignals(t *testing.T) {
	f := start(t)
	c := f.create(`{"templateID":"base"}`)
	pc := processconnect.NewProcessClient(http.DefaultClient, f.SandboxURL(), connect.WithProtoJSON())
	hdr := func(h http.Header) {
		for k, v := range f.envdHeaders(c) {
			h.Set(k, v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "cat"}})
	hdr(req.Header())
	stream, err := pc.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetEvent().GetStart() == nil {
		t.Fatalf("no start event: %v", stream.Err())
	}
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: stream.Msg().GetEvent().GetStart().GetPid()}}
	lreq := connect.NewRequest(&process.ListRequest{})
	hdr(lreq.Header())
	list, err := pc.List(ctx, lreq)
	if err != nil || len(list.Msg.GetProcesses()) != 1 {
		t.Fatalf("list: %v %v", err, list)
	}
	in := connect.NewRequest(&process.SendInputRequest{Process: sel, Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("ping")}}})
	hdr(in.Header())
	if _, err := pc.SendInput(ctx, in); err != nil {
		t.Fatal(err)
	}
	cl := connect.NewRequest(&process.CloseStdinRequest{Process: sel})
	hdr(cl.Header())
	if _, err := pc.CloseStdin(ctx, cl); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	var end *process.ProcessEvent_EndEvent
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		out.Write(ev.GetData().GetStdout())
		if ev.GetEnd() != nil {
			end = ev.GetEnd()
		}
	}
	if out.String() != "ping" || end == nil || end.GetExitCode() != 0 {
		t.Fatalf("cat: %q end %v err %v", out.String(), end, stream.Err())
	}
	sig := connect.NewRequest(&process.SendSignalRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: 99999}}, Signal: process.Signal_SIGNAL_SIGKILL})
	hdr(sig.Header())
	_, err = pc.SendSignal(ctx, sig)
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("signal to unknown pid: %v", err)
	}
}

// TestFilesystemAnswersAsEnvd pins the answers of envd 0.6.13 observed in
// research/daemons.md for paths that run through a regular file.
func TestFilesystemAnswersAsEnvd(t *testing.T) {
	f := start(t)
	c := f.create(`{"templateID":"base"}`)
	h := f.envdHeaders(c)
	h["Content-Type"] = "application/octet-stream"
	if st, _, b := f.do("POST", f.SandboxURL()+"/files?path=/home/user/f", h, []byte("x")); st != 200 {
		t.Fatalf("upload: %d %s", st, b)
	}
	if st, _, b := f.do("POST", f.SandboxURL()+"/files?path=/home/user/d/x", h, []byte("x")); st != 200 {
		t.Fatalf("upload: %d %s", st, b)
	}
	h["Content-Type"] = "application/json"
	rpc := func(method, body string) (int, map[string]string) {
		t.Helper()
		st, _, b := f.do("POST", f.SandboxURL()+"/filesystem.Filesystem/"+method, h, []byte(body))
		var out map[string]string
		_ = json.Unmarshal(b, &out)
		return st, out
	}
	// MakeDir under a file: envd's stat fails with ENOTDIR, answered internal.
	st, out := rpc("MakeDir", `{"path":"/home/user/f/g"}`)
	if st != 500 || out["code"] != "internal" || out["message"] != "error getting file info: stat /home/user/f/g: not a directory" {
		t.Errorf("MakeDir under a file: %d %v", st, out)
	}
	st, out = rpc("MakeDir", `{"path":"/home/user/f"}`)
	if st != 400 || out["code"] != "invalid_argument" || out["message"] != "path already exists but it is not a directory: /home/user/f" {
		t.Errorf("MakeDir on a file: %d %v", st, out)
	}
	// Move of a file onto a directory: Go's os.Rename answers EEXIST.
	st, out = rpc("Move", `{"source":"/home/user/f","destination":"/home/user/d"}`)
	if st != 500 || out["code"] != "internal" || !strings.HasSuffix(out["message"], ": file exists") {
		t.Errorf("Move onto a directory: %d %v", st, out)
	}
	// A file as cwd gets as far as the spawn, whose chdir fails.
	h["Content-Type"] = "application/connect+json"
	_, _, b := f.do("POST", f.SandboxURL()+"/process.Process/Start", h, envelope(`{"process":{"cmd":"true","cwd":"/home/user/f"}}`))
	msgs, end := frames(t, b)
	if len(msgs) != 0 || !strings.Contains(end, "invalid_argument") || !strings.Contains(end, "not a directory") {
		t.Errorf("file as cwd: %q / %s", msgs, end)
	}
}

// envd's file API acts as root: over sandboxes whose file methods have
// root's rights, an upload to a directory the user may not write
// succeeds, and the file is the user's; Stat names the real owners.
func TestFilesWriteAsRootLikeEnvd(t *testing.T) {
	f := e2bfake.New(memory.New(memory.WithRootFileAccess()))
	t.Cleanup(f.Close)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	r := &rawFake{f, t}
	c := r.create(`{"templateID":"base"}`)
	h := r.envdHeaders(c)
	h["Content-Type"] = "application/octet-stream"
	if st, _, b := r.do("POST", r.SandboxURL()+"/files?path=/usr/x&username=user", h, []byte("x")); st != 200 {
		t.Fatalf("upload to /usr/x as user: %d %s, want 200 as envd", st, b)
	}
	h["Content-Type"] = "application/json"
	for p, want := range map[string]string{"/usr": "root", "/usr/bin": "root", "/home/user": "user"} {
		st, _, b := r.do("POST", r.SandboxURL()+"/filesystem.Filesystem/Stat", h, []byte(`{"path":"`+p+`"}`))
		var out struct {
			Entry struct{ Owner, Group string } `json:"entry"`
		}
		if err := json.Unmarshal(b, &out); err != nil || st != 200 || out.Entry.Owner != want || out.Entry.Group != want {
			t.Errorf("Stat(%s): %d %s, want owner and group %s", p, st, b, want)
		}
	}
}

// envd's Stat is an lstat: a symbolic link is described as itself (type
// symlink, mode 0777) with its target as an absolute path, also when the
// target is missing; a path through a link is followed by the kernel.
func TestStatIsAnLstatLikeEnvd(t *testing.T) {
	f := e2bfake.New(memory.New(memory.WithRootFileAccess()))
	t.Cleanup(f.Close)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	r := &rawFake{f, t}
	c := r.create(`{"templateID":"base"}`)
	h := r.envdHeaders(c)
	h["Content-Type"] = "application/connect+json"
	_, _, b := r.do("POST", r.SandboxURL()+"/process.Process/Start", h,
		envelope(`{"process":{"cmd":"/bin/bash","args":["-l","-c","mkdir -p /home/user/d && ln -s d /home/user/rel && ln -s /etc /home/user/abs && ln -s /nowhere /home/user/gone"]}}`))
	if _, end := frames(t, b); strings.Contains(end, "error") {
		t.Fatalf("ln: %s", end)
	}
	h["Content-Type"] = "application/json"
	for p, want := range map[string]string{"/home/user/rel": "/home/user/d", "/home/user/abs": "/etc", "/home/user/gone": "/nowhere", "/home/user/d": ""} {
		st, _, b := r.do("POST", r.SandboxURL()+"/filesystem.Filesystem/Stat", h, []byte(`{"path":"`+p+`"}`))
		var out struct {
			Entry struct {
				Type, SymlinkTarget, Permissions, Size string
				Mode                                   uint32
			} `json:"entry"`
		}
		if err := json.Unmarshal(b, &out); err != nil || st != 200 {
			t.Errorf("Stat(%s): %d %s", p, st, b)
			continue
		}
		if want == "" {
			if out.Entry.Type != "FILE_TYPE_DIRECTORY" || out.Entry.SymlinkTarget != "" {
				t.Errorf("Stat(%s): %s, want a directory", p, b)
			}
			continue
		}
		if out.Entry.Type != "FILE_TYPE_SYMLINK" || out.Entry.SymlinkTarget != want || out.Entry.Mode != 0o777 || out.Entry.Permissions != "Lrwxrwxrwx" {
			t.Errorf("Stat(%s): %s, want a symlink to %s with mode 0777", p, b, want)
		}
		// lstat's size: the target as stored ("d" for rel).
		if wantSize := map[string]string{"/home/user/rel": "1", "/home/user/abs": "4", "/home/user/gone": "8"}[p]; out.Entry.Size != wantSize {
			t.Errorf("Stat(%s): size %q, want %s, the link's own", p, out.Entry.Size, wantSize)
		}
	}
}
