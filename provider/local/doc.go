// Package local is the embedded default provider: sandboxes on this
// machine, with no account and no server, isolated as far as the host
// allows (Linux only for now: its isolation is built on Linux's
// namespaces, Landlock, seccomp and cgroups). On other systems New, and
// sandbox.Open of "" or "local://", fail with Unimplemented; use
// docker:// (provider/docker), memory:// for tests, or a cloud provider
// there.
//
// Importing the package registers the "local" scheme, which is also the
// default of sandbox.Open:
//
//	import _ "github.com/sandboxkit/sandbox/provider/local"
//
//	c, err := sandbox.Open(ctx, "")                         // same as "local://"
//	c, err := sandbox.Open(ctx, "local:///var/lib/sbx")     // root directory
//	c, err := sandbox.Open(ctx, "local://?isolation=l1")    // force a level
//
// URL query parameters: isolation=l0…l4 (WithIsolation), min_isolation=l0…l4
// (WithMinIsolation), lease=5m (WithDefaultLease), warm_pool=N
// (WithWarmPool), commands_as_root=true (WithCommandsAsRoot),
// network=isolated|host|none (WithNetwork). The URL path
// is the root directory (WithRoot); the default root is
// /var/lib/sandboxkit/local for root (below directories every user may
// search, which the sandboxes' users need) and
// <user cache dir>/sandboxkit/local for anyone else.
//
// # Re-execution
//
// The provider re-executes the program's own binary (/proc/self/exe) as two
// helpers, recognised by argv[0]: a small long-lived spawner that starts
// sandboxes (so their start does not copy the page tables of a large
// application), and one agent per sandbox through which every command runs.
// The package's init function dispatches to them before main runs, also in
// test binaries; Init does the same for programs that prefer to call it
// first thing in main or TestMain. Nothing else is needed in the program.
//
// # Isolation levels
//
// New probes once per process which level the host gives, by running the
// real set-up (sysctls and AppArmor states lie), and every sandbox reports
// what it achieved in Info.Isolation ("L4 full", "L3 namespaces", ...) and
// Info.Detail: "level", "isolation_missing" (why not more), "landlock"
// ("ABI 7"), "seccomp", "socket_families", "cgroup_limits", "memory_max",
// "pids_max", "open_files_max", "limits_basis", "limits_note",
// "nested_userns", "network"
// ("isolated ...", "host" or "off", with "network_note" saying why),
// "host_home", "root", "user" (at L1 and L2 on a root host: the uid
// commands run as, or why root), "cgroup_escape" and, when paused,
// "paused_by". A level is never reported higher than what was set up.
//
//   - L0 none: plain host processes with the home as working directory.
//     Only when asked for (WithIsolation(L0)). On a root host they run as
//     the sandbox's own unprivileged user, as at L1.
//   - L1 process: L0 plus a subreaper agent that ends whole process trees,
//     a new session per command, a scrubbed environment, no capabilities,
//     rlimits (no core dumps) and the file API through os.Root. Commands can
//     read and write whatever their user can, and reach the network
//     (CreateOptions.NoNetwork is refused with FailedPrecondition). On a
//     root host they run as an unprivileged uid and gid of their sandbox's
//     own (unless WithCommandsAsRoot; Detail "user" is "uid N"), drawn
//     from the block 0x70000000–0x70FFFFFF that distributions leave unused
//     and reserved in <root>/.uids; its home and temporary directory are
//     0700 and that user's, so one sandbox's commands can neither read nor
//     write another's files nor signal its processes. That needs every
//     directory above the root to be searchable by any user (the default
//     root is; Detail "user" says when a root is not, and commands then
//     run as root). On a host without root they run as the host user, and
//     sandboxes at L0 and L1 are not isolated from each other: a command
//     can read and write other sandboxes' homes and reach their agents.
//   - L2 Landlock+seccomp: L1 plus a Landlock allow-list (read-only /usr,
//     /etc, /bin, /lib*, /opt, /proc, /dev; read-write home and a private
//     temporary directory, $TMPDIR, in which files may be renamed and
//     linked across directories but never out) with signals and abstract
//     sockets scoped to the sandbox, and a seccomp filter (no ptrace, mount, bpf, io_uring,
//     kernel keyrings, namespaces...; sockets of the allowed address
//     families only, see below; with the network off, the default at L2,
//     no sockets but unix ones). Host processes stay visible in /proc. On a root host
//     commands run as their sandbox's own uid, as at L1.
//   - L3 namespaces: user, mount, pid, uts, ipc and (unless the network is
//     the host's) net namespaces; a tmpfs root holding read-only binds of /usr, /etc and
//     /opt, the merged-/usr symlinks, a private /tmp, /proc and a minimal
//     /dev; the home bound read-write at /home/user; pivot_root; commands run
//     as uid 1000 with no capabilities and cannot create user namespaces.
//     On a root host the sandbox user is mapped to the unprivileged uid
//     65534, never to root. No namespace confines AF_VSOCK, so L3 applies
//     the seccomp filter's socket rules alone (see below): io_uring and
//     the 32-bit (i386, x32) syscall interfaces fail at L3 too. Where the
//     kernel has no seccomp, Detail "socket_families" says so, and a
//     sandbox at L3 reaches the host's vsock port space.
//   - L4 full: L3 plus Landlock, seccomp and cgroup limits (memory, default
//     2 GiB or Resources.MemoryMiB; pids, see below; CPUs when
//     Resources.CPUs is set), which need a writable cgroup hierarchy (root
//     or delegation).
//
// # Address families
//
// With seccomp (L2, L3, L4) a sandbox opens sockets (socket, socketpair)
// of an allow-list of address families, those of its own network: unix,
// inet, inet6 and netlink with the routing protocol only (interfaces,
// addresses and routes, as getaddrinfo, ip and Go's net.Interfaces read
// them). Every other family fails with EAFNOSUPPORT, as on a kernel
// without it, and every other netlink protocol with EPROTONOSUPPORT; at
// L2 with the network off, inet, inet6 and netlink fail with EPERM. The
// families left out reach past the sandbox's network namespace or into
// rarely used kernel code: AF_VSOCK is not network-namespaced (its port
// space is the host's, where a hypervisor's services listen on a VM host),
// AF_PACKET, AF_XDP and AF_KEY need privileges, and AF_ALG, AF_TIPC,
// AF_RDS, AF_BLUETOOTH, AF_CAN and others load kernel modules on demand.
// Detail "socket_families" lists what a sandbox may open.
//
// # Limits
//
// Every sandbox's limits are computed at Create from the host's tables,
// read from /proc then, so that no sandbox can exhaust them for the rest
// of the host: its cgroup's pids.max is at most 1/8 of the host's tasks
// (the lower of kernel.pid_max and kernel.threads-max) and at most 4096,
// and RLIMIT_NOFILE (soft and hard alike, for the agent and every
// command, which cannot raise it) is such that pids.max times it stays
// within 1/8 of fs.file-max: 1024 open files per process, with pids.max
// lowered (down to 256) where the file table is too small for both, and
// more files (up to 65536, and fs.nr_open) where it is large. Linux has
// no per-cgroup count of open files, so pids.max times the per-process
// limit is the sandbox's total; the memory limit, which charges the
// kernel memory of open files to the sandbox, bounds them too but more
// loosely (some 450 bytes a file: 2 GiB is room for millions). A host
// with fs.file-max 2,466,248 and pid_max 32768 gives 301 processes of
// 1024 files. All sandboxes together (the cgroup their cgroups are made
// under, shared by every Runtime of the host user's cgroup) hold at most
// half the host's tasks, and at most as many processes as keep their open
// files within half of fs.file-max (1204 on that host), so that many
// sandboxes at their own limits cannot fill the file table either. The open files apply at every level; pids.max and the
// memory limit (2 GiB by default) where a writable cgroup hierarchy
// exists (at L0 and L1 from the first command). Memory and CPUs asked in
// Resources beyond what the host has (MemTotal, its CPUs) are lowered to
// it, with a note: Detail "memory_max", "pids_max", "open_files_max",
// "limits_basis" (the host's values) and "limits_note" report them.
//
// Landlock, seccomp, no_new_privs and the capability drop confine the
// agent's forking thread, from which every command descends (the agent's
// other threads serve the socket); the agent itself is not dumpable.
//
// Without usable user namespaces the provider falls back to L2, and without
// Landlock to L1. WithMinIsolation makes New (and Create) fail with an
// *IsolationError naming what is missing; WithIsolation, or the
// SANDBOX_LOCAL_ISOLATION environment variable (for tests and CI: "l1"),
// chooses the level.
//
// # Sandboxes on disk
//
// Each sandbox is a directory <root>/<id> holding its home ("home"), a
// private temporary directory ("tmp", used at L1 and L2), meta.json (id,
// labels, env, creation time, requested level: written once), a state
// record ("state": state, lease end, achieved level and why, cgroups, agent
// pid; rewritten in place under a flock shared by every process using the
// root), the agent's socket and its log. Get, List and label filters read
// these files, so a new process sees the sandboxes an earlier one created;
// a sandbox whose metadata is corrupt is skipped by List (and logged) while
// Get reports it. The env file may hold secret values: every file is 0600
// under a 0700 directory (0711 when L0 to L2 commands run as a user of
// their own, which must pass through it, and through the root, 0711 too,
// to its home).
//
// GetOrCreate is single-flight across every process sharing the root: a
// lock file per key in <root>/.keys (left in place, empty) serialises the
// look-up and the create (CreateKeyed).
//
// # Disk
//
// Resources.DiskGiB is enforced at L3 and L4 on a root host with
// mkfs.ext4 (Debian package e2fsprogs) and loop devices: the home is then
// an ext4 file system in a sparse image of that size ("home.img" in the
// sandbox's directory), loop-mounted on the home's host path, so the file
// methods and the sandbox see the same files. Writing past it fails with
// ENOSPC inside the sandbox and ResourceExhausted through the file
// methods. The image outlives a reboot: the next agent start or file call
// mounts it again; Destroy unmounts and removes it. Elsewhere (L0 to L2,
// a host without root) the home is unbounded and Detail["disk"] says so;
// /tmp at L3 and L4 is a tmpfs of 512 MiB in every case.
//
// # Snapshots
//
// The Runtime is a driver.Snapshotter in filesystem mode. A snapshot
// copies what a sandbox's commands may write: its home (on its disk image
// too, where it has one) and its temporary directory (the private $TMPDIR
// at L0 to L2; the /tmp tmpfs at L3 and L4 while its agent runs, read
// through the agent's root and restored as the sandbox's user). The copy
// is taken with the sandbox frozen (the cgroup freezer Pause uses, else
// SIGSTOP through the agent) and thawed after; a paused sandbox stays
// paused. Files are reflinked (FICLONE) where the root's file system
// clones them (XFS, btrfs, bcachefs), else copied keeping their holes
// (SEEK_DATA/SEEK_HOLE: a 1 GiB sparse file stays a few blocks), with
// modes, times, symbolic links, hard links, FIFOs and owners (the source
// sandbox's user becomes the new sandbox's). Each snapshot is a directory
// <root>/snapshots/<id> with its meta.json, made under a temporary name
// and renamed into place when complete: it survives the Runtime and the
// program, and neither List nor the reaper of sandboxes touches it; New
// removes what interrupted snapshots left. A sandbox created from one
// (CreateRequest.FromSnapshot) starts with a copy (a reflink where the
// file system clones) of its files. Snapshot.Detail says how the files
// were copied ("copy": "reflink" or "copy") and what was kept;
// Capabilities.SnapshotNote what the host offers. The Runtime is a
// driver.Forker too: Fork freezes the source once and copies its files
// straight into each new sandbox (at most 4 at a time), with no snapshot
// in between.
//
// Full mode (processes and memory) is not offered: it is
// FailedPrecondition naming what the host lacks, and
// Capabilities.SnapshotNote and each snapshot's Detail["full_mode"] say
// the same. It would need CRIU (Debian package criu) passing `criu
// check` on the host's kernel (probed once per process, bounded: Debian
// 12's criu 3.17 fails it on kernels from 6.13 on, whose vDSO layout it
// predates; criu 4.2 passes), the capabilities CRIU dumps with
// (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE, CAP_SYS_PTRACE,
// CAP_SYS_RESOURCE: a container's bounding set often lacks the last),
// and a restore of the checkpointed processes into the new sandbox,
// which is not built at any level: CRIU gives restored processes their
// old process ids, which at L1 and L2 (no pid namespace) the source
// sandbox's processes, running on, still hold; at L3 and L4 the
// processes' namespaces belong to the sandbox's user namespace, which
// CRIU run from the host refuses to dump without its init (the agent)
// and CRIU run inside it has not the capabilities to.
//
// # Network
//
// A sandbox created with the network on (CreateOptions.NoNetwork unset)
// gets, by default, an isolated network: at L3 and L4 its own network
// namespace, connected to the outside by pasta (Debian package passt), a
// user-space network stack running outside the sandbox. Outbound TCP, UDP
// and ICMP work; no port is forwarded in either direction and the gateway
// is not mapped to the host, so nothing listening on the host's loopback
// (databases, admin ports, metadata proxies) nor the host's abstract unix
// sockets can be reached. pasta joins the sandbox's cgroup and, where the
// host allows (root), its pid namespace, so that it ends with the sandbox
// however that ends; elsewhere Destroy ends it. Private ranges of the host's own network are not filtered.
//
// Where that cannot be had, the sandbox gets no network (only its own
// loopback at L3 and L4; no sockets but unix ones at L2), and
// Detail["network_note"] says why: pasta is not installed, or the level
// has no namespaces (L2). The host's network is given only when asked for,
// with WithNetwork(NetworkHost), the URL parameter network=host or the
// provider option "network": "host" of one sandbox; asking for
// "isolated" where it cannot be had is FailedPrecondition naming what is
// missing. At L0 and L1 commands always use the host's network.
//
// WithNetwork(NetworkNone) (URL parameter network=none) turns the default
// around for a Runtime whose sandboxes mostly need no way out: a sandbox
// whose create asks for no network policy gets no network (its own
// loopback only) and costs no pasta process, while one created with a
// policy gets what the policy asks (an explicit allow-all, the isolated
// network), and SetNetwork can still open one later through the egress
// proxy. A sandbox without pasta starts sooner (its agent waits for no
// routes) and spares the host pasta's start-up, about a tenth of a CPU
// second on a small host.
//
// On a root host pasta keeps uid 0 (--runas 0): it must join a user
// namespace that root created. It drops its capabilities and confines
// itself (own mount namespace, seccomp) once set up; sandboxed code sees
// it in its process list but, another user, cannot signal or trace it.
// On a host without root, if an agent ends its sandbox on its own (lease
// or directory gone) with no Runtime around, its pasta runs on until a
// Runtime destroys the sandbox.
//
// # Egress policy and brokered secrets
//
// At L3 and L4 a sandbox whose network policy (CreateOptions.Network) is
// an allow-list, has deny entries, or that has brokered secrets runs
// behind an egress proxy: its network namespace has no route out, only
// its loopback, as with NoNetwork; the sandbox's agent listens on
// 127.0.0.1:3128 there before any command runs and hands each connection
// (the socket itself) to a proxy process (internal/egress) that runs as
// the host user in the host's network namespace, outside every namespace
// of the sandbox, which cannot see, signal or trace it. It runs in the
// sandbox's cgroups, as pasta does, so the memory, processes and CPU a
// sandbox makes it spend (a flood of connections, say) count against the
// sandbox's own Resources, not the host's; its RLIMIT_NOFILE is two per
// connection it serves at once plus a little (640). Pause freezes it with
// the sandbox's commands, and SetNetwork on a sandbox so paused fails with
// sandbox.ErrPaused until Resume. A fork of a sandbox behind its proxy is
// behind a proxy of its own, whatever policy it is given (an allow-all
// included), never on pasta. The proxy serves
// HTTP CONNECT, plain HTTP proxy requests and SOCKS5, resolves names
// itself, checks each name and every address it resolves to against the
// policy (a loopback, private or link-local address only where the
// policy's CIDRs name it, so DNS rebinding fails), and refuses with a
// 403 whose body names the host and the reason. Commands get HTTP_PROXY,
// HTTPS_PROXY, ALL_PROXY (and their lower-case forms) set to
// http://127.0.0.1:3128 and NO_PROXY=localhost,127.0.0.1,::1; a program
// that ignores them has no route anywhere. Other protocols (UDP, ICMP,
// DNS) have no way out. Info.Detail "egress" is "proxy" and "network"
// says so.
//
// With brokered secrets the proxy intercepts TLS to their hosts only
// (other HTTPS passes through by its CONNECT host) with a CA of its own,
// made when it starts: the agent writes the host's CA bundle plus that CA
// to /run/sandboxkit/ca-certificates.crt (read-only), binds it over the
// sandbox's view of the system bundle (/etc/ssl/certs/ca-certificates.crt
// on Debian; the host's file is untouched) and commands get
// SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, PIP_CERT and
// GIT_SSL_CAINFO pointing at it, NODE_EXTRA_CA_CERTS at the CA alone
// (/run/sandboxkit/egress-ca.pem). The secrets' values are kept in
// egress.json, 0600 in the sandbox's directory, with the policy; they are
// never in the sandbox's files, environment, process list, meta.json or
// state, nor on the proxy's command line or in its environment, and the
// proxy is not dumpable. The CA is valid for 397 days.
//
// The proxy is started with the agent and ends with it (its connection to
// the agent closes), and Destroy ends it too; it outlives the Runtime that
// started it, as the sandbox does. Runtime.SetNetwork changes its policy
// at once (and in egress.json, so a later Runtime, or the proxy started
// with the agent again after a reboot, has it); on a sandbox without
// network it starts the proxy; on one with the isolated network of pasta
// or the host's it refuses anything but allow-all (FailedPrecondition:
// routes out cannot be taken back safely while the sandbox runs). Below
// L3 there is no network namespace to put behind a proxy: only deny-all
// (L2) and allow-all are offered, and any list or secret is
// FailedPrecondition at Create. WithEgressHosts gives the proxy a table of
// names to addresses (tests map names to servers on 127.0.0.1), and
// WithEgressRootCAs the CAs it trusts for brokered hosts.
//
// # Agents
//
// Every connection to an agent opens with the sandbox's key (32 random
// bytes, compared in constant time) before the agent reads anything else;
// a client without it gets the connection closed. The key is kept in the
// sandbox's directory (file "key", 0600), which no sandbox can read: L3
// and L4 do not see the host's file system, Landlock keeps L2 out of it,
// and on a root host L1 and L2 commands run as another user. The agent
// gets it through the spawner's socket pair, never through a file or its
// environment, and is not dumpable. The socket itself is 0600 in a
// directory only the host user may list.
//
// # Ports
//
// Runtime.Expose (sandbox.Sandbox.Expose) makes a port of a sandbox
// reachable from the host without giving the sandbox any network: it
// returns http://127.0.0.1:<ephemeral port> with a per-endpoint token
// that every request must carry in the header TokenHeader, and a unix
// socket (Endpoint.Socket, 0600 in a 0700 directory) for protocols other
// than HTTP/1.x. Each connection is opened by the sandbox's agent inside
// the sandbox (its network namespace at L3 and L4) and relayed on the
// host, so it works with CreateOptions.NoNetwork and with the isolated
// network, and never listens beyond loopback. The loopback port is open
// to every user of the host, so the relay checks the token of each TCP
// connection's first request before the sandbox's server sees a byte.
// Expose checks at once that something accepts connections on the port
// (FailedPrecondition otherwise); at most ExposeOptions.MaxConns
// connections (DefaultMaxConns) are relayed at once, and one idle for
// ExposeOptions.IdleTimeout (DefaultIdleTimeout) is closed. Destroy and
// Runtime.Close close the endpoints.
//
// # Commands
//
// Exec and Start send the command to the sandbox's agent, which forks it
// with the home as default working directory, the environment PATH, HOME,
// USER, LOGNAME, SHELL, LANG, TMPDIR, PWD, then the sandbox's env, then the
// command's. Output streams back live, split and byte-exact. Shell lines
// run with /bin/sh -c; a missing program exits 127. When the command's
// timeout ends (or, for Exec, the caller's context), its process group and
// every descendant are killed (but see Limits for detached daemons). At L0 and L1 the agent starts on first use;
// at L2 and above with the sandbox. Agents outlive the Runtime (and the
// program): a later process can attach to their background processes by
// pid. If an agent is gone (after a reboot, for instance), the next command
// starts a new one.
//
// Exec's output is complete: everything the command wrote before it exited
// is delivered, however loaded the host. A descendant that keeps stdout or
// stderr open after the command exited (a daemon started without
// redirecting them) has 200 ms to close them; then the agent reads what
// was written up to that moment and stops reading.
//
// A cold create at L3 or L4 costs one start of the program's binary plus
// the set-up (about 2× an os/exec of the binary). From a Runtime's second
// sandbox of a kind (namespaces, network) on, the spawner starts the next
// one's agent ahead, with its pasta for the isolated network: an idle
// process in fresh namespaces, in the spawner's cgroup, that runs nothing
// until a Create hands it the sandbox's cgroups, descriptors and
// configuration; it is confined then as any agent is, and ends with the
// spawner (not with WithWarmPool, which starts whole sandboxes ahead). A
// Create then costs the set-up alone. Set SANDBOX_LOCAL_TRACE=1
// to have every create print where its time went. WithWarmPool keeps
// sandboxes started ahead, so that a Create with default settings only
// renames a directory and writes metadata. New also removes what dead
// processes left in the root (pooled sandboxes, interrupted destroys).
//
// # Terminals
//
// StartTerminal asks the agent for a pseudo-terminal: it opens one inside
// the sandbox (from a devpts instance of the sandbox's own, mounted with
// its /dev, at L3 and L4; from the host's /dev/ptmx at L1 and L2) and
// forks the program as it forks commands, so the program runs as the same
// user under the same Landlock rules, seccomp filter and cgroup; it is a
// session leader with the terminal as its controlling terminal, so echo,
// line editing, job control, Ctrl-C and SIGWINCH work, and programs may
// reopen /dev/tty (and, at L3 and L4, the sandbox's own /dev/pts). With no
// program the terminal runs bash -l (sh -l without bash), TERM is
// xterm-256color unless set. The agent keeps the terminal until its
// program exits: AttachTerminal reaches it by id from any process, and a
// client that goes away leaves it running. Destroy ends it.
//
// Pseudo-terminals are a host-wide table (kernel.pty.max), so a sandbox
// holds at most 64 of them, or 1/8 of what the host leaves to devpts
// instances (kernel.pty.max minus kernel.pty.reserve) when that is less:
// at L3 and L4 that is the max= of its own devpts instance, and a
// StartTerminal while its programs hold them all fails ResourceExhausted;
// at L1 and L2 the agent refuses the terminal beyond it with
// ResourceExhausted naming the cap. Input is written to the terminal by
// the agent apart from the resizes and signals, so Ctrl-C reaches a
// program that does not read a paste; a Write of more input than the
// program reads is held back (bounded by its context) once 16 frames of
// up to 32 KiB wait in the agent.
//
// # Files
//
// The file methods serve the sandbox's file system as its commands see
// it, with their permissions. At L3 and L4 that is the sandbox's own root
// (its /tmp, the read-only /usr and /etc, the home), reached through the
// agent's /proc/<pid>/root; on a root host they act with the file system
// identity of the sandbox's user (setfsuid on a thread of their own), so a
// read-only place is PermissionDenied and a file the user may not read
// stays unread. /proc, /sys and /dev are not served (PermissionDenied).
// At L0, L1 and L2 they serve the host's file system as the commands see
// it: with their user's rights (setfsuid to the sandbox's own uid on a
// root host) and, at L2, on a thread confined by the same Landlock
// allow-list, so ReadFile("/etc/os-release") works and a write to /usr
// or /etc (or, at L2, the host's /tmp) is PermissionDenied. The home and
// the private temporary directory are served as views of their own, so a
// link in the home leading out of it matches sandbox.ErrPathEscape, and
// Rename moves files within one of the home, the temporary directory or
// the rest (PermissionDenied across them: copy, then remove). Where the
// commands run as root (WithCommandsAsRoot, or a root directory other
// users cannot reach), and at L3 and L4 while no agent runs (after a
// reboot), they serve the home only: a path elsewhere is
// PermissionDenied, and the file methods never write the host's /etc. Every
// request works through os.Root on the host side, streamed (io.Copy keeps
// the kernel's copy fast paths), so neither ".." nor a symbolic link
// planted in the sandbox reaches beyond what is served: an absolute link
// is read in the sandbox's terms (one to the home, as Info.Home names it,
// is followed there) and one leading out of what is served matches
// sandbox.ErrPathEscape. Upload writes a temporary file next to the
// target and renames it over the target after the last byte, so a failed
// upload leaves the target as it was. Upload and Download refuse FIFOs,
// devices and sockets (FailedPrecondition) rather than block on them.
//
// # Pause, lease, destroy
//
// Pause freezes every process of the sandbox with cgroup v2 cgroup.freeze,
// else the v1 freezer, else SIGSTOP through the agent; Exec and writes then
// fail with sandbox.ErrPaused. Destroy ends every process of the sandbox,
// at every level, before it removes the directory and cgroups: at L3 and
// L4 through the death of the sandbox's PID 1 (and cgroup.kill); below,
// where there is no pid namespace, by killing until none is left the
// agent's descendants (the agent is a subreaper, so a daemon that called
// setsid and double-forked is still one), the processes of the sandbox's
// cgroups and those whose environment carries the sandbox's marker
// (SANDBOXKIT_ID=<id>, set for every command below L3), then the agent,
// then the same once more. At L0, and at L1 when commands run as the host
// user, a command can move itself out of the sandbox's cgroup (Detail
// "cgroup_escape" says so); as a user of its own and at L2 it cannot. A sandbox whose lease ends is destroyed (paused with AutoPause)
// by the reaper of any open Runtime, and by the next Get or List of any
// process. Without either, the agent itself ends the sandbox's processes
// 30 seconds after the lease (unless the sandbox pauses at its lease end),
// or as soon as its directory disappears; the directory is then removed by
// the next Runtime. DefaultLease is 5 minutes. Commands inherit no
// descriptor but their stdin, stdout and stderr, and start with every
// standard signal at its default action and none blocked, whatever the
// program ignores or blocks (a program started by nohup, or in the
// background of a script, ignores SIGHUP or SIGINT; perf blocks SIGWINCH;
// both survive exec): a helper started with signals blocked re-executes
// itself once with none.
//
// # Limits
//
// At L0, and at L1 when commands run as the host user, a command can read
// another sandbox's agent key and so reach its agent: sandboxes there are
// not isolated from each other. On a root host, where each sandbox has a
// user of its own, L0 and L1 commands still read whatever any user may
// (world-readable host files) and see every process of the host. Two root directories draw their users
// from one block independently: they may, rarely, share one.
//
// A command's timeout or cancellation kills its process group and the
// processes that descend from it at that moment. A process that left both
// before then, by starting a session of its own (setsid) from a child that
// then exited (a double-forked daemon, as in "(setsid cmd &)"), has been
// reparented to the agent and is no longer attributable to the command: it
// keeps running until it exits, the sandbox's lease ends or the sandbox is
// destroyed (which ends every process of the sandbox at every level). At
// L4 it still counts against the sandbox's memory and pids limits; at L1
// and L2 nothing bounds it but the sandbox's end. A process that both left
// the cgroup and dropped the marker from its environment (exec env -i),
// at L0 or L1 as the host user, is missed by Destroy if the agent died
// before it.
//
// With network=host a sandbox reaches every service of the host's
// loopback and, at L3, the host's abstract unix sockets; an isolated
// network does not filter the private ranges of the host's own network.
// If a sandbox's egress proxy dies on its own, the sandbox's connections
// through it fail (closed: the relay waits 5 seconds for a proxy, then
// closes them) until SetNetwork starts another or, for a sandbox with
// brokered secrets, whose CA must be installed again, the agent starts
// again. On a root host the proxy runs as root, as pasta does; it is
// outside the sandbox's namespaces, where sandboxed code cannot name it.
// Templates are not supported:
// the sandbox runs the host's /usr and /etc.
//
// # Directory watch and process list
//
// Watch runs inotify in the sandbox's agent, inside the sandbox's
// namespaces, so paths are those the sandbox sees and nothing outside it
// is watched; each directory is added as the sandbox's user (a directory
// it may not read is PermissionDenied). A recursive watch adds each new
// directory and then lists it, so files created in it before its watch
// was added are reported too (possibly twice); inotify's queue overflow is
// reported as FileOverflow. Below the watched directory no symbolic link
// is followed: a directory replaced by a link to elsewhere is opened
// without following it, watched through the open file and listed from it,
// so nothing outside the tree is reported. A burst (a tree of many files
// moved in) is sent in frames of at most 1024 events and about 1 MiB;
// past 16384 events pending in the agent one FileOverflow stands for the
// rest. inotify's limits count per host user, which the sandboxes may
// share: a sandbox gets 1/8 of fs.inotify.max_user_watches and of
// max_user_instances. At L3 and L4 that share is its user namespace's
// user.max_inotify_watches and user.max_inotify_instances, which bound
// every process of the sandbox (the agent's watches included; a nested
// namespace cannot raise them); at every level the agent adds at most
// that many watches for all of the sandbox's watches. Beyond it a watch
// fails with ResourceExhausted when it starts, and a directory created
// later that cannot be watched is reported as FileOverflow. Events reach the client as they happen
// (bench: p50 under 1 ms). Processes reads /proc in the agent: at L3 and
// L4 its pid namespace, below that the agent's descendants (every
// command's tree, orphans included), never the agent itself or a zombie;
// Handle marks the processes Start started.
package local
