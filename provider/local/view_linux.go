//go:build linux

package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/sandboxkit/sandbox/internal/pathsafe"
	"github.com/sandboxkit/sandbox/sberrors"
	"golang.org/x/sys/unix"
)

// The file methods serve the sandbox's file system as its commands see it,
// with their permissions:
//
//   - L3 and L4: the sandbox's own root (its /usr, /etc, /tmp, home...),
//     reached through the agent's /proc/<pid>/root, which the sandbox's
//     mount namespace resolves. While no agent runs (after a reboot, say)
//     only the home exists, and only it is served.
//   - L2: the host's root, through a thread confined by the same Landlock
//     allow-list as the commands (read-only system directories, read-write
//     home and private temporary directory, nothing else).
//   - L0 and L1: the host's root, with the rights of the commands' user:
//     the sandbox's own uid on a root host, else the host user. Where the
//     commands run as root (WithCommandsAsRoot, or a root directory the
//     sandbox's user cannot reach), the home only: a path elsewhere is
//     PermissionDenied, so that the file methods never write the host's
//     /etc.
//
// Every request works through os.Root on the view's top directory, so
// neither ".." nor a symbolic link planted by code in the sandbox reaches
// outside it (an absolute link is read in the sandbox's terms, from its
// root). Where the host process is root and the sandbox's commands are
// not, the methods act with the file system identity of the sandbox's user
// (setfsuid on a thread of their own), so the kernel grants them what it
// grants the commands: a read-only place is PermissionDenied, and a file
// the user may not read stays unread. /proc, /sys and /dev are kernel
// interfaces, not files: they are not served (PermissionDenied).

// view returns the sandbox path the file methods' root stands for and the
// host directory to open as that root.
func (r *Runtime) view(m *meta) (top, dir string) {
	switch {
	case m.Achieved >= L3 && procAlive(m.AgentPID, m.AgentAt):
		return "/", "/proc/" + strconv.Itoa(m.AgentPID) + "/root"
	case m.Achieved == L2, m.Achieved < L2 && !rootCommands(m):
		return "/", "/"
	}
	return r.info(m).Home, r.home(m.ID)
}

// rootCommands reports whether the commands of m, below L3, run as the
// host's root.
func rootCommands(m *meta) bool { return m.RunAs == 0 && os.Getuid() == 0 }

// ownDirs returns the host paths of the home and the private temporary
// directory ($TMPDIR) of sandbox m (below L3).
func (r *Runtime) ownDirs(m *meta) []string {
	return []string{r.home(m.ID), filepath.Join(r.dir(m.ID), "tmp")}
}

// kernelDirs are the sandbox paths of kernel interfaces, never served.
var kernelDirs = []string{"/proc", "/sys", "/dev"}

// openView opens the view of sandbox m that serves p and returns it with
// its top and p relative to it.
func (r *Runtime) openView(m *meta, p string) (root *os.Root, top, rel string, err error) {
	top, dir := r.view(m)
	if top == "/" {
		for _, k := range kernelDirs {
			if pathsafe.Within(k, p) {
				return nil, "", "", sberrors.Errorf(sberrors.PermissionDenied, "local: %s: the file methods do not serve %s (kernel interfaces, not files)", p, k)
			}
		}
	}
	if top == "/" && m.Achieved < L3 {
		// The host's root: the sandbox's own directories are opened as
		// roots of their own (here, with the host process's rights), as
		// the commands' user may search but not read the directories
		// above them, and Landlock grants no reading of those either.
		for _, d := range r.ownDirs(m) {
			if pathsafe.Within(d, p) {
				top, dir = d, d
				break
			}
		}
	}
	if !pathsafe.Within(top, p) {
		return nil, "", "", sberrors.Errorf(sberrors.PermissionDenied, "local: %s is outside the home %s: the local provider serves files under the home only while the sandbox's commands run as root (or, at L3 and L4, while no agent runs)", p, top)
	}
	rel, err = homeRel(top, p)
	if err != nil {
		return nil, "", "", fmt.Errorf("local: %s: %w: %w", p, err, sberrors.ErrPathEscape)
	}
	root, err = os.OpenRoot(dir)
	if err == nil && top == "/" && m.Achieved >= L3 && !procAlive(m.AgentPID, m.AgentAt) {
		// The agent ended while its root was opened: the pid may name
		// another process now.
		root.Close()
		err = fmt.Errorf("the sandbox's agent %d ended: %w", m.AgentPID, fs.ErrNotExist)
	}
	if err != nil {
		if top == "/" && m.Achieved >= L3 {
			// No agent to reach the sandbox's root through (or no right
			// to): serve the home, as when none runs.
			m2 := *m
			m2.AgentPID = 0
			return r.openView(&m2, p)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", "", sberrors.Errorf(sberrors.NotFound, "local: sandbox %s is gone: %w", m.ID, sberrors.ErrNotFound)
		}
		return nil, "", "", sberrors.Errorf(sberrors.Internal, "local: open the file system of sandbox %s: %w", m.ID, err)
	}
	return root, top, rel, nil
}

// creds is a file system identity: the host uid and gid the kernel checks
// file accesses against (0: the process's own), and the Landlock
// allow-list that confines them (nil: none).
type creds struct {
	uid, gid int
	landlock *agentConfig
}

// fileCreds returns the identity the file methods take for sandbox m: its
// commands' user where the host process is root and they are not, and
// at L2 their Landlock allow-list; nil to keep the process's own.
func (r *Runtime) fileCreds(m *meta) *creds {
	var c creds
	if os.Getuid() == 0 {
		switch {
		case m.Achieved >= L3:
			c.uid, c.gid = r.uid, r.gid
		case m.RunAs != 0:
			c.uid, c.gid = m.RunAs, m.RunAs
		}
	}
	if m.Achieved == L2 {
		c.landlock = &agentConfig{HostHome: r.home(m.ID), HostTmp: filepath.Join(r.dir(m.ID), "tmp")}
	}
	if c == (creds{}) {
		return nil
	}
	return &c
}

// as runs fn with the file system identity c (nil: the process's own), on
// a thread of its own that no other goroutine ever uses: the thread is
// locked and never unlocked, so it ends with fn's goroutine. It waits for
// fn.
func as(c *creds, fn func() error) error {
	if c == nil {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		if err := setThreadCreds(c); err != nil {
			done <- sberrors.Errorf(sberrors.Internal, "local: take the sandbox user's identity: %v", err)
			return
		}
		done <- fn()
	}()
	return <-done
}

// setThreadCreds gives the calling thread (only: raw system calls, not
// the runtime's all-threads versions) no supplementary groups and the file
// system uid and gid of c. Changing the fsuid from 0 drops the
// capabilities that bypass file permissions from the thread.
func setThreadCreds(c *creds) error {
	if c.landlock != nil {
		// no_new_privs, which Landlock needs without CAP_SYS_ADMIN, is a
		// property of this thread alone, as is the domain.
		if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); e != 0 {
			return fmt.Errorf("no_new_privs: %w", e)
		}
		if _, err := applyLandlock(c.landlock, false); err != nil {
			return fmt.Errorf("landlock: %w", err)
		}
	}
	if c.uid == 0 {
		return nil
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(c.gid), 0, 0)
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(c.uid), 0, 0)
	// Each call returns the previous value; an invalid id (-1) changes
	// nothing, so this reads the current ones back.
	gid, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0)
	uid, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0)
	if int(uid) != c.uid || int(gid) != c.gid {
		return fmt.Errorf("setfsuid/setfsgid: the thread has %d/%d, want %d/%d", uid, gid, c.uid, c.gid)
	}
	return nil
}
