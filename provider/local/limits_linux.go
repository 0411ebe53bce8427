package local

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// limitShare is the share of the host's task table, and of its file
// table, that one sandbox may take: 1/limitShare of each. A sandbox's
// pids.max is at most that share of min(kernel.pid_max,
// kernel.threads-max), and pids.max times its RLIMIT_NOFILE (a per-process
// limit, the same for every process of the sandbox, which cannot raise it)
// at most that share of fs.file-max: whatever a sandbox does, the rest of
// the host keeps 7/8 of the processes and of the open files it allows.
const limitShare = 8

// allSandboxesShare is the share of the host's tasks, and of its file
// table, that all sandboxes together may take: 1/2 of each (see allPids).
const allSandboxesShare = 2

// Bounds of the per-sandbox limits. The open files per process default to
// the usual soft limit, 1024, lowering the sandbox's pids (down to
// minSandboxPids) where the file table's share would not cover them, and
// rise with it up to maxOpenFiles.
const (
	defaultOpenFiles = 1024
	minSandboxPids   = 256
	maxOpenFiles     = 65536
)

// sandboxLimits are the limits a sandbox is created with.
type sandboxLimits struct {
	Pids     int    `json:"pids"`                // the cgroup's pids.max
	NoFile   uint64 `json:"nofile"`              // RLIMIT_NOFILE, soft and hard
	MemMiB   int    `json:"memory_mib"`          // the cgroup's memory limit
	CPUs     int    `json:"cpus,omitempty"`      // the cgroup's CPU quota; 0 for none
	Basis    string `json:"basis,omitempty"`     // the host's values they come from
	Note     string `json:"note,omitempty"`      // Resources lowered to what the host has
	FileMax  uint64 `json:"file_max,omitempty"`  // fs.file-max when computed
	TasksMax uint64 `json:"tasks_max,omitempty"` // min(pid_max, threads-max) when computed
}

// readProcUint reads a number from a /proc file.
func readProcUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// hostMemMiB returns the host's memory (MemTotal) in MiB, 0 if unknown.
func hostMemMiB() int {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kib, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return int(kib >> 10)
			}
		}
	}
	return 0
}

// limitsFor returns the limits of a new sandbox given the Resources asked
// (memMiB and cpus, 0 for the defaults), reading the host's tables now.
// Memory and CPUs beyond what the host has are lowered to it, with a note.
func limitsFor(memMiB, cpus int) sandboxLimits {
	l := computeLimits(readProcValues())
	var notes []string
	if memMiB == 0 {
		memMiB = defaultMemoryMiB
	} else if host := hostMemMiB(); host > 0 && memMiB > host {
		notes = append(notes, fmt.Sprintf("Resources.MemoryMiB %d lowered to the host's memory, %d MiB", memMiB, host))
		memMiB = host
	}
	if n := runtime.NumCPU(); cpus > n {
		notes = append(notes, fmt.Sprintf("Resources.CPUs %d lowered to the host's %d", cpus, n))
		cpus = n
	}
	l.MemMiB, l.CPUs, l.Note = memMiB, cpus, strings.Join(notes, "; ")
	return l
}

// procValues are the host's tables as read from /proc (0 when unreadable).
type procValues struct {
	fileMax, nrOpen, pidMax, threadsMax uint64
}

func readProcValues() procValues {
	var v procValues
	v.fileMax, _ = readProcUint("/proc/sys/fs/file-max")
	v.nrOpen, _ = readProcUint("/proc/sys/fs/nr_open")
	v.pidMax, _ = readProcUint("/proc/sys/kernel/pid_max")
	v.threadsMax, _ = readProcUint("/proc/sys/kernel/threads-max")
	return v
}

// computeLimits derives pids and open files from the host's tables (see
// limitShare).
func computeLimits(v procValues) sandboxLimits {
	tasks := v.pidMax
	if v.threadsMax > 0 && (tasks == 0 || v.threadsMax < tasks) {
		tasks = v.threadsMax
	}
	pids := uint64(defaultPids)
	var basis []string
	if tasks > 0 {
		pids = min(pids, max(tasks/limitShare, 1))
		basis = append(basis, fmt.Sprintf("pids_max at most 1/%d of the host's %d tasks (min of kernel.pid_max and kernel.threads-max), all sandboxes together 1/%d of them and of fs.file-max", limitShare, tasks, allSandboxesShare))
	}
	nofile := uint64(defaultOpenFiles)
	if v.fileMax > 0 {
		files := v.fileMax / limitShare
		if files/pids < defaultOpenFiles {
			pids = max(min(pids, files/defaultOpenFiles), min(pids, minSandboxPids))
		}
		nofile = min(max(files/pids, 1), maxOpenFiles)
		basis = append(basis, fmt.Sprintf("pids_max x open_files_max at most 1/%d of fs.file-max %d", limitShare, v.fileMax))
	}
	if v.nrOpen > 0 {
		nofile = min(nofile, v.nrOpen)
	}
	return sandboxLimits{Pids: int(pids), NoFile: nofile, Basis: strings.Join(basis, "; "), FileMax: v.fileMax, TasksMax: tasks}
}

// allPids returns the pids.max of the cgroup all sandboxes are made
// under (0 when the host's tables are unreadable): 1/allSandboxesShare of
// the host's tasks, and no more than keeps their processes' open files
// (each process holds at most the per-sandbox RLIMIT_NOFILE) within
// 1/allSandboxesShare of fs.file-max. Linux counts no open files per
// cgroup, so this is what bounds the files of many sandboxes together, as
// pids.max times RLIMIT_NOFILE bounds one sandbox's: however many
// sandboxes run, the rest of the host keeps half its processes and half
// its file table. It is never below one sandbox's pids.max.
func allPids(v procValues) uint64 {
	l := computeLimits(v)
	all := uint64(0)
	if l.TasksMax > 0 {
		all = max(l.TasksMax/allSandboxesShare, 1)
	}
	if v.fileMax > 0 && l.NoFile > 0 {
		byFiles := v.fileMax / allSandboxesShare / l.NoFile
		if all == 0 || byFiles < all {
			all = byFiles
		}
	}
	if all > 0 {
		all = max(all, uint64(l.Pids))
	}
	return all
}

// setOpenFiles sets RLIMIT_NOFILE (soft and hard) to n, or to the hard
// limit the process already has if lower, and returns the limit set (0 if
// none could be). It goes through the syscall package so that processes
// started with syscall.ForkExec keep it (Go restores its own start-up soft
// limit in children otherwise).
func setOpenFiles(n uint64) uint64 {
	var cur syscall.Rlimit
	if err := syscall.Getrlimit(unix.RLIMIT_NOFILE, &cur); err != nil {
		return 0
	}
	n = min(n, cur.Max)
	if err := syscall.Setrlimit(unix.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
		return 0
	}
	return n
}

// maxSandboxPtys is the most pseudo-terminals one sandbox may hold (see
// sandboxPtys).
const maxSandboxPtys = 64

// sandboxPtys returns how many pseudo-terminals one sandbox may hold:
// maxSandboxPtys, or 1/limitShare of the terminals the host leaves to
// devpts instances other than its own (kernel.pty.max minus
// kernel.pty.reserve) when that is less, read now. At L3 and L4 it is the
// max= of the sandbox's own devpts instance, so its programs cannot open
// more (ENOSPC); at L1 and L2, where terminals come from the host's
// /dev/ptmx, the agent refuses a StartTerminal beyond it.
func sandboxPtys() int {
	n := uint64(maxSandboxPtys)
	if ptyMax, err := readProcUint("/proc/sys/kernel/pty/max"); err == nil {
		reserve, _ := readProcUint("/proc/sys/kernel/pty/reserve")
		if ptyMax > reserve {
			n = min(n, max((ptyMax-reserve)/limitShare, 1))
		}
	}
	return int(n)
}
