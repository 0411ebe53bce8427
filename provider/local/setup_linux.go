package local

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// setupSandbox runs in the agent before it serves: with cfg.Namespaces it
// builds the sandbox's root file system and pivots into it, then it
// applies Landlock, seccomp and rlimits as asked. It returns what it
// achieved; an error means the requested namespaced set-up failed.
func setupSandbox(cfg *agentConfig) (features, error) {
	var f features
	if cfg.Namespaces {
		if err := setupNamespaces(cfg, &f); err != nil {
			return f, err
		}
		f.Namespaces = true
	} else if cfg.HostHome != "" {
		_ = os.Chdir(cfg.HostHome)
	}
	_ = unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	if cfg.NoFile > 0 {
		f.NoFile = setOpenFiles(cfg.NoFile)
	}
	if cfg.MaxFileMiB > 0 {
		n := uint64(cfg.MaxFileMiB) << 20
		_ = unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: n, Max: n})
	}
	// Nothing may ptrace the agent or open its /proc/<pid>/exe.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	return f, nil
}

// newRoot is where the sandbox's root is assembled: a tmpfs mounted over
// /tmp of the agent's private copy of the mount table.
const newRoot = "/tmp"

func setupNamespaces(cfg *agentConfig, f *features) error {
	step := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return step("make / private", err)
	}
	if err := unix.Mount("tmpfs", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=16m"); err != nil {
		return step("mount tmpfs root", err)
	}
	at := func(p string) string { return filepath.Join(newRoot, p) }
	for _, d := range []string{"usr", "etc", "opt"} {
		fi, err := os.Lstat("/" + d)
		if err != nil || !fi.IsDir() {
			continue
		}
		if err := bindRO("/"+d, at(d)); err != nil {
			return step("bind /"+d, err)
		}
	}
	// On merged-/usr hosts these are symlinks into /usr: recreate them.
	for _, d := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		fi, err := os.Lstat("/" + d)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink("/" + d)
			if err != nil {
				return step("readlink /"+d, err)
			}
			if err := os.Symlink(t, at(d)); err != nil {
				return step("symlink /"+d, err)
			}
		case fi.IsDir():
			if err := bindRO("/"+d, at(d)); err != nil {
				return step("bind /"+d, err)
			}
		}
	}
	home := at(cfg.Home)
	if err := os.MkdirAll(home, 0o755); err != nil {
		return step("mkdir home", err)
	}
	if cfg.HomeTree {
		err := unix.MoveMount(agentHomeFD, "", unix.AT_FDCWD, home, unix.MOVE_MOUNT_F_EMPTY_PATH)
		_ = unix.Close(agentHomeFD)
		if err != nil {
			return step("move home mount", err)
		}
	} else if err := unix.Mount(cfg.HostHome, home, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return step("bind home", err)
	}
	_ = unix.MountSetattr(-1, home, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV})
	tmpMiB := cfg.TmpMiB
	if tmpMiB <= 0 {
		tmpMiB = 512
	}
	if err := mountTmpfs(at("tmp"), fmt.Sprintf("mode=1777,size=%dm", tmpMiB)); err != nil {
		return step("mount /tmp", err)
	}
	if err := os.Mkdir(at("proc"), 0o555); err != nil {
		return step("mkdir /proc", err)
	}
	if err := unix.Mount("proc", at("proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return step("mount /proc", err)
	}
	if err := setupDev(at("dev")); err != nil {
		return step("populate /dev", err)
	}
	if cfg.EgressCA != "" {
		if err := installEgressCA(at, cfg.EgressCA); err != nil {
			return step("install the egress proxy's CA", err)
		}
	}
	old := at(".old")
	if err := os.Mkdir(old, 0o700); err != nil {
		return step("mkdir .old", err)
	}
	if err := unix.PivotRoot(newRoot, old); err != nil {
		return step("pivot_root", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return step("chdir /", err)
	}
	if err := unix.Unmount("/.old", unix.MNT_DETACH); err != nil {
		return step("unmount old root", err)
	}
	_ = os.Remove("/.old")
	// Nothing can be created at the top of the root or in /dev.
	for _, p := range []string{"/", "/dev"} {
		if err := unix.MountSetattr(-1, p, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			if err := unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID, ""); err != nil {
				return step("remount "+p+" read-only", err)
			}
		}
	}
	if cfg.Hostname != "" {
		_ = unix.Sethostname([]byte(cfg.Hostname))
	}
	if cfg.NewNet {
		if err := loopbackUp(); err != nil {
			return step("bring lo up", err)
		}
	}
	// No nested user namespaces: they would give a process of the sandbox
	// every capability over new namespaces of its own.
	if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0"), 0); err == nil {
		f.NoUserNS = true
	}
	// The sandbox's share of inotify (see inotifyShare); a failure leaves
	// the agent's own bound on its watches.
	_ = limitInotify(cfg.InotifyWatches)
	_ = unix.Chdir(cfg.Home)
	return nil
}

func mountTmpfs(dir, opts string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts)
}

// bindRO bind-mounts src (recursively) read-only, nosuid, nodev at dst.
func bindRO(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(-1, dst, unix.AT_RECURSIVE, attr); err == nil {
		return nil
	}
	// Kernels before 5.12: remount the top mount, keeping its locked flags.
	var st unix.Statfs_t
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV)
	if unix.Statfs(dst, &st) == nil && st.Flags&unix.ST_NOEXEC != 0 {
		flags |= unix.MS_NOEXEC
	}
	return unix.Mount("", dst, "", flags, "")
}

func setupDev(dev string) error {
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return err
	}
	for _, n := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		if _, err := os.Stat("/dev/" + n); err != nil {
			continue
		}
		p := filepath.Join(dev, n)
		if err := os.WriteFile(p, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+n, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", n, err)
		}
	}
	links := map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}
	for n, t := range links {
		if err := os.Symlink(t, filepath.Join(dev, n)); err != nil {
			return err
		}
	}
	if err := mountTmpfs(filepath.Join(dev, "shm"), "mode=1777,size=64m"); err != nil {
		return err
	}
	// The sandbox's own pseudo-terminals (StartTerminal): a devpts
	// instance of its own, so its terminals are neither the host's nor
	// visible from it; ptmx is reached through the instance's node.
	// Without it (a kernel that refuses the mount) terminals fail to
	// start, naming /dev/ptmx, and nothing else changes.
	if err := os.Mkdir(filepath.Join(dev, "pts"), 0o755); err != nil {
		return err
	}
	// The instance holds at most sandboxPtys() terminals: the kernel
	// counts every instance's terminals against the host-wide
	// kernel.pty.max, so without max= one sandbox could take them all and
	// leave none for the terminals of the others.
	opts := fmt.Sprintf("newinstance,ptmxmode=0666,mode=0620,max=%d", sandboxPtys())
	if unix.Mount("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, opts) == nil {
		return os.Symlink("pts/ptmx", filepath.Join(dev, "ptmx"))
	}
	return nil
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// applyLandlock restricts the calling thread and everything it starts to the
// sandbox's file system allow-list and, with scoped, (ABI ≥ 6) scopes
// signals and abstract unix sockets to the sandbox.
func applyLandlock(cfg *agentConfig, scoped bool) (int, error) {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0, err
	}
	if abi < 1 {
		return 0, errors.New("not enabled")
	}
	devFiles := landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full").IgnoreIfMissing()
	// A terminal's programs reopen their controlling terminal through
	// /dev/tty (stty -F /dev/tty, a shell's job control, vi) and need its
	// ioctls; with the sandbox's own devpts (L3, L4), its pseudo-terminals
	// too (a program that runs its own terminals: script, tmux).
	ttyFiles := landlock.RWFiles("/dev/tty").WithIoctlDev().IgnoreIfMissing()
	if cfg.Namespaces {
		ttyFiles = landlock.RWFiles("/dev/tty", "/dev/pts").WithIoctlDev().IgnoreIfMissing()
	}
	writable := landlock.RWDirs(cfg.HostHome, cfg.HostTmp)
	if cfg.Namespaces {
		writable = landlock.RWDirs(cfg.Home, "/tmp", "/dev/shm")
	}
	if abi >= 2 {
		// Rename and link across directories of the writable trees (and
		// between them, on one file system): without the refer right
		// Landlock fails them with EXDEV. Moving a file out of these trees
		// stays impossible, since the destination needs the right too.
		// (Below ABI 2 asking for it would disable Landlock altogether.)
		writable = writable.WithRefer()
	}
	var rules []landlock.Rule
	if cfg.Namespaces {
		// The root is already only what the sandbox may see.
		rules = []landlock.Rule{landlock.RODirs("/"), writable, devFiles, ttyFiles}
	} else {
		rules = []landlock.Rule{
			landlock.RODirs("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc", "/dev").IgnoreIfMissing(),
			writable,
			devFiles,
			ttyFiles,
		}
	}
	// File system rights and IPC scopes (signals, abstract unix sockets),
	// not network ports: the network is governed by namespaces and seccomp.
	c := landlock.Config{HandledAccessFS: landlock.V11.HandledAccessFS}
	if scoped {
		c.Scoped = landlock.V11.Scoped
	}
	c = c.BestEffort()
	if err := restrictThread(c, rules...); err != nil {
		return 0, err
	}
	return abi, nil
}

// restrictThread enforces a Landlock ruleset on the calling thread only
// (which must be locked to its goroutine and have no_new_privs set).
func restrictThread(c landlock.Config, rules ...landlock.Rule) error {
	fd, flags, err := c.NewRulesetFD(rules...)
	if err != nil {
		return err
	}
	if fd < 0 {
		return nil
	}
	defer unix.Close(fd)
	return ll.LandlockRestrictSelf(fd, flags)
}

// deniedSyscalls return EPERM in every sandbox with seccomp: debugging
// other processes, kernel and mount administration, io_uring (which can
// bypass the socket rule), bpf, keyrings and namespaces.
var deniedSyscalls = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "io_uring_setup", "io_uring_enter",
	"io_uring_register", "mount", "umount2", "pivot_root", "unshare", "setns", "bpf",
	"perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "kexec_load",
	"kexec_file_load", "init_module", "finit_module", "delete_module", "open_by_handle_at",
	"name_to_handle_at", "swapon", "swapoff", "reboot", "acct", "syslog", "iopl", "ioperm",
	"quotactl", "fsopen", "fsmount", "fsconfig", "fspick", "move_mount", "open_tree", "mount_setattr",
	"lookup_dcookie", "vhangup",
}

// cloneNewFlags are the clone(2) flags that create namespaces. The
// filter refuses clone with any of them, as it refuses unshare: a sandbox
// gets no namespaces of its own beyond those the agent made. (CLONE_NEWTIME
// shares its bit with the exit signal in clone's first argument, and
// only unshare and clone3 accept it.)
const cloneNewFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// seccompErrno is the filter's return value that fails a syscall with errno e.
func seccompErrno(e unix.Errno) seccomp.Action {
	return seccomp.Action(uint32(unix.SECCOMP_RET_ERRNO) | uint32(e))
}

// allowedFamilies are the only address families a sandbox with a filter
// may open sockets of (an allow-list: a family the list does not name,
// known today or added to the kernel later, is refused): unix sockets, and
// those of its network, IPv4, IPv6 and netlink (allowedNetlink only). The
// others reach beyond the sandbox's network namespace or the kernel's
// common paths: AF_VSOCK is not namespaced at all (its port space is the
// host's, where a hypervisor's services listen on a VM host); AF_PACKET,
// AF_XDP and AF_KEY need privileges a sandbox lacks; AF_ALG, AF_TIPC,
// AF_RDS, AF_BLUETOOTH, AF_CAN and the like are rarely used protocols
// whose modules the kernel would load on demand. A refused family fails
// with EAFNOSUPPORT, as on a kernel built without it, which programs
// already handle.
var allowedFamilies = []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

// allowedNetlink is the one netlink protocol allowed: routing, which reads
// (and, with privileges the sandbox lacks, changes) the interfaces,
// addresses and routes of the sandbox's network namespace; getaddrinfo,
// ip and Go's net.Interfaces use it. The others (generic netlink and its
// many families, audit, uevents, netfilter, xfrm, sock_diag...) fail with
// EPROTONOSUPPORT, as an unknown protocol does.
const allowedNetlink = unix.NETLINK_ROUTE

// socketFamilies lists, for Info.Detail, the families allowedFamilies and
// allowedNetlink let a sandbox open; hostNetOff as in seccompProgram.
func socketFamilies(hostNetOff bool) string {
	if hostNetOff {
		return "unix"
	}
	return "unix, inet, inet6, netlink (routing)"
}

// socketSyscalls are the calls that make a socket of a chosen family.
var socketSyscalls = []string{"socket", "socketpair"}

// ioUringSyscalls can open sockets (and more) past a filter on socket.
var ioUringSyscalls = []string{"io_uring_setup", "io_uring_enter", "io_uring_register"}

// seccompProgram assembles the filter. In every form, every syscall of an
// architecture other than the native one (say the i386 interface, int
// $0x80, of an x86-64 process) and every x32 syscall fails with ENOSYS,
// whatever its number, and so does socketcall where the architecture has
// it, so that sockets are made through socket and socketpair alone, whose
// family the filter checks against allowedFamilies; io_uring fails with
// EPERM. With hostNetOff (the host's network namespace, network off) IP and
// netlink sockets fail with EPERM too. With full (L2, L4) clone3 fails with
// ENOSYS, so libc falls back to clone, whose flags the filter can see;
// deniedSyscalls and clone with namespace flags fail with EPERM. The rest
// is allowed.
func seccompProgram(full, hostNetOff bool) ([]bpf.RawInstruction, error) {
	info, err := arch.GetInfo(runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	has := func(n string) bool { _, ok := info.SyscallNames[n]; return ok }
	var names []string
	denied := ioUringSyscalls
	if full {
		denied = deniedSyscalls
	}
	for _, n := range denied {
		if has(n) {
			names = append(names, n)
		}
	}
	deny := seccomp.SyscallGroup{Action: seccompErrno(unix.EPERM), Names: names}
	if full && has("clone") {
		flagsArg := uint32(0) // clone's flags come first, but for s390x
		if runtime.GOARCH == "s390x" {
			flagsArg = 1
		}
		deny.NamesWithCondtions = append(deny.NamesWithCondtions, seccomp.NameWithConditions{
			Name:       "clone",
			Conditions: seccomp.ArgumentConditions{{Argument: flagsArg, Operation: seccomp.BitsSet, Value: cloneNewFlags}},
		})
	}
	enosys := seccomp.SyscallGroup{Action: seccompErrno(unix.ENOSYS)}
	if full && has("clone3") {
		enosys.Names = append(enosys.Names, "clone3")
	}
	if has("socketcall") {
		enosys.Names = append(enosys.Names, "socketcall")
	}
	// The unconditional group first: the library's program does not reload
	// the syscall number once a condition (clone's flags) has loaded an
	// argument, so a group after it would compare that argument.
	groups := []seccomp.SyscallGroup{enosys, deny}
	policy := seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: groups}
	insts, err := policy.Assemble()
	if err != nil {
		return nil, err
	}
	// The library's program lets a syscall of a foreign architecture
	// through to its default action (allow), unfiltered: put a check that
	// fails them in front, and one for x32 (which the library has too, but
	// this filter does not rely on it).
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: seccompDataArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccompErrno(unix.ENOSYS))},
	}
	if info.ID == arch.X86_64.ID {
		prog = append(prog,
			bpf.LoadAbsolute{Off: seccompDataNr, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: x32SyscallBit, SkipFalse: 1},
			bpf.RetConstant{Val: uint32(seccompErrno(unix.ENOSYS))},
		)
	}
	rules, err := socketRules(info, hostNetOff)
	if err != nil {
		return nil, err
	}
	prog = append(prog, rules...)
	prog = append(prog, insts...) // it loads what it needs itself
	return bpf.Assemble(prog)
}

// socketRules returns the filter's checks of socket and socketpair, which
// fall through to what follows for an allowed socket or another syscall.
// They are written here rather than as conditions of the library's
// policy: its program does not reload the syscall number after an
// argument check fails, so a second conditional rule for the same call
// would compare an argument with syscall numbers and let the call through.
// Every argument is compared whole (64 bits): a family or protocol with
// high bits set, which the kernel would drop, matches no allowed value.
func socketRules(info *arch.Info, hostNetOff bool) ([]bpf.Instruction, error) {
	type ins struct {
		bpf.Instruction
		jt, jf string // targets by label ("" falls through)
		label  string // label of this instruction
	}
	var code []ins
	add := func(i bpf.Instruction, jt, jf string) { code = append(code, ins{Instruction: i, jt: jt, jf: jf}) }
	label := func(l string) { code = append(code, ins{label: l}) }
	ret := func(e unix.Errno) { add(bpf.RetConstant{Val: uint32(seccompErrno(e))}, "", "") }
	lo, hi := uint32(0), uint32(4)
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		lo, hi = 4, 0
	}
	arg := func(n uint32) (uint32, uint32) { return seccompDataArgs + 8*n + lo, seccompDataArgs + 8*n + hi }
	add(bpf.LoadAbsolute{Off: seccompDataNr, Size: 4}, "", "")
	for _, n := range socketSyscalls {
		if nr, ok := info.SyscallNames[n]; ok {
			add(bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr)}, "check", "")
		}
	}
	add(bpf.Jump{}, "out", "")
	label("check")
	famLo, famHi := arg(0)
	add(bpf.LoadAbsolute{Off: famHi, Size: 4}, "", "")
	add(bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0}, "", "nofamily")
	add(bpf.LoadAbsolute{Off: famLo, Size: 4}, "", "")
	add(bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_UNIX}, "out", "")
	if hostNetOff {
		for _, f := range []uint32{unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK} {
			add(bpf.JumpIf{Cond: bpf.JumpEqual, Val: f}, "perm", "")
		}
	}
	add(bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_INET}, "out", "")
	add(bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_INET6}, "out", "")
	add(bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_NETLINK}, "netlink", "")
	label("nofamily")
	ret(unix.EAFNOSUPPORT)
	label("perm")
	ret(unix.EPERM)
	label("netlink")
	protoLo, protoHi := arg(2)
	add(bpf.LoadAbsolute{Off: protoHi, Size: 4}, "", "")
	add(bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0}, "", "noproto")
	add(bpf.LoadAbsolute{Off: protoLo, Size: 4}, "", "")
	add(bpf.JumpIf{Cond: bpf.JumpEqual, Val: allowedNetlink}, "out", "")
	label("noproto")
	ret(unix.EPROTONOSUPPORT)
	label("out")

	// Resolve the labels into forward skips.
	pos := map[string]int{}
	var out []ins
	for _, c := range code {
		if c.label != "" {
			pos[c.label] = len(out)
			continue
		}
		out = append(out, c)
	}
	skip := func(from int, l string) (uint32, error) {
		if l == "" {
			return 0, nil
		}
		to, ok := pos[l]
		if !ok || to <= from || to-from-1 > 255 {
			return 0, fmt.Errorf("socket rules: bad jump to %q", l)
		}
		return uint32(to - from - 1), nil
	}
	prog := make([]bpf.Instruction, len(out))
	for i, c := range out {
		t, err := skip(i, c.jt)
		if err != nil {
			return nil, err
		}
		f, err := skip(i, c.jf)
		if err != nil {
			return nil, err
		}
		switch x := c.Instruction.(type) {
		case bpf.JumpIf:
			x.SkipTrue, x.SkipFalse = uint8(t), uint8(f)
			prog[i] = x
		case bpf.Jump:
			x.Skip = t
			prog[i] = x
		default:
			prog[i] = c.Instruction
		}
	}
	return prog, nil
}

// hostNetOff reports whether the sandbox shares the host's network
// namespace with its network off (L2): IP sockets would be the host's.
func (cfg *agentConfig) hostNetOff() bool { return cfg.NoNetwork && !cfg.NewNet }

// Offsets in struct seccomp_data, and x86-64's __X32_SYSCALL_BIT.
const (
	seccompDataNr   = 0
	seccompDataArch = 4
	seccompDataArgs = 16
	x32SyscallBit   = 0x40000000
)

// applySeccomp installs the filter (the full one, or with full false the
// socket rules alone) on the calling thread only (no TSYNC: the forker
// thread, which every command descends from), with no_new_privs set.
func applySeccomp(cfg *agentConfig, full bool) error {
	raw, err := seccompProgram(full, cfg.hostNetOff())
	if err != nil {
		return fmt.Errorf("assembling the filter: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, in := range raw {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("loading the filter: %w", errno)
	}
	return nil
}

// hostCABundles are where distributions keep the bundle of trusted CA
// certificates, first match wins.
var hostCABundles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"}

// installEgressCA makes the egress proxy's CA trusted in the sandbox
// being assembled (at maps a sandbox path to its place in the new root):
// it writes egressBundle (the host's bundle plus the CA) and egressCAOnly
// into the new root, which becomes read-only, and binds the bundle over
// the host's bundle in the sandbox's /etc, so programs that read the
// system's trust store trust the proxy too. The host's files are not
// touched.
func installEgressCA(at func(string) string, ca string) error {
	var host []byte
	var hostPath string
	for _, p := range hostCABundles {
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if b, err := os.ReadFile(p); err == nil {
			host, hostPath = b, p
			break
		}
	}
	if err := os.MkdirAll(at(egressCADir), 0o755); err != nil {
		return err
	}
	bundle := append(append([]byte(nil), host...), '\n')
	bundle = append(bundle, ca...)
	if err := os.WriteFile(at(egressBundle), bundle, 0o444); err != nil {
		return err
	}
	if err := os.WriteFile(at(egressCAOnly), []byte(ca), 0o444); err != nil {
		return err
	}
	if hostPath != "" {
		dst := at(hostPath)
		if err := unix.Mount(at(egressBundle), dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind over %s: %w", hostPath, err)
		}
		if err := unix.MountSetattr(-1, dst, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}); err != nil {
			if err := unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
				return fmt.Errorf("remount %s read-only: %w", hostPath, err)
			}
		}
	}
	return nil
}
