//go:build linux

package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/local"
)

// The local provider's targets T1, T2, T3, T6, T7, T8 and T9 of
// research/local.md §3.2. Each benchmark runs a raw baseline in the same
// run (interleaved where the two can alternate) and reports the ratio as
// "x-raw" (variant/baseline; for throughput, variant/baseline of the rate),
// next to absolute medians. Run them with
//
//	go test ./bench -run '^$' -bench 'Local' -benchtime 30x
//
// The local provider picks the best isolation level of the host; set
// SANDBOX_LOCAL_ISOLATION=l1 to measure the process level.

// noopEnv makes the benchmark binary exit in init: the T1 baseline is an
// os/exec of the SDK binary itself (research row a3).
const noopEnv = "SANDBOX_BENCH_EXIT_IN_INIT"

// pingEnv makes the benchmark binary, in init, the far end of the
// ping-pong baseline of T2: it dials the unix socket the variable names
// and echoes every byte until the connection ends.
const pingEnv = "SANDBOX_BENCH_PING_SOCKET"

func init() {
	if os.Getenv(noopEnv) == "1" {
		os.Exit(0)
	}
	if sock := os.Getenv(pingEnv); sock != "" {
		c, err := net.Dial("unix", sock)
		if err != nil {
			os.Exit(2)
		}
		var b [1]byte
		for {
			if _, err := io.ReadFull(c, b[:]); err != nil {
				os.Exit(0)
			}
			if _, err := c.Write(b[:]); err != nil {
				os.Exit(0)
			}
		}
	}
}

// pingPong is a round trip of one byte between this process and another
// Go process (the test binary re-executed) over a unix socket: the floor
// of any exchange with a sandbox's agent.
type pingPong struct {
	c   net.Conn
	cmd *exec.Cmd
}

func newPingPong(b *testing.B) *pingPong {
	b.Helper()
	sock := filepath.Join(b.TempDir(), "ping")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), pingEnv+"="+sock)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	ln.(*net.UnixListener).SetDeadline(time.Now().Add(30 * time.Second))
	c, err := ln.Accept()
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.Fatal(err)
	}
	p := &pingPong{c: c, cmd: cmd}
	for range 100 { // warm both ends
		p.once(b)
	}
	return p
}

// once times one round trip.
func (p *pingPong) once(b *testing.B) time.Duration {
	var buf [1]byte
	t0 := time.Now()
	if _, err := p.c.Write(buf[:]); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(p.c, buf[:]); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

func (p *pingPong) close() {
	_ = p.c.Close()
	_ = p.cmd.Wait()
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func localClient(b *testing.B) (*sandbox.Client, *local.Runtime) {
	b.Helper()
	rt, err := local.New(local.WithRoot(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	b.Cleanup(func() { _ = c.Close() })
	return c, rt
}

func levelName(rt *local.Runtime) string {
	l, _ := rt.Level()
	return l.String()
}

func rawSelf() error {
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), noopEnv+"=1")
	return cmd.Run()
}

// BenchmarkLocalT1Create: create until the first exec works, against an
// os/exec of the SDK binary itself. Targets: ≤ 2.5× raw; p50 ≤ 25 ms and
// p95 ≤ 60 ms on the CI VM; L1 create ≤ 1 ms.
func BenchmarkLocalT1Create(b *testing.B) {
	ctx := context.Background()
	c, rt := localClient(b)
	b.Run(levelName(rt), func(b *testing.B) {
		var tv, tb []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if err := rawSelf(); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			sb, err := c.Create(ctx, sandbox.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			tb, tv = append(tb, t1.Sub(t0)), append(tv, t2.Sub(t1))
			b.StopTimer()
			if err := sb.Destroy(ctx); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.ReportMetric(ms(median(tv)), "p50-ms")
		b.ReportMetric(ms(pct(tv, 0.95)), "p95-ms")
		b.ReportMetric(ms(median(tb)), "raw-p50-ms")
		b.ReportMetric(float64(median(tv))/float64(median(tb)), "x-raw")
	})
	b.Run(levelName(rt)+"-warm-pool", func(b *testing.B) {
		rtp, err := local.New(local.WithRoot(b.TempDir()), local.WithWarmPool(4))
		if err != nil {
			b.Fatal(err)
		}
		defer rtp.Close()
		cp := sandbox.NewClient(rtp)
		var tv, tb []time.Duration
		for b.Loop() {
			b.StopTimer()
			time.Sleep(20 * time.Millisecond) // a program does other work between creates
			b.StartTimer()
			t0 := time.Now()
			if err := rawSelf(); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			sb, err := cp.Create(ctx, sandbox.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			tb, tv = append(tb, t1.Sub(t0)), append(tv, t2.Sub(t1))
			b.StopTimer()
			if err := sb.Destroy(ctx); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.ReportMetric(ms(median(tv)), "p50-ms")
		b.ReportMetric(ms(pct(tv, 0.95)), "p95-ms")
		b.ReportMetric(ms(median(tb)), "raw-p50-ms")
		b.ReportMetric(float64(median(tv))/float64(median(tb)), "x-raw")
	})
	b.Run("L1-create-only", func(b *testing.B) {
		rt1, err := local.New(local.WithRoot(b.TempDir()), local.WithIsolation(local.L1))
		if err != nil {
			b.Fatal(err)
		}
		defer rt1.Close()
		c1 := sandbox.NewClient(rt1)
		var tv, tb []time.Duration
		dir := b.TempDir()
		i := 0
		for b.Loop() {
			// Baseline: the file system work of an L1 create, raw.
			t0 := time.Now()
			d := filepath.Join(dir, strconv.Itoa(i))
			i++
			if err := os.MkdirAll(filepath.Join(d, "home"), 0o755); err != nil {
				b.Fatal(err)
			}
			r, err := os.OpenRoot(filepath.Join(d, "home"))
			if err != nil {
				b.Fatal(err)
			}
			r.Close()
			t1 := time.Now()
			sb, err := c1.Create(ctx, sandbox.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			tb, tv = append(tb, t1.Sub(t0)), append(tv, t2.Sub(t1))
			b.StopTimer()
			_ = sb.Destroy(ctx)
			b.StartTimer()
		}
		b.ReportMetric(ms(median(tv)), "p50-ms")
		b.ReportMetric(ms(median(tb)), "raw-p50-ms")
		b.ReportMetric(float64(median(tv))/float64(median(tb)), "x-raw")
	})
}

// BenchmarkLocalT2Exec: /bin/true through the Client (output captured,
// exit code) against a raw os/exec with captured output. Target ≤ 1.5×
// raw, ≤ 6 ms absolute. Beside them, the round trip of a ping-pong
// between two Go processes over a unix socket, measured in the same loop
// (rtt-p50-us): the overhead of an exec over raw is reported as a
// multiple of it (x-rtt; target ≤ 4), which stays comparable across hosts
// and loads where absolute times do not.
func BenchmarkLocalT2Exec(b *testing.B) {
	ctx := context.Background()
	c, rt := localClient(b)
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Destroy(ctx)
	b.Run(levelName(rt), func(b *testing.B) {
		var tv, tb, tp []time.Duration
		pp := newPingPong(b)
		defer pp.close()
		cpu0, cs0 := agentCost(ctx, b, rt, sb.ID())
		for b.Loop() {
			for range 5 {
				tp = append(tp, pp.once(b))
			}
			t0 := time.Now()
			var o, e bytes.Buffer
			cmd := exec.Command("/bin/true")
			cmd.Stdout, cmd.Stderr = &o, &e
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"/bin/true"}})
			if err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
			t2 := time.Now()
			tb, tv = append(tb, t1.Sub(t0)), append(tv, t2.Sub(t1))
		}
		cpu1, cs1 := agentCost(ctx, b, rt, sb.ID())
		b.ReportMetric(ms(median(tv)), "p50-ms")
		b.ReportMetric(ms(median(tb)), "raw-p50-ms")
		b.ReportMetric(float64(median(tv))/float64(median(tb)), "x-raw")
		rtt := median(tp)
		b.ReportMetric(float64(rtt)/float64(time.Microsecond), "rtt-p50-us")
		b.ReportMetric(float64(median(tv)-median(tb))/float64(rtt), "x-rtt")
		// What the agent itself spends per exec (its threads, not the
		// command): far less noisy than wall time on a loaded machine.
		b.ReportMetric(float64(cpu1-cpu0)/1e3/float64(len(tv)), "agent-cpu-us/op")
		b.ReportMetric(float64(cs1-cs0)/float64(len(tv)), "agent-cs/op")
	})
}

// agentCost sums, over the threads of the sandbox's agent (every process
// of the sandbox but pasta, the network stack), the CPU time in ns
// (/proc/PID/task/TID/schedstat) and the context switches, voluntary and
// not (/proc/PID/task/TID/status).
func agentCost(ctx context.Context, b *testing.B, rt *local.Runtime, id string) (cpuNS, switches int64) {
	b.Helper()
	pids, err := rt.HostPIDs(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid)
		if comm, _ := os.ReadFile(dir + "/comm"); strings.HasPrefix(string(comm), "pasta") || strings.HasPrefix(string(comm), "passt") {
			continue
		}
		tasks, _ := os.ReadDir(dir + "/task")
		for _, t := range tasks {
			if st, err := os.ReadFile(dir + "/task/" + t.Name() + "/schedstat"); err == nil {
				if f := strings.Fields(string(st)); len(f) > 0 {
					n, _ := strconv.ParseInt(f[0], 10, 64)
					cpuNS += n
				}
			}
			st, _ := os.ReadFile(dir + "/task/" + t.Name() + "/status")
			for _, l := range strings.Split(string(st), "\n") {
				if k, v, ok := strings.Cut(l, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
					n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					switches += n
				}
			}
		}
	}
	return cpuNS, switches
}

// BenchmarkLocalT3Transfer: 100 MiB upload and download through the Client
// against a raw io.Copy file→file. Targets: ≥ 0.5× raw throughput; heap
// allocated per transfer ≤ 4 MiB (streaming).
func BenchmarkLocalT3Transfer(b *testing.B) {
	ctx := context.Background()
	c, _ := localClient(b)
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Destroy(ctx)
	const size = 100 << 20
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	f, err := os.Create(src)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		b.Fatal(err)
	}
	f.Close()
	rawCopy := func(dst string) error {
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			return err
		}
		return out.Close()
	}
	run := func(b *testing.B, variant func() error) {
		var tv, tb []time.Duration
		var alloc uint64
		var ms0, ms1 runtime.MemStats
		for b.Loop() {
			t0 := time.Now()
			if err := rawCopy(filepath.Join(dir, "raw")); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			runtime.ReadMemStats(&ms0)
			if err := variant(); err != nil {
				b.Fatal(err)
			}
			runtime.ReadMemStats(&ms1)
			t2 := time.Now()
			alloc = max(alloc, ms1.TotalAlloc-ms0.TotalAlloc)
			tb, tv = append(tb, t1.Sub(t0)), append(tv, t2.Sub(t1))
		}
		mibs := func(d time.Duration) float64 { return float64(size>>20) / d.Seconds() }
		b.ReportMetric(mibs(median(tv)), "MiB/s")
		b.ReportMetric(mibs(median(tb)), "raw-MiB/s")
		b.ReportMetric(mibs(median(tv))/mibs(median(tb)), "x-raw")
		b.ReportMetric(float64(alloc)/(1<<20), "alloc-MiB")
	}
	b.Run("upload", func(b *testing.B) {
		run(b, func() error {
			in, err := os.Open(src)
			if err != nil {
				return err
			}
			defer in.Close()
			return sb.Upload(ctx, "big", in)
		})
	})
	b.Run("download", func(b *testing.B) {
		run(b, func() error {
			rc, err := sb.Download(ctx, "big")
			if err != nil {
				return err
			}
			defer rc.Close()
			out, err := os.Create(filepath.Join(dir, "down"))
			if err != nil {
				return err
			}
			n, err := io.Copy(out, rc)
			if err == nil && n != size {
				err = fmt.Errorf("downloaded %d bytes", n)
			}
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			return err
		})
	})
}

// BenchmarkLocalT6Concurrency: 32 sandboxes created at once, then 10 execs
// in each, all concurrently; baselines: 32 concurrent raw execs of the SDK
// binary, and the same number of concurrent raw /bin/true. Targets: 0
// errors; create wall ≤ 1.5 s; ≥ 200 exec/s; no descriptor left after.
func BenchmarkLocalT6Concurrency(b *testing.B) {
	ctx := context.Background()
	const n, per = 32, 10
	c, _ := localClient(b)
	warm, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	_ = warm.Destroy(ctx)
	fds0 := fdCount()
	var createWall, rawWall, execWall, rawExecWall time.Duration
	errs := 0
	for b.Loop() {
		t0 := time.Now()
		parallel(n, func(int) error { return rawSelf() })
		rawWall += time.Since(t0)

		sbs := make([]*sandbox.Sandbox, n)
		t1 := time.Now()
		errs += parallel(n, func(i int) error {
			var err error
			sbs[i], err = c.Create(ctx, sandbox.CreateOptions{})
			return err
		})
		createWall += time.Since(t1)

		t2 := time.Now()
		errs += parallel(n*per, func(i int) error {
			sb := sbs[i%n]
			if sb == nil {
				return fmt.Errorf("no sandbox")
			}
			_, err := sb.Exec(ctx, sandbox.Command{Args: []string{"/bin/true"}})
			return err
		})
		execWall += time.Since(t2)
		t3 := time.Now()
		parallel(n*per, func(int) error { return exec.Command("/bin/true").Run() })
		rawExecWall += time.Since(t3)
		parallel(n, func(i int) error {
			if sbs[i] != nil {
				return sbs[i].Destroy(ctx)
			}
			return nil
		})
	}
	k := float64(b.N)
	b.ReportMetric(float64(errs), "errors")
	b.ReportMetric(ms(createWall)/k, "create32-wall-ms")
	b.ReportMetric(ms(rawWall)/k, "raw32-wall-ms")
	b.ReportMetric(float64(createWall)/float64(rawWall), "create-x-raw")
	rate := float64(n*per) * k / execWall.Seconds()
	rawRate := float64(n*per) * k / rawExecWall.Seconds()
	b.ReportMetric(rate, "exec/s")
	b.ReportMetric(rawRate, "raw-exec/s")
	b.ReportMetric(rate/rawRate, "exec-x-raw")
	b.ReportMetric(float64(fdCount()-fds0), "fds-left")
}

func parallel(n int, f func(i int) error) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(i); err != nil {
				mu.Lock()
				errs++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}

func fdCount() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}

// BenchmarkLocalT7FatParent: create p50 with 1 GiB of touched application
// heap against the same with a tiny heap. Target ≤ 1.2× (the spawner keeps
// the application's page tables out of every sandbox's clone).
func BenchmarkLocalT7FatParent(b *testing.B) {
	ctx := context.Background()
	c, rt := localClient(b)
	b.Run(levelName(rt), func(b *testing.B) {
		createOnce := func() time.Duration {
			t0 := time.Now()
			sb, err := c.Create(ctx, sandbox.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			d := time.Since(t0)
			_ = sb.Destroy(ctx)
			return d
		}
		var thin, fat []time.Duration
		var heap []byte
		for b.Loop() {
			thin = append(thin, createOnce())
			if heap == nil {
				heap = make([]byte, 1<<30)
				for i := 0; i < len(heap); i += 4096 {
					heap[i] = 1
				}
			}
			fat = append(fat, createOnce())
		}
		runtime.KeepAlive(heap)
		heap = nil
		debug.FreeOSMemory()
		b.ReportMetric(ms(median(thin)), "thin-p50-ms")
		b.ReportMetric(ms(median(fat)), "fat-p50-ms")
		b.ReportMetric(float64(median(fat))/float64(median(thin)), "x-raw")
	})
}

// BenchmarkLocalT8Pause: Pause and Resume of a sandbox with a spinning
// process, against a raw cgroup v2 freeze and thaw of a bare cgroup holding
// a spinning process (or, without one, SIGSTOP/SIGCONT of it). Targets: v2
// ≤ 1 ms p50 (v1 ≤ 10 ms, signals ≤ 2 ms); 0 CPU ticks while frozen.
func BenchmarkLocalT8Pause(b *testing.B) {
	ctx := context.Background()
	c, rt := localClient(b)
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Destroy(ctx)
	spin, err := sb.Start(ctx, sandbox.Command{Shell: "while :; do :; done"})
	if err != nil {
		b.Fatal(err)
	}
	defer spin.Close()
	raw := newRawFreezer(b)
	defer raw.close()
	b.Run(levelName(rt)+"/"+raw.kind, func(b *testing.B) {
		var tp, tr, rp, rr []time.Duration
		for b.Loop() {
			t0 := time.Now()
			raw.set(true)
			t1 := time.Now()
			raw.set(false)
			t2 := time.Now()
			if err := sb.Pause(ctx); err != nil {
				b.Fatal(err)
			}
			t3 := time.Now()
			if err := sb.Resume(ctx); err != nil {
				b.Fatal(err)
			}
			t4 := time.Now()
			rp, rr = append(rp, t1.Sub(t0)), append(rr, t2.Sub(t1))
			tp, tr = append(tp, t3.Sub(t2)), append(tr, t4.Sub(t3))
		}
		b.ReportMetric(ms(median(tp)), "pause-p50-ms")
		b.ReportMetric(ms(median(tr)), "resume-p50-ms")
		b.ReportMetric(ms(median(rp)), "raw-freeze-p50-ms")
		b.ReportMetric(float64(median(tp))/float64(median(rp)), "x-raw")
		// A frozen sandbox accrues no CPU time.
		if err := sb.Pause(ctx); err != nil {
			b.Fatal(err)
		}
		pids, err := rt.HostPIDs(ctx, sb.ID())
		if err != nil {
			b.Fatal(err)
		}
		c0 := cpuTicks(pids)
		time.Sleep(100 * time.Millisecond)
		c1 := cpuTicks(pids)
		if err := sb.Resume(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(c1-c0), "frozen-cpu-ticks")
	})
}

func cpuTicks(pids []int) int64 {
	var sum int64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			st, _ := strconv.ParseInt(f[12], 10, 64)
			sum += u + st
		}
	}
	return sum
}

// rawFreezer freezes a bare process the most direct way available.
type rawFreezer struct {
	kind string
	dir  string
	cmd  *exec.Cmd
}

func newRawFreezer(b *testing.B) *rawFreezer {
	cmd := exec.Command("/bin/sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	f := &rawFreezer{kind: "signal", cmd: cmd}
	dir := "/sys/fs/cgroup/unified/sandboxkit-bench-" + strconv.Itoa(os.Getpid())
	if os.Mkdir(dir, 0o755) == nil {
		if os.WriteFile(dir+"/cgroup.procs", []byte(strconv.Itoa(cmd.Process.Pid)), 0) == nil {
			f.kind, f.dir = "cgroup-v2", dir
		} else {
			os.Remove(dir)
		}
	}
	return f
}

func (f *rawFreezer) set(on bool) {
	if f.dir == "" {
		sig := syscall.SIGCONT
		if on {
			sig = syscall.SIGSTOP
		}
		_ = f.cmd.Process.Signal(sig)
		return
	}
	v := "0"
	if on {
		v = "1"
	}
	_ = os.WriteFile(f.dir+"/cgroup.freeze", []byte(v), 0)
	for i := 0; i < 100000; i++ {
		b, _ := os.ReadFile(f.dir + "/cgroup.events")
		if strings.Contains(string(b), "frozen "+v) {
			return
		}
	}
}

func (f *rawFreezer) close() {
	_ = f.cmd.Process.Kill()
	_ = f.cmd.Wait()
	if f.dir != "" {
		_ = os.Remove(f.dir)
	}
}

// BenchmarkLocalT9Destroy: Destroy of a sandbox with a running process
// against a raw kill and wait of a process. Targets: p50 ≤ 5 ms; nothing of
// the sandbox survives (checked by the provider's tests).
func BenchmarkLocalT9Destroy(b *testing.B) {
	ctx := context.Background()
	c, rt := localClient(b)
	b.Run(levelName(rt), func(b *testing.B) {
		var tv, tb []time.Duration
		for b.Loop() {
			b.StopTimer()
			sb, err := c.Create(ctx, sandbox.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := sb.Start(ctx, sandbox.Command{Args: []string{"sleep", "600"}}); err != nil {
				b.Fatal(err)
			}
			raw := exec.Command("sleep", "600")
			if err := raw.Start(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			t0 := time.Now()
			_ = raw.Process.Kill()
			_ = raw.Wait()
			t1 := time.Now()
			if err := sb.Destroy(ctx); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			tb, tv = append(tb, t1.Sub(t0)), append(tv, t2.Sub(t1))
		}
		b.ReportMetric(ms(median(tv)), "p50-ms")
		b.ReportMetric(ms(median(tb)), "raw-p50-ms")
		b.ReportMetric(float64(median(tv))/float64(median(tb)), "x-raw")
	})
}
