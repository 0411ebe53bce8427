package session_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

// fakePython answers python3 by printing its script path, working
// directory and the script itself.
func fakePython(rt *memory.Runtime) {
	rt.Handle("python3", func(ctx context.Context, c *memory.Call) int {
		src, err := c.Files.ReadFile(c.Args[1])
		if err != nil {
			fmt.Fprintln(c.Stderr, err)
			return 2
		}
		fmt.Fprintf(c.Stdout, "script=%s dir=%s args=%q\n%s", c.Args[1], c.Dir, c.Args[2:], src)
		return 0
	})
}

func TestRunUploadsFilesAndRunsEntrypoint(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	fakePython(rt)
	ctx := context.Background()
	s := mustAcquire(t, m, "k")
	res, err := s.Run(ctx, "print(open('data/in.txt').read())\n", session.RunOptions{
		Files: []sandbox.File{{Path: "data/in.txt", Data: []byte("hello")}, {Path: "tools/mcp.py", Data: []byte("# client")}},
		Args:  []string{"--flag"},
	})
	if err != nil || !res.Success() {
		t.Fatalf("Run: %+v %v", res, err)
	}
	ws := s.Workspace()
	wantHead := fmt.Sprintf("script=%s/main.py dir=%s args=[\"--flag\"]\n", ws, ws)
	if !strings.HasPrefix(string(res.Stdout), wantHead) {
		t.Fatalf("stdout %q, want prefix %q", res.Stdout, wantHead)
	}
	got, err := s.ReadFile(ctx, "data/in.txt")
	if err != nil || string(got) != "hello" {
		t.Fatalf("uploaded file: %q %v", got, err)
	}
	if _, err := s.Sandbox().Stat(ctx, ws+"/tools/mcp.py"); err != nil {
		t.Fatal(err)
	}
	if len(rt.CallsOf(memory.OpStat)) < 3 {
		t.Fatal("uploads were not verified")
	}
}

func TestRunHoistsFutureImportsAbovePrelude(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	fakePython(rt)
	s := mustAcquire(t, m, "k")
	code := "\"\"\"Doc.\"\"\"\nfrom __future__ import annotations\nimport sys\nprint(sys.argv)\n"
	res, err := s.Run(context.Background(), code, session.RunOptions{Prelude: "import os\nos.chdir('/tmp')"})
	if err != nil {
		t.Fatal(err)
	}
	_, src, _ := strings.Cut(string(res.Stdout), "\n")
	want := "\"\"\"Doc.\"\"\"\nfrom __future__ import annotations\nimport os\nos.chdir('/tmp')\nimport sys\nprint(sys.argv)\n"
	if src != want {
		t.Fatalf("uploaded program:\n%s\nwant:\n%s", src, want)
	}
}

func TestRunRejectsPathsOutsideWorkspace(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	s := mustAcquire(t, m, "k")
	before := len(rt.CallsOf(memory.OpUpload))
	for _, o := range []session.RunOptions{
		{Entrypoint: "../main.py"},
		{Files: []sandbox.File{{Path: "a/../../etc/passwd"}}},
		{Files: []sandbox.File{{Path: "main.py"}}}, // clashes with the entrypoint
		{Files: []sandbox.File{{Path: "x\x00y"}}},
	} {
		if _, err := s.Run(context.Background(), "pass", o); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("Run(%+v) = %v, want InvalidArgument", o, err)
		}
	}
	if len(rt.CallsOf(memory.OpUpload)) != before {
		t.Fatal("uploaded despite invalid paths")
	}
}

// truncatingUpload stores only half of every upload, as a broken transfer
// that reported success.
type truncatingUpload struct{ *memory.Runtime }

func (r truncatingUpload) Upload(ctx context.Context, id, p string, src io.Reader) error {
	b, err := io.ReadAll(src)
	if err != nil {
		return err
	}
	return r.Runtime.Upload(ctx, id, p, bytes.NewReader(b[:len(b)/2]))
}

func TestRunDetectsUnverifiedUpload(t *testing.T) {
	t.Parallel()
	rt := truncatingUpload{memory.New()}
	fakePython(rt.Runtime)
	m := session.NewManager(sandbox.NewClient(rt), session.Options{})
	defer m.Close(context.Background())
	s := mustAcquire(t, m, "k")
	_, err := s.Run(context.Background(), "print('hello world')", session.RunOptions{})
	if err == nil || !strings.Contains(err.Error(), "not verified") || !strings.Contains(err.Error(), "main.py") {
		t.Fatalf("Run = %v, want a verification error naming the file", err)
	}
	if len(rt.CallsOf(memory.OpExec)) != 0 {
		t.Fatal("ran a program whose upload was not verified")
	}
	if _, ok := m.Lookup("k"); !ok {
		t.Fatal("a live sandbox was forgotten after a failed upload")
	}
}

func TestTimeoutsNameTheirLayer(t *testing.T) {
	t.Parallel()
	m, rt := newManager(t, session.Options{})
	rt.Handle("python3", func(ctx context.Context, _ *memory.Call) int { <-ctx.Done(); return 1 })
	s := mustAcquire(t, m, "k")

	res, err := s.Run(context.Background(), "while True: pass", session.RunOptions{Timeout: 20 * time.Millisecond})
	if err != nil || !res.TimedOut || res.TimeoutBy != sandbox.TimeoutCommand || res.Timeout != 20*time.Millisecond {
		t.Fatalf("command timeout: %+v %v", res, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err = s.Run(ctx, "while True: pass", session.RunOptions{Timeout: time.Hour})
	if !errors.Is(err, context.DeadlineExceeded) || res == nil || !res.TimedOut || res.TimeoutBy != sandbox.TimeoutContext {
		t.Fatalf("context timeout: %+v %v", res, err)
	}

	rt.FailNext(memory.OpExec, 1, sandbox.Errorf(sandbox.DeadlineExceeded, "memory: envd: deadline exceeded"))
	res, err = s.Exec(context.Background(), sandbox.Command{Args: []string{"python3", "x.py"}, Timeout: 30 * time.Second})
	if err != nil || !res.TimedOut || res.TimeoutBy != sandbox.TimeoutProvider || res.Timeout != 30*time.Second {
		t.Fatalf("provider timeout: %+v %v", res, err)
	}
	if _, ok := m.Lookup("k"); !ok {
		t.Fatal("session forgotten after timeouts")
	}

	// A deadline on the upload before the program is not a timeout of the
	// program: the error comes back, and nothing claims the program ran.
	rt.FailNext(memory.OpUpload, 1, fmt.Errorf("upload: %w", context.DeadlineExceeded))
	execs := len(rt.CallsOf(memory.OpExec))
	res, err = s.Run(context.Background(), "print(1)", session.RunOptions{})
	if err == nil || res != nil {
		t.Fatalf("failed upload reported as %+v, %v", res, err)
	}
	if got := len(rt.CallsOf(memory.OpExec)); got != execs {
		t.Fatalf("the program ran %d times after a failed upload", got-execs)
	}
}

func TestSessionFilesRelativeToWorkspace(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, session.Options{Workspace: "/srv/ws"})
	ctx := context.Background()
	s := mustAcquire(t, m, "k")
	if s.Workspace() != "/srv/ws" {
		t.Fatalf("workspace %q", s.Workspace())
	}
	if err := s.WriteFile(ctx, "out/r.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	b, err := s.Sandbox().ReadFile(ctx, "/srv/ws/out/r.txt")
	if err != nil || string(b) != "x" {
		t.Fatalf("%q %v", b, err)
	}
	res, err := s.Exec(ctx, sandbox.Command{Args: []string{"pwd"}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "/srv/ws" {
		t.Fatalf("pwd: %+v %v", res, err)
	}
}

func TestAttachedSessionRedactsSecretEnv(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	opts := session.Options{Create: sandbox.CreateOptions{SecretEnv: map[string]string{"API_TOKEN": "s3cr3t-value"}}, ReapInterval: -1}
	m1 := session.NewManager(c, opts)
	mustAcquire(t, m1, "k")
	m2 := session.NewManager(c, opts)
	s := mustAcquire(t, m2, "k")
	if !s.Adopted() {
		t.Fatal("expected an adopted session")
	}
	res, err := s.Exec(context.Background(), sandbox.Command{Args: []string{"printenv", "API_TOKEN"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(res.Stdout), "s3cr3t-value") {
		t.Fatalf("secret leaked through an attached session: %q", res.Stdout)
	}
	_ = rt
}
