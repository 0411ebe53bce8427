package memory

import (
	"context"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

var _ driver.MetricsReader = (*Runtime)(nil)

// Metrics reports what the fake holds for sandbox id: DiskBytes is the
// bytes of its regular files, Processes its running background
// processes and Execs. It runs nothing on a CPU of its own and keeps no
// memory apart from its files, so CPU, memory and every limit are
// MetricUnknown. A paused sandbox reports what it holds.
func (r *Runtime) Metrics(_ context.Context, id string) (driver.Metrics, error) {
	if err := r.begin("metrics", id, ""); err != nil {
		return driver.Metrics{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.get(id, false)
	if err != nil {
		return driver.Metrics{}, err
	}
	m := driver.NewMetrics()
	m.Time = r.now()
	if m.Time.IsZero() {
		m.Time = time.Now()
	}
	var disk int64
	for _, n := range b.files {
		if n.mode.IsRegular() {
			disk += int64(len(n.data))
		}
	}
	m.DiskBytes = disk
	m.Processes = int64(len(b.procs) + len(b.execs))
	m.Notes = []string{"memory: disk is the bytes of the sandbox's files; it has no CPU, memory or limits of its own"}
	return m, nil
}
