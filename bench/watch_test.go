//go:build linux

package bench

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxkit/sandbox"
)

// BenchmarkWatchLatency: the time from the start of a write in the
// sandbox (Sandbox.WriteFile of a new file) to Sandbox.Watch's event for
// it, against a raw inotify watch of a host directory that os.WriteFile
// writes to. Target on local: p50 ≤ 50 ms. Daytona polls
// (daytona.WatchInterval, 500 ms): its latency is the interval's phase
// plus a listing, up to about WatchLatency plus one round trip. Run with
//
//	go test ./bench -run '^$' -bench 'WatchLatency' -benchtime 50x
func BenchmarkWatchLatency(b *testing.B) {
	ctx := context.Background()
	b.Run("raw-inotify", func(b *testing.B) {
		dir := b.TempDir()
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Close(fd)
		if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE); err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 4096)
		var lat []time.Duration
		i := 0
		for b.Loop() {
			t0 := time.Now()
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
			if _, err := unix.Read(fd, buf); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
			i++
		}
		b.ReportMetric(ms(median(lat)), "p50-ms")
	})
	b.Run("local", func(b *testing.B) {
		c, rt := localClient(b)
		sb, err := c.Create(ctx, sandbox.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer sb.Destroy(ctx)
		b.Run(levelName(rt), func(b *testing.B) { watchLatency(ctx, b, sb) })
	})
	b.Run("daytona-poll", func(b *testing.B) {
		_, sb := daytonaOver(b, b.TempDir())
		watchLatency(ctx, b, sb)
	})
}

// watchLatency writes a new file per iteration and waits for its
// creation event.
func watchLatency(ctx context.Context, b *testing.B, sb *sandbox.Sandbox) {
	dir := path.Join(sb.Home(), "watched")
	if err := sb.MkdirAll(ctx, dir); err != nil {
		b.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seq, err := sb.Watch(wctx, dir, sandbox.WatchOptions{})
	if err != nil {
		b.Fatal(err)
	}
	created := make(chan string, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range seq {
			if err != nil {
				return
			}
			if ev.Kind == sandbox.FileCreated {
				created <- ev.Path
			}
		}
	}()
	defer func() { cancel(); <-done }()
	var lat, write []time.Duration
	i := 0
	for b.Loop() {
		p := path.Join(dir, fmt.Sprintf("f%d", i))
		i++
		t0 := time.Now()
		if err := sb.WriteFile(ctx, p, []byte("x")); err != nil {
			b.Fatal(err)
		}
		write = append(write, time.Since(t0))
		timeout := time.After(30 * time.Second)
	wait:
		for {
			select {
			case got := <-created:
				if got == p {
					break wait
				}
			case <-timeout:
				b.Fatalf("no event for %s within 30s", p)
			}
		}
		lat = append(lat, time.Since(t0))
	}
	b.ReportMetric(ms(median(lat)), "p50-ms")
	b.ReportMetric(ms(pct(lat, 0.95)), "p95-ms")
	b.ReportMetric(ms(median(write)), "write-p50-ms")
}
