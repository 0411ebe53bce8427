//go:build linux

package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/testport"
	"github.com/sandboxkit/sandbox/provider/local"
)

// BenchmarkLocalPortDownload measures a 64 MiB GET through Sandbox.Expose
// on local (python3 -m http.server in the sandbox, relayed by the agent)
// against the same server run on the host, in one run. Reported: MB/s of
// each and "ratio" = endpoint throughput / host throughput (goal ≥ 0.5).
func BenchmarkLocalPortDownload(b *testing.B) {
	if _, err := exec.LookPath("python3"); err != nil {
		b.Skip("python3 is not installed (the benchmark's server is python3 -m http.server)")
	}
	const size = 64 << 20
	ctx := context.Background()
	data := make([]byte, size)
	_, _ = rand.Read(data)

	// Host-side server.
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "blob"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	hostPort := testport.Pick()
	srv := exec.Command("python3", "-m", "http.server", strconv.Itoa(hostPort), "--bind", "127.0.0.1", "--directory", dir)
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	hostURL := "http://127.0.0.1:" + strconv.Itoa(hostPort)
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.Dial("tcp", hostURL[len("http://"):])
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("host server: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The same server in a sandbox, through the endpoint.
	// BENCH_PORTS_LEVEL (such as L1) picks the isolation level, to tell
	// the relay's cost from the level's.
	var c *sandbox.Client
	if v := os.Getenv("BENCH_PORTS_LEVEL"); v != "" {
		l, err := local.ParseLevel(v)
		if err != nil {
			b.Fatal(err)
		}
		rt, err := local.New(local.WithRoot(b.TempDir()), local.WithIsolation(l))
		if err != nil {
			b.Fatal(err)
		}
		c = sandbox.NewClient(rt)
		b.Cleanup(func() { _ = c.Close() })
	} else {
		c, _ = localClient(b)
	}
	b.Logf("isolation: %s", c.Capabilities().Isolation)
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Destroy(ctx)
	if err := sb.WriteFile(ctx, sb.Home()+"/www/blob", data); err != nil {
		b.Fatal(err)
	}
	port := testport.Pick()
	p, err := sb.Start(ctx, sandbox.Command{Args: []string{"python3", "-m", "http.server", strconv.Itoa(port), "--bind", "127.0.0.1", "--directory", sb.Home() + "/www"}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := sb.WaitForPort(wctx, port); err != nil {
		b.Fatal(err)
	}
	ep, err := sb.Expose(ctx, port, sandbox.ExposeOptions{})
	if err != nil {
		b.Fatal(err)
	}

	if os.Getenv("PORTS_DIAG") != "" {
		r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"python3", "-c", "import urllib.request,time;t=time.time();n=len(urllib.request.urlopen('http://127.0.0.1:" + strconv.Itoa(port) + "/blob').read());print(n/(time.time()-t)/1e6)"}})
		b.Logf("in-sandbox MB/s: %s %v", r.Stdout, err)
		r, err = sb.Exec(ctx, sandbox.Command{Shell: "cat /proc/self/cgroup; cat /sys/fs/cgroup/cpu.max 2>&1"})
		b.Logf("cgroup: %s %v", r.Stdout, err)
		t0 := time.Now()
		rc, err := sb.Download(ctx, sb.Home()+"/www/blob")
		if err == nil {
			io.Copy(io.Discard, rc)
			rc.Close()
		}
		b.Logf("Download MB/s %.1f", float64(size)/1e6/time.Since(t0).Seconds())
	}
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	get := func(url string, h http.Header) (time.Duration, error) {
		t0 := time.Now()
		req, err := http.NewRequest(http.MethodGet, url+"/blob", nil)
		if err != nil {
			return 0, err
		}
		for k, vs := range h {
			req.Header[k] = vs
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err == nil && n != size {
			err = fmt.Errorf("got %d bytes, want %d", n, size)
		}
		return time.Since(t0), err
	}
	var th, te time.Duration
	for b.Loop() {
		d, err := get(hostURL, nil)
		if err != nil {
			b.Fatal(err)
		}
		th += d
		if d, err = get(ep.URL, ep.Header); err != nil {
			b.Fatal(err)
		}
		te += d
	}
	mb := float64(size) / 1e6 * float64(b.N)
	b.ReportMetric(mb/th.Seconds(), "host-MB/s")
	b.ReportMetric(mb/te.Seconds(), "endpoint-MB/s")
	b.ReportMetric(th.Seconds()/te.Seconds(), "ratio")
}
