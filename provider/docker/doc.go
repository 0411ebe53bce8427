// Package docker is the sandbox provider for containers run by a Docker
// Engine (API 1.41 or later: Docker 20.10 and newer), with gVisor when the
// engine has the runsc runtime. Import it for its side effect to use
// "docker://" URLs:
//
//	import _ "github.com/sandboxkit/sandbox/provider/docker"
//
//	c, err := sandbox.Open(ctx, "docker://?image=debian:bookworm")
//
// # Configuration
//
// The engine is DOCKER_HOST (or ?host=unix:///path/docker.sock), else the
// engine's default socket. URL parameters: host, image (the template used
// when CreateOptions.Template is empty; also SANDBOX_DOCKER_IMAGE), user
// (name, uid or uid:gid; default the image's user, or 1000:1000 when that
// is root), home (default the image's working directory for the image's
// own user, else /home/sandbox, created for a numeric user), runtime
// (runsc for gVisor), network (the network joined when
// CreateOptions.NoNetwork is false; default none, so a sandbox never
// reaches the engine's default bridge unless asked), readonly (1: a
// read-only root file system; WithReadOnlyRoot), keyfile (the owner key:
// see below; WithKeyFile). The provider never pulls: the image must be on
// the engine.
//
// # Mapping onto the sandbox contract
//
//   - A sandbox is a container named sandboxkit-<MAC> whose main process
//     only keeps it running, under the engine's init (--init), with every
//     capability dropped, no-new-privileges, limits, and a disk size where
//     the storage driver allows it (else Create fails, saying so). Labels
//     are Docker labels (prefixed dev.sandboxkit.label.), so List filters
//     on the engine.
//   - Limits: Resources.MemoryMiB, else DefaultMemoryMiB (2 GiB, as the
//     local provider's L4), with swap equal to it (no swap on top, so the
//     limit holds); Resources.CPUs, else DefaultCPUs (2, or the engine's
//     CPU count when smaller); DefaultPidsLimit processes. Info.Detail
//     reports them as set at Create: "memory_mib", "cpus", "pids_limit".
//   - With readonly=1 the root file system is read-only: /tmp, the
//     provider's state directory and the home directory's parent (the
//     home itself when its parent is /) are anonymous volumes, each
//     starting as a copy of the image's directory (so /tmp keeps the
//     image's mode) and removed by Destroy. Create makes the home
//     directory inside its parent's volume, owned by a numeric user.
//     Writing anywhere else is PermissionDenied, from the file methods as
//     from commands (EROFS); uploads stay atomic (the temporary file is
//     beside the target, on the same volume).
//   - Network policy: deny-all (and NoNetwork) is the engine's none
//     network; allow-all is the network of ?network= when one is set. A
//     policy with domain or CIDR entries, allow-all on a Runtime that
//     joins no network, and brokered secrets are enforced by the egress
//     proxy of package internal/egress (HTTP, HTTPS and SOCKS5): the
//     container runs on the none network, whose only way out is a
//     listener on its loopback, 127.0.0.1:3128, which a helper process
//     (this binary re-executed, argv[0] sandboxkit-docker-egress and the
//     container's id) opens inside the container's network namespace and
//     serves from the host's; never a bridge. Commands get HTTP_PROXY,
//     HTTPS_PROXY, ALL_PROXY and NO_PROXY (both cases); with brokered
//     secrets also SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE,
//     PIP_CERT and GIT_SSL_CAINFO naming /.sandboxkit/ca-certificates.crt
//     (the image's /etc/ssl/certs/ca-certificates.crt and the proxy's CA)
//     and NODE_EXTRA_CA_CERTS naming /.sandboxkit/egress-ca.pem, both
//     root's and read-only. The helper runs in a session of its own, so
//     it outlives the Runtime and the program as the container does; it
//     ends with the container's main process and Destroy (hence the
//     reaper) kills it too. Resume of a stopped container starts a new
//     one with the recorded policy; the secrets' values lived only in the
//     old helper's memory, so their hosts then get the placeholders,
//     never a value. The helper needs root and an engine on this host (its
//     unix socket's peer is a process here) with a runc-like runtime:
//     elsewhere (a remote or another namespace's engine, a non-root
//     program, runsc) Capabilities.NetworkPolicy declares none of it and
//     such a policy is FailedPrecondition, saying why.
//     WithEgressHosts, WithEgressDialOverride and WithEgressRootCAs point
//     the proxy at test servers.
//   - Secrets and `docker inspect` (checked by TestSecretsInInspect):
//     create-time environment values are written to a file in the
//     container (/.sandboxkit/env, readable by the sandbox's user only)
//     that every command sources, so the container's inspect does not
//     show them (its Config.Env is the image's); per-command values go in
//     the exec request, whose inspect (/exec/ID/json) does not show the
//     environment either. What inspect does show: labels, the image's
//     environment, and every exec's arguments (ProcessConfig.arguments, as
//     `docker top` and ps in the sandbox do), so pass a secret in Env,
//     never in Args, Shell or labels. What else reads the values: the
//     engine's owner through `docker cp` or `docker commit` (the file is
//     in the container's writable layer, or its state volume with
//     readonly=1), and anyone who may read /proc/PID/environ of a command.
//   - Exec goes through the engine's exec API; the multiplexed stream is
//     split into stdout and stderr as it arrives. Every command runs under
//     a small sh wrapper as the sandbox's user, in a session of its own: a
//     watchdog inside the container kills its whole process group when
//     Command.Timeout expires, and when the command exits the wrapper ends
//     what is left of its process group (start a background process with
//     ProcessRuntime to keep one). An ended ctx kills every process that
//     carries the command's token in its environment, whatever session it
//     moved to. A command killed by a signal reports the shell's 128+N:
//     the engine's exec inspect has only an exit code (runc reports a
//     signal n as 128+n there too), so the provider cannot tell a signal
//     from "exit 128+n" and ExitStatus.Signal stays 0
//     (Capabilities.ReportsSignal is false).
//   - The engine gives an exec's output streams a bounded time (about two
//     seconds) to drain once the exec exits, then closes them: on a
//     starved host the tail of the output was lost. So an Exec without
//     stdin keeps its exec alive until the client has all of it: once the
//     command ended, the wrapper writes an end mark (the exec's random
//     token between control characters) on each stream and waits for the
//     client, which acknowledges on the exec's stdin once both marks
//     arrived; the marks never reach the caller, nor does output written
//     after them (by a process that left the command's process group). An
//     Exec with stdin, whose stdin is the command's, has no handshake. A
//     background process's output goes to files in the container; once
//     it has ended, the client compares what it received with the files'
//     sizes and follows again from where a stream stopped short.
//   - Terminals (driver.TerminalRuntime) are execs with a TTY: the engine
//     allocates the pseudo-terminal and makes the program its session
//     leader, so Ctrl-C, job control and SIGWINCH work as in any terminal.
//     The program runs as Exec's commands do (the sandbox's user, the
//     create-time environment, a watchdog for the Timeout). Resize is the
//     engine's exec resize; Signal signals the terminal's foreground
//     process group; the exit status is the exec's exit code (128+N for a
//     signal, as for Exec). The engine cannot attach to an exec that
//     already runs, so only the Runtime that started a terminal keeps its
//     stream: closing a handle leaves the program running and that
//     Runtime's AttachTerminal reaches it again, but another Runtime (in
//     this or another OS process) gets NotFound, although background
//     processes do attach across clients (Capabilities.AttachAcrossClients
//     speaks of those). Closing the Runtime drops its terminals' streams;
//     their programs run on, unreachable, until they exit or the sandbox
//     is destroyed.
//   - File methods run as the sandbox's user through exec (with the
//     permissions of its commands), except Stat and Download, which use the
//     engine's archive endpoint (as root: they can read what the user
//     cannot). Upload streams through an exec's stdin into a temporary file
//     beside the target, renamed over it with mv -f.
//   - Pause is the engine's pause (the cgroup freezer): memory and
//     processes survive. A container stopped by an engine restart lists as
//     paused and Resume starts it again. Pause never runs while an exec of
//     the same Runtime is starting: Docker 20.10's containerd shim holds
//     its task lock while `runc exec` waits for the new process's runc
//     init, and an init frozen by the pause never answers, so the shim
//     would ignore even the Resume that thaws it. Exec starts take a
//     per-container gate that Pause holds, and Pause first waits (at most
//     30 s, else Unavailable) until the engine reports a pid for every exec
//     whose start is in flight. Execs started by another client or process
//     at the moment of the pause are outside this gate.
//   - The lease is the modification time of /.sandboxkit/lease (SetTimeout
//     rewrites it, so every client sees it). Get and List end (or pause,
//     with AutoPause) a sandbox whose lease passed, and each Runtime runs a
//     reaper that does the same every 30 s until Close.
//   - Containers outlive the Client: a new process finds them with List
//     and Get (see below). Destroy removes the container and its anonymous
//     volumes.
//
// Info.Isolation is "container", or "gvisor" with runtime=runsc.
//
// # Which containers are sandboxes
//
// Anyone who may use the engine can create a container carrying this
// provider's labels, copied from a real sandbox, on a container that runs
// as root with extra capabilities. Labels therefore prove nothing: the
// provider treats as its own only a container whose name is
// sandboxkit-<hex HMAC-SHA256(key, container id)>. Create makes the
// container under a temporary name (sandboxkit-<create token>) and, once
// the engine has chosen the id, renames it to that owner name, before it
// writes the sandbox's files and starts it. A name is engine metadata: no
// command in any container can change it, and copying a sandbox's name
// (once it is free), labels, files or volumes to another container proves
// nothing, since the MAC covers the id, which the engine chooses and never
// reuses; making the name for a new id needs the key.
//
// The key is 32 random bytes in the user's state directory
// ($XDG_STATE_HOME/sandboxkit/docker/key, else
// ~/.local/state/sandboxkit/docker/key; WithKeyFile or ?keyfile= to choose
// another), made by the first call that needs it, with mode 0600 in a 0700
// directory; a key file others may read is refused (PermissionDenied).
//
// Every call that names a container (Get, Exec, Start, Attach, the file
// methods, SetTimeout, Pause, Resume, Destroy) checks its name first (once
// per container and Runtime), and List checks each container its label
// filter finds (from the same listing: no extra request). A container
// without its owner name is never listed, adopted by GetOrCreate, run in,
// paused, resumed or removed: Get of its id is NotFound and Destroy leaves
// it alone, as the lease reaper does.
//
// Runtimes with the same key file see the same sandboxes, across process
// restarts; those of another user (another key) see none of them. To share
// sandboxes between users or machines using one engine, give them the same
// key file. A Create whose process died between the engine's create and
// the rename leaves a container under its temporary name, which no Runtime
// touches: remove it with docker rm. A Create cancelled at that moment
// removes its container itself, found by the temporary name. Containers
// made before this check existed, or whose key is lost, are not adopted
// either (nor ended by a lease): remove them with docker rm.
//
// # gVisor
//
// runtime=runsc needs runsc registered on the engine, and Open probes that
// it starts a container. Debian 12's runsc (release 20221219) refuses the
// engine's none network with its own network stack on ("cannot run with
// network enabled in root network namespace"); registered with its network
// off it runs: {"runtimes": {"runsc": {"path": "/usr/bin/runsc",
// "runtimeArgs": ["--network=none"]}}} in the daemon's config file (.ci/run
// does so). Such a runtime gives no network even with ?network=. Under
// runsc /tmp is a volume, since runsc otherwise mounts its own tmpfs there,
// out of the archive endpoint's sight. Results here (Docker 20.10.24,
// cgroup v1, kernel 6.18, load average about 40): TestGVisorBasics passes;
// the whole suite (TestConformanceGVisor, SANDBOX_TEST_RUNSC=1) passes but
// for Files/FSView (gVisor's modification times, seen by commands, differ
// by milliseconds from the host's that Stat reads) and Exec/ContextDeadline
// (its 2 s deadline is shorter than an exec's start under runsc on a busy
// machine), both skipped there, and the subtests the harness cannot drive
// (fault injection, Ports).
//
// # Directory watch and process list
//
// Images need not have inotify tools, so Watch polls: it lists the
// directory every WatchInterval (500 ms, declared as
// Capabilities.WatchLatency) and reports the differences, with the limits
// of polling (events up to that late, a rename as a remove and a create, a
// change undone within one interval not seen, at most 256 directories per
// poll of a recursive watch). Processes reads the container's /proc with
// one exec: every process but the container's init, zombies and the
// listing's own, Handle marking those Start started.
package docker
