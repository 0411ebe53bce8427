package e2bfake_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// envd refuses a Start whose argv is over the kernel's limits as its exec
// of /bin/sh fails (E2BIG): invalid_argument naming the whole command,
// before any start event, and nothing runs.
func TestStartOverArgLimitsRefusedLikeEnvd(t *testing.T) {
	f := start(t)
	c := f.create(`{"templateID":"base"}`)
	h := f.envdHeaders(c)
	h["Content-Type"] = "application/connect+json"
	one := strings.Repeat("a", 128<<10)  // one argument over MAX_ARG_STRLEN
	many := strings.Repeat("b", 100<<10) // 24 of them are over ARG_MAX
	for name, args := range map[string][]string{"one argument": {one}, "argv": repeat(many, 24)} {
		argsJSON, _ := json.Marshal(append([]string{"-c", "touch /home/user/ran"}, args...))
		_, _, b := f.do("POST", f.SandboxURL()+"/process.Process/Start", h,
			envelope(`{"process":{"cmd":"/bin/sh","args":`+string(argsJSON)+`},"stdin":false}`))
		msgs, end := frames(t, b)
		want := "error starting process '/bin/sh -c touch /home/user/ran " + strings.Join(args, " ") + "': fork/exec /bin/sh: argument list too long"
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(end), &e); err != nil || len(msgs) != 0 || e.Error.Code != "invalid_argument" || e.Error.Message != want {
			t.Errorf("%s: %d events, end %.200s, want invalid_argument %.100s…", name, len(msgs), end, want)
		}
	}
	h["Content-Type"] = "application/json"
	if st, _, b := f.do("POST", f.SandboxURL()+"/filesystem.Filesystem/Stat", h, []byte(`{"path":"/home/user/ran"}`)); st != 404 {
		t.Errorf("the refused command ran: Stat: %d %s", st, b)
	}
	// Just under the limits, it runs.
	h["Content-Type"] = "application/connect+json"
	argsJSON, _ := json.Marshal(append([]string{"-c", "true"}, repeat(many, 19)...))
	_, _, b := f.do("POST", f.SandboxURL()+"/process.Process/Start", h, envelope(`{"process":{"cmd":"sh","args":`+string(argsJSON)+`},"stdin":false}`))
	if msgs, end := frames(t, b); len(msgs) != 2 || end != "{}" {
		t.Errorf("19 arguments of 100 KiB: %q / %.200s", msgs, end)
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// A program envd cannot find is not an RPC error: the process starts,
// its wrapper's nice(1) says so on stderr, and it exits 127.
func TestMissingProgramLikeEnvd(t *testing.T) {
	f := start(t)
	c := f.create(`{"templateID":"base"}`)
	h := f.envdHeaders(c)
	h["Content-Type"] = "application/connect+json"
	_, _, b := f.do("POST", f.SandboxURL()+"/process.Process/Start", h, envelope(`{"process":{"cmd":"nope","args":["x"]},"stdin":false}`))
	msgs, end := frames(t, b)
	stderr := base64.StdEncoding.EncodeToString([]byte("/usr/bin/nice: 'nope': No such file or directory\n"))
	if len(msgs) != 3 || !strings.Contains(msgs[0], `"start"`) || !strings.Contains(msgs[1], `"stderr":"`+stderr+`"`) ||
		!strings.Contains(msgs[2], `"exitCode":127`) || end != "{}" {
		t.Errorf("missing program: %q / %s", msgs, end)
	}
}

// envd serves a download with http.ServeContent: the type from the name's
// extension or the content, a Range answered 206 with Content-Range, 416
// past the end; its error bodies are JSON with a charset.
func TestDownloadLikeEnvd(t *testing.T) {
	f := start(t)
	c := f.create(`{"templateID":"base"}`)
	h := f.envdHeaders(c)
	h["Content-Type"] = "application/octet-stream"
	files := map[string]string{
		"/home/user/a.txt":  "hello world\n",
		"/home/user/plain":  "hello world\n",
		"/home/user/bin":    "\x00\xff\xfe abc",
		"/home/user/img":    "\x89PNG\r\n\x1a\n0000",
		"/home/user/x.json": `{"a":1}`,
	}
	for p, data := range files {
		if st, _, b := f.do("POST", f.SandboxURL()+"/files?path="+p, h, []byte(data)); st != 200 {
			t.Fatalf("upload %s: %d %s", p, st, b)
		}
	}
	delete(h, "Content-Type")
	for p, want := range map[string]string{
		"/home/user/a.txt": "text/plain; charset=utf-8", "/home/user/plain": "text/plain; charset=utf-8",
		"/home/user/bin": "application/octet-stream", "/home/user/img": "image/png", "/home/user/x.json": "application/json",
	} {
		st, hdr, b := f.do("GET", f.SandboxURL()+"/files?path="+p, h, nil)
		if st != 200 || hdr.Get("Content-Type") != want || string(b) != files[p] {
			t.Errorf("download %s: %d %q %q, want 200 %q", p, st, hdr.Get("Content-Type"), b, want)
		}
	}
	for rg, want := range map[string]struct {
		status       int
		body, crange string
	}{
		"bytes=2-4":  {206, "llo", "bytes 2-4/12"},
		"bytes=6-":   {206, "world\n", "bytes 6-11/12"},
		"bytes=-3":   {206, "ld\n", "bytes 9-11/12"},
		"bytes=5-99": {206, " world\n", "bytes 5-11/12"},
		"bytes=12-":  {416, "", "bytes */12"},
	} {
		h["Range"] = rg
		st, hdr, b := f.do("GET", f.SandboxURL()+"/files?path=/home/user/plain", h, nil)
		if st != want.status || hdr.Get("Content-Range") != want.crange || (st == 206 && string(b) != want.body) {
			t.Errorf("Range %s: %d %q %q, want %d %q %q", rg, st, hdr.Get("Content-Range"), b, want.status, want.crange, want.body)
		}
	}
	delete(h, "Range")
	st, hdr, b := f.do("GET", f.SandboxURL()+"/files?path=/home/user/none", h, nil)
	if st != 404 || hdr.Get("Content-Type") != "application/json; charset=utf-8" || !strings.Contains(string(b), `"message":"path '/home/user/none' does not exist"`) {
		t.Errorf("missing: %d %q %s", st, hdr.Get("Content-Type"), b)
	}
}
