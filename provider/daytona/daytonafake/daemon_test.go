package daytonafake_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
)

// The expectations below are the real toolbox daemon's answers
// (research/daemons.md, "Observed 2026-12-04").

// TestUploadParentsMode0750: an upload creates the missing parent
// directories with mode 0750, as the daemon's upload handler does.
func TestUploadParentsMode0750(t *testing.T) {
	t.Parallel()
	r := newRaw(t)
	id := r.create(nil)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	w, _ := mw.CreateFormFile("file", "f")
	_, _ = w.Write([]byte("x"))
	_ = mw.Close()
	if st, _, _ := r.do("POST", r.tb(id)+"/files/upload?path=up/a/b/f", &body, mw.FormDataContentType()); st != 200 {
		t.Fatalf("upload: %d", st)
	}
	st, out := r.json("POST", r.tb(id)+"/process/execute", map[string]any{"command": "stat -c %a up up/a up/a/b up/a/b/f"})
	if st != 200 || out["result"] != "750\n750\n750\n644\n" {
		t.Errorf("modes of the created parents and the file: %d %q, want 750 750 750 644", st, out["result"])
	}
}

// TestUploadWritesNothingUntilTheBodyEnds: the daemon parses the whole
// multipart form before it creates the destination, so while the body
// is still coming nothing appears in the directory, and a body that
// never ends properly leaves nothing there (a client whose upload failed
// cleans up once, and a write begun after that would stay).
func TestUploadWritesNothingUntilTheBodyEnds(t *testing.T) {
	t.Parallel()
	r := newRaw(t)
	id := r.create(nil)
	if st, out := r.json("POST", r.tb(id)+"/process/execute", map[string]any{"command": "mkdir d"}); st != 200 {
		t.Fatalf("mkdir: %d %v", st, out)
	}
	list := func() string {
		st, _, b := r.do("GET", r.tb(id)+"/files?path=d", nil, "")
		var fis []struct{ Name string }
		if st != 200 || json.Unmarshal(b, &fis) != nil {
			t.Fatalf("list d: %d %s", st, b)
		}
		var names []string
		for _, fi := range fis {
			names = append(names, fi.Name)
		}
		return strings.Join(names, ",")
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	req, err := http.NewRequest("POST", r.tb(id)+"/files/upload?path=d/f", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+r.key)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	sent := make(chan error, 1)
	go func() {
		resp, err := r.hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				err = errors.New("200")
			}
		}
		sent <- err
	}()
	w, _ := mw.CreateFormFile("file", "f")
	if _, err := w.Write(bytes.Repeat([]byte("a"), 256<<10)); err != nil {
		t.Fatal(err)
	}
	// The handler has read the part's first bytes by now (the pipe
	// returns once they are taken); give it time to act on them.
	time.Sleep(300 * time.Millisecond)
	if l := list(); l != "" {
		t.Errorf("while the body is still coming, the directory holds %q, want nothing", l)
	}
	pw.CloseWithError(errors.New("the client gave up"))
	if err := <-sent; err != nil && err.Error() == "200" {
		t.Fatal("an upload whose body never ended was answered 200")
	}
	if l := list(); l != "" {
		t.Errorf("after an upload whose body never ended, the directory holds %q, want nothing", l)
	}
}

// TestExecuteKeepsWriteOrder: /process/execute's merged result keeps the
// order the command wrote its stdout and stderr in.
func TestExecuteKeepsWriteOrder(t *testing.T) {
	t.Parallel()
	r := newRaw(t)
	id := r.create(nil)
	for range 3 {
		st, out := r.json("POST", r.tb(id)+"/process/execute", map[string]any{"command": `printf 'out\n'; printf 'err\n' >&2; printf 'out2\n'; printf 'err2\n' >&2`})
		if st != 200 || out["result"] != "out\nerr\nout2\nerr2\n" {
			t.Fatalf("merged result %d %q, want the write order out, err, out2, err2", st, out["result"])
		}
	}
}

// TestDaemonErrorBodies: status, body shape and text of the daemon's
// errors.
func TestDaemonErrorBodies(t *testing.T) {
	t.Parallel()
	r := newRaw(t)
	id := r.create(nil)
	check := func(what string, st int, out map[string]any, wantSt int, want map[string]any, absent ...string) {
		t.Helper()
		if st != wantSt {
			t.Errorf("%s: status %d, want %d (%v)", what, st, wantSt, out)
		}
		for k, v := range want {
			if out[k] != v {
				t.Errorf("%s: %s = %#v, want %#v", what, k, out[k], v)
			}
		}
		for _, k := range absent {
			if _, ok := out[k]; ok {
				t.Errorf("%s: has %s (%v), the daemon's body has none", what, k, out[k])
			}
		}
	}
	st, out := r.json("POST", r.tb(id)+"/process/execute", map[string]any{"command": "sleep 30", "timeout": 1})
	check("timeout", st, out, 408, map[string]any{"statusCode": 408.0, "code": "REQUEST_TIMEOUT",
		"message": "request timeout: command execution timeout", "path": "/process/execute", "method": "POST"})
	st, out = r.json("POST", r.tb(id)+"/process/execute", map[string]any{"command": " \n\t"})
	check("blank command", st, out, 400, map[string]any{"statusCode": 400.0, "code": "BAD_REQUEST",
		"message": "bad request: command cannot be empty or whitespace-only", "path": "/process/execute"})
	st, out = r.json("POST", r.tb(id)+"/process/execute", map[string]any{"command": "true", "envs": map[string]string{"1X": "y"}})
	check("bad env key", st, out, 400, map[string]any{"code": "BAD_REQUEST",
		"message": "bad request: invalid environment variable name: '1X'", "path": "/process/execute"})
	st, out = r.json("POST", r.tb(id)+"/process/session/nope/exec", map[string]any{"command": "true"})
	check("unknown session", st, out, 500, map[string]any{"statusCode": 500.0,
		"message": "failed to execute command: not found: session not found", "path": "", "timestamp": "0001-01-01T00:00:00Z"}, "code")

	// A non-empty directory without recursive: 400 with an empty body.
	if st, _ := r.json("POST", r.tb(id)+"/process/execute", map[string]any{"command": "mkdir -p d && : > d/f"}); st != 200 {
		t.Fatalf("setup: %d", st)
	}
	st, _, b := r.do("DELETE", r.tb(id)+"/files?path=d", nil, "")
	if st != 400 || len(b) != 0 {
		t.Errorf("delete of a non-empty directory: %d %q, want 400 with an empty body", st, b)
	}
	var m map[string]any
	if json.Unmarshal(b, &m) == nil {
		t.Errorf("delete of a non-empty directory answered a JSON body %v", m)
	}
}

// TestPreviewProxyAnswers: the preview proxy answers a port nothing
// listens on with 502 and an empty body, and a request without a valid
// preview token with 307 to the login page (setting the PKCE cookie),
// as Daytona's proxy does; the login page answers 200.
func TestPreviewProxyAnswers(t *testing.T) {
	t.Parallel()
	r := newRaw(t)
	id := r.create(nil)
	st, link := r.json("GET", r.f.URL()+"/sandbox/"+id+"/ports/8080/preview-url", nil)
	if st != 200 || link["token"] == nil {
		t.Fatalf("preview-url: %d %v", st, link)
	}
	noRedirect := &http.Client{Transport: r.hc.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(token string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", r.f.PreviewURL()+"/x?y=1", nil)
		req.Header.Set("X-Forwarded-Host", "8080-"+id+"."+daytonafake.PreviewDomain)
		if token != "" {
			req.Header.Set("X-Daytona-Preview-Token", token)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, b := get(link["token"].(string))
	if resp.StatusCode != 502 || len(b) != 0 || resp.ContentLength != 0 {
		t.Errorf("closed port: %d (Content-Length %d) %q, want 502 with an empty body", resp.StatusCode, resp.ContentLength, b)
	}
	for _, tok := range []string{"", "wrong"} {
		resp, _ := get(tok)
		loc, err := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != 307 || err != nil || loc.Path != daytonafake.AuthPath || loc.Query().Get("code_challenge_method") != "S256" ||
			!strings.HasSuffix(loc.Query().Get("redirect_uri"), "/callback") {
			t.Errorf("token %q: %d Location %q, want 307 to the login page", tok, resp.StatusCode, resp.Header.Get("Location"))
			continue
		}
		var cookie bool
		for _, c := range resp.Cookies() {
			cookie = cookie || c.Name == "pkce_verifier"
		}
		if !cookie {
			t.Errorf("token %q: no pkce_verifier cookie", tok)
		}
		page, err := r.hc.Get(loc.String())
		if err != nil {
			t.Fatal(err)
		}
		page.Body.Close()
		if page.StatusCode != 200 {
			t.Errorf("login page: %d", page.StatusCode)
		}
	}
}
