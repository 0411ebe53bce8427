package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/daytona"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/local"
)

// rawDaytona is the minimal client a user could write by hand against
// Daytona's toolbox API: one net/http client, one request per operation,
// no wrapper script, no output polling, no error mapping. It is the
// baseline of the Daytona benchmarks.
type rawDaytona struct {
	hc   *http.Client
	base string // {toolboxProxyUrl}/{id}
	key  string
}

func newRawDaytona(tb testing.TB, f *daytonafake.Server, id string) *rawDaytona {
	tb.Helper()
	t := http.DefaultTransport.(*http.Transport).Clone()
	tb.Cleanup(t.CloseIdleConnections)
	return &rawDaytona{hc: &http.Client{Transport: t}, base: f.ToolboxURL() + "/" + id, key: f.APIKey()}
}

// do sends req with the key and turns a non-2xx answer into an error.
func (r *rawDaytona) do(req *http.Request) (*http.Response, error) {
	req.Header.Set("Authorization", "Bearer "+r.key)
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("raw daytona: %s %s: HTTP %d", req.Method, req.URL.Path, resp.StatusCode)
	}
	return resp, nil
}

// rawExecBody runs the program /bin/true as the adapter does (a subshell
// that execs it, so it is never the shell's builtin), with its output
// discarded: the same program, without the adapter's wrapper script.
var rawExecBody = func() []byte {
	b, err := json.Marshal(map[string]string{"command": "(exec true) </dev/null >/dev/null 2>&1"})
	if err != nil {
		panic(err)
	}
	return b
}()

// exec posts rawExecBody to /process/execute and decodes the exit code.
func (r *rawDaytona) exec(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/process/execute", bytes.NewReader(rawExecBody))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		ExitCode *int   `json:"exitCode"`
		Result   string `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return err
	}
	if out.ExitCode == nil || *out.ExitCode != 0 {
		return fmt.Errorf("raw daytona: exec: exit code %v, output %q", out.ExitCode, out.Result)
	}
	return nil
}

// upload streams src as the multipart field "file" of POST /files/upload.
func (r *rawDaytona) upload(ctx context.Context, p string, src io.Reader) error {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	done := make(chan struct{})
	go func() {
		defer close(done)
		part, err := mw.CreateFormFile("file", "f")
		if err == nil {
			_, err = io.Copy(part, src)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	defer func() { pr.Close(); <-done }()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/files/upload?path="+url.QueryEscape(p), pr)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := r.do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// download copies GET /files/download into dst.
func (r *rawDaytona) download(ctx context.Context, p string, dst io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/files/download?path="+url.QueryEscape(p), nil)
	if err != nil {
		return 0, err
	}
	resp, err := r.do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return io.Copy(dst, resp.Body)
}

// daytonaOver starts daytonafake over provider/local (so commands and
// files are real), the Daytona adapter and a Client on it, and one
// sandbox, with the local provider's state (the sandbox's home included)
// under root. The local provider serves only the home, so the adapter's
// scratch directory is moved there.
func daytonaOver(tb testing.TB, root string) (*daytonafake.Server, *sandbox.Sandbox) {
	tb.Helper()
	loc, err := local.New(local.WithRoot(root))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = loc.Close() })
	f := daytonafake.New(loc)
	tb.Cleanup(f.Close)
	rt, err := daytona.New(daytona.WithAPIKey(f.APIKey()), daytona.WithAPIURL(f.URL()), daytona.WithScratchDir("~/.sandboxkit"))
	if err != nil {
		tb.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	tb.Cleanup(func() { _ = c.Close(); _ = rt.Close() })
	sb, err := c.Create(context.Background(), sandbox.CreateOptions{Timeout: 30 * time.Minute})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	return f, sb
}

// BenchmarkDaytonaExec is the exec round trip of the Daytona adapter (its
// wrapper script, output files and trailer, plus the portable layer)
// against the raw client posting the same program to /process/execute,
// both on daytonafake over provider/local. Target: x-raw ≤ 1.2.
//
// The adapter creates two files per exec (the command's stdout and
// stderr), the raw client none, so the ratio depends on what a file
// creation costs where the scratch directory lives. It is measured twice:
// "exec-tmpfs" with the sandbox's home on tmpfs (/dev/shm), as cheap as a
// container's overlay /tmp, the adapter's default scratch directory, on a
// typical host; "exec-disk" under the test's temporary directory, whose
// file system may be far slower (on the 2-core CI VM, ext4 takes about
// 0.5 ms per file creation: time bash -c 'for i in $(seq 1000); do : >f$i; done').
func BenchmarkDaytonaExec(b *testing.B) {
	ctx := context.Background()
	cmd := sandbox.Command{Args: []string{"true"}}
	run := func(name, root string) {
		f, sb := daytonaOver(b, root)
		raw := newRawDaytona(b, f, sb.ID())
		interleave(b, name,
			func() error { return raw.exec(ctx) },
			func() error { _, err := sb.Exec(ctx, cmd); return err })
	}
	if root, err := os.MkdirTemp("/dev/shm", "sandboxkit-bench-"); err != nil {
		b.Logf("no tmpfs at /dev/shm (%v): exec-tmpfs not measured", err)
	} else {
		b.Cleanup(func() { _ = os.RemoveAll(root) })
		run("exec-tmpfs", root)
	}
	run("exec-disk", b.TempDir())
}

// BenchmarkDaytonaTransfer is a 256 MiB upload and download through the
// Daytona adapter against the raw client (streamed multipart POST, plain
// GET), on daytonafake over provider/local (files really written).
// Targets: throughput x-raw ≥ 0.8, heap growth during the adapter's
// transfer ≤ 16 MiB (the fake and the backend run in this process, so
// their memory counts too).
func BenchmarkDaytonaTransfer(b *testing.B) {
	const size = 256 << 20
	ctx := context.Background()
	f, sb := daytonaOver(b, b.TempDir())
	raw := newRawDaytona(b, f, sb.ID())
	home := sb.Home()
	var rawUp, upT, rawDown, downT time.Duration
	var upHeap, downHeap uint64
	n := 0
	for b.Loop() {
		t0 := time.Now()
		if err := raw.upload(ctx, home+"/raw.bin", io.LimitReader(&pattern{}, size)); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		h, err := heapPeak(func() error { return sb.Upload(ctx, "sdk.bin", io.LimitReader(&pattern{}, size)) })
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		upHeap = max(upHeap, h)
		if got, err := raw.download(ctx, home+"/raw.bin", io.Discard); err != nil || got != size {
			b.Fatal(got, err)
		}
		t3 := time.Now()
		h, err = heapPeak(func() error {
			rc, err := sb.Download(ctx, "sdk.bin")
			if err != nil {
				return err
			}
			defer rc.Close()
			got, err := io.Copy(io.Discard, rc)
			if err == nil && got != size {
				err = fmt.Errorf("downloaded %d bytes", got)
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		downHeap = max(downHeap, h)
		rawUp, upT, rawDown, downT = rawUp+t1.Sub(t0), upT+t2.Sub(t1), rawDown+t3.Sub(t2), downT+t4.Sub(t3)
		n++
	}
	reportTransfer(b, n, size, rawUp, upT, rawDown, downT, upHeap, downHeap)
}
