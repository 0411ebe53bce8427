package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// rawE2B is the minimal client a user could write by hand against E2B's
// wire protocol: one net/http client, headers set inline, no error
// classification, no retries. It is the baseline of T4/T5.
type rawE2B struct {
	hc    *http.Client
	base  string
	id    string
	token string
}

func newRawE2B(tb testing.TB, f *e2bfake.Server, id string) *rawE2B {
	tb.Helper()
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableCompression = true
	hc := &http.Client{Transport: t}
	tb.Cleanup(t.CloseIdleConnections)
	req, _ := http.NewRequest(http.MethodGet, f.APIURL()+"/sandboxes/"+id, nil)
	req.Header.Set("X-API-Key", f.APIKey())
	resp, err := hc.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var d struct {
		Token string `json:"envdAccessToken"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		tb.Fatal(err)
	}
	return &rawE2B{hc: hc, base: f.SandboxURL(), id: id, token: d.Token}
}

func (r *rawE2B) header(h http.Header) {
	h.Set("X-Access-Token", r.token)
	h.Set("E2b-Sandbox-Id", r.id)
	h.Set("E2b-Sandbox-Port", "49983")
}

var startBody = func() []byte {
	msg := `{"process":{"cmd":"true"},"stdin":false}`
	b := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:5], uint32(len(msg)))
	copy(b[5:], msg)
	return b
}()

// exec runs "true" and reads the stream to its end.
func (r *rawE2B) exec(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/process.Process/Start", bytes.NewReader(startBody))
	if err != nil {
		return err
	}
	r.header(req.Header)
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Connect-Timeout-Ms", "60000")
	resp, err := r.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("raw exec: HTTP %d", resp.StatusCode)
	}
	// Read the envelopes and decode each event, as any client must to
	// learn the exit code.
	var hdr [5]byte
	var buf []byte
	ended := false
	for {
		if _, err := io.ReadFull(resp.Body, hdr[:]); err != nil {
			if err == io.EOF && ended {
				return nil
			}
			return fmt.Errorf("raw exec: %w", err)
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			return err
		}
		if hdr[0]&2 != 0 {
			continue // end of stream: {} or an error
		}
		var ev rawEvent
		if err := json.Unmarshal(buf, &ev); err != nil {
			return err
		}
		if ev.Event.End != nil {
			ended = true
		}
		_, _ = io.Discard.Write(ev.Event.Data.Stdout)
	}
}

type rawEvent struct {
	Event struct {
		Start *struct {
			PID uint32 `json:"pid"`
		} `json:"start"`
		Data struct {
			Stdout []byte `json:"stdout"`
			Stderr []byte `json:"stderr"`
		} `json:"data"`
		End *struct {
			ExitCode int `json:"exitCode"`
		} `json:"end"`
	} `json:"event"`
}

func (r *rawE2B) upload(ctx context.Context, p string, src io.Reader) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/files?path="+url.QueryEscape(p), src)
	if err != nil {
		return err
	}
	r.header(req.Header)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := r.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("raw upload: %d", resp.StatusCode)
	}
	return nil
}

func (r *rawE2B) download(ctx context.Context, p string, dst io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/files?path="+url.QueryEscape(p), nil)
	if err != nil {
		return 0, err
	}
	r.header(req.Header)
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("raw download: %d", resp.StatusCode)
	}
	return io.Copy(dst, resp.Body)
}

func e2bOver(tb testing.TB, backend driver.Runtime) (*e2bfake.Server, *sandbox.Sandbox) {
	tb.Helper()
	f := e2bfake.New(backend)
	tb.Cleanup(f.Close)
	rt, err := e2b.New(e2b.WithAPIKey(f.APIKey()), e2b.WithAPIURL(f.APIURL()), e2b.WithSandboxURL(f.SandboxURL()))
	if err != nil {
		tb.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	tb.Cleanup(func() { _ = c.Close() })
	sb, err := c.Create(context.Background(), sandbox.CreateOptions{Timeout: 30 * time.Minute})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	return f, sb
}

// BenchmarkE2BT5Exec is T5 for E2B: one small exec ("true") through the
// adapter and the portable layer versus the raw client, both against
// e2bfake over provider/memory (so the protocol, not process start-up,
// dominates). Target: x-raw ≤ 1.2.
func BenchmarkE2BT5Exec(b *testing.B) {
	ctx := context.Background()
	f, sb := e2bOver(b, memory.New())
	raw := newRawE2B(b, f, sb.ID())
	cmd := sandbox.Command{Args: []string{"true"}}
	interleave(b, "exec",
		func() error { return raw.exec(ctx) },
		func() error { _, err := sb.Exec(ctx, cmd); return err })
}

// pattern is an endless cheap byte source.
type pattern struct{ n byte }

func (p *pattern) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = p.n
		p.n++
	}
	return len(b), nil
}

// heapPeak samples the heap while f runs and returns the peak growth.
func heapPeak(f func() error) (uint64, error) {
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
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > base && m.HeapInuse-base > peak.Load() {
				peak.Store(m.HeapInuse - base)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	err := f()
	close(stop)
	wg.Wait()
	return peak.Load(), err
}

// BenchmarkE2BT4Transfer is T4 for E2B: a 256 MiB upload and download
// through the adapter versus the raw client, against e2bfake over
// provider/local (files really written). Targets: throughput x-raw ≥ 0.8,
// heap growth during the adapter's transfer ≤ 16 MiB (the fake and the
// backend run in the same process, so their memory counts too).
func BenchmarkE2BT4Transfer(b *testing.B) {
	const size = 256 << 20
	ctx := context.Background()
	loc, err := local.New(local.WithRoot(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = loc.Close() })
	f, sb := e2bOver(b, loc)
	raw := newRawE2B(b, f, sb.ID())
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
