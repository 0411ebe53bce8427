package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/fsbackend"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/local"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counting wraps a Runtime and counts the calls that cross it: one call is
// one provider round trip.
type counting struct {
	driver.Runtime
	n atomic.Int64
}

func (c *counting) Exec(ctx context.Context, id string, cmd *driver.Command) (driver.ExitStatus, error) {
	c.n.Add(1)
	return c.Runtime.Exec(ctx, id, cmd)
}

func (c *counting) Upload(ctx context.Context, id, p string, r io.Reader) error {
	c.n.Add(1)
	return c.Runtime.Upload(ctx, id, p, r)
}

func (c *counting) Download(ctx context.Context, id, p string) (io.ReadCloser, error) {
	c.n.Add(1)
	return c.Runtime.Download(ctx, id, p)
}

func (c *counting) Stat(ctx context.Context, id, p string) (driver.FileInfo, error) {
	c.n.Add(1)
	return c.Runtime.Stat(ctx, id, p)
}

func (c *counting) ReadDir(ctx context.Context, id, p string) ([]driver.FileInfo, error) {
	c.n.Add(1)
	return c.Runtime.ReadDir(ctx, id, p)
}

func (c *counting) MkdirAll(ctx context.Context, id, p string) error {
	c.n.Add(1)
	return c.Runtime.MkdirAll(ctx, id, p)
}

func (c *counting) Remove(ctx context.Context, id, p string) error {
	c.n.Add(1)
	return c.Runtime.Remove(ctx, id, p)
}

// fsEnv is a FilesystemBackend over E2B's adapter talking to e2bfake,
// which executes for real through provider/local.
type fsEnv struct {
	b    *fsbackend.FilesystemBackend
	sb   *sandbox.Sandbox
	rt   *counting
	base string
}

func newFSEnv(tb testing.TB) *fsEnv {
	tb.Helper()
	ctx := context.Background()
	loc, err := local.New(local.WithRoot(tb.TempDir()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = loc.Close() })
	fake := e2bfake.New(loc)
	tb.Cleanup(fake.Close)
	e, err := e2b.New(e2b.WithAPIKey(fake.APIKey()), e2b.WithAPIURL(fake.APIURL()), e2b.WithSandboxURL(fake.SandboxURL()))
	if err != nil {
		tb.Fatal(err)
	}
	rt := &counting{Runtime: e}
	c := sandbox.NewClient(rt)
	tb.Cleanup(func() { _ = c.Close() })
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: 30 * time.Minute})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	b, err := fsbackend.New(sb, fsbackend.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	base, err := b.BaseDir(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return &fsEnv{b: b, sb: sb, rt: rt, base: base}
}

// populate writes n text files spread over a few directories.
func (e *fsEnv) populate(tb testing.TB, n int) {
	tb.Helper()
	files := make([]backend.File, n)
	for i := range files {
		files[i] = backend.File{Path: fmt.Sprintf("pkg%d/sub/file%d.go", i%10, i), Data: []byte("package x\n// needle\nfunc f() {}\n")}
	}
	res, err := e.b.SetFiles(context.Background(), &backend.SetFilesRequest{Files: files})
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range res.Results {
		if r.Error != nil {
			tb.Fatal(r.Error)
		}
	}
}

// The naive per-file approach: list each directory, then read each
// file, one provider call at a time.
func (e *fsEnv) perFileWalk(ctx context.Context, dir string, read bool, visit func(rel string, data []byte)) error {
	list, err := e.sb.ReadDir(ctx, dir)
	if err != nil {
		return err
	}
	for _, fi := range list {
		rel := strings.TrimPrefix(fi.Path, e.base+"/")
		if rel == fsbackend.MetadataDir {
			continue
		}
		if fi.IsDir() {
			if err := e.perFileWalk(ctx, fi.Path, read, visit); err != nil {
				return err
			}
			continue
		}
		var data []byte
		if read {
			if data, err = e.sb.ReadFile(ctx, fi.Path); err != nil {
				return err
			}
		}
		visit(rel, data)
	}
	return nil
}

type row struct {
	op, approach string
	files        int
	trips        float64
	per          time.Duration
}

// BenchmarkFSBackend measures round trips and time per operation of the
// FilesystemBackend (E2B adapter over e2bfake over provider/local) with 10,
// 100 and 1000 files in the workspace, next to the naive per-file
// approach for grep, glob and get-all, and prints a table. Run with
//
//	go test -run '^$' -bench FSBackend -benchtime 5x ./bench
func BenchmarkFSBackend(b *testing.B) {
	ctx := context.Background()
	var rows []row
	for _, n := range []int{10, 100, 1000} {
		e := newFSEnv(b)
		e.populate(b, n)
		ops := []struct {
			name, approach string
			f              func() error
		}{
			{"read", "fsbackend", func() error {
				_, err := e.b.Read(ctx, &backend.ReadRequest{Path: "pkg0/sub/file0.go"})
				return err
			}},
			{"write", "fsbackend", func() error {
				_, err := e.b.Write(ctx, &backend.WriteRequest{Path: "new/dir/w.txt", Content: "x"})
				return err
			}},
			{"edit", "fsbackend", func() error {
				_, err := e.b.Edit(ctx, &backend.EditRequest{Path: "pkg0/sub/file0.go", OldString: "f()", NewString: "f()", ReplaceAll: true})
				return err
			}},
			{"ls", "fsbackend", func() error { _, err := e.b.Ls(ctx, &backend.LsRequest{}); return err }},
			{"glob", "fsbackend", func() error {
				r, err := e.b.Glob(ctx, &backend.GlobRequest{Pattern: "*.go"})
				return check(err, len(r.Files) >= n)
			}},
			{"glob", "naive per-file", func() error {
				found := 0
				err := e.perFileWalk(ctx, e.base, false, func(rel string, _ []byte) {
					if ok, _ := path.Match("*.go", path.Base(rel)); ok {
						found++
					}
				})
				return check(err, found >= n)
			}},
			{"grep", "fsbackend", func() error {
				r, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: "needle"})
				return check(err, len(r.Matches) >= n)
			}},
			{"grep", "naive per-file", func() error {
				found := 0
				err := e.perFileWalk(ctx, e.base, true, func(_ string, data []byte) { found += strings.Count(string(data), "needle") })
				return check(err, found >= n)
			}},
			{"get-all", "fsbackend", func() error {
				r, err := e.b.GetFiles(ctx, &backend.GetFilesRequest{})
				return check(err, len(r.Files) >= n)
			}},
			{"get-all", "naive per-file", func() error {
				found := 0
				err := e.perFileWalk(ctx, e.base, true, func(string, []byte) { found++ })
				return check(err, found >= n)
			}},
		}
		for _, op := range ops {
			b.Run(fmt.Sprintf("%s/files=%d/%s", op.name, n, strings.ReplaceAll(op.approach, " ", "-")), func(b *testing.B) {
				before := e.rt.n.Load()
				start := time.Now()
				calls := 0
				for b.Loop() {
					if err := op.f(); err != nil {
						b.Fatal(err)
					}
					calls++
				}
				trips := float64(e.rt.n.Load()-before) / float64(calls)
				b.ReportMetric(trips, "roundtrips/op")
				rows = append(rows, row{op.name, op.approach, n, trips, time.Since(start) / time.Duration(calls)})
			})
		}
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "operation\tapproach\tfiles\tround trips/op\ttime/op\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%d\t%.0f\t%v\t\n", r.op, r.approach, r.files, r.trips, r.per.Round(10*time.Microsecond))
	}
	_ = w.Flush()
}

func check(err error, ok bool) error {
	if err == nil && !ok {
		err = fmt.Errorf("fewer results than files")
	}
	return err
}
