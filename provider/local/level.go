package local

import (
	"fmt"
	"strings"

	"github.com/sandboxkit/sandbox/sberrors"
)

// Level is an isolation level, from L0 (none) to L4 (full). Higher levels
// include what the lower ones give. See the package documentation for what
// each level stops and what it does not.
type Level int

// The isolation levels.
const (
	// L0 runs commands as plain processes of the host user with the home
	// as working directory. It is reached only when asked for explicitly.
	L0 Level = iota
	// L1 adds a process jail: own session and process group, a subreaper
	// agent that ends the whole tree, a scrubbed environment, rlimits, and
	// file access through os.Root. Commands can still read and write
	// whatever the host user can.
	L1
	// L2 adds Landlock (file system allow-list: read-only system
	// directories, read-write home and a private temporary directory) and
	// seccomp (no ptrace, mount, bpf, io_uring, namespaces...; sockets of
	// the sandbox's own address families only, and no IP sockets when the
	// network is off). No namespaces are needed.
	L2
	// L3 runs the sandbox in its own user, mount, pid, uts, ipc and
	// (unless the network is the host's) net namespaces: a tmpfs root with read-only binds
	// of /usr and /etc, the home bound read-write at /home/user, pivot_root,
	// uid 1000 without capabilities. A seccomp filter of socket rules
	// alone keeps it to its own address families (AF_VSOCK is not
	// namespaced).
	L3
	// L4 is L3 plus Landlock, seccomp and cgroup limits (memory, pids;
	// see the package documentation for their defaults).
	L4
)

// String returns "L0" to "L4".
func (l Level) String() string {
	if l < L0 || l > L4 {
		return fmt.Sprintf("Level(%d)", int(l))
	}
	return fmt.Sprintf("L%d", int(l))
}

// Describe returns the level with its name, such as "L3 namespaces": the
// form used in Info.Isolation and Capabilities.Isolation.
func (l Level) Describe() string {
	names := [...]string{"none", "process", "landlock+seccomp", "namespaces", "full"}
	if l < L0 || l > L4 {
		return l.String()
	}
	return l.String() + " " + names[l]
}

// ParseLevel parses "l0".."l4" (or "L0".."L4", or "0".."4").
func ParseLevel(s string) (Level, error) {
	t := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "l")
	if len(t) == 1 && t[0] >= '0' && t[0] <= '4' {
		return Level(t[0] - '0'), nil
	}
	return 0, sberrors.Errorf(sberrors.InvalidArgument, "local: isolation level %q: want l0, l1, l2, l3 or l4", s)
}

// IsolationError reports that the host cannot give the isolation level a
// caller demanded (WithMinIsolation, WithIsolation, or the
// SANDBOX_LOCAL_ISOLATION variable). It matches sberrors.ErrFailedPrecondition.
type IsolationError struct {
	// Want is the level demanded, Got the best one available.
	Want, Got Level
	// Missing says, feature by feature, what stood in the way, for
	// example "userns: clone: operation not permitted".
	Missing []string
}

// Error names the levels and what is missing.
func (e *IsolationError) Error() string {
	msg := fmt.Sprintf("local: isolation %s required but this host gives %s", e.Want.Describe(), e.Got.Describe())
	if len(e.Missing) > 0 {
		msg += " (missing: " + strings.Join(e.Missing, "; ") + ")"
	}
	return msg
}

// Is makes the error match sberrors.ErrFailedPrecondition.
func (e *IsolationError) Is(target error) bool { return target == sberrors.ErrFailedPrecondition }

// features is what one agent set-up achieved. It travels from the agent to
// the runtime as JSON and is stored in the sandbox's metadata.
type features struct {
	Namespaces bool   `json:"namespaces,omitempty"` // user+mnt+pid+uts+ipc (+net) with pivot_root
	Landlock   bool   `json:"landlock,omitempty"`
	Seccomp    bool   `json:"seccomp,omitempty"`
	Cgroup     bool   `json:"cgroup,omitempty"` // memory and pids limits applied
	NoUserNS   bool   `json:"no_userns,omitempty"`
	LandlockV  int    `json:"landlock_abi,omitempty"`
	UID        int    `json:"uid,omitempty"`     // host uid commands run as, when switched (L1, L2)
	Sockets    string `json:"sockets,omitempty"` // the socket families a filter allows, "" when none applies
	NoFile     uint64 `json:"nofile,omitempty"`  // RLIMIT_NOFILE set, 0 when none
	Missing    string `json:"missing,omitempty"` // "; "-joined reasons
}

// level returns the level those features amount to, never more.
func (f features) level() Level {
	switch {
	case f.Namespaces && f.Landlock && f.Seccomp && f.Cgroup:
		return L4
	case f.Namespaces:
		return L3
	case f.Landlock && f.Seccomp:
		return L2
	}
	return L1
}
