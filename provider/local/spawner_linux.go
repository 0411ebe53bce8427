package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/cpu"
	"golang.org/x/sys/unix"
)

// spawnReq asks the spawner to start one agent.
type spawnReq struct {
	Seq      uint64      `json:"seq"`
	Sock     string      `json:"sock"`      // where the agent listens
	Home     string      `json:"home"`      // host path of the home
	Log      string      `json:"log"`       // agent's stderr
	HostUID  int         `json:"host_uid"`  // host uid of the sandbox user (namespaces)
	HostGID  int         `json:"host_gid"`  // host gid of the sandbox user (namespaces)
	CgroupV2 string      `json:"cgroup_v2"` // cgroup directory to start the agent in
	CgroupV1 []string    `json:"cgroup_v1"` // v1 cgroup directories to move it to
	Pasta    string      `json:"pasta"`     // path of pasta, to connect the agent's network namespace
	State    string      `json:"state"`     // the sandbox's state record, handed to the agent read-only
	Config   agentConfig `json:"config"`
	// Egress, when set, is the sandbox's directory: start its egress
	// proxy with the agent (see egressMain); EgressCA installs the proxy's
	// CA in the sandbox. With Op "egress" only the proxy is started, for
	// the agent that runs already.
	Egress   string `json:"egress,omitempty"`
	EgressCA bool   `json:"egress_ca,omitempty"`
	Op       string `json:"op,omitempty"`
	// Trace asks for the stamps of the start's steps (see traceEnv).
	Trace bool `json:"trace,omitempty"`
	// Ahead asks the spawner to start the next agent of this kind ahead
	// (see prestartSlot); a Runtime with a warm pool, which starts whole
	// sandboxes ahead, does not.
	Ahead bool `json:"ahead,omitempty"`
}

// spawnResp answers a spawnReq.
type spawnResp struct {
	Seq         uint64   `json:"seq"`
	PID         int      `json:"pid"`
	Start       uint64   `json:"start"` // start time in clock ticks, to recognise the pid later
	Features    features `json:"features"`
	NetPID      int      `json:"net_pid,omitempty"` // pasta's pid and start time
	NetStart    uint64   `json:"net_start,omitempty"`
	EgressPID   int      `json:"egress_pid,omitempty"` // the egress proxy's pid and start time
	EgressStart uint64   `json:"egress_start,omitempty"`
	Err         string   `json:"err,omitempty"`
	Trace       []stamp  `json:"trace,omitempty"` // when asked: the spawner's and the agent's steps
}

// agentEnv is the environment of the agent process itself (commands get
// theirs in each request).
var agentEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "GOMAXPROCS=1"}

// agentTimerSlack is the timer slack, in ns, of an agent's threads. Once
// the agent makes a system call after being idle, its Go runtime's monitor
// thread (sysmon) wakes every 20 µs for at least 50 rounds; with the
// kernel's default slack (50 µs) that is about 20 wake-ups per exec, a
// third of the agent's CPU for a short command. With 250 µs the kernel
// lets them fall together (measured on a 2-core VM: agent CPU per exec of
// /bin/true 870 → 590 µs, context switches 28 → 15). No timer of the
// agent needs finer precision (its shortest period is 5 ms), and commands
// never inherit it: the forker thread, from which every command descends,
// takes back the slack the spawner had (cmdSlackEnv).
const agentTimerSlack = 250_000

// cmdSlackEnv, in the agent's environment, is the timer slack its
// commands get: the spawner's own, which it inherited from the
// application.
const cmdSlackEnv = "SANDBOX_CMD_TIMERSLACK_NS"

// startAgentProcess starts cmd, an agent, with agentTimerSlack: the fork
// is made from a thread of its own whose slack is raised first, so the
// agent's threads inherit it, and which ends with the start (its goroutine
// never unlocks it), so no other goroutine runs with that slack. Where the
// slack cannot be read or set, the agent starts with the spawner's.
func startAgentProcess(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		if old, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0); err == nil && old > 0 &&
			unix.Prctl(unix.PR_SET_TIMERSLACK, agentTimerSlack, 0, 0, 0) == nil {
			cmd.Env = append(slices.Clip(cmd.Env), cmdSlackEnv+"="+strconv.Itoa(old))
		}
		errc <- cmd.Start()
	}()
	return <-errc
}

// spawnerMain is the body of the spawner: a small process that starts
// agents on request, so that their start does not copy the page tables of
// a large application (a clone with CLONE_NEWUSER cannot use vfork). It
// exits when the application closes its end of the socket.
func spawnerMain() {
	closeOnExec()
	conn, err := net.FileConn(os.NewFile(3, "ctl"))
	if err != nil {
		os.Exit(2)
	}
	dec := json.NewDecoder(conn)
	var mu sync.Mutex
	enc := json.NewEncoder(conn)
	for {
		var req spawnReq
		if err := dec.Decode(&req); err != nil {
			prestarted.end()
			os.Exit(0)
		}
		go func() {
			var resp spawnResp
			if req.Op == "egress" {
				resp = startEgressOnly(&req)
			} else {
				resp = startAgent(&req)
			}
			resp.Seq = req.Seq
			mu.Lock()
			_ = enc.Encode(resp)
			mu.Unlock()
		}()
	}
}

// startAgent starts one agent and waits until it has set the sandbox up.
func startAgent(req *spawnReq) spawnResp {
	var tr *trace
	if req.Trace {
		tr = &trace{}
		tr.mark("got-req")
		req.Config.Trace = true
	}
	fail := func(err error) spawnResp { return spawnResp{Err: err.Error()} }
	_ = os.Remove(req.Sock)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: req.Sock, Net: "unix"})
	if err != nil {
		return fail(fmt.Errorf("listen: %w", err))
	}
	ln.SetUnlinkOnClose(false)
	lf, err := ln.File()
	_ = ln.Close()
	if err != nil {
		return fail(err)
	}
	defer lf.Close()
	_ = os.Chmod(req.Sock, 0o600)
	dir, err := os.Open(filepath.Dir(req.Sock))
	if err != nil {
		return fail(err)
	}
	defer dir.Close()
	// Descriptors 3 to 7 (agentCtlFD to agentStateFD); a nil one is closed.
	var tree, state *os.File
	if req.State != "" {
		if state, err = os.Open(req.State); err == nil {
			defer state.Close()
		}
	}
	attr := &syscall.SysProcAttr{Setsid: true}
	ns := req.Config.Namespaces
	if ns {
		// A detached copy of the home mount, which the agent moves into
		// its root: this works even where the sandbox user cannot walk the
		// path to the home (a root host). Without the privilege for it, the
		// agent bind-mounts the home by path.
		if fd, err := unix.OpenTree(unix.AT_FDCWD, req.Home, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC); err == nil {
			tree = os.NewFile(uintptr(fd), "home-tree")
			defer tree.Close()
			req.Config.HomeTree = true
		}
		attr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC
		if req.Config.NewNet {
			attr.Cloneflags |= syscall.CLONE_NEWNET
		}
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: sandboxUID, HostID: req.HostUID, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: sandboxUID, HostID: req.HostGID, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		// Become the mapped user: the host uid may differ from the caller's
		// (a root host maps the sandbox user to an unprivileged uid).
		attr.Credential = &syscall.Credential{Uid: sandboxUID, Gid: sandboxUID, NoSetGroups: true}
		attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP, unix.CAP_SYS_RESOURCE}
	}
	if req.CgroupV2 != "" {
		if d, err := os.Open(req.CgroupV2); err == nil {
			defer d.Close()
			attr.UseCgroupFD, attr.CgroupFD = true, int(d.Fd())
		}
	}
	cgroupFD := -1
	if attr.UseCgroupFD {
		cgroupFD = attr.CgroupFD
	}
	var logf *os.File
	if req.Log != "" {
		logf, _ = os.OpenFile(req.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if logf != nil {
			defer logf.Close()
		}
	}
	var eg *egressStart
	if req.Egress != "" {
		// Started with the agent, which needs its CA only once it is
		// configured (below).
		if eg, err = startEgress(req.Egress, logf, req.CgroupV2, req.CgroupV1); err != nil {
			return fail(err)
		}
		req.Config.EgressPort = egressPort
	}
	tr.mark("prepared")
	key := prestartKey{ns: ns, newNet: req.Config.NewNet, hostUID: req.HostUID, hostGID: req.HostGID}
	if ns && req.Config.NewNet {
		key.pasta = req.Pasta
	}
	files := handoverFiles{listen: lf, dir: dir, tree: tree, state: state, log: logf}
	var cmd *exec.Cmd
	var mine *os.File
	var adoptedNet *netResult
	if ag := prestarted.take(key); ag != nil {
		// An agent started ahead for a sandbox of this kind: it enters
		// the sandbox's cgroup and gets its descriptors now, before its
		// configuration; any failure leaves it for a fresh start.
		if err := ag.adopt(req.CgroupV2, files); err == nil {
			cmd, mine, adoptedNet = ag.cmd, ag.ctl, ag.net
			tr.mark("agent-adopted")
		} else {
			ag.discard()
		}
	}
	if cmd == nil {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			if eg != nil {
				eg.kill()
			}
			return fail(fmt.Errorf("socketpair: %w", err))
		}
		var theirs *os.File
		mine, theirs = os.NewFile(uintptr(fds[0]), "ctl"), os.NewFile(uintptr(fds[1]), "ctl-agent")
		extra := []*os.File{theirs, lf, dir, tree, state}
		cmd = &exec.Cmd{Path: helperExe, Args: []string{agentArg0}, Env: agentEnv, ExtraFiles: extra, SysProcAttr: attr}
		if logf != nil {
			cmd.Stderr = logf
		}
		err = startAgentProcess(cmd)
		theirs.Close()
		if err != nil {
			mine.Close()
			if eg != nil {
				eg.kill()
			}
			return fail(fmt.Errorf("start agent: %w", err))
		}
		go func() { _ = cmd.Wait() }() // reap it whenever it ends
		tr.mark("agent-started")
	}
	defer mine.Close()
	if req.Ahead {
		// The next sandbox of this kind finds its agent started.
		defer prestarted.fill(key, attr)
	}
	for _, dir := range req.CgroupV1 {
		_ = os.WriteFile(dir+"/cgroup.procs", []byte(strconv.Itoa(cmd.Process.Pid)), 0)
	}
	var net netResult
	if ns && req.Pasta != "" && req.Config.NewNet {
		// Connect the network namespace while the agent sets up; the
		// agent reports ready once pasta has configured it.
		req.Config.NetWaitV4, req.Config.NetWaitV6 = hostDefaultRoutes()
		if adoptedNet != nil {
			net = *adoptedNet
			adoptNet(net, req.CgroupV2, req.CgroupV1)
		} else if net = startPasta(req, cmd.Process.Pid, cgroupFD, logf); net.err != nil {
			_ = cmd.Process.Kill()
			if eg != nil {
				eg.kill()
			}
			return fail(fmt.Errorf("isolated network: %w (see %s)", net.err, req.Log))
		}
		tr.mark("pasta-started")
	}
	killAgent := func() {
		_ = cmd.Process.Kill()
		if net.pid > 0 {
			_ = syscall.Kill(net.pid, syscall.SIGKILL)
		}
		if eg != nil {
			eg.kill()
		}
	}
	if eg != nil {
		ca, err := eg.started()
		if err != nil {
			killAgent()
			return fail(fmt.Errorf("%w (see %s)", err, req.Log))
		}
		if req.EgressCA {
			req.Config.EgressCA = ca
		}
	}
	_ = mine.SetDeadline(time.Now().Add(30 * time.Second))
	if err := json.NewEncoder(mine).Encode(req.Config); err != nil {
		killAgent()
		return fail(fmt.Errorf("configure agent: %w", err))
	}
	tr.mark("config-sent")
	var rep setupReply
	repc := make(chan error, 1)
	go func() { repc <- json.NewDecoder(mine).Decode(&rep) }()
	select {
	case err := <-repc:
		if err != nil {
			killAgent()
			return fail(fmt.Errorf("agent set-up: %w (see %s)", err, req.Log))
		}
	case err := <-net.exited:
		// pasta ended before the agent saw its network configured.
		killAgent()
		<-repc // the agent's end closes with it
		return fail(fmt.Errorf("isolated network: pasta exited: %v (see %s)", err, req.Log))
	}
	if rep.Err != "" {
		killAgent()
		return spawnResp{Features: rep.Features, Err: rep.Err}
	}
	tr.mark("agent-ready")
	resp := spawnResp{PID: cmd.Process.Pid, Start: procStart(cmd.Process.Pid), Features: rep.Features}
	if tr != nil {
		tr.add("agent:", rep.Trace)
		tr.mark("resp")
		resp.Trace = tr.stamps
	}
	if net.pid > 0 {
		resp.NetPID, resp.NetStart = net.pid, procStart(net.pid)
	}
	if eg != nil {
		if err := eg.attached(); err != nil {
			killAgent()
			return fail(fmt.Errorf("%w (see %s)", err, req.Log))
		}
		resp.EgressPID, resp.EgressStart = eg.cmd.Process.Pid, procStart(eg.cmd.Process.Pid)
	}
	return resp
}

// startEgressOnly starts the egress proxy of a sandbox whose agent runs
// already (SetNetwork to a policy that needs it).
func startEgressOnly(req *spawnReq) spawnResp {
	var logf *os.File
	if req.Log != "" {
		logf, _ = os.OpenFile(req.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if logf != nil {
			defer logf.Close()
		}
	}
	eg, err := startEgress(req.Egress, logf, req.CgroupV2, req.CgroupV1)
	if err != nil {
		return spawnResp{Err: err.Error()}
	}
	if _, err = eg.started(); err == nil {
		err = eg.attached()
	}
	if err != nil {
		eg.kill()
		return spawnResp{Err: err.Error()}
	}
	pid := eg.cmd.Process.Pid
	return spawnResp{EgressPID: pid, EgressStart: procStart(pid)}
}

// netResult is a started pasta: its host pid when Destroy must end it (0
// when it runs in the sandbox's pid namespace and ends with it), and a
// channel that receives its exit.
type netResult struct {
	pid     int
	hostPid int  // pasta's pid, even where pid is 0
	inPid   bool // it runs in the sandbox's pid namespace
	exited  <-chan error
	err     error
}

// startPasta connects the network namespace of the agent pid to the
// outside through pasta: outbound TCP, UDP and ICMP, no port forwarded in
// either direction (-t, -u, -T, -U none: in particular nothing bound on
// the host's loopback is mapped into the sandbox) and the gateway not
// mapped to the host (--no-map-gw), so the host's own addresses stay out
// of reach. pasta runs in the foreground (-f), in the sandbox's cgroup:
// its pid is known at once and nothing waits for its whole start-up (it
// configures the namespace early, then spends most of its start filling
// its tables); the agent waits for the namespace's routes instead (see
// waitDefaultRoutes). Where the spawner may (root), pasta is started in
// the sandbox's pid namespace, though in the host's network namespace, so
// that it ends with the sandbox's PID 1 whoever ends that (Destroy, or the
// agent itself at its lease end); elsewhere its host pid is returned, for
// Destroy to end it. On a root host pasta must stay root to join a user
// namespace that root created (--runas 0); it drops its capabilities and
// confines itself (own mount namespace, seccomp) once set up, and
// sandboxed code, another user, cannot signal or trace it.
func startPasta(req *spawnReq, pid, cgroupFD int, logf *os.File) netResult {
	// The thread may join the sandbox's pid namespace for its children
	// and can never leave it: it is not unlocked, so it ends with this
	// goroutine.
	type started struct {
		res    netResult
		inPid  bool
		waitFn func() error
	}
	ch := make(chan started, 1)
	go func() {
		runtime.LockOSThread()
		inPidNS := false
		if fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/pid", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			inPidNS = unix.Setns(fd, unix.CLONE_NEWPID) == nil
			_ = unix.Close(fd)
		}
		args := []string{"-f", "-q", "-t", "none", "-u", "none", "-T", "none", "-U", "none", "--no-map-gw", "--config-net"}
		if os.Getuid() == 0 {
			args = append(args, "--runas", "0")
		}
		args = append(args, strconv.Itoa(pid))
		c := exec.Command(pastaBinary(req.Pasta), args...)
		c.Args[0] = req.Pasta // the name tells passt to act as pasta
		c.Env = agentEnv
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if cgroupFD >= 0 {
			c.SysProcAttr.UseCgroupFD, c.SysProcAttr.CgroupFD = true, cgroupFD
		}
		if logf != nil {
			c.Stdout, c.Stderr = logf, logf
		}
		if err := c.Start(); err != nil {
			ch <- started{res: netResult{err: fmt.Errorf("pasta: %w", err)}}
			return
		}
		ch <- started{res: netResult{pid: c.Process.Pid}, inPid: inPidNS, waitFn: c.Wait}
	}()
	st := <-ch
	if st.res.err != nil {
		return st.res
	}
	exited := make(chan error, 1)
	go func() { exited <- st.waitFn() }() // reaps it whenever it ends
	res := netResult{pid: st.res.pid, hostPid: st.res.pid, inPid: st.inPid, exited: exited}
	if st.inPid {
		res.pid = 0 // ends with the sandbox's PID 1
	} else {
		for _, dir := range req.CgroupV1 {
			_ = os.WriteFile(dir+"/cgroup.procs", []byte(strconv.Itoa(res.pid)), 0)
		}
	}
	return res
}

// procStart returns the start time of pid in clock ticks (field 22 of
// /proc/pid/stat), or 0.
func procStart(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0
	}
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}

// procAlive reports whether pid still runs (not a zombie) and started at start.
func procAlive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+3 >= len(s) {
		return false
	}
	if s[i+2] == 'Z' || s[i+2] == 'X' {
		return false
	}
	return start == 0 || procStart(pid) == start
}

// errSpawnerGone says that the spawner process died (killed, or crashed)
// before it answered: the request may be sent again to a new one.
var errSpawnerGone = errors.New("local: spawner exited")

// spawner is the runtime's handle on its spawner process.
type spawner struct {
	cmd  *exec.Cmd
	conn net.Conn
	done chan struct{} // closed when the reader ends

	mu      sync.Mutex
	seq     uint64
	pending map[uint64]chan spawnResp
	err     error
}

func startSpawner() (*spawner, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "spawner"), os.NewFile(uintptr(fds[1]), "spawner-child")
	cmd := &exec.Cmd{Path: helperExe, Args: []string{spawnerArg0}, Env: agentEnv, ExtraFiles: []*os.File{theirs}}
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		mine.Close()
		return nil, fmt.Errorf("start spawner: %w", err)
	}
	conn, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	s := &spawner{cmd: cmd, conn: conn, done: make(chan struct{}), pending: map[uint64]chan spawnResp{}}
	go s.read()
	return s, nil
}

func (s *spawner) read() {
	defer close(s.done)
	dec := json.NewDecoder(s.conn)
	for {
		var resp spawnResp
		if err := dec.Decode(&resp); err != nil {
			s.mu.Lock()
			s.err = errSpawnerGone
			for _, ch := range s.pending {
				close(ch)
			}
			s.pending = nil
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		if ch, ok := s.pending[resp.Seq]; ok {
			ch <- resp
			delete(s.pending, resp.Seq)
		}
		s.mu.Unlock()
	}
}

// spawn starts an agent. ctx bounds the wait; an agent whose start
// completes after ctx ended is left to the caller's cleanup (its socket
// and pid are not recorded, and Destroy kills it through the cgroup or
// its socket).
func (s *spawner) spawn(ctx context.Context, req *spawnReq) (spawnResp, error) {
	ch := make(chan spawnResp, 1)
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return spawnResp{}, s.err
	}
	s.seq++
	req.Seq = s.seq
	s.pending[req.Seq] = ch
	b, err := json.Marshal(req)
	if err == nil {
		_, err = s.conn.Write(append(b, '\n'))
	}
	s.mu.Unlock()
	if err != nil {
		return spawnResp{}, fmt.Errorf("%w: %w", errSpawnerGone, err)
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return spawnResp{}, errSpawnerGone
		}
		if resp.Err != "" {
			return resp, errors.New(resp.Err)
		}
		return resp, nil
	case <-ctx.Done():
		// The agent may still start: end it then, so nothing is orphaned.
		go func() {
			resp, ok := <-ch
			if ok && resp.PID > 0 {
				_ = syscall.Kill(resp.PID, syscall.SIGKILL)
			}
			if ok && resp.EgressPID > 0 {
				_ = syscall.Kill(resp.EgressPID, syscall.SIGKILL)
			}
		}()
		return spawnResp{}, ctx.Err()
	}
}

func (s *spawner) alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err == nil
}

// close ends the spawner (agents it started live on) and waits for it.
func (s *spawner) close() error {
	_ = s.conn.Close()
	<-s.done
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-exited
	}
	return nil
}

// pastaBinary returns the build of pasta to run: on x86-64 with AVX2, its
// AVX2 build (Debian's passt ships pasta.avx2 beside pasta), which pasta
// would otherwise exec itself once started, so that each sandbox's
// network costs one exec instead of two (about a tenth of a create on the
// hosts measured); otherwise pasta itself.
func pastaBinary(pasta string) string {
	if runtime.GOARCH != "amd64" || !cpu.X86.HasAVX2 {
		return pasta
	}
	avx2 := pasta + ".avx2"
	if fi, err := os.Stat(avx2); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return pasta
	}
	return avx2
}
