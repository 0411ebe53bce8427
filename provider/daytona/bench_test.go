package daytona_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// rawClient is the minimal client the adapter is measured against: one
// request per operation, no wrapper script, no polling, no error mapping.
type rawClient struct {
	hc       *http.Client
	base     string // {toolboxProxyUrl}/{id}
	key      string
	execBody []byte
}

func (e *env) raw(id string) *rawClient {
	b, _ := json.Marshal(map[string]string{"command": "true"})
	return &rawClient{hc: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		base: e.fake.ToolboxURL() + "/" + id, key: e.fake.APIKey(), execBody: b}
}

func (c *rawClient) do(req *http.Request) (*http.Response, error) {
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.hc.Do(req)
	if err == nil && resp.StatusCode/100 != 2 {
		resp.Body.Close()
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return resp, err
}

func (c *rawClient) exec() error { return c.execBodyOf(c.execBody) }

func (c *rawClient) execBodyOf(body []byte) error {
	req, _ := http.NewRequest("POST", c.base+"/process/execute", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	var out struct{ ExitCode int }
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	return err
}

func (c *rawClient) upload(p string, r io.Reader) error {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", "f")
		if err == nil {
			_, err = io.Copy(part, r)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, _ := http.NewRequest("POST", c.base+"/files/upload?path="+p, pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.do(req)
	pr.Close()
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func (c *rawClient) download(p string, w io.Writer) error {
	req, _ := http.NewRequest("GET", c.base+"/files/download?path="+p, nil)
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}

// zeros is an endless reader that allocates nothing.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// peakHeap runs f and returns how far HeapInuse rose above its level
// before f, sampled every 5 ms.
func peakHeap(f func() error) (uint64, error) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapInuse > base && m.HeapInuse-base > peak.Load() {
					peak.Store(m.HeapInuse - base)
				}
			}
		}
	}()
	err := f()
	close(stop)
	wg.Wait()
	return peak.Load(), err
}

func benchEnv(b *testing.B) (*env, *sandbox.Sandbox, *rawClient) {
	e := newEnv(b, nil)
	sb, err := e.c.Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	return e, sb, e.raw(sb.ID())
}

func BenchmarkExecAdapter(b *testing.B) {
	_, sb, _ := benchEnv(b)
	ctx := context.Background()
	for b.Loop() {
		if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExecRaw(b *testing.B) {
	_, _, raw := benchEnv(b)
	defer raw.hc.CloseIdleConnections()
	for b.Loop() {
		if err := raw.exec(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBenchReport prints the adapter's exec round trip and 256 MiB
// upload and download throughput against the raw client on the same fake,
// with the heap growth of each transfer. It asserts nothing (timings do
// not belong in unit tests) and runs only with SANDBOXKIT_BENCH=1.
func TestBenchReport(t *testing.T) {
	if os.Getenv("SANDBOXKIT_BENCH") != "1" {
		t.Skip("set SANDBOXKIT_BENCH=1 to measure")
	}
	e := newEnv(t, nil)
	ctx := context.Background()
	sb, err := e.c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	raw := e.raw(sb.ID())
	defer raw.hc.CloseIdleConnections()

	// Interleaved, medians: the two clients see the same machine noise.
	const n = 300
	rawBuiltin, rawProg, adapter := make([]time.Duration, 0, n), make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	progBody, _ := json.Marshal(map[string]string{"command": "(exec true) </dev/null >/dev/null 2>&1"})
	timeOne := func(dst *[]time.Duration, f func() error) {
		start := time.Now()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		*dst = append(*dst, time.Since(start))
	}
	for range n {
		timeOne(&rawBuiltin, raw.exec)
		timeOne(&rawProg, func() error { return raw.execBodyOf(progBody) })
		timeOne(&adapter, func() error {
			_, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
			return err
		})
	}
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	mb, mp, ma := med(rawBuiltin), med(rawProg), med(adapter)
	t.Logf("exec round trip (median of %d): adapter %v; raw \"true\" (a shell builtin, merged output) %v, ratio %.2f; raw running the program /bin/true %v, ratio %.2f",
		n, ma, mb, float64(ma)/float64(mb), mp, float64(ma)/float64(mp))

	const size = 256 << 20
	home := sb.Home()
	transfer := func(name string, f func() error) (float64, uint64) {
		start := time.Now()
		heap, err := peakHeap(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return float64(size) / (1 << 20) / time.Since(start).Seconds(), heap
	}
	rawUp, rawUpHeap := transfer("raw upload", func() error { return raw.upload(home+"/raw.bin", io.LimitReader(zeros{}, size)) })
	adUp, adUpHeap := transfer("adapter upload", func() error { return sb.Upload(ctx, "ad.bin", io.LimitReader(zeros{}, size)) })
	rawDown, rawDownHeap := transfer("raw download", func() error { return raw.download(home+"/raw.bin", io.Discard) })
	adDown, adDownHeap := transfer("adapter download", func() error {
		rc, err := sb.Download(ctx, "ad.bin")
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.Copy(io.Discard, rc)
		return err
	})
	t.Logf("upload 256 MiB: adapter %.0f MiB/s (heap +%.1f MiB), raw %.0f MiB/s (heap +%.1f MiB), ratio %.2f",
		adUp, float64(adUpHeap)/(1<<20), rawUp, float64(rawUpHeap)/(1<<20), adUp/rawUp)
	t.Logf("download 256 MiB: adapter %.0f MiB/s (heap +%.1f MiB), raw %.0f MiB/s (heap +%.1f MiB), ratio %.2f",
		adDown, float64(adDownHeap)/(1<<20), rawDown, float64(rawDownHeap)/(1<<20), adDown/rawDown)
}
