// Package drivertest checks a driver.Runtime against the contract of
// package driver, calling it directly, without the portable layer in
// between: it fails a driver that returns a wrong code, ignores List's
// label filter or page size, mishandles stdin, Close or the scope of its
// files. It is gocloud.dev's drivertest for this module. Package
// sandboxtest, which checks what the portable layer adds, runs it as its
// "Driver" group, so every provider's conformance test runs both.
package drivertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Harness says how to get the Runtime under test.
type Harness struct {
	// NewRuntime returns a new Runtime of the provider under test. It is
	// called once per subtest; the subtest destroys the sandboxes it
	// creates and, when the Runtime is a driver.Closer, closes it.
	NewRuntime func(t *testing.T) driver.Runtime
	// Create is the request every sandbox is created with (a template,
	// provider options); the suite sets its own labels and, when zero, a
	// 10 minute lease.
	Create driver.CreateRequest
	// Skip names subtests to skip, with the reason. Run fails on a key
	// that names no subtest (or case, such as "Codes/ReadOnly").
	Skip map[string]string
	// Timeout bounds each subtest (default 5 minutes, as sandboxtest's).
	Timeout time.Duration
	// ReadOnlyDir is a directory the sandbox's commands cannot write, for
	// the PermissionDenied rows of Codes (default /usr); they skip where
	// the commands can write it, and a provider without read-only places
	// skips them through Skip ("Codes/ReadOnly").
	ReadOnlyDir string
}

type test struct {
	name string
	fn   func(ctx context.Context, t *testing.T, e *env)
}

var tests = []test{
	{"Capabilities", testCapabilities},
	{"Codes", testCodes},
	{"ExecStatus", testExecStatus},
	{"Stdin", testStdin},
	{"ListFilterAndPageSize", testList},
	{"FileScope", testFileScope},
	{"Close", testClose},
}

// Run runs the driver-level suite as subtests of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewRuntime == nil {
		t.Fatal("drivertest: Harness.NewRuntime is nil")
	}
	if h.Timeout == 0 {
		h.Timeout = 5 * time.Minute
	}
	if err := checkSkip(h.Skip); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if reason, ok := h.Skip[tc.name]; ok {
				t.Skip(reason)
			}
			ctx, cancel := context.WithTimeout(context.Background(), h.Timeout)
			defer cancel()
			rt := h.NewRuntime(t)
			e := &env{h: h, rt: rt, run: randHex()}
			t.Cleanup(e.cleanup)
			tc.fn(ctx, t, e)
		})
	}
}

// caseKeys are the keys Harness.Skip may hold for one case of a subtest.
var caseKeys = []string{"Codes/ReadOnly"}

// checkSkip returns an error naming each key of skip that names no
// subtest (or case, see caseKeys): a misspelt or renamed key would
// otherwise skip nothing, silently.
func checkSkip(skip map[string]string) error {
	var bad []string
	for k := range skip {
		if !slices.ContainsFunc(tests, func(tc test) bool { return tc.name == k }) && !slices.Contains(caseKeys, k) {
			bad = append(bad, strconv.Quote(k))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return fmt.Errorf("drivertest: Harness.Skip names %s, which is no subtest of the suite", strings.Join(bad, ", "))
}

type env struct {
	h       Harness
	rt      driver.Runtime
	run     string
	created []string
	closed  bool
}

func randHex() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// create makes a sandbox labelled with the run id and extra labels.
func (e *env) create(ctx context.Context, t *testing.T, labels map[string]string) driver.Info {
	t.Helper()
	req := e.h.Create
	req.Labels = maps.Clone(req.Labels)
	if req.Labels == nil {
		req.Labels = map[string]string{}
	}
	req.Labels["drivertest"] = e.run
	maps.Copy(req.Labels, labels)
	if req.Timeout == 0 {
		req.Timeout = 10 * time.Minute
	}
	in, err := e.rt.Create(ctx, &req)
	if in.ID != "" {
		e.created = append(e.created, in.ID)
	}
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if in.Home == "" || !path.IsAbs(in.Home) {
		t.Fatalf("Create: Info.Home %q is not an absolute path", in.Home)
	}
	return in
}

func (e *env) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !e.closed {
		for _, id := range e.created {
			_ = e.rt.Destroy(ctx, id)
		}
	}
	if c, ok := e.rt.(driver.Closer); ok && !e.closed {
		_ = c.Close()
	}
}

// exec runs a shell line in dir (the home when empty) with stdin.
func (e *env) exec(ctx context.Context, in driver.Info, dir, line string, stdin io.Reader) (driver.ExitStatus, string, string, error) {
	var out, errb bytes.Buffer
	if dir == "" {
		dir = in.Home
	}
	st, err := e.rt.Exec(ctx, in.ID, &driver.Command{Shell: line, Dir: dir, Env: map[string]string{},
		Stdin: stdin, Stdout: &out, Stderr: &errb, Timeout: time.Minute})
	return st, out.String(), errb.String(), err
}

// wantCode fails t unless err has code (and matches every sentinel).
func wantCode(t *testing.T, what string, err error, code sberrors.Code, sentinels ...error) {
	t.Helper()
	if got := sberrors.CodeOf(err); got != code {
		t.Errorf("%s: code %v (err %v), want %v", what, got, err, code)
		return
	}
	for _, s := range sentinels {
		if !errors.Is(err, s) {
			t.Errorf("%s: %v does not match %v", what, err, s)
		}
	}
}

// fileOp is one file method of the Runtime.
type fileOp string

const (
	opDownload fileOp = "Download"
	opStat     fileOp = "Stat"
	opReadDir  fileOp = "ReadDir"
	opMkdirAll fileOp = "MkdirAll"
	opRemove   fileOp = "Remove"
	opUpload   fileOp = "Upload"
)

// do runs op on the absolute path p; a Download is read to the end, since
// a reader may report the failure on its first Read.
func (e *env) do(ctx context.Context, id string, op fileOp, p string) error {
	switch op {
	case opDownload:
		rc, err := e.rt.Download(ctx, id, p)
		if err == nil {
			_, err = io.Copy(io.Discard, rc)
			rc.Close()
		}
		return err
	case opStat:
		_, err := e.rt.Stat(ctx, id, p)
		return err
	case opReadDir:
		_, err := e.rt.ReadDir(ctx, id, p)
		return err
	case opMkdirAll:
		return e.rt.MkdirAll(ctx, id, p)
	case opRemove:
		return e.rt.Remove(ctx, id, p)
	case opUpload:
		return e.rt.Upload(ctx, id, p, strings.NewReader("error table"))
	}
	panic("drivertest: unknown op " + op)
}

var (
	notFound    = []error{sberrors.ErrNotFound, fs.ErrNotExist}
	isDirectory = []error{sberrors.ErrIsDirectory}
	notDir      = []error{sberrors.ErrNotDirectory}
	denied      = []error{sberrors.ErrPermission, fs.ErrPermission}
)

// testCodes is the error table at the driver level: the same bad input
// gets the same Code and sentinel from every driver, with the absolute,
// clean paths the portable layer passes.
func testCodes(ctx context.Context, t *testing.T, e *env) {
	in := e.create(ctx, t, nil)
	// A sandbox that does not exist: one that did, in the provider's own
	// id format, destroyed.
	missing := e.create(ctx, t, nil).ID
	if err := e.rt.Destroy(ctx, missing); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	_, err := e.rt.Get(ctx, missing)
	wantCode(t, "Get(destroyed sandbox)", err, sberrors.NotFound, sberrors.ErrNotFound)
	if err := e.rt.Destroy(ctx, missing); err != nil {
		t.Errorf("Destroy(destroyed sandbox) = %v, want nil", err)
	}
	_, _, _, err = e.exec(ctx, driver.Info{ID: missing, Home: in.Home}, in.Home, "true", nil)
	wantCode(t, "Exec(destroyed sandbox)", err, sberrors.NotFound, sberrors.ErrNotFound)

	et := path.Join(in.Home, "et")
	if err := e.rt.MkdirAll(ctx, in.ID, path.Join(et, "dir", "sub")); err != nil {
		t.Fatalf("MkdirAll: %v", err)
	}
	if err := e.rt.Upload(ctx, in.ID, path.Join(et, "file"), strings.NewReader("keep me")); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	rows := []struct {
		op        fileOp
		path      string
		code      sberrors.Code
		sentinels []error
	}{
		// A missing file.
		{opDownload, "missing", sberrors.NotFound, notFound},
		{opStat, "missing", sberrors.NotFound, notFound},
		{opRemove, "missing", sberrors.NotFound, notFound},
		{opReadDir, "missing", sberrors.NotFound, notFound},
		{opDownload, "nodir/missing", sberrors.NotFound, notFound},
		// A directory where a file is expected.
		{opDownload, "dir", sberrors.FailedPrecondition, isDirectory},
		{opUpload, "dir", sberrors.FailedPrecondition, isDirectory},
		// A file where a directory is expected, also as a parent.
		{opReadDir, "file", sberrors.FailedPrecondition, notDir},
		{opMkdirAll, "file", sberrors.FailedPrecondition, notDir},
		{opMkdirAll, "file/sub", sberrors.FailedPrecondition, notDir},
		{opUpload, "file/x", sberrors.FailedPrecondition, notDir},
	}
	for _, row := range rows {
		p := path.Join(et, row.path)
		wantCode(t, fmt.Sprintf("%s(%s)", row.op, p), e.do(ctx, in.ID, row.op, p), row.code, row.sentinels...)
	}
	for _, dir := range []struct {
		dir       string
		code      sberrors.Code
		sentinels []error
	}{{"missing", sberrors.NotFound, notFound}, {"file", sberrors.FailedPrecondition, notDir}} {
		for _, shell := range []bool{false, true} {
			cmd := &driver.Command{Args: []string{"pwd"}, Dir: path.Join(et, dir.dir), Env: map[string]string{},
				Stdout: io.Discard, Stderr: io.Discard, Timeout: time.Minute}
			if shell {
				cmd.Args, cmd.Shell = nil, "pwd"
			}
			_, err := e.rt.Exec(ctx, in.ID, cmd)
			wantCode(t, fmt.Sprintf("Exec(Dir %s, shell %v)", cmd.Dir, shell), err, dir.code, dir.sentinels...)
		}
	}
	// The failed calls changed nothing.
	if got := e.read(ctx, t, in.ID, path.Join(et, "file")); got != "keep me" {
		t.Errorf("et/file after the failed calls: %q", got)
	}
	if fi, err := e.rt.Stat(ctx, in.ID, path.Join(et, "dir", "sub")); err != nil || !fi.IsDir() {
		t.Errorf("et/dir/sub after the failed calls: %+v, %v", fi, err)
	}

	t.Run("ReadOnly", func(t *testing.T) {
		if reason, ok := e.h.Skip["Codes/ReadOnly"]; ok {
			t.Skip(reason)
		}
		dir := e.h.ReadOnlyDir
		if dir == "" {
			dir = "/usr"
		}
		p := path.Join(dir, "drivertest-ro-"+e.run)
		// The place must be read-only for the sandbox's own commands too.
		if st, _, _, err := e.exec(ctx, in, "", `test -d '`+dir+`' && ! test -w '`+dir+`'`, nil); err != nil || st.ExitCode != 0 {
			t.Skipf("%s is not a read-only directory for the sandbox's commands here (%+v, %v)", dir, st, err)
		}
		for _, op := range []fileOp{opUpload, opMkdirAll} {
			wantCode(t, fmt.Sprintf("%s(%s)", op, p), e.do(ctx, in.ID, op, p), sberrors.PermissionDenied, denied...)
		}
		if _, err := e.rt.Stat(ctx, in.ID, p); sberrors.CodeOf(err) != sberrors.NotFound {
			t.Errorf("Stat(%s) after the refused writes: %v, want NotFound", p, err)
		}
	})
}

// read downloads p whole.
func (e *env) read(ctx context.Context, t *testing.T, id, p string) string {
	t.Helper()
	rc, err := e.rt.Download(ctx, id, p)
	if err != nil {
		t.Fatalf("Download(%s): %v", p, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Download(%s): reading: %v", p, err)
	}
	return string(b)
}

func testExecStatus(ctx context.Context, t *testing.T, e *env) {
	in := e.create(ctx, t, nil)
	st, out, errOut, err := e.exec(ctx, in, "", "printf out; printf err >&2; exit 7", nil)
	if err != nil || st.ExitCode != 7 || st.TimedOut || out != "out" || errOut != "err" {
		t.Errorf("exit 7: status %+v out %q err %q error %v; want 7, split streams, nil error", st, out, errOut, err)
	}
	st, err = e.rt.Exec(ctx, in.ID, &driver.Command{Args: []string{"drivertest-no-such-program"}, Dir: in.Home,
		Env: map[string]string{}, Stdout: io.Discard, Stderr: io.Discard, Timeout: time.Minute})
	if err != nil || st.ExitCode != 127 {
		t.Errorf("missing program: status %+v error %v; want exit code 127 and a nil error", st, err)
	}
	// A second, and 5 s again when nothing was printed within it: a
	// CPU-starved machine may not have run the echo yet when the first
	// timeout ends the command.
	var live bytes.Buffer
	var started time.Time
	for _, timeout := range []time.Duration{time.Second, 5 * time.Second} {
		live.Reset()
		started = time.Now()
		st, err = e.rt.Exec(ctx, in.ID, &driver.Command{Shell: "echo before; sleep 120", Dir: in.Home,
			Env: map[string]string{}, Stdout: &live, Stderr: io.Discard, Timeout: timeout})
		if err != nil || !st.TimedOut || live.Len() > 0 {
			break
		}
		t.Logf("Timeout %v ended the command before it printed (after %v): trying a longer one", timeout, time.Since(started))
	}
	if err != nil || !st.TimedOut || live.String() != "before\n" {
		t.Errorf("Timeout on sleep 120: status %+v output %q error %v after %v; want TimedOut, the output before it, a nil error",
			st, live.String(), err, time.Since(started))
	}
}

func testStdin(ctx context.Context, t *testing.T, e *env) {
	in := e.create(ctx, t, nil)
	payload := "line one\nline two\x00\xff"
	st, out, _, err := e.exec(ctx, in, "", "cat", strings.NewReader(payload))
	if err != nil || st.ExitCode != 0 || out != payload {
		t.Errorf("cat with Stdin: status %+v out %q error %v; want the input back", st, out, err)
	}
	// A nil Stdin is a closed one: cat sees EOF at once instead of
	// waiting for input that never comes.
	st, out, _, err = e.exec(ctx, in, "", "cat; echo eof", nil)
	if err != nil || st.ExitCode != 0 || st.TimedOut || out != "eof\n" {
		t.Errorf("cat with nil Stdin: status %+v out %q error %v; want EOF at once", st, out, err)
	}
}

// testList: a page never holds more than the page size asked for, the
// pages together hold every match exactly once, page tokens advance, and a
// provider that declares server-side labels returns only matches (the
// contract lets the others return a superset, which the portable layer
// filters). A page size of 0 asks for no bound: the pages, however the
// provider cuts them, still hold every match once (a driver indexed its
// empty page with it).
func testList(ctx context.Context, t *testing.T, e *env) {
	want := map[string]bool{}
	for range 3 {
		want[e.create(ctx, t, map[string]string{"drivertest-group": "in"}).ID] = true
	}
	other := e.create(ctx, t, map[string]string{"drivertest-group": "out"})
	caps := e.rt.Capabilities()
	for _, size := range []int{1, 0} {
		req := &driver.ListRequest{Labels: map[string]string{"drivertest": e.run, "drivertest-group": "in"}, PageSize: size}
		got := map[string]bool{}
		for pages := 0; ; pages++ {
			if pages > 1000 {
				t.Fatalf("List: more than 1000 pages of size %d", size)
			}
			page, next, err := e.rt.List(ctx, req)
			if err != nil {
				t.Fatalf("List(%+v): %v", req, err)
			}
			if size > 0 && len(page) > size {
				t.Errorf("List returned %d sandboxes for page size %d", len(page), size)
			}
			for _, in := range page {
				if in.Labels["drivertest"] != e.run || in.Labels["drivertest-group"] != "in" {
					if caps.ServerSideLabels {
						t.Errorf("List with labels %v returned %s labelled %v (the provider declares server-side labels)", req.Labels, in.ID, in.Labels)
					}
					continue
				}
				if got[in.ID] {
					t.Errorf("List (page size %d) returned %s twice", size, in.ID)
				}
				got[in.ID] = true
			}
			if next == "" {
				break
			}
			if next == req.PageToken {
				t.Fatalf("List returned the same page token %q twice", next)
			}
			req.PageToken = next
		}
		for id := range want {
			if !got[id] {
				t.Errorf("List (page size %d) missed %s (got %v)", size, id, got)
			}
		}
		if got[other.ID] {
			t.Errorf("List (page size %d) counted %s, labelled out, as a match", size, other.ID)
		}
	}
}

func testFileScope(ctx context.Context, t *testing.T, e *env) {
	a := e.create(ctx, t, nil)
	b := e.create(ctx, t, nil)
	data := make([]byte, 256)
	for i := range data {
		data[i] = byte(i)
	}
	name := path.Join(a.Home, "drivertest-scope.bin")
	if err := e.rt.Upload(ctx, a.ID, name, bytes.NewReader(data)); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	// The file methods and the commands see one file system.
	_, out, _, err := e.exec(ctx, a, "", "cat drivertest-scope.bin", nil)
	if err != nil || out != string(data) {
		t.Errorf("a command reading the uploaded file: %q (error %v), want the 256 bytes 0..255", out, err)
	}
	if _, _, _, err := e.exec(ctx, a, "", "printf made > drivertest-by-cmd", nil); err != nil {
		t.Fatalf("exec: %v", err)
	}
	rc, err := e.rt.Download(ctx, a.ID, path.Join(a.Home, "drivertest-by-cmd"))
	if err != nil {
		t.Fatalf("Download of a command's file: %v", err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(got) != "made" {
		t.Errorf("Download of a command's file: %q %v, want \"made\"", got, err)
	}
	// Another sandbox does not see it: not there (its own file system), or
	// out of its reach (local below L3: one host file system, a uid per
	// sandbox).
	_, err = e.rt.Stat(ctx, b.ID, name)
	if c := sberrors.CodeOf(err); c != sberrors.PermissionDenied {
		wantCode(t, "Stat in another sandbox", err, sberrors.NotFound, fs.ErrNotExist)
	}
	if _, out, _, err := e.exec(ctx, b, "", "test -e drivertest-scope.bin && echo visible || echo absent", nil); err != nil || out != "absent\n" {
		t.Errorf("a command in another sandbox: %q (error %v), want absent", out, err)
	}
}

func testClose(ctx context.Context, t *testing.T, e *env) {
	c, ok := e.rt.(driver.Closer)
	if !ok {
		t.Skip("the Runtime holds no resources (it is not a driver.Closer)")
	}
	in := e.create(ctx, t, nil)
	if err := e.rt.Destroy(ctx, in.ID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	e.closed = true
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("Close did not return before the subtest's deadline")
	}
	if err := c.Close(); err != nil {
		t.Errorf("a second Close: %v, want nil", err)
	}
}
