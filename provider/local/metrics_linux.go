package local

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"golang.org/x/sys/unix"
)

var _ driver.MetricsReader = (*Runtime)(nil)

// Metrics reads the sandbox's resource use from its cgroup and its home:
//
//   - CPU time: cpu.stat usage_usec (v2), or cpuacct.usage (v1).
//   - Memory now: memory.current (v2) or memory.usage_in_bytes (v1); the
//     peak from memory.peak (v2, Linux 5.19 and later) or
//     memory.max_usage_in_bytes (v1), where the file exists (probed on
//     each call, never assumed).
//   - Processes: the processes in the cgroup (the sandbox's agent among
//     them).
//   - Limits: memory.max or memory.limit_in_bytes, and cpu.max or
//     cpu.cfs_quota_us/cpu.cfs_period_us; "no limit" is MetricUnknown with
//     a note, as the sandbox may then use what its host has.
//   - Disk: with a disk quota (Resources.DiskGiB, a loop-mounted home) the
//     home file system's used and total size; otherwise the blocks of the
//     home's files, summed (hard links once), with no limit. The walk is
//     relative to directory descriptors (any depth), bounded by ctx and
//     by maxTreeEntries: past it the figure is a lower bound, and entries
//     it cannot read are left out, each case with a note.
//
// Without cgroups (no delegated hierarchy), CPU time and the peak are
// MetricUnknown, memory now is the sum of the processes' resident sets,
// and the processes are the agent and its descendants. A paused
// sandbox reports what it holds. Sandboxes created before the v1 cpuacct
// controller was used report no CPU time on a v1 host.
func (r *Runtime) Metrics(ctx context.Context, id string) (driver.Metrics, error) {
	m, err := r.readMetaCtx(ctx, id)
	if err != nil {
		return driver.Metrics{}, err
	}
	out := driver.NewMetrics()
	out.Time = time.Now()
	sc := m.Cgroups
	if sc.V2 != "" || len(sc.V1) > 0 {
		sc.cgroupMetrics(&out)
		out.Processes = int64(len(sc.procs()))
	} else {
		out.Notes = append(out.Notes, "local: no cgroup for this sandbox: CPU time and the memory peak are unknown, memory is the processes' resident sets")
		var pids []int
		if procAlive(m.AgentPID, m.AgentAt) {
			pids = append([]int{m.AgentPID}, descendants(m.AgentPID)...)
		}
		out.Processes = int64(len(pids))
		var rss int64
		for _, pid := range pids {
			rss += residentBytes(pid)
		}
		out.MemoryBytes = rss
	}
	home := filepath.Join(r.dir(id), "home")
	if m.Disk != "" && mounted(r.dir(id), home) {
		var st unix.Statfs_t
		if err := unix.Statfs(home, &st); err == nil {
			bs := int64(st.Bsize)
			out.DiskLimitBytes = int64(st.Blocks) * bs
			out.DiskBytes = (int64(st.Blocks) - int64(st.Bfree)) * bs
		}
	} else {
		u, err := treeBytes(ctx, home)
		if err != nil {
			return driver.Metrics{}, err
		}
		out.DiskBytes = u.Bytes
		out.Notes = append(out.Notes, "local: disk is the blocks of the home's files; there is no disk limit without a quota (Resources.DiskGiB)")
		if u.Skipped > 0 {
			out.Notes = append(out.Notes, fmt.Sprintf("local: %d entries of the home could not be read and are left out of the disk figure", u.Skipped))
		}
		if u.Capped {
			out.Notes = append(out.Notes, fmt.Sprintf("local: the home holds more than %d entries or nests deeper than %d directories: disk is a lower bound (the walk stops there)", maxTreeEntries, maxTreeDepth))
		}
	}
	if out.MemoryPeakBytes >= 0 && out.MemoryPeakBytes < out.MemoryBytes {
		out.MemoryPeakBytes = out.MemoryBytes
	}
	return out, nil
}

// cgroupMetrics fills CPU, memory and limits from the sandbox's cgroups.
func (sc sandboxCgroups) cgroupMetrics(out *driver.Metrics) {
	if d := sc.V2; d != "" {
		if v, ok := statField(d+"/cpu.stat", "usage_usec"); ok {
			out.CPUTime = time.Duration(v) * time.Microsecond
		}
		if v, ok := readInt(d + "/memory.current"); ok {
			out.MemoryBytes = v
		}
		if v, ok := readInt(d + "/memory.peak"); ok {
			out.MemoryPeakBytes = v
		}
		if v, ok := readInt(d + "/memory.max"); ok {
			out.MemoryLimitBytes = v
		}
		if b, err := os.ReadFile(d + "/cpu.max"); err == nil {
			if f := strings.Fields(string(b)); len(f) == 2 && f[0] != "max" {
				q, e1 := strconv.ParseFloat(f[0], 64)
				p, e2 := strconv.ParseFloat(f[1], 64)
				if e1 == nil && e2 == nil && p > 0 {
					out.CPULimit = q / p
				}
			}
		}
	}
	// v1: each controller in its own hierarchy (or co-mounted: a file is
	// looked for in every v1 directory of the sandbox).
	for _, d := range sc.v1Dirs() {
		if out.CPUTime < 0 {
			if v, ok := readInt(d + "/cpuacct.usage"); ok {
				out.CPUTime = time.Duration(v)
			}
		}
		if out.MemoryBytes < 0 {
			if v, ok := readInt(d + "/memory.usage_in_bytes"); ok {
				out.MemoryBytes = v
			}
		}
		if out.MemoryPeakBytes < 0 {
			if v, ok := readInt(d + "/memory.max_usage_in_bytes"); ok {
				out.MemoryPeakBytes = v
			}
		}
		if out.MemoryLimitBytes < 0 {
			// The kernel shows "no limit" as the largest page-aligned
			// value (1<<63 - 4096 on 4 KiB pages).
			if v, ok := readInt(d + "/memory.limit_in_bytes"); ok && v < 1<<62 {
				out.MemoryLimitBytes = v
			}
		}
		if out.CPULimit < 0 {
			q, okq := readInt(d + "/cpu.cfs_quota_us")
			p, okp := readInt(d + "/cpu.cfs_period_us")
			if okq && okp && q > 0 && p > 0 {
				out.CPULimit = float64(q) / float64(p)
			}
		}
	}
	if out.CPUTime < 0 {
		out.Notes = append(out.Notes, "local: no CPU accounting in the sandbox's cgroup (cpu.stat or cpuacct.usage)")
	}
	if out.MemoryPeakBytes < 0 && out.MemoryBytes >= 0 {
		out.Notes = append(out.Notes, "local: this kernel keeps no memory peak for the cgroup (memory.peak needs Linux 5.19)")
	}
	if out.CPULimit < 0 {
		out.Notes = append(out.Notes, "local: no CPU quota set (Resources.CPUs): the sandbox may use every core of its host")
	}
	if out.MemoryLimitBytes < 0 {
		out.Notes = append(out.Notes, "local: no memory limit readable from the cgroup")
	}
}

// readInt reads a cgroup file holding one integer; "max" and a missing or
// malformed file are not ok.
func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil && v >= 0
}

// statField reads the value of key from a "key value" per line file
// (cpu.stat).
func statField(path, key string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key+" "); ok {
			v, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			return v, err == nil && v >= 0
		}
	}
	return 0, false
}

// residentBytes is the resident set of pid (VmRSS, "VmRSS:\t 1234 kB"),
// 0 when it is gone.
func residentBytes(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// maxTreeEntries caps the entries one disk walk of a home visits, and
// maxTreeDepth the directory levels it descends: a sandbox decides how
// many files its home holds and how deeply they nest, and the walk runs
// on the host, so what it costs is bounded. Past either, the sum is a
// lower bound (treeUsage.Capped). Variables so tests can lower them.
var (
	maxTreeEntries = 1 << 20
	maxTreeDepth   = 1 << 14
)

// direntBuf is how many bytes of directory entries one getdents call
// reads (about a thousand entries of common name lengths); ctx is
// checked once a batch.
const direntBuf = 32 << 10

// treeUsage is what a disk walk of a home found.
type treeUsage struct {
	Bytes   int64 // allocated blocks, in bytes
	Skipped int   // entries that could not be read and are not counted
	Capped  bool  // the walk stopped at maxTreeEntries or maxTreeDepth
}

// treeBytes sums the allocated blocks of the files under dir (as du
// does: a hard-linked file once), without following symbolic links. It
// walks relative to open directory descriptors, so the depth of the tree
// (past PATH_MAX) never matters, reads each directory a batch at a time
// (never a whole directory into memory), checks ctx once a batch and
// stops at maxTreeEntries entries. An entry that cannot be read
// (vanished, unreadable, moved meanwhile) is counted in Skipped, never
// failing the walk; the only error is ctx's.
func treeBytes(ctx context.Context, dir string) (treeUsage, error) {
	if err := ctx.Err(); err != nil {
		return treeUsage{}, err
	}
	fd, err := openDirPath(dir)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return treeUsage{}, nil
		}
		return treeUsage{Skipped: 1}, nil
	}
	d := &dirRef{fd: fd}
	defer d.close()
	w := &treeWalk{ctx: ctx, seen: map[inode]bool{}}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil {
		w.out.Bytes = st.Blocks * 512
	}
	if err := w.dir(d, 0); err != nil {
		return treeUsage{}, err
	}
	return w.out, nil
}

type inode struct{ dev, ino uint64 }

type treeWalk struct {
	ctx     context.Context
	seen    map[inode]bool // hard-linked files already counted
	entries int
	out     treeUsage
}

// dir adds what directory d holds. On return d is open again unless it
// could not be reopened (then what it held past that point is skipped).
func (w *treeWalk) dir(d *dirRef, depth int) error {
	var buf []byte
	for {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		if w.out.Capped {
			return nil
		}
		if buf == nil {
			buf = make([]byte, direntBuf)
		}
		n, err := unix.Getdents(d.fd, buf)
		if err != nil {
			w.out.Skipped++
			return nil
		}
		if n <= 0 {
			return nil
		}
	batch:
		for off := 0; off+19 <= n; {
			// linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen <= 19 || off+reclen > n {
				break
			}
			next := int64(binary.NativeEndian.Uint64(buf[off+8:]))
			raw := buf[off+19 : off+reclen]
			off += reclen
			if i := bytes.IndexByte(raw, 0); i >= 0 {
				raw = raw[:i]
			}
			name := string(raw)
			if name == "." || name == ".." || name == "" {
				continue
			}
			if w.entries >= maxTreeEntries {
				w.out.Capped = true
				return nil
			}
			w.entries++
			var st unix.Stat_t
			if unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				w.out.Skipped++
				continue
			}
			isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
			if st.Nlink > 1 && !isDir {
				k := inode{uint64(st.Dev), st.Ino}
				if w.seen[k] {
					continue
				}
				w.seen[k] = true
			}
			w.out.Bytes += st.Blocks * 512
			if !isDir {
				continue
			}
			if depth+1 >= maxTreeDepth {
				w.out.Capped = true
				return nil
			}
			cfd, err := unix.Openat(d.fd, name, openFlags, 0)
			if err != nil {
				w.out.Skipped++
				continue
			}
			c := &dirRef{fd: cfd}
			if depth < keepOpen {
				err := w.dir(c, depth+1)
				c.close()
				if err != nil {
					return err
				}
				continue
			}
			// Deep: close d while below it (bounded descriptors), drop
			// this batch (bounded memory), and come back to the entry
			// after name by its directory offset.
			buf = nil
			if d.leave() != nil {
				c.close()
				w.out.Skipped++
				return nil
			}
			err = w.dir(c, depth+1)
			berr := errors.New("closed")
			if c.fd >= 0 {
				berr = d.back(c.fd)
			}
			c.close()
			if err != nil {
				return err
			}
			if berr != nil {
				w.out.Skipped++
				return nil
			}
			if _, err := unix.Seek(d.fd, next, io.SeekStart); err != nil {
				w.out.Skipped++
				return nil
			}
			break batch
		}
	}
}
