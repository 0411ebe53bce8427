//go:build unix

package k8s_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/fsbackend"
	"github.com/sandboxkit/sandbox/run"
	"github.com/sandboxkit/sandbox/session"
)

// The layers above the portable Client (session, fsbackend, run) work
// over the provider end to end: the real sandboxd as the data plane, the
// fake clientsets and the controller stand-in as the control plane.

// layerTimeout bounds each layer's test: generous for a starved host
// running -race, short enough that a hang fails rather than stalls.
const layerTimeout = 2 * time.Minute

// claims lists the names of the SandboxClaims left in the fake clientset.
func (c *cluster) claims(t *testing.T, ctx context.Context) []string {
	t.Helper()
	list, err := c.ext.ExtensionsV1beta1().SandboxClaims(c.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cl := range list.Items {
		names = append(names, cl.Name)
	}
	return names
}

// newManager returns a session manager over e's client, closed at the end
// of the test, with no reaper goroutine.
func newManager(t *testing.T, e *env) *session.Manager {
	m := session.NewManager(e.c, session.Options{ReapInterval: -1, IdleTimeout: -1})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), layerTimeout)
		defer cancel()
		_ = m.Close(ctx)
	})
	return m
}

func TestLayersSession(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), layerTimeout)
	defer cancel()
	m := newManager(t, e)

	a, err := m.Acquire(ctx, "alice")
	if err != nil {
		t.Fatalf("Acquire(alice): %v", err)
	}
	again, err := m.Acquire(ctx, "alice")
	if err != nil {
		t.Fatalf("Acquire(alice) again: %v", err)
	}
	if again.ID() != a.ID() {
		t.Fatalf("the same key got another sandbox: %s, then %s", a.ID(), again.ID())
	}
	b, err := m.Acquire(ctx, "bob")
	if err != nil {
		t.Fatalf("Acquire(bob): %v", err)
	}
	if b.ID() == a.ID() {
		t.Fatalf("two keys share sandbox %s", a.ID())
	}

	// The session's operations reach its own sandbox, in its workspace.
	if err := a.WriteFile(ctx, "hello.txt", []byte("from alice")); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	got, err := a.ReadFile(ctx, "hello.txt")
	if err != nil || string(got) != "from alice" {
		t.Fatalf("ReadFile = %q, %v; want %q", got, err, "from alice")
	}
	res, err := a.Exec(ctx, sandbox.Command{Args: []string{"cat", "hello.txt"}})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "from alice" {
		t.Fatalf("Exec(cat) = %+v, %v; want exit 0 and %q (commands run in the workspace)", res, err, "from alice")
	}
	if _, err := b.ReadFile(ctx, "hello.txt"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("bob's sandbox sees alice's file: ReadFile err = %v, want ErrNotFound", err)
	}
	if _, err := a.ReadFile(ctx, "../../etc/passwd"); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Fatalf("ReadFile(../../etc/passwd) err = %v, want ErrPathEscape", err)
	}

	if n := len(e.cl.claims(t, ctx)); n != 2 {
		t.Fatalf("%d SandboxClaims for two sessions, want 2", n)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if left := e.cl.claims(t, ctx); len(left) != 0 {
		t.Fatalf("Close left SandboxClaims %v", left)
	}
	if _, err := m.Acquire(ctx, "alice"); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("Acquire after Close err = %v, want ErrClosed", err)
	}
}

func TestLayersFsbackend(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), layerTimeout)
	defer cancel()
	s, err := newManager(t, e).Acquire(ctx, "agent")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	// The workspace is under sandboxd's root, the only tree its file API
	// serves.
	fb, err := fsbackend.New(s.Sandbox(), fsbackend.Options{BaseDir: s.Workspace(), AllowExecute: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()

	w, err := fb.Write(ctx, &backend.WriteRequest{Path: "notes/todo.txt", Content: "buy milk\ncall bob\n"})
	if err != nil || w.Error != nil {
		t.Fatalf("Write = %+v, %v", w, err)
	}
	ed, err := fb.Edit(ctx, &backend.EditRequest{Path: "notes/todo.txt", OldString: "milk", NewString: "bread"})
	if err != nil || ed.Error != nil || ed.Occurrences != 1 {
		t.Fatalf("Edit = %+v, %v; want 1 occurrence", ed, err)
	}
	r, err := fb.Read(ctx, &backend.ReadRequest{Path: "notes/todo.txt"})
	if err != nil || r.Error != nil || !strings.Contains(r.Content, "buy bread") || strings.Contains(r.Content, "milk") {
		t.Fatalf("Read after Edit = %+v, %v; want the edited text", r, err)
	}
	ls, err := fb.Ls(ctx, &backend.LsRequest{Path: "notes"})
	if err != nil || ls.Error != nil || len(ls.Files) != 1 || ls.Files[0].Path != "notes/todo.txt" {
		t.Fatalf("Ls(notes) = %+v, %v; want notes/todo.txt", ls, err)
	}
	g, err := fb.Grep(ctx, &backend.GrepRequest{Pattern: "bob"})
	if err != nil || g.Error != nil || len(g.Matches) != 1 || g.Matches[0].Path != "notes/todo.txt" || g.Matches[0].Line != 2 {
		t.Fatalf("Grep(bob) = %+v, %v; want notes/todo.txt:2", g, err)
	}
	gl, err := fb.Glob(ctx, &backend.GlobRequest{Pattern: "**/*.txt"})
	if err != nil || gl.Error != nil {
		t.Fatalf("Glob = %+v, %v", gl, err)
	}
	if paths := pathsOf(gl.Files); !slices.Equal(paths, []string{"notes/todo.txt"}) {
		t.Fatalf("Glob(**/*.txt) = %v, want [notes/todo.txt]", paths)
	}
	x, err := fb.Execute(ctx, &backend.ExecuteRequest{Command: "wc -l < notes/todo.txt"})
	if err != nil || x.ExitCode != 0 || strings.TrimSpace(x.Output) != "2" {
		t.Fatalf("Execute(wc -l) = %+v, %v; want exit 0 and 2", x, err)
	}
	// The backend's jail helper reached the sandbox through sandboxd's
	// file API (it lives under the workspace), so the tools above ran on
	// the helper's path, not only on the shell fallback.
	if res, err := s.Exec(ctx, sandbox.Command{Args: []string{"ls", "-A", fsbackend.MetadataDir + "/bin"}}); err != nil || res.ExitCode != 0 || len(bytes.TrimSpace(res.Stdout)) == 0 {
		t.Fatalf("no fsbackend helper in the workspace: %+v, %v", res, err)
	}
	// The file tools and the session see the same workspace.
	if got, err := s.ReadFile(ctx, "notes/todo.txt"); err != nil || string(got) != "buy bread\ncall bob\n" {
		t.Fatalf("session ReadFile = %q, %v", got, err)
	}

	esc, err := fb.Read(ctx, &backend.ReadRequest{Path: "../../etc/passwd"})
	if err != nil {
		t.Fatal(err)
	}
	if esc.Error == nil || esc.Error.Code != backend.CodeInvalidPath {
		t.Fatalf("Read(../../etc/passwd) = %+v, want a %s error", esc, backend.CodeInvalidPath)
	}
}

func pathsOf(files []backend.FileInfo) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	slices.Sort(out)
	return out
}

func TestLayersRun(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), layerTimeout)
	defer cancel()
	sb, err := e.c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), layerTimeout)
		defer cancel()
		_ = sb.Destroy(dctx)
	}()

	req := run.Request{
		ID:      "job-1",
		Command: []string{"sh", "-c", "echo started; echo to-stderr >&2; exit 3"},
		Budget:  time.Minute,
	}
	r, err := run.Start(ctx, sb, req)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	st, err := r.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if st.State != run.Exited || st.ExitCode != 3 {
		t.Fatalf("Wait = %+v, want exited with code 3", st)
	}
	logs, err := r.Logs(ctx, 0)
	if err != nil {
		t.Fatalf("Logs: %v", err)
	}
	if string(logs) != "started\nto-stderr\n" {
		t.Fatalf("Logs = %q, want both streams combined", logs)
	}

	// A finished run is found again by id, through a new handle, and
	// starting it again returns it without a second process.
	sb2, err := e.c.Attach(ctx, sb.ID())
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	again, err := run.Open(ctx, sb2, "job-1")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	st2, err := again.Status(ctx)
	if err != nil || st2.State != run.Exited || st2.ExitCode != 3 {
		t.Fatalf("Status of the finished run = %+v, %v; want exited with code 3", st2, err)
	}
	same, err := run.Start(ctx, sb, req)
	if err != nil {
		t.Fatalf("Start again: %v", err)
	}
	if st3, err := same.Status(ctx); err != nil || st3 != st2 {
		t.Fatalf("Start again gave %+v, %v; want the finished run %+v", st3, err, st2)
	}
	if logs, err := same.Logs(ctx, 0); err != nil || string(logs) != "started\nto-stderr\n" {
		t.Fatalf("Logs after Start again = %q, %v; the command ran twice?", logs, err)
	}
}
