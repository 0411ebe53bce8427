package local

import (
	"math"
	"testing"
)

// TestComputeLimits checks the per-sandbox limits derived from the host's
// tables, on hosts like this one and others: pids.max at most 1/8 of the
// host's tasks, pids.max times open files at most 1/8 of fs.file-max, and
// workable values (1024 open files, and pids lowered no further than 256
// to keep them) where the tables allow; and for all sandboxes together,
// pids at most half the host's tasks, and times the open files at most
// half fs.file-max (8 sandboxes at their own limits filled a small VM's
// file table before).
func TestComputeLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		v      procValues
		pids   int
		nofile uint64
		all    uint64 // the pids of all sandboxes together
	}{
		{"small VM", procValues{fileMax: 2466248, nrOpen: 1048576, pidMax: 32768, threadsMax: 192735}, 301, 1024, 1204},
		{"systemd host", procValues{fileMax: math.MaxInt64, nrOpen: 1073741816, pidMax: 4194304, threadsMax: 254000}, 4096, maxOpenFiles, 127000},
		{"threads-max low", procValues{fileMax: 1 << 40, nrOpen: 1 << 20, pidMax: 4194304, threadsMax: 8000}, 1000, maxOpenFiles, 4000},
		{"tiny file table", procValues{fileMax: 100000, nrOpen: 1 << 20, pidMax: 32768, threadsMax: 100000}, 256, 48, 1041},
		{"nr_open low", procValues{fileMax: 1 << 40, nrOpen: 4096, pidMax: 1 << 22, threadsMax: 1 << 20}, 4096, 4096, 524288},
		{"unreadable", procValues{}, defaultPids, defaultOpenFiles, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := computeLimits(tc.v)
			if l.Pids != tc.pids || l.NoFile != tc.nofile {
				t.Errorf("pids %d, nofile %d; want %d, %d", l.Pids, l.NoFile, tc.pids, tc.nofile)
			}
			tasks := min(tc.v.pidMax, tc.v.threadsMax)
			if tasks > 0 && uint64(l.Pids) > tasks/limitShare {
				t.Errorf("pids %d above 1/%d of %d tasks", l.Pids, limitShare, tasks)
			}
			if tc.v.fileMax > 0 && uint64(l.Pids)*l.NoFile > tc.v.fileMax/limitShare {
				t.Errorf("pids %d x nofile %d above 1/%d of file-max %d", l.Pids, l.NoFile, limitShare, tc.v.fileMax)
			}
			all := allPids(tc.v)
			if all != tc.all {
				t.Errorf("all sandboxes' pids %d; want %d", all, tc.all)
			}
			if tasks > 0 && all > tasks/allSandboxesShare {
				t.Errorf("all sandboxes' pids %d above 1/%d of %d tasks", all, allSandboxesShare, tasks)
			}
			if tc.v.fileMax > 0 && all*l.NoFile > tc.v.fileMax/allSandboxesShare {
				t.Errorf("all sandboxes' pids %d x nofile %d above 1/%d of file-max %d: together they could fill the host's file table", all, l.NoFile, allSandboxesShare, tc.v.fileMax)
			}
		})
	}
}
