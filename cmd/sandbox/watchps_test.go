package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// lockedBuffer is a bytes.Buffer safe to read while the tool writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func cleanMemoryURL(t *testing.T) string {
	url := memoryURL(t)
	t.Cleanup(func() { destroyAll(t, url) })
	return url
}

func openSandbox(t *testing.T, url, id string) *sandbox.Sandbox {
	t.Helper()
	ctx := context.Background()
	c, err := sandbox.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	sb, err := c.Attach(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// waitOutput waits until out holds want, failing after 10s.
func waitOutput(t *testing.T, out *lockedBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output %q", want, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// "sandbox watch" prints each change as it happens, one line each, until
// interrupted, then exits 130.
func TestCLIWatch(t *testing.T) {
	t.Parallel()
	url := cleanMemoryURL(t)
	id := createSandbox(t, url)
	sb := openSandbox(t, url, id)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		args []string
	}{{"plain", nil}, {"recursive", []string{"-r"}}, {"json", []string{"--json", "--recursive"}}} {
		t.Run(tc.name, func(t *testing.T) {
			w := "w-" + tc.name
			if err := sb.MkdirAll(ctx, w+"/sub"); err != nil {
				t.Fatal(err)
			}
			var out, errb lockedBuffer
			a := newApp(nil, &out, &errb)
			a.getenv = func(string) string { return "" }
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			code := make(chan int, 1)
			go func() { code <- a.run(wctx, append([]string{"--url", url, "watch", id, w}, tc.args...)) }()
			// The watch is in place once a change made now is printed.
			probe := fmt.Sprintf("probe-%s", tc.name)
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(out.String(), probe) {
				if time.Now().After(deadline) {
					t.Fatalf("the watch printed nothing: %q %q", out.String(), errb.String())
				}
				if err := sb.WriteFile(ctx, w+"/"+probe, []byte("x")); err != nil {
					t.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			home := sb.Home()
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(sb.WriteFile(ctx, w+"/a", []byte("1")))
			must(sb.Rename(ctx, w+"/a", w+"/b"))
			must(sb.Remove(ctx, w+"/b"))
			must(sb.WriteFile(ctx, w+"/sub/deep", []byte("1")))
			must(sb.WriteFile(ctx, w+"/last", []byte("1")))
			if tc.args == nil {
				waitOutput(t, &out, "create\t"+home+"/"+w+"/last\n")
			} else {
				waitOutput(t, &out, home+"/"+w+"/last")
			}
			cancel()
			select {
			case c := <-code:
				if c != exitInterrupted {
					t.Errorf("exit %d after the interrupt, want %d; stderr %q", c, exitInterrupted, errb.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("watch went on after the interrupt")
			}
			got := out.String()
			if tc.name == "json" {
				var kinds []string
				for line := range strings.Lines(got) {
					var e eventJSON
					if err := json.Unmarshal([]byte(line), &e); err != nil {
						t.Fatalf("line %q: %v", line, err)
					}
					if e.Time == nil || e.Path == "" {
						t.Errorf("line %q lacks time or path", line)
					}
					if strings.HasSuffix(e.Path, "/"+w+"/a") || strings.HasSuffix(e.Path, "/"+w+"/b") {
						kinds = append(kinds, e.Kind+" "+e.Path[len(home)+len(w)+1:])
					}
				}
				want := []string{"create /a", "write /a", "rename /a", "create /b", "remove /b"}
				if strings.Join(kinds, ",") != strings.Join(want, ",") {
					t.Errorf("events on a and b: %q, want %q", kinds, want)
				}
				return
			}
			d := home + "/" + w
			order := []string{"create\t" + d + "/a\n", "rename\t" + d + "/a\n", "create\t" + d + "/b\n", "remove\t" + d + "/b\n"}
			at := 0
			for _, o := range order {
				i := strings.Index(got[at:], o)
				if i < 0 {
					t.Fatalf("no %q after offset %d in %q", o, at, got)
				}
				at += i + len(o)
			}
			deep := "create\t" + d + "/sub/deep\n"
			if recursive := tc.args != nil; strings.Contains(got, deep) != recursive {
				t.Errorf("recursive=%v, but the output %s the subdirectory's file: %q", recursive,
					map[bool]string{true: "shows", false: "lacks"}[!recursive], got)
			}
		})
	}
}

func TestCLIWatchBadInput(t *testing.T) {
	t.Parallel()
	url := cleanMemoryURL(t)
	id := createSandbox(t, url)
	r := invoke(t, url, nil, "watch", id)
	if r.code != exitToolFailure || !strings.Contains(r.stderr, "ID DIR") {
		t.Errorf("watch without DIR: exit %d, stderr %q", r.code, r.stderr)
	}
	r = invoke(t, url, nil, "watch", id, "no-such-dir")
	if r.code != exitToolFailure || !strings.Contains(r.stderr, "NotFound") || !strings.Contains(r.stderr, "no-such-dir") {
		t.Errorf("watch of a missing dir: exit %d, stderr %q", r.code, r.stderr)
	}
	r = invoke(t, url, nil, "watch", id, ".", "--buffer", "-3")
	if r.code != exitToolFailure || !strings.Contains(r.stderr, "--buffer") {
		t.Errorf("watch --buffer -3: exit %d, stderr %q", r.code, r.stderr)
	}
}

// "sandbox ps" lists a running background process as a handle, and not
// one that finished.
func TestCLIPs(t *testing.T) {
	t.Parallel()
	url := cleanMemoryURL(t)
	id := createSandbox(t, url)
	sb := openSandbox(t, url, id)
	ctx := context.Background()
	done, err := sb.Start(ctx, sandbox.Command{Args: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := done.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := sb.Start(ctx, sandbox.Command{Args: []string{"sleep", "45"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Kill(ctx); _, _ = p.Wait(ctx) }()

	r := mustOK(t, invoke(t, url, nil, "ps", id), "ps")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "PID") {
		t.Fatalf("ps printed %q, want a header and one process", r.stdout)
	}
	f := strings.Fields(lines[1])
	if len(f) != 5 || f[0] != fmt.Sprint(p.PID()) || f[2] != "yes" || f[3] != "sleep" || f[4] != "45" {
		t.Errorf("ps line %q", lines[1])
	}
	if _, err := time.Parse(time.RFC3339, f[1]); err != nil {
		t.Errorf("start %q: %v", f[1], err)
	}

	r = mustOK(t, invoke(t, url, nil, "ps", id, "--json"), "ps --json")
	var list []procJSON
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("ps --json: %v in %q", err, r.stdout)
	}
	if len(list) != 1 || list[0].PID != p.PID() || !list[0].Handle || list[0].StartedAt == nil || strings.Join(list[0].Args, " ") != "sleep 45" {
		t.Errorf("ps --json = %+v", list)
	}

	r = invoke(t, url, nil, "ps", "sbx-missing")
	if r.code != exitToolFailure || !strings.Contains(r.stderr, "NotFound") {
		t.Errorf("ps of a missing sandbox: exit %d, stderr %q", r.code, r.stderr)
	}
}
