package local

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox"
)

// meta is the metadata file of one sandbox, <root>/<id>/meta.json. It is
// replaced atomically (write to a temporary file, rename) under the
// sandbox's lock file, so readers in any process see a whole version.
type meta struct {
	ID        string            `json:"id"`
	Template  string            `json:"template,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Env       map[string]string `json:"env,omitempty"` // may hold secrets: the file is 0600
	State     sandbox.State     `json:"state"`
	CreatedAt time.Time         `json:"created_at"`
	LeaseEnd  time.Time         `json:"lease_end"`
	Lease     time.Duration     `json:"lease"` // the lease granted at create, reused by Resume
	AutoPause bool              `json:"auto_pause,omitempty"`
	NoNetwork bool              `json:"no_network,omitempty"`
	Resources sandbox.Resources `json:"resources"`

	Level    Level          `json:"level"`    // level asked for
	Achieved Level          `json:"achieved"` // level the running agent achieved
	Features features       `json:"features"`
	Why      string         `json:"why,omitempty"` // why not more than Achieved
	Cgroups  sandboxCgroups `json:"cgroups"`
	Paused   string         `json:"paused_by,omitempty"` // cgroup or signal
	AgentPID int            `json:"agent_pid,omitempty"`
	AgentAt  uint64         `json:"agent_start,omitempty"`
}

// idRE matches the ids this provider makes: "sbx-", a hex timestamp in
// microseconds (so ids sort by creation time) and random hex.
var idRE = regexp.MustCompile(`^sbx-[0-9a-f]{14}-[0-9a-f]{8}$`)

func newID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("sbx-%014x-%s", time.Now().UnixMicro(), hex.EncodeToString(b[:]))
}

const metaFile = "meta.json"

func (r *Runtime) dir(id string) string  { return filepath.Join(r.root, id) }
func (r *Runtime) home(id string) string { return filepath.Join(r.root, id, "home") }
func (r *Runtime) sock(id string) string { return filepath.Join(r.root, id, "s") }

// readMeta reads the metadata of id. A sandbox that does not exist is
// NotFound; an unreadable or corrupt file is Internal and names the file.
func (r *Runtime) readMeta(id string) (*meta, error) {
	if !idRE.MatchString(id) {
		return nil, sandbox.Errorf(sandbox.NotFound, "local: %q is not a local sandbox id (want sbx-<hex>-<hex>)", id)
	}
	p := filepath.Join(r.dir(id), metaFile)
	b, err := os.ReadFile(p)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, sandbox.Errorf(sandbox.NotFound, "local: no sandbox %s under %s: %w", id, r.root, sandbox.ErrNotFound)
		}
		return nil, sandbox.Errorf(sandbox.Internal, "local: reading %s: %w", p, err)
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil || m.ID != id {
		if err == nil {
			err = fmt.Errorf("id %q does not match its directory", m.ID)
		}
		return nil, sandbox.Errorf(sandbox.Internal, "local: corrupt metadata %s: %v", p, err)
	}
	return &m, nil
}

// writeMeta atomically replaces the metadata file of m.ID.
func (r *Runtime) writeMeta(m *meta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	dir := r.dir(m.ID)
	f, err := os.CreateTemp(dir, ".meta-*")
	if err != nil {
		if os.IsNotExist(err) {
			return sandbox.Errorf(sandbox.NotFound, "local: sandbox %s is gone: %w", m.ID, err)
		}
		return fmt.Errorf("local: writing metadata: %w", err)
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), filepath.Join(dir, metaFile))
	}
	if werr != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("local: writing metadata: %w", werr)
	}
	return nil
}

// lock takes the sandbox's exclusive lock (flock on <dir>/lock), shared by
// every process using the root. The returned func releases it.
func (r *Runtime) lock(id string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(r.dir(id), "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, sandbox.Errorf(sandbox.NotFound, "local: no sandbox %s under %s: %w", id, r.root, sandbox.ErrNotFound)
		}
		return nil, fmt.Errorf("local: lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("local: lock: %w", err)
	}
	return func() { f.Close() }, nil
}

// info converts m to the portable Info.
func (r *Runtime) info(m *meta) sandbox.Info {
	home := r.home(m.ID)
	if m.Achieved >= L3 {
		home = sandboxHome
	}
	detail := map[string]string{
		"level":     m.Achieved.String(),
		"host_home": r.home(m.ID),
		"root":      r.root,
	}
	if m.Why != "" {
		detail["isolation_missing"] = m.Why
	}
	if m.Paused != "" {
		detail["paused_by"] = m.Paused
	}
	if m.Cgroups.Limits {
		detail["cgroup_limits"] = "memory,pids"
	}
	return sandbox.Info{
		ID: m.ID, Provider: "local", Template: m.Template, Labels: maps.Clone(m.Labels),
		State: m.State, CreatedAt: m.CreatedAt, LeaseEnd: m.LeaseEnd, Home: home,
		Isolation: m.Achieved.Describe(), Detail: detail,
	}
}

// why explains, for an achieved level, what kept the sandbox from more.
func why(achieved Level, f features, extra ...string) string {
	var parts []string
	for _, e := range extra {
		if e != "" {
			parts = append(parts, e)
		}
	}
	if f.Missing != "" {
		parts = append(parts, f.Missing)
	}
	if achieved >= L3 && !f.Cgroup {
		parts = append(parts, "cgroup limits not applied")
	}
	return strings.Join(parts, "; ")
}
