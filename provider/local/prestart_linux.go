package local

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// An agent's start is mostly the exec of the binary and its runtime's
// start-up, which depend on nothing of the sandbox: the spawner starts
// the agent of the next sandbox ahead, in fresh namespaces of the same
// kind, and hands it its sandbox when one is asked for (see adopt). The
// agent waits, idle and unconfined, for its descriptors and its
// configuration, and runs nothing before it has them: it is confined as
// every agent is, once configured. One agent at most waits, for the kind
// of the last sandbox started; it ends with the spawner.

// prestartArg is the argument of an agent started ahead: it receives its
// descriptors from the spawner before its configuration.
const prestartArg = "prestarted"

// prestartKey is what an agent started ahead must share with the sandbox
// that takes it: the namespaces it was cloned with and the user they map.
type prestartKey struct {
	ns, newNet       bool
	hostUID, hostGID int
	// pasta, when set, is the pasta that connects the agent's network
	// namespace: started with the agent, so only a sandbox that asked for
	// that network gets it.
	pasta string
}

// handoverFiles are the descriptors a sandbox's agent gets (see the
// agent*FD constants); nil ones are absent.
type handoverFiles struct {
	listen, dir, tree, state, log *os.File
}

// idleAgent is an agent started ahead.
type idleAgent struct {
	key prestartKey
	cmd *exec.Cmd
	ctl *os.File   // the spawner's end of the agent's control socket
	net *netResult // its pasta, when key.pasta is set
}

// prestartSlot holds the one idle agent.
type prestartSlot struct {
	mu      sync.Mutex
	idle    *idleAgent
	filling bool
	started map[prestartKey]int // agents started for sandboxes, by kind
}

var prestarted prestartSlot

// take returns the idle agent if it has key, else nil (an idle agent of
// another kind is ended).
func (p *prestartSlot) take(key prestartKey) *idleAgent {
	p.mu.Lock()
	ag := p.idle
	p.idle = nil
	p.mu.Unlock()
	if ag == nil {
		return nil
	}
	if ag.key != key || !procAlive(ag.cmd.Process.Pid, 0) {
		ag.discard()
		return nil
	}
	if ag.net != nil {
		select {
		case <-ag.net.exited:
			ag.discard() // its network is gone
			return nil
		default:
		}
	}
	return ag
}

// end discards the idle agent, as the spawner exits: its pasta, outside
// the agent's pid namespace on a host without root, would outlive it. An
// agent being started ahead ends as its control socket closes.
func (p *prestartSlot) end() {
	p.mu.Lock()
	ag := p.idle
	p.idle = nil
	p.mu.Unlock()
	if ag != nil {
		ag.discard()
	}
}

// fill starts, in the background, an agent for the next sandbox of kind
// key, with the namespaces of attr (a sandbox's: its cgroup is not used),
// unless one is being started.
func (p *prestartSlot) fill(key prestartKey, attr *syscall.SysProcAttr) {
	p.mu.Lock()
	if p.started == nil {
		p.started = map[prestartKey]int{}
	}
	p.started[key]++
	// A program that made one sandbox of a kind may make no other: an
	// agent is started ahead from the second on.
	if p.started[key] < 2 || p.filling || p.idle != nil && p.idle.key == key {
		p.mu.Unlock()
		return
	}
	p.filling = true
	p.mu.Unlock()
	a := *attr
	a.UseCgroupFD, a.CgroupFD = false, 0
	go func() {
		ag, err := startIdle(key, &a)
		p.mu.Lock()
		p.filling = false
		old := p.idle
		if err == nil {
			p.idle = ag
		}
		p.mu.Unlock()
		if err == nil && old != nil {
			old.discard()
		}
	}()
}

func startIdle(key prestartKey, attr *syscall.SysProcAttr) (*idleAgent, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "ctl"), os.NewFile(uintptr(fds[1]), "ctl-agent")
	null, err := os.Open(os.DevNull)
	if err != nil {
		mine.Close()
		theirs.Close()
		return nil, err
	}
	// The sandbox's descriptors replace these at the hand-over: until then
	// they hold the numbers, which the agent's runtime would otherwise
	// take for its own (its poller) while it starts.
	cmd := &exec.Cmd{Path: helperExe, Args: []string{agentArg0, prestartArg}, Env: agentEnv,
		ExtraFiles: []*os.File{theirs, null, null, null, null}, SysProcAttr: attr}
	err = startAgentProcess(cmd)
	theirs.Close()
	null.Close()
	if err != nil {
		mine.Close()
		return nil, err
	}
	go func() { _ = cmd.Wait() }() // reap it whenever it ends
	ag := &idleAgent{key: key, cmd: cmd, ctl: mine}
	if key.pasta != "" {
		// Its cgroups are the spawner's until a sandbox takes it (see
		// adoptNet); its output goes nowhere (it runs with -q).
		net := startPasta(&spawnReq{Pasta: key.pasta}, cmd.Process.Pid, -1, nil)
		if net.err != nil {
			ag.discard()
			return nil, net.err
		}
		ag.net = &net
	}
	return ag, nil
}

// discard ends an idle agent that no sandbox will take, and its pasta.
func (ag *idleAgent) discard() {
	_ = ag.cmd.Process.Kill()
	if ag.net != nil && ag.net.hostPid > 0 {
		_ = syscall.Kill(ag.net.hostPid, syscall.SIGKILL)
	}
	_ = ag.ctl.Close()
}

// adoptNet moves the pasta of an adopted agent into the sandbox's cgroups,
// where a pasta started for the sandbox runs.
func adoptNet(net netResult, cgroupV2 string, cgroupV1 []string) {
	pid := []byte(strconv.Itoa(net.hostPid))
	if cgroupV2 != "" {
		_ = os.WriteFile(cgroupV2+"/cgroup.procs", pid, 0)
	}
	if !net.inPid {
		for _, dir := range cgroupV1 {
			_ = os.WriteFile(dir+"/cgroup.procs", pid, 0)
		}
	}
}

// adopt moves the idle agent into the sandbox's cgroup (cgroupV2, "" for
// none) and sends it the sandbox's descriptors. The agent is only then
// configured, so it runs nothing before it is in its sandbox's cgroup.
func (ag *idleAgent) adopt(cgroupV2 string, f handoverFiles) error {
	if cgroupV2 != "" {
		if err := os.WriteFile(cgroupV2+"/cgroup.procs", []byte(strconv.Itoa(ag.cmd.Process.Pid)), 0); err != nil {
			return fmt.Errorf("moving the agent to its cgroup: %w", err)
		}
	}
	var have [5]byte
	var rights []int
	for i, fl := range []*os.File{f.listen, f.dir, f.tree, f.state, f.log} {
		if fl != nil {
			have[i] = 1
			rights = append(rights, int(fl.Fd()))
		}
	}
	rc, err := ag.ctl.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), have[:], unix.UnixRights(rights...), nil, 0)
		return serr != unix.EAGAIN
	}); err != nil {
		return err
	}
	return serr
}

// receiveHandover is the first thing an agent started ahead does: it
// receives its sandbox's descriptors and puts them where an agent started
// for its sandbox has them (the log becomes its stderr).
func receiveHandover() error {
	var have [5]byte
	oob := make([]byte, unix.CmsgSpace(5*4))
	n, oobn, _, _, err := unix.Recvmsg(agentCtlFD, have[:], oob, unix.MSG_CMSG_CLOEXEC)
	for err == unix.EINTR {
		n, oobn, _, _, err = unix.Recvmsg(agentCtlFD, have[:], oob, unix.MSG_CMSG_CLOEXEC)
	}
	if err != nil {
		return fmt.Errorf("receiving the sandbox's descriptors: %w", err)
	}
	if n == 0 {
		os.Exit(0) // the spawner ended: no sandbox will take this agent
	}
	for got := n; got < len(have); got += n {
		// The rights came with the first byte; the rest follows.
		if n, err = unix.Read(agentCtlFD, have[got:]); err == unix.EINTR {
			n = 0
		} else if err != nil || n == 0 {
			return fmt.Errorf("receiving the sandbox's descriptors: %d bytes: %v", got, err)
		}
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return fmt.Errorf("receiving the sandbox's descriptors: %d messages: %v", len(msgs), err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil {
		return fmt.Errorf("receiving the sandbox's descriptors: %w", err)
	}
	targets := []int{agentListenFD, agentDirFD, agentHomeFD, agentStateFD, 2}
	for i, t := range targets {
		if have[i] == 0 {
			if t != 2 {
				_ = unix.Close(t) // absent, as for an agent started for its sandbox
			}
			continue
		}
		if len(fds) == 0 {
			return fmt.Errorf("receiving the sandbox's descriptors: too few")
		}
		fd := fds[0]
		fds = fds[1:]
		flags := unix.O_CLOEXEC
		if t == 2 {
			flags = 0
		}
		if err := unix.Dup3(fd, t, flags); err != nil {
			return fmt.Errorf("receiving the sandbox's descriptors: %w", err)
		}
		_ = unix.Close(fd)
	}
	return nil
}
