package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupParents are the writable directories under which sandbox cgroups
// are created: one in the unified (v2) hierarchy, used for freeze and kill,
// and one per v1 controller, used for limits, the v1 freezer and (cpuacct)
// CPU accounting.
type cgroupParents struct {
	V2     string            // "" when no writable v2 hierarchy
	V1     map[string]string // controller → parent directory
	V2Ctrl map[string]bool   // controllers usable in V2 children
	Why    string            // why limits are unavailable, if they are
}

// sandboxCgroups are the cgroup directories of one sandbox.
type sandboxCgroups struct {
	V2 string            `json:"v2,omitempty"`
	V1 map[string]string `json:"v1,omitempty"`
	// Limits reports that memory and pids limits were applied.
	Limits bool `json:"limits,omitempty"`
	// Pids and MemMiB are the pids and memory limits applied, 0 for none.
	Pids   int `json:"pids,omitempty"`
	MemMiB int `json:"mem_mib,omitempty"`
}

const cgroupDirName = "sandboxkit-local"

// detectCgroups finds writable cgroup hierarchies for this process.
func detectCgroups() cgroupParents {
	cp := cgroupParents{V1: map[string]string{}, V2Ctrl: map[string]bool{}}
	self := map[string]string{} // controller (or "" for v2) → path
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			if parts[0] == "0" && parts[1] == "" {
				self[""] = parts[2]
				continue
			}
			for _, c := range strings.Split(parts[1], ",") {
				self[c] = parts[2]
			}
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		cp.Why = "cgroup: " + err.Error()
		return cp
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, x := range fields {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(fields)+1 || len(fields) < sep+3 {
			continue
		}
		fstype, mnt, super := fields[sep+1], fields[4], ""
		if len(fields) > sep+3 {
			super = fields[sep+3]
		}
		switch fstype {
		case "cgroup2":
			if p, ok := self[""]; ok && cp.V2 == "" {
				dir := filepath.Join(mnt, p, cgroupDirName)
				if os.MkdirAll(dir, 0o755) == nil && writable(dir) {
					cp.V2 = dir
					// Let children use memory and pids when the parent offers them.
					_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0)
					if b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control")); err == nil {
						for _, c := range strings.Fields(string(b)) {
							cp.V2Ctrl[c] = true
						}
					}
				}
			}
		case "cgroup":
			for _, opt := range strings.Split(super, ",") {
				switch opt {
				case "memory", "pids", "freezer", "cpu", "cpuacct":
					p, ok := self[opt]
					if !ok || cp.V1[opt] != "" {
						continue
					}
					dir := filepath.Join(mnt, p, cgroupDirName)
					if other := cp.v1Owner(dir); other != "" {
						// Co-mounted controllers (cpu,cpuacct) share one
						// directory: it is kept under "cpu", whose limits
						// create writes, and Metrics finds cpuacct.usage
						// there too.
						if opt == "cpu" && other == "cpuacct" {
							delete(cp.V1, other)
							cp.V1[opt] = dir
						}
						continue
					}
					if os.MkdirAll(dir, 0o755) == nil && writable(dir) {
						cp.V1[opt] = dir
					}
				}
			}
		}
	}
	if !cp.limits() {
		cp.Why = "cgroup: no writable memory and pids controllers (needs root or a delegated cgroup)"
	}
	cp.capAllPids()
	return cp
}

// capAllPids limits the pids of all the sandboxes under the parents
// together (every Runtime of this host that shares them); see allPids.
func (cp cgroupParents) capAllPids() {
	all := allPids(readProcValues())
	if all == 0 {
		return
	}
	n := []byte(strconv.FormatUint(all, 10))
	for _, dir := range []string{cp.V2, cp.V1["pids"]} {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(dir + "/pids.max"); err == nil {
			_ = os.WriteFile(dir+"/pids.max", n, 0)
		}
	}
}

// v1Owner returns the v1 controller whose parent directory is dir, or "".
func (cp cgroupParents) v1Owner(dir string) string {
	for c, d := range cp.V1 {
		if d == dir {
			return c
		}
	}
	return ""
}

func writable(dir string) bool {
	return syscall.Access(dir, 2 /* W_OK */) == nil
}

// limits reports whether memory and pids limits can be set.
func (cp cgroupParents) limits() bool {
	mem := cp.V1["memory"] != "" || cp.V2Ctrl["memory"]
	pids := cp.V1["pids"] != "" || cp.V2Ctrl["pids"]
	return mem && pids
}

// create makes the cgroups of sandbox id and applies limits.
func (cp cgroupParents) create(id string, memMiB, pids, cpus int) sandboxCgroups {
	var sc sandboxCgroups
	memOK, pidsOK := false, false
	if cp.V2 != "" {
		dir := filepath.Join(cp.V2, id)
		if os.Mkdir(dir, 0o755) == nil {
			sc.V2 = dir
			if cp.V2Ctrl["memory"] && os.WriteFile(dir+"/memory.max", []byte(strconv.Itoa(memMiB<<20)), 0) == nil {
				memOK = true
				_ = os.WriteFile(dir+"/memory.swap.max", []byte("0"), 0)
			}
			if cp.V2Ctrl["pids"] && os.WriteFile(dir+"/pids.max", []byte(strconv.Itoa(pids)), 0) == nil {
				pidsOK = true
			}
			if cpus > 0 && cp.V2Ctrl["cpu"] {
				_ = os.WriteFile(dir+"/cpu.max", fmt.Appendf(nil, "%d 100000", cpus*100000), 0)
			}
		}
	}
	for ctrl, parent := range cp.V1 {
		dir := filepath.Join(parent, id)
		if os.Mkdir(dir, 0o755) != nil {
			continue
		}
		if sc.V1 == nil {
			sc.V1 = map[string]string{}
		}
		sc.V1[ctrl] = dir
		switch ctrl {
		case "memory":
			if !memOK && os.WriteFile(dir+"/memory.limit_in_bytes", []byte(strconv.Itoa(memMiB<<20)), 0) == nil {
				memOK = true
			}
		case "pids":
			if !pidsOK && os.WriteFile(dir+"/pids.max", []byte(strconv.Itoa(pids)), 0) == nil {
				pidsOK = true
			}
		case "cpu":
			if cpus > 0 {
				_ = os.WriteFile(dir+"/cpu.cfs_period_us", []byte("100000"), 0)
				_ = os.WriteFile(dir+"/cpu.cfs_quota_us", []byte(strconv.Itoa(cpus*100000)), 0)
			}
		}
	}
	sc.Limits = memOK && pidsOK
	if memOK {
		sc.MemMiB = memMiB
	}
	if pidsOK {
		sc.Pids = pids
	}
	return sc
}

// v1Dirs lists the v1 cgroup directories of the sandbox.
func (sc sandboxCgroups) v1Dirs() []string {
	var out []string
	for _, d := range sc.V1 {
		out = append(out, d)
	}
	return out
}

// procs returns the pids in the sandbox's cgroups.
func (sc sandboxCgroups) procs() []int {
	var out []int
	seen := map[int]bool{}
	dirs := sc.v1Dirs()
	if sc.V2 != "" {
		dirs = append(dirs, sc.V2)
	}
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cgroup.procs")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	return out
}

// kill ends every process of the sandbox's cgroups, thawing them first,
// and waits (bounded by ctx) until they are gone.
func (sc sandboxCgroups) kill(ctx context.Context) {
	if sc.V2 == "" && len(sc.V1) == 0 {
		return
	}
	if sc.V2 != "" {
		_ = os.WriteFile(sc.V2+"/cgroup.kill", []byte("1"), 0)
	}
	for {
		pids := sc.procs()
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if fz := sc.V1["freezer"]; fz != "" {
			_ = os.WriteFile(fz+"/freezer.state", []byte("THAWED"), 0)
		}
		if sc.V2 != "" {
			_ = os.WriteFile(sc.V2+"/cgroup.freeze", []byte("0"), 0)
		}
		if len(pids) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// remove deletes the sandbox's cgroup directories (they must be empty).
func (sc sandboxCgroups) remove(ctx context.Context) error {
	var errs []error
	dirs := sc.v1Dirs()
	if sc.V2 != "" {
		dirs = append(dirs, sc.V2)
	}
	for _, d := range dirs {
		for {
			err := os.Remove(d)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if ctx.Err() != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// freeze freezes (or thaws) the sandbox's cgroup and waits until the
// kernel reports it done. It returns false when no freezer is available.
func (sc sandboxCgroups) freeze(ctx context.Context, on bool) (bool, error) {
	if sc.V2 != "" {
		v := "0"
		if on {
			v = "1"
		}
		if err := os.WriteFile(sc.V2+"/cgroup.freeze", []byte(v), 0); err == nil {
			want := "frozen " + v
			for i := 0; ; i++ {
				b, err := os.ReadFile(sc.V2 + "/cgroup.events")
				if err != nil {
					return true, err
				}
				if strings.Contains(string(b), want) {
					return true, nil
				}
				// Spin briefly (freezing usually takes tens of µs), then
				// sleep: a timer's wake-up costs more than the freeze.
				if i >= 100 {
					if err := sleepCtx(ctx, 100*time.Microsecond); err != nil {
						return true, err
					}
				} else if err := ctx.Err(); err != nil {
					return true, err
				}
			}
		}
	}
	if fz := sc.V1["freezer"]; fz != "" {
		v := "THAWED"
		if on {
			v = "FROZEN"
		}
		if err := os.WriteFile(fz+"/freezer.state", []byte(v), 0); err == nil {
			for {
				b, err := os.ReadFile(fz + "/freezer.state")
				if err != nil {
					return true, err
				}
				if strings.TrimSpace(string(b)) == v {
					return true, nil
				}
				if err := sleepCtx(ctx, 200*time.Microsecond); err != nil {
					return true, err
				}
			}
		}
	}
	return false, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
