package docker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxkit/sandbox/internal/egress"
)

// egressCAValidity is the lifetime of a sandbox's proxy CA, made once per
// helper start: as long as certificates clients accept may last.
const egressCAValidity = 397 * 24 * time.Hour

// egressMain is the body of the helper of one sandbox: argv[1] is the
// container's id, argv[2] the pid of its main process; descriptor 3 the
// configuration pipe, 4 the status pipe.
func egressMain() {
	status := os.NewFile(4, "status")
	fail := func(err error) {
		if status != nil {
			b, _ := json.Marshal(egressHello{Err: err.Error()})
			_, _ = status.Write(append(b, '\n'))
		}
		fmt.Fprintf(os.Stderr, "sandbox egress helper: %v\n", err)
		os.Exit(1)
	}
	if len(os.Args) != 3 {
		fail(errors.New("usage: " + egressArg0 + " <container id> <pid>"))
	}
	// Nothing may trace the helper or read its memory (the secrets).
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	pid, err := strconv.Atoi(os.Args[2])
	if err != nil || pid <= 0 {
		fail(fmt.Errorf("pid %q", os.Args[2]))
	}
	var cfg egressConfig
	cf := os.NewFile(3, "config")
	if err := json.NewDecoder(io.LimitReader(cf, 64<<20)).Decode(&cfg); err != nil {
		fail(fmt.Errorf("reading the configuration: %w", err))
	}
	cf.Close()
	// Watch the container's main process before anything else: the
	// helper ends with it.
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		fail(fmt.Errorf("the container's process %d: %w", pid, err))
	}
	ln, err := listenIn(pid)
	if err != nil {
		fail(err)
	}
	p, err := newEgressProxy(&cfg)
	if err != nil {
		fail(err)
	}
	cfg.Secrets = nil // the proxy holds them now
	b, _ := json.Marshal(egressHello{CA: string(p.CACertPEM())})
	_, _ = status.Write(append(b, '\n'))
	status.Close()
	go func() { _ = p.Serve(ln) }()
	gone := make(chan struct{})
	go func() {
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err == nil || !errors.Is(err, unix.EINTR) {
				close(gone)
				return
			}
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-gone:
	case <-sig:
	}
	_ = p.Close()
	os.Exit(0)
}

// listenIn listens on 127.0.0.1:egressPort in the network namespace of
// process pid, from a thread that enters it and comes back: a socket
// stays in the namespace it was made in, and the proxy connects out from
// the host's. A thread that cannot come back is left locked, so the
// runtime ends it rather than reuse it.
func listenIn(pid int) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		host, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("the host's network namespace: %w", err)}
			return
		}
		defer host.Close()
		target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("the container's network namespace: %w", err)}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("entering the container's network namespace: %w", err)}
			return
		}
		ln, lerr := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", egressPort))
		if err := unix.Setns(int(host.Fd()), unix.CLONE_NEWNET); err != nil {
			if ln != nil {
				ln.Close()
			}
			ch <- result{err: fmt.Errorf("leaving the container's network namespace: %w", err)} // thread stays locked: discarded
			return
		}
		runtime.UnlockOSThread()
		if lerr != nil {
			lerr = fmt.Errorf("listening in the container: %w", lerr)
		}
		ch <- result{ln, lerr}
	}()
	r := <-ch
	return r.ln, r.err
}

// newEgressProxy builds the proxy of one sandbox from its configuration:
// names in cfg.Hosts resolve to their addresses, others through DNS.
func newEgressProxy(cfg *egressConfig) (*egress.Proxy, error) {
	var roots *x509.CertPool
	if cfg.Roots != "" {
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM([]byte(cfg.Roots)) {
			return nil, errors.New("WithEgressRootCAs: no certificate in the PEM")
		}
	}
	d := net.Dialer{Timeout: 30 * time.Second}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if ap, err := netip.ParseAddrPort(addr); err == nil {
			if to, ok := cfg.Dial[ap]; ok {
				addr = to.String()
			}
		}
		return d.DialContext(ctx, network, addr)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return egress.New(egress.Config{
		Policy: cfg.Policy, Secrets: cfg.Secrets, Dial: dial,
		Resolver:      hostsResolver{hosts: cfg.Hosts, next: net.DefaultResolver},
		UpstreamRoots: roots, Logger: log, CAValidity: egressCAValidity,
	})
}

// hostsResolver answers from a fixed table, then from DNS.
type hostsResolver struct {
	hosts map[string][]netip.Addr
	next  *net.Resolver
}

func (h hostsResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := h.hosts[strings.ToLower(strings.TrimSuffix(host, "."))]; ok {
		var out []netip.Addr
		for _, x := range a {
			if network == "ip" || network == "ip4" && x.Unmap().Is4() || network == "ip6" && x.Is6() && !x.Is4In6() {
				out = append(out, x)
			}
		}
		if len(out) == 0 {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return out, nil
	}
	return h.next.LookupNetIP(ctx, network, host)
}

// startEgress starts the helper of container id, whose main process is
// pid, with configuration cfg, and returns the proxy's CA once the helper
// listens in the container. The helper runs in a session of its own: it
// outlives this process, as the container does.
func startEgress(ctx context.Context, id string, pid int, cfg *egressConfig) (string, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	cr, cw, err := os.Pipe()
	if err != nil {
		return "", err
	}
	sr, sw, err := os.Pipe()
	if err != nil {
		cr.Close()
		cw.Close()
		return "", err
	}
	defer sr.Close()
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{egressArg0, id, strconv.Itoa(pid)},
		Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, ExtraFiles: []*os.File{cr, sw},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	err = cmd.Start()
	cr.Close()
	sw.Close()
	if err != nil {
		cw.Close()
		return "", fmt.Errorf("starting the egress helper: %w", err)
	}
	go func() { _ = cmd.Wait() }() // reap it whenever it ends, while this process lives
	_, werr := cw.Write(b)
	cw.Close()
	clear(b)
	if werr != nil {
		_ = cmd.Process.Kill()
		return "", fmt.Errorf("configuring the egress helper: %w", werr)
	}
	deadline := time.Now().Add(30 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = sr.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = sr.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	line, err := bufio.NewReader(sr).ReadBytes('\n')
	var h egressHello
	if err == nil {
		err = json.Unmarshal(line, &h)
	}
	if err == nil && h.Err != "" {
		err = errors.New(h.Err)
	}
	if err != nil {
		_ = cmd.Process.Kill()
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("egress helper: %w", err)
	}
	return h.CA, nil
}

// egressHelpers returns the pids of the helpers of container id: the
// processes of this user whose command line is egressArg0 and id.
func egressHelpers(id string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(egressArg0 + "\x00" + id + "\x00")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.HasPrefix(b, want) {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", e.Name()), &st) != nil || int(st.Uid) != os.Geteuid() {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// stopEgress ends the helpers of container id and waits, briefly, until
// they are gone.
func stopEgress(id string) {
	pids := egressHelpers(id)
	for _, pid := range pids {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(pids) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		pids = egressHelpers(id)
	}
}

// proxyProbe says whether this process can put the egress proxy in front
// of the engine's containers, and if not why: it must be root, and the
// engine must be a process of this host (the peer of its unix socket is
// visible here), so that a container's process and network namespace are
// in this host's /proc.
func proxyProbe(host, ociRuntime string) error {
	if ociRuntime != "" && ociRuntime != "runc" {
		return fmt.Errorf("the OCI runtime %q has a network stack of its own, which the proxy cannot listen in", ociRuntime)
	}
	if os.Geteuid() != 0 {
		return errors.New("the proxy enters the container's network namespace, which needs this program to run as root")
	}
	u, err := url.Parse(host)
	if err != nil || u.Scheme != "unix" {
		return fmt.Errorf("the engine at %s is not a local unix socket: the proxy must run on the engine's host", host)
	}
	sock := u.Path
	if sock == "" {
		sock = u.Opaque
	}
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return fmt.Errorf("the engine's socket %s: %v", sock, err)
	}
	defer c.Close()
	rc, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("the engine's socket %s: %v", sock, cerr)
	}
	if cred.Pid <= 0 {
		return fmt.Errorf("the engine behind %s runs outside this host's process namespace: the proxy must run on the engine's host", sock)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/ns/net", cred.Pid)); err != nil {
		return fmt.Errorf("the engine behind %s is not visible in this host's /proc: %v", sock, err)
	}
	return nil
}
