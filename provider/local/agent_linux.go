package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/sigreset"
)

// agentConfig is what the runtime tells a new agent (through the spawner).
type agentConfig struct {
	Namespaces bool `json:"namespaces"`
	Landlock   bool `json:"landlock"`
	Seccomp    bool `json:"seccomp"`
	// SocketFilter asks, without Seccomp, for a filter of the socket
	// rules alone (address families, io_uring): L3's.
	SocketFilter bool   `json:"socket_filter,omitempty"`
	NoNetwork    bool   `json:"no_network"` // no sockets but unix ones (L2)
	NewNet       bool   `json:"new_net"`    // own network namespace (L3, L4)
	HostHome     string `json:"host_home"`  // host path of the home
	HomeTree     bool   `json:"home_tree"`  // fd 5 is a detached mount of the home
	HostTmp      string `json:"host_tmp"`   // private temporary directory (L1/L2)
	Home         string `json:"home"`       // home as commands see it
	Hostname     string `json:"hostname"`
	TmpMiB       int    `json:"tmp_mib"`
	MaxFileMiB   int    `json:"max_file_mib"`
	NoFile       uint64 `json:"nofile,omitempty"` // RLIMIT_NOFILE of the agent and every command; 0 leaves it
	// InotifyWatches is the sandbox's share of inotify watches (see
	// inotifyShare); 0 is the share the agent works out itself.
	InotifyWatches uint64 `json:"inotify_watches,omitempty"`
	LeaseGrace     int64  `json:"lease_grace_ns"`
	AutoPause      bool   `json:"auto_pause,omitempty"` // the lease end pauses: the agent never enforces it
	// Key authenticates every connection (see checkAuth). It reaches the
	// agent only through the spawner's socket pair, never a file the
	// sandbox can read.
	Key []byte `json:"key"`
	// UID and GID, when not 0, are the host user commands run as (at L1
	// and L2 on a root host): the forker thread switches to them.
	UID int `json:"uid,omitempty"`
	GID int `json:"gid,omitempty"`
	// NetWaitV4 and NetWaitV6 ask the agent to wait, before it reports
	// ready, until pasta has given its network namespace an IPv4 or IPv6
	// default route (see waitDefaultRoutes).
	NetWaitV4 bool `json:"net_wait_v4,omitempty"`
	NetWaitV6 bool `json:"net_wait_v6,omitempty"`
	// EgressPort, when set, is the port of the egress relay on the
	// sandbox's loopback (see egressRelay), listening before any command
	// runs.
	EgressPort int `json:"egress_port,omitempty"`
	// EgressCA, PEM, is the CA of the sandbox's egress proxy, which
	// intercepts TLS to the hosts of brokered secrets: the agent installs
	// it in the sandbox's trust store (see installEgressCA).
	EgressCA string `json:"egress_ca,omitempty"`
	// Trace asks for the stamps of the set-up's steps (see traceEnv).
	Trace bool `json:"trace,omitempty"`
}

// setupReply is the agent's answer once it is ready to serve.
type setupReply struct {
	Features features `json:"features"`
	Err      string   `json:"err,omitempty"`
	Trace    []stamp  `json:"trace,omitempty"`
}

// Fixed descriptors of an agent process.
const (
	agentCtlFD    = 3 // socket to the spawner: config in, reply out
	agentListenFD = 4 // the sandbox's listening socket
	agentDirFD    = 5 // the sandbox's directory on the host, watched
	agentHomeFD   = 6 // a detached mount of the home (namespaced agents)
	agentStateFD  = 7 // the sandbox's state record, read-only (see leaseOver)
)

// closeOnExec marks every descriptor from 3 up close-on-exec, so nothing
// the program inherited (or the helper's own descriptors) reaches a
// command.
func closeOnExec() {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return
	}
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= 3 {
			unix.CloseOnExec(fd)
		}
	}
}

// leaseGrace is how long after its lease ends an agent still waits for a
// Runtime to destroy (or pause) its sandbox before it ends the sandbox's
// processes itself (agentConfig.LeaseGrace, from Runtime.leaseGrace).
const leaseGrace = 30 * time.Second

// watchDir ends the sandbox's processes, and the agent, once its directory
// is removed from the host (a root deleted by hand or by a test's
// clean-up), or once its lease ended leaseGrace ago with no Runtime around
// to enforce it. The directory stays for the next Runtime to remove.
func (a *agent) watchDir() {
	for {
		time.Sleep(2 * time.Second)
		a.reapAll() // orphans whose exit no command's exit swept up
		var st unix.Stat_t
		if err := unix.Fstat(agentDirFD, &st); err != nil || st.Nlink == 0 || a.leaseOver() {
			a.signalAll(syscall.SIGKILL)
			os.Exit(0)
		}
	}
}

// leaseOver reads the sandbox's state record (rewritten in place) through
// the read-only descriptor the spawner opened for the agent: the agent may
// run as a user that cannot open the file (uid 65534 on a root host, with
// the record root's and 0600). Commands never get the descriptor (every
// one from 3 up is close-on-exec) nor reach it through /proc (the agent is
// not dumpable). Without it, the record is opened through the directory
// descriptor. Whether the lease end pauses is read from meta.json where
// the agent can, else taken from its configuration.
func (a *agent) leaseOver() bool {
	autoPause := a.cfg.AutoPause
	if fd, err := unix.Openat(agentDirFD, metaFile, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		b := make([]byte, 1<<20)
		n, _ := unix.Read(fd, b)
		unix.Close(fd)
		var static struct {
			AutoPause bool `json:"auto_pause"`
		}
		if json.Unmarshal(b[:max(n, 0)], &static) == nil {
			autoPause = static.AutoPause
		}
	}
	if autoPause {
		return false
	}
	b := make([]byte, stateSize)
	n, err := unix.Pread(agentStateFD, b, 0)
	if err != nil {
		fd, err := unix.Openat(agentDirFD, stateFile, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return false
		}
		n, _ = unix.Pread(fd, b, 0)
		unix.Close(fd)
	}
	var state struct {
		State    string    `json:"state"`
		LeaseEnd time.Time `json:"lease_end"`
	}
	if json.Unmarshal(trimState(b[:max(n, 0)]), &state) != nil || state.LeaseEnd.IsZero() {
		return false
	}
	return state.State != "paused" && time.Since(state.LeaseEnd) >= time.Duration(a.cfg.LeaseGrace)
}

// authTimeout bounds how long a new connection may take to authenticate.
const authTimeout = 10 * time.Second

// cancelDrain bounds how long, once it sees an exec's client close its
// side (its context ended), the agent waits for the killed command to end
// before sending its output and exit; the client reads on for twice that.
const cancelDrain = time.Second

// waitDelay is how long, after a command's main process exited, the agent
// waits for EOF on its stdout and stderr before it assumes that a
// descendant keeps them open. Even then it stops reading only once
// everything written to the pipes before that moment has been read (see
// outPipe.settled), so the grace never cuts off output already written,
// however slowly the agent is scheduled.
const waitDelay = 200 * time.Millisecond

// pumpBuf is the size of each read from a command's stdout or stderr.
const pumpBuf = 32 << 10

// outPipe is the read end of a command's stdout or stderr with the count
// of bytes its pump has read.
type outPipe struct {
	f    *os.File
	read atomic.Int64
}

// mark is a point to read up to: the bytes read so far and the bytes
// waiting in the pipe at that moment.
type mark struct{ read, queued int64 }

// queued returns the bytes waiting in the pipe (TIOCINQ, alias FIONREAD), or 0 once it is
// closed.
func (o *outPipe) queued() int64 {
	rc, err := o.f.SyscallConn()
	if err != nil {
		return 0
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil || ierr != nil {
		return 0
	}
	return int64(n)
}

func (o *outPipe) mark() mark { return mark{read: o.read.Load(), queued: o.queued()} }

// settled reports whether every byte that was in the pipe at m has been
// taken by a read: the pipe was empty since, or the pump has read m.queued
// bytes plus one read's worth (a read under way at m may have taken bytes
// that m.queued no longer counted) since. Bytes a read took are never
// lost: closing the pipe interrupts only a read still waiting for data.
func (o *outPipe) settled(m mark) bool {
	return o.queued() == 0 || o.read.Load()-m.read >= m.queued+pumpBuf
}

// agentMain is the body of the per-sandbox agent. It never returns.
func agentMain() {
	t0 := monoNow()
	closeOnExec()
	// The agent is the program re-executed, with the signals it ignores
	// (nohup, a script's background job): commands must not inherit them.
	sigreset.Unignore()
	if len(os.Args) > 1 && os.Args[1] == prestartArg {
		if err := receiveHandover(); err != nil {
			fmt.Fprintf(os.Stderr, "sandbox agent: %v\n", err)
			os.Exit(2)
		}
		t0 = monoNow() // its start was ahead of the sandbox's
	}
	ctl := os.NewFile(agentCtlFD, "ctl")
	var cfg agentConfig
	if err := json.NewDecoder(ctl).Decode(&cfg); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox agent: reading config: %v\n", err)
		os.Exit(2)
	}
	if cfg.InotifyWatches > 0 {
		agentWatchLimit = func() int64 { return int64(min(cfg.InotifyWatches, math.MaxInt64)) }
	}
	var tr *trace
	if cfg.Trace {
		tr = &trace{stamps: []stamp{{Name: "main", At: t0}}}
		tr.mark("got-config")
	}
	feat, err := setupSandbox(&cfg)
	tr.mark("namespaces+mounts")
	var a *agent
	if err == nil {
		var lsm features
		a, lsm = newAgent(&cfg)
		tr.mark("landlock+seccomp")
		feat.Landlock, feat.LandlockV, feat.Seccomp = lsm.Landlock, lsm.LandlockV, lsm.Seccomp
		feat.Missing, feat.UID, feat.Sockets = lsm.Missing, lsm.UID, lsm.Sockets
		if cfg.UID != 0 && lsm.UID != cfg.UID {
			// Never run commands as root when another user was asked for.
			err = fmt.Errorf("switching commands to uid %d: %s", cfg.UID, lsm.Missing)
		}
	}
	if err == nil && cfg.EgressPort > 0 {
		if lerr := a.egress.listen(cfg.EgressPort); lerr != nil {
			err = fmt.Errorf("egress relay: %w", lerr)
		}
	}
	if err == nil && (cfg.NetWaitV4 || cfg.NetWaitV6) {
		// Ready only once the network is: pasta configures the namespace
		// while the agent sets up.
		if werr := waitDefaultRoutes(cfg.NetWaitV4, cfg.NetWaitV6, netWaitTimeout); werr != nil {
			err = fmt.Errorf("isolated network: %w", werr)
		}
		tr.mark("net-wait")
	}
	reply := setupReply{Features: feat}
	if tr != nil {
		reply.Trace = tr.stamps
	}
	if err != nil {
		reply.Err = err.Error()
	}
	_ = json.NewEncoder(ctl).Encode(reply)
	if err != nil {
		os.Exit(3)
	}
	lf := os.NewFile(agentListenFD, "listener")
	ln, err := net.FileListener(lf)
	_ = lf.Close()
	if err != nil {
		os.Exit(4)
	}
	_ = ctl.Close()
	go a.watchDir()
	a.serve(ln)
	os.Exit(0)
}

// agent serves one sandbox: it forks every command and reaps every child.
type agent struct {
	cfg   *agentConfig
	isPID bool // PID 1 of its own pid namespace

	procMu  sync.Mutex // held across fork+register and wait4
	procs   map[int]*proc
	exited  []int // pids of finished procs kept for attach, oldest first
	forkReq chan func()
	devNull int // /dev/null opened once (read-only), the stdin of commands without one; -1 if none
	egress  egressRelay

	terms terms // the terminals, by id (terminal_linux.go)
	// ptyLimit is how many terminals the agent opens at L1 and L2
	// (sandboxPtys, read when it starts).
	ptyLimit int
}

func newAgent(cfg *agentConfig) (*agent, features) {
	a := &agent{cfg: cfg, isPID: os.Getpid() == 1, procs: map[int]*proc{}, forkReq: make(chan func()), devNull: -1, ptyLimit: sandboxPtys()}
	if !a.isPID {
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	}
	if fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		a.devNull = fd
	}
	ready := make(chan features)
	go a.forker(ready)
	f := <-ready
	return a, f
}

// forker runs every fork, and every signal to a command, on one locked OS
// thread, the only one that is confined: its capabilities are all dropped,
// and Landlock and seccomp (as configured) apply to it and so to every
// command, which descend from it. The agent's other threads are not
// confined, which keeps the set-up cheap (no all-threads synchronisation)
// and gives every command one Landlock domain: scoped signals may only go
// to processes of the sender's domain, so the agent signals commands from
// this thread too.
func (a *agent) forker(ready chan<- features) {
	runtime.LockOSThread() // never unlocked: the thread dies with the agent
	// Commands get the application's timer slack, not the agent's
	// (startAgentProcess).
	if n, err := strconv.Atoi(os.Getenv(cmdSlackEnv)); err == nil && n > 0 {
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(n), 0, 0, 0)
	}
	var f features
	var missing []string
	if err := dropThreadCaps(a.cfg.UID, a.cfg.GID); err != nil {
		missing = append(missing, "user: "+err.Error())
	} else if a.cfg.UID != 0 {
		f.UID = a.cfg.UID
	}
	// No command may gain privileges through execve.
	_ = unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	if a.cfg.Landlock {
		if abi, err := applyLandlock(a.cfg, true); err != nil {
			missing = append(missing, "landlock: "+err.Error())
		} else {
			f.Landlock, f.LandlockV = true, abi
		}
	}
	switch {
	case a.cfg.Seccomp:
		if err := applySeccomp(a.cfg, true); err != nil {
			missing = append(missing, "seccomp: "+err.Error())
		} else {
			f.Seccomp, f.Sockets = true, socketFamilies(a.cfg.hostNetOff())
		}
	case a.cfg.SocketFilter:
		if err := applySeccomp(a.cfg, false); err != nil {
			missing = append(missing, "socket filter (seccomp): "+err.Error())
		} else {
			f.Sockets = socketFamilies(a.cfg.hostNetOff())
		}
	}
	f.Missing = strings.Join(missing, "; ")
	ready <- f
	for fn := range a.forkReq {
		fn()
	}
}

// onForker runs f on the forker thread and waits for it.
func (a *agent) onForker(f func()) {
	done := make(chan struct{})
	a.forkReq <- func() { f(); close(done) }
	<-done
}

// dropThreadCaps empties the calling thread's bounding, ambient,
// inheritable, permitted and effective capability sets and, when uid is
// not 0, makes the thread that user (and gid its only group). The raw
// system calls act on this thread alone, as the capability calls do.
func dropThreadCaps(uid, gid int) error {
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		_ = unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
	}
	var err error
	if uid != 0 {
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
			err = fmt.Errorf("setgroups: %w", e)
		} else if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
			err = fmt.Errorf("setresgid %d: %w", gid, e)
		} else if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			err = fmt.Errorf("setresuid %d: %w", uid, e)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	_ = unix.Capset(&hdr, &data[0])
	return err
}

// Reaping. Every command is forked with a pidfd, which the netpoller
// watches (watchExit): its exit wakes the thread that is already waiting
// for the command's pipes, with no thread blocked in a wait system call.
// (A blocking waitid held the agent's only P in a system call: the Go
// scheduler's monitor then spun every 20 µs until it took the P back, and
// each exit cost several thread hand-offs.) Orphans reparented to the
// agent (PID 1, or a subreaper) are reaped by reapAll after every exit of
// a command and by watchDir's periodic sweep.

// watchExit waits, through the netpoller, until the process of pidfd
// has exited, reaps every child that has, then runs then (if not nil)
// before it closes pidfd: the exit reaches the client first.
func (a *agent) watchExit(pidfd int, then func()) {
	exited := func(fd int) bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		// Signo stays 0 while it runs; an error (ECHILD: already reaped)
		// ends the wait too.
		return err != nil || info.Signo != 0
	}
	waited := false
	if unix.SetNonblock(pidfd, true) == nil {
		f := os.NewFile(uintptr(pidfd), "pidfd")
		if rc, err := f.SyscallConn(); err == nil {
			waited = rc.Read(func(fd uintptr) bool { return exited(int(fd)) }) == nil
		}
		if !waited {
			// Not pollable: block (outside the netpoller) instead.
			if rc, err := f.SyscallConn(); err == nil {
				_ = rc.Control(func(fd uintptr) {
					var info unix.Siginfo
					for unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
					}
				})
			}
		}
		a.reapAll()
		if then != nil {
			then()
		}
		_ = f.Close()
		return
	}
	_ = unix.Close(pidfd)
	a.reapAll()
	if then != nil {
		then()
	}
}

func (a *agent) reapAll() {
	a.procMu.Lock()
	defer a.procMu.Unlock()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
		if p := a.procs[pid]; p != nil && p.status == nil {
			p.status = make(chan syscall.WaitStatus, 1)
			p.status <- ws
			close(p.reaped)
		}
	}
}

// proc is one command started through the agent.
type proc struct {
	pid      int
	fg       bool
	stdin    *os.File
	timedOut atomic.Bool
	status   chan syscall.WaitStatus // set by the reaper (under procMu)
	reaped   chan struct{}           // closed by the reaper
	done     chan struct{}           // closed once exit is final and output drained

	mu   sync.Mutex // guards subs, exit and writes to subs
	subs map[*frameWriter]struct{}
	exit *exitMsg
}

func (p *proc) broadcast(typ byte, b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for fw := range p.subs {
		if fw.write(typ, b) != nil {
			delete(p.subs, fw)
		}
	}
}

func (p *proc) unsubscribe(fw *frameWriter) {
	p.mu.Lock()
	delete(p.subs, fw)
	p.mu.Unlock()
}

func (a *agent) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go a.handle(c)
	}
}

// frameMsg is one frame read from a connection.
type frameMsg struct {
	typ byte
	b   []byte
}

// readConn reads c's frames into the returned channel until c fails or
// quit is closed; the channel is then closed.
func readConn(c net.Conn, quit <-chan struct{}) <-chan frameMsg {
	ch := make(chan frameMsg)
	go func() {
		defer close(ch)
		for {
			typ, b, err := readFrame(c, nil)
			if err != nil {
				return
			}
			select {
			case ch <- frameMsg{typ, b}:
			case <-quit:
				return
			}
		}
	}()
	return ch
}

// handle serves one connection. A connection carries any number of exec
// requests, one after the other (clients keep idle connections for
// reuse); every other request ends it.
func (a *agent) handle(c net.Conn) {
	defer c.Close()
	// Nothing but the sandbox's key is read from a client before it is
	// checked: an unauthenticated peer gets the connection closed.
	_ = c.SetReadDeadline(time.Now().Add(authTimeout))
	if !checkAuth(c, a.cfg.Key) {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	quit := make(chan struct{})
	defer close(quit)
	in := readConn(c, quit)
	fw := &frameWriter{w: c}
	var next *frameMsg
	for {
		f, ok := frameMsg{}, true
		if next != nil {
			f, next = *next, nil
		} else {
			f, ok = <-in
		}
		if !ok || f.typ != frameRequest {
			return
		}
		var req request
		if err := decodeRequest(f.b, &req); err != nil {
			_ = fw.writeJSON(frameFail, failMsg{"InvalidArgument", "bad request"})
			return
		}
		switch req.Op {
		case "exec":
			var reuse bool
			if reuse, next = a.runCommand(in, fw, &req); !reuse {
				return
			}
			continue
		case "start":
			a.runCommand(in, fw, &req)
		case "ping":
			_ = fw.writeJSON(frameOK, map[string]int{"pid": os.Getpid()})
		case "dial":
			a.forwardPort(c, in, fw, &req)
		case "egress":
			a.serveEgress(c, in, fw, &req)
		case "attach":
			a.attach(in, fw, req.PID)
		case "watch":
			a.serveWatch(in, fw, &req)
		case "ps":
			a.listProcs(fw)
		case "term":
			a.startTerm(in, fw, &req)
		case "term-attach":
			a.attachTerm(in, fw, req.Term)
		case "signal":
			err := a.signal(req.PID, syscall.Signal(req.Signal))
			if err != nil {
				_ = fw.writeJSON(frameFail, failMsg{"NotFound", err.Error()})
				return
			}
			_ = fw.writeJSON(frameOK, struct{}{})
		case "stop", "cont":
			sig := syscall.SIGSTOP
			if req.Op == "cont" {
				sig = syscall.SIGCONT
			}
			a.signalAll(sig)
			_ = fw.writeJSON(frameOK, struct{}{})
		case "shutdown":
			a.signalAll(syscall.SIGKILL)
			_ = fw.writeJSON(frameOK, struct{}{})
			os.Exit(0)
		default:
			_ = fw.writeJSON(frameFail, failMsg{"InvalidArgument", "unknown op " + strconv.Quote(req.Op)})
		}
		return
	}
}

// lookPath finds file in the PATH of env, as the sandbox sees it.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	pathEnv := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", syscall.ENOENT
}

// runCommand starts req's command and streams it until it ends (exec) or
// the client goes (start). It reports whether the connection may carry
// another request: only after an exec whose exit was sent, or one that
// could not start.
func (a *agent) runCommand(in <-chan frameMsg, fw *frameWriter, req *request) (bool, *frameMsg) {
	if len(req.Args) == 0 {
		_ = fw.writeJSON(frameFail, failMsg{"InvalidArgument", "empty command"})
		return false, nil
	}
	dir := req.Dir
	if dir == "" {
		dir = a.cfg.Home
	}
	path, err := lookPath(req.Args[0], req.Env)
	if err != nil {
		if badDir(fw, dir) {
			return false, nil
		}
		a.failExec(fw, 127, fmt.Sprintf("sandbox: %s: command not found\n", req.Args[0]))
		return !req.Stdin, nil
	}
	var stdinR, stdinW *os.File
	stdinFD := uintptr(a.devNull)
	switch {
	case req.Stdin:
		stdinR, stdinW, err = os.Pipe()
	case a.devNull < 0:
		stdinR, err = os.Open(os.DevNull)
	}
	if err != nil {
		_ = fw.writeJSON(frameFail, failMsg{"Internal", err.Error()})
		return false, nil
	}
	if stdinR != nil {
		stdinFD = stdinR.Fd()
	}
	// The command's ends of its output pipes are plain descriptors, never
	// registered with the netpoller: the agent only closes them. The
	// agent's ends are registered after the fork, while the command
	// starts: nothing is read from them before then.
	outR, outW, err1 := outputPipe()
	errR, errW, err2 := outputPipe()
	if err1 != nil || err2 != nil {
		closeAll(stdinR, stdinW)
		closeFDs(outR, outW, errR, errW)
		_ = fw.writeJSON(frameFail, failMsg{"Internal", "pipe: " + errors.Join(err1, err2).Error()})
		return false, nil
	}
	pidfd := -1
	attr := &syscall.ProcAttr{
		Dir:   dir,
		Env:   req.Env,
		Files: []uintptr{stdinFD, uintptr(outW), uintptr(errW)},
		Sys:   &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL, PidFD: &pidfd},
	}
	p := &proc{fg: req.Op == "exec", stdin: stdinW, reaped: make(chan struct{}), done: make(chan struct{}),
		subs: map[*frameWriter]struct{}{fw: {}}}
	var pid int
	var ferr error
	a.procMu.Lock()
	a.onForker(func() { pid, ferr = syscall.ForkExec(path, req.Args, attr) })
	if ferr == nil {
		p.pid = pid
		a.procs[p.pid] = p
	}
	a.procMu.Unlock()
	closeAll(stdinR)
	closeFDs(outW, errW)
	if ferr != nil {
		closeAll(stdinW)
		closeFDs(outR, errR)
		// The child's chdir to dir comes before its execve: a working
		// directory that is missing or not one fails there, and is told
		// apart from a command that cannot run here, on this failure path
		// only (no check of dir before every command).
		if badDir(fw, dir) {
			return false, nil
		}
		code := 127
		if errors.Is(ferr, syscall.EACCES) || errors.Is(ferr, syscall.ENOEXEC) {
			code = 126
		}
		a.failExec(fw, code, fmt.Sprintf("sandbox: %s: %v\n", req.Args[0], ferr))
		return !req.Stdin, nil
	}
	if !p.fg {
		// Exec needs no pid: its client takes any frame as the start.
		_ = fw.writeJSON(frameStarted, startedMsg{PID: p.pid})
	}
	out, errp := &outPipe{f: os.NewFile(uintptr(outR), "stdout")}, &outPipe{f: os.NewFile(uintptr(errR), "stderr")}
	// The last pump to reach EOF closes drained (no goroutine waits for
	// the pumps only to say so).
	drained := make(chan struct{})
	var pumping atomic.Int32
	pumping.Store(2)
	go p.pump(out, frameStdout, &pumping, drained)
	go p.pump(errp, frameStderr, &pumping, drained)
	var timer *time.Timer
	if req.Timeout > 0 {
		timer = time.AfterFunc(time.Duration(req.Timeout), func() {
			select {
			case <-p.reaped:
				return // exited in time; its pid may be reused
			default:
			}
			p.timedOut.Store(true)
			a.killTree(p.pid)
		})
	}
	// One goroutine waits for the exit, reaps and then finishes: the
	// reaper closed p.reaped by then, so finish goes on without a wait.
	go func() {
		fin := func() { a.finish(p, timer, drained, out, errp) }
		if pidfd >= 0 {
			a.watchExit(pidfd, fin)
		} else {
			a.waitBlocking(pid)
			fin()
		}
	}()
	done, next := a.stream(in, p, fw)
	return done && p.fg && !req.Stdin, next
}

// badDir reports, with a fail frame naming it, a working directory that
// is missing or not a directory; it returns false when dir is one.
func badDir(fw *frameWriter, dir string) bool {
	fi, err := os.Stat(dir)
	if err != nil {
		code := "NotFound"
		switch {
		case errors.Is(err, syscall.ENOTDIR):
			code = "NotDirectory"
		case errors.Is(err, fs.ErrPermission):
			code = "PermissionDenied"
		case errors.Is(err, syscall.ENAMETOOLONG):
			code = "InvalidArgument"
		}
		_ = fw.writeJSON(frameFail, failMsg{code, fmt.Sprintf("working directory %q: %v", iox.Shorten(dir, 64), errors.Unwrap(err))})
		return true
	}
	if !fi.IsDir() {
		_ = fw.writeJSON(frameFail, failMsg{"NotDirectory", fmt.Sprintf("working directory %q is not a directory", iox.Shorten(dir, 64))})
		return true
	}
	return false
}

// failExec reports a command that could not start the way a shell would:
// a message on stderr and exit code 127 (not found) or 126 (not runnable).
func (a *agent) failExec(fw *frameWriter, code int, msg string) {
	_ = fw.writeJSON(frameStarted, startedMsg{PID: 0})
	_ = fw.write(frameStderr, []byte(msg))
	_ = fw.writeExit(&exitMsg{Code: code})
}

func (p *proc) pump(o *outPipe, typ byte, pumping *atomic.Int32, drained chan<- struct{}) {
	defer func() {
		if pumping.Add(-1) == 0 {
			close(drained)
		}
	}()
	buf := make([]byte, pumpBuf)
	for {
		n, err := o.f.Read(buf)
		if n > 0 {
			o.read.Add(int64(n))
			p.broadcast(typ, buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// finish waits for the process to be reaped and its output drained, then
// publishes the exit status.
func (a *agent) finish(p *proc, timer *time.Timer, drained <-chan struct{}, out, errp *outPipe) {
	<-p.reaped
	ws := <-p.status
	if timer != nil {
		timer.Stop()
	}
	settle(drained, out, errp)
	closed := false
	select {
	case <-drained:
		// Both pipes reached EOF: they are closed after the exit is sent.
	default:
		// A descendant holds them open: closing them ends the pumps' reads.
		closeAll(out.f, errp.f)
		closed = true
		<-drained
	}
	ex := exitMsg{Code: ws.ExitStatus()}
	if ws.Signaled() {
		ex.Code, ex.Signal = -1, int(ws.Signal())
	}
	if p.timedOut.Load() {
		ex = exitMsg{Code: -1, TimedOut: true}
	}
	p.mu.Lock()
	p.exit = &ex
	for fw := range p.subs {
		_ = fw.writeExit(&ex)
	}
	p.subs = nil
	p.mu.Unlock()
	if !closed {
		closeAll(out.f, errp.f)
	}
	if p.stdin != nil {
		_ = p.stdin.Close()
	}
	close(p.done)
	a.procMu.Lock()
	a.exited = append(a.exited, p.pid)
	if len(a.exited) > 256 {
		old := a.exited[0]
		a.exited = a.exited[1:]
		if q := a.procs[old]; q != nil && q.exit != nil {
			delete(a.procs, old)
		}
	}
	a.procMu.Unlock()
}

// settle returns once both pipes reached EOF (drained is closed), or,
// waitDelay after the command exited, once everything written to them
// before then has been read: what remains open belongs to a descendant,
// and the caller stops reading there. Everything the command itself wrote
// was in the pipes when it exited, so it is always read in full.
func settle(drained <-chan struct{}, pipes ...*outPipe) {
	select {
	case <-drained:
		return // the common case: no timer to make
	default:
	}
	grace := time.NewTimer(waitDelay)
	defer grace.Stop()
	select {
	case <-drained:
		return
	case <-grace.C:
	}
	marks := make([]mark, len(pipes))
	for i, o := range pipes {
		marks[i] = o.mark()
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		done := true
		for i, o := range pipes {
			done = done && o.settled(marks[i])
		}
		if done {
			return
		}
		select {
		case <-drained:
			return
		case <-tick.C:
		}
	}
}

// stream feeds the client's frames (stdin) to the process until it is
// done or the client goes away, and reports which came first (true: done).
// A foreground command whose client went away is killed with its whole
// tree; a background one keeps running. A frame other than stdin is the
// client's next request, sent after it read the exit frame: it is
// returned, once the process is done, for the caller to serve.
func (a *agent) stream(in <-chan frameMsg, p *proc, fw *frameWriter) (bool, *frameMsg) {
	for {
		select {
		case <-p.done:
			return true, nil
		case f, ok := <-in:
			switch {
			case !ok:
				if p.fg {
					// The client went away, or closed its side when its
					// context ended: the command is killed, and what it
					// wrote until then still reaches a client that reads
					// on, ahead of the exit frame (finish writes both).
					a.killTree(p.pid)
					t := time.NewTimer(cancelDrain)
					select {
					case <-p.done:
					case <-t.C:
					}
					t.Stop()
				}
				p.unsubscribe(fw)
				return false, nil
			case f.typ == frameStdin:
				if p.stdin != nil {
					if _, err := p.stdin.Write(f.b); err != nil {
						_ = p.stdin.Close()
					}
				}
			case f.typ == frameEOF:
				if p.stdin != nil {
					_ = p.stdin.Close()
				}
			default:
				<-p.done
				return true, &f
			}
		}
	}
}

func (a *agent) attach(in <-chan frameMsg, fw *frameWriter, pid int) {
	a.procMu.Lock()
	p := a.procs[pid]
	a.procMu.Unlock()
	if p == nil {
		_ = fw.writeJSON(frameFail, failMsg{"NotFound", fmt.Sprintf("no process %d started through this sandbox", pid)})
		return
	}
	p.mu.Lock()
	_ = fw.writeJSON(frameStarted, startedMsg{PID: pid})
	if p.exit != nil {
		_ = fw.writeExit(p.exit)
		p.mu.Unlock()
		return
	}
	p.subs[fw] = struct{}{}
	p.mu.Unlock()
	a.stream(in, &proc{pid: pid, done: p.done}, fw)
	p.unsubscribe(fw)
}

func (a *agent) signal(pid int, sig syscall.Signal) error {
	a.procMu.Lock()
	p := a.procs[pid]
	a.procMu.Unlock()
	if p == nil {
		return fmt.Errorf("no process %d started through this sandbox", pid)
	}
	select {
	case <-p.reaped:
		return nil // already exited: nothing to signal
	default:
	}
	if sig == syscall.SIGKILL {
		a.killTree(pid)
		return nil
	}
	var err error
	a.onForker(func() {
		if err = syscall.Kill(-pid, sig); err != nil {
			err = syscall.Kill(pid, sig)
		}
	})
	return err
}

// signalAll sends sig to every process of the sandbox but the agent.
func (a *agent) signalAll(sig syscall.Signal) {
	if a.isPID {
		a.onForker(func() { _ = syscall.Kill(-1, sig) }) // the whole pid namespace but PID 1
		return
	}
	a.procMu.Lock()
	var pids []int
	for pid, p := range a.procs {
		if p.exit == nil {
			pids = append(pids, pid)
		}
	}
	a.procMu.Unlock()
	a.onForker(func() {
		for _, pid := range pids {
			for _, d := range descendants(pid) {
				_ = syscall.Kill(d, sig)
			}
			_ = syscall.Kill(-pid, sig)
		}
		// Orphans reparented to the agent (a subreaper) belong to it too.
		for _, d := range descendants(os.Getpid()) {
			_ = syscall.Kill(d, sig)
		}
	})
}

// killTree kills pid's process group and every descendant of pid.
func (a *agent) killTree(pid int) {
	a.onForker(func() { killTree(pid) })
}

func killTree(pid int) {
	if pid <= 0 {
		return
	}
	for range 3 {
		desc := descendants(pid)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for _, d := range desc {
			_ = syscall.Kill(d, syscall.SIGKILL)
		}
		if len(desc) == 0 {
			return
		}
	}
}

// descendants lists the children of pid, recursively, from /proc.
func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	seen := map[int]bool{pid: true}
	for len(queue) > 0 && len(out) < 100000 {
		p := queue[0]
		queue = queue[1:]
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(p) + "/task")
		for _, t := range tasks {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/task/" + t.Name() + "/children")
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				c, err := strconv.Atoi(f)
				if err == nil && !seen[c] {
					seen[c] = true
					out = append(out, c)
					queue = append(queue, c)
				}
			}
		}
	}
	return out
}

// outputPipe returns a pipe whose read end is nonblocking (for the
// netpoller, once os.NewFile wraps it) and whose write end, for a
// command, is a plain descriptor.
func outputPipe() (r, w int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, -1, err
	}
	if err := unix.SetNonblock(p[0], true); err != nil {
		closeFDs(p[0], p[1])
		return -1, -1, err
	}
	return p[0], p[1], nil
}

func closeFDs(fds ...int) {
	for _, fd := range fds {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
	}
}

// waitBlocking waits for pid in a blocking system call (a kernel without
// pidfds), then reaps every child that has exited.
func (a *agent) waitBlocking(pid int) {
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	a.reapAll()
}

func closeAll(fs ...io.Closer) {
	for _, f := range fs {
		if f != nil && !isNilFile(f) {
			_ = f.Close()
		}
	}
}

func isNilFile(c io.Closer) bool {
	f, ok := c.(*os.File)
	return ok && f == nil
}
