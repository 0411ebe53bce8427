package local

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/egress"
	"github.com/sandboxkit/sandbox/sberrors"
	"golang.org/x/sys/unix"
)

// The egress proxy of a sandbox whose policy needs one (an allow-list,
// deny entries, or brokered secrets; see needsProxy). The sandbox's
// network namespace then has no route out, only its loopback; the
// sandbox's agent listens on 127.0.0.1:egressPort in that namespace and
// hands each connection it accepts (the socket itself, SCM_RIGHTS) over
// its own unix socket to the proxy, a process of the host user in the
// host's network namespace, outside every namespace of the sandbox. The
// proxy checks each destination against the policy, resolves names
// itself and brokers secrets (package internal/egress).
//
// The proxy is started by the spawner (a child of it, in a session of its
// own, so it outlives the Runtime as the sandbox does), before the agent
// when the sandbox is created; it connects to the agent's socket with the
// sandbox's key and asks for the connections (request op "egress"). It
// ends when that connection ends, that is with the agent, and Destroy
// kills it by pid as well. What it needs (the policy, the secrets' values,
// the resolver's table) is in egressFile, 0600 in the sandbox's directory,
// which no sandbox sees; nothing of it is on its command line or in its
// environment. SetNetwork rewrites the file and asks the proxy, over its
// control socket (egressSock, 0600), to load the policy again.
const (
	egressFile = "egress.json"
	egressSock = "egress.sock"
	// egressPort is the port of the relay in the sandbox's loopback.
	egressPort = 3128
	// egressCADir is where, inside a sandbox with brokered secrets, the
	// agent writes the trust bundle (the host's CA certificates and the
	// proxy's CA, egressBundle) and the proxy's CA alone (egressCAOnly).
	egressCADir  = "/run/sandboxkit"
	egressBundle = egressCADir + "/ca-certificates.crt"
	egressCAOnly = egressCADir + "/egress-ca.pem"
)

// egressConfig is egressFile: what the proxy of one sandbox runs with.
type egressConfig struct {
	Policy  *driver.NetworkPolicy   `json:"policy"`
	Secrets []driver.BrokeredSecret `json:"secrets,omitempty"`
	// Hosts maps names to the addresses the proxy uses for them instead
	// of asking DNS (WithEgressHosts).
	Hosts map[string][]netip.Addr `json:"hosts,omitempty"`
	// Roots, PEM, replaces the host's CA certificates for the proxy's
	// connections to brokered hosts (WithEgressRootCAs).
	Roots string `json:"roots,omitempty"`
	// Dial maps the addresses the proxy would connect to to those it
	// connects to instead (WithEgressDialOverride).
	Dial map[netip.AddrPort]netip.AddrPort `json:"dial,omitempty"`
}

// egressHello is what the proxy writes on its status pipe: first its CA
// (or an error), then, once connected to the agent, Attached (or an
// error).
type egressHello struct {
	CA       string `json:"ca,omitempty"`
	Attached bool   `json:"attached,omitempty"`
	Err      string `json:"err,omitempty"`
}

// writeEgressConfig writes c to the sandbox directory dir, 0600, whole
// (a temporary file renamed over the old one).
func writeEgressConfig(dir string, c *egressConfig) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+egressFile)
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, egressFile))
}

func readEgressConfig(dir string) (*egressConfig, error) {
	b, err := os.ReadFile(filepath.Join(dir, egressFile))
	if err != nil {
		return nil, err
	}
	var c egressConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", egressFile, err)
	}
	return &c, nil
}

// proxyEnv returns the variables every command of a sandbox behind the
// proxy gets: the proxy, and with brokered secrets the trust bundle that
// holds the proxy's CA.
func proxyEnv(ca bool) map[string]string {
	u := fmt.Sprintf("http://127.0.0.1:%d", egressPort)
	env := map[string]string{
		"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u,
		"ALL_PROXY": u, "all_proxy": u,
		"NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
	}
	if ca {
		for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO"} {
			env[k] = egressBundle
		}
		env["NODE_EXTRA_CA_CERTS"] = egressCAOnly
	}
	return env
}

// egressProxy is what the proxy process needs of internal/egress.
type egressProxy interface {
	ServeConn(ctx context.Context, c net.Conn)
	SetPolicy(p *driver.NetworkPolicy) error
	CACertPEM() []byte
	Close() error
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

// rootsOf returns the pool of c.Roots, nil for the host's.
func rootsOf(c *egressConfig) (*x509.CertPool, error) {
	if c.Roots == "" {
		return nil, nil
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM([]byte(c.Roots)) {
		return nil, errors.New("WithEgressRootCAs: no certificate in the PEM")
	}
	return p, nil
}

// egressMain is the body of the proxy process of one sandbox: argv[1] is
// the sandbox's directory, descriptor 3 the status pipe to the spawner.
func egressMain() {
	closeOnExec()
	status := os.NewFile(3, "status")
	say := func(h egressHello) { b, _ := json.Marshal(h); _, _ = status.Write(append(b, '\n')) }
	fail := func(err error) {
		say(egressHello{Err: err.Error()})
		fmt.Fprintf(os.Stderr, "sandbox egress proxy: %v\n", err)
		os.Exit(1)
	}
	if len(os.Args) != 2 {
		fail(errors.New("usage: " + egressArg0 + " <sandbox directory>"))
	}
	dir := os.Args[1]
	// Nothing may trace the proxy or read its memory (the secrets' values).
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	// It runs in the sandbox's cgroup (see startEgress); its descriptors
	// are bounded by what it serves, not by the host's default.
	setOpenFiles(egressNoFile)
	cfg, err := readEgressConfig(dir)
	if err != nil {
		fail(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := newEgressProxy(cfg, log)
	if err != nil {
		fail(err)
	}
	cfg.Secrets = nil // the proxy holds them now
	ctl, err := listenControl(filepath.Join(dir, egressSock))
	if err != nil {
		fail(err)
	}
	say(egressHello{CA: string(p.CACertPEM())})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go serveControl(ctl, dir, p)
	c, err := attachAgent(ctx, filepath.Join(dir, "s"))
	if err != nil {
		fail(fmt.Errorf("connecting to the sandbox's agent: %w", err))
	}
	say(egressHello{Attached: true})
	_ = status.Close()
	for {
		typ, _, fds, err := readFrameFDs(c)
		if err != nil {
			break // the agent ended: so does the sandbox's proxy
		}
		if typ != frameOK {
			closeFDs(fds...)
			continue
		}
		tc, err := tcpFromFDs(fds)
		if err != nil {
			log.Warn("sandbox egress proxy: relay", "err", err)
			continue
		}
		go p.ServeConn(ctx, tc)
	}
	cancel()
	_ = p.Close()
	_ = ctl.Close()
	os.Exit(0)
}

// attachAgent connects to the agent's socket and asks it for the
// connections its relay accepts; the agent may still be starting, so a
// missing or refusing socket is tried again for a while.
func attachAgent(ctx context.Context, sock string) (*net.UnixConn, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := dial(ctx, sock)
		if err == nil {
			uc := c.(*net.UnixConn)
			fw := &frameWriter{w: uc}
			_ = uc.SetDeadline(deadline)
			if err = fw.writeRequest(&request{Op: "egress", Port: egressPort}); err == nil {
				var typ byte
				var b []byte
				typ, b, err = readFrame(uc, nil)
				if err == nil && typ == frameFail {
					var f failMsg
					_ = json.Unmarshal(b, &f)
					err = f.err()
				}
				if err == nil {
					_ = uc.SetDeadline(time.Time{})
					return uc, nil
				}
			}
			uc.Close()
			return nil, err
		}
		if time.Now().After(deadline) || !(errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)) {
			return nil, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func listenControl(path string) (*net.UnixListener, error) {
	_ = os.Remove(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// serveControl answers "reload" (load the policy of egressFile again) on
// the control socket, one line per request, "ok" or "error: ...".
func serveControl(ln *net.UnixListener, dir string, p egressProxy) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			line, err := bufio.NewReader(io.LimitReader(c, 64)).ReadString('\n')
			if err != nil || strings.TrimSpace(line) != "reload" {
				_, _ = io.WriteString(c, "error: unknown request\n")
				return
			}
			cfg, err := readEgressConfig(dir)
			if err == nil {
				err = p.SetPolicy(cfg.Policy)
			}
			if err != nil {
				_, _ = io.WriteString(c, "error: "+strings.ReplaceAll(err.Error(), "\n", " ")+"\n")
				return
			}
			_, _ = io.WriteString(c, "ok\n")
		}()
	}
}

// reloadEgress asks the proxy of the sandbox in dir to load its policy
// again. It reports false, nil when no proxy answers (it loads the file
// when it starts).
func reloadEgress(ctx context.Context, dir string) (bool, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", filepath.Join(dir, egressSock))
	if err != nil {
		return false, nil
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "reload\n"); err != nil {
		return true, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
		return true, fmt.Errorf("egress proxy: %w", err)
	}
	if msg, ok := strings.CutPrefix(strings.TrimSpace(line), "error: "); ok {
		return true, errors.New(msg)
	}
	return true, nil
}

// egressStart is a started proxy process, seen from the spawner.
type egressStart struct {
	cmd    *exec.Cmd
	status *bufio.Reader
	pipe   *os.File
}

// egressNoFile is the proxy's RLIMIT_NOFILE: two descriptors (the
// sandbox's end and the upstream) for each of the connections it serves at
// once, and room for its own (control socket, agent connection, resolver,
// connections answered over the cap).
const egressNoFile = 2*egress.DefaultMaxConns + 128

// startEgress starts the proxy of the sandbox in dir; started and
// attached wait for its progress, so that the agent starts meanwhile.
//
// The proxy is started in the sandbox's cgroups (cgroupV2, a directory
// or "", and the v1 directories cgroupV1), as pasta is: the memory, pids
// and CPU a sandbox makes its proxy spend (connections, buffered headers)
// count against the sandbox's own limits rather than the host's. Pause
// freezes it with the sandbox's commands, which cannot use it meanwhile.
func startEgress(dir string, logf *os.File, cgroupV2 string, cgroupV1 []string) (*egressStart, error) {
	attr := &syscall.SysProcAttr{Setsid: true}
	if cgroupV2 != "" {
		// As for the agent: a cgroup that cannot be opened is one the
		// agent did not join either.
		if d, err := os.Open(cgroupV2); err == nil {
			defer d.Close()
			attr.UseCgroupFD, attr.CgroupFD = true, int(d.Fd())
		}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{Path: helperExe, Args: []string{egressArg0, dir}, Env: agentEnv,
		ExtraFiles: []*os.File{pw}, SysProcAttr: attr}
	if logf != nil {
		cmd.Stderr = logf
	}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, fmt.Errorf("start egress proxy: %w", err)
	}
	for _, d := range cgroupV1 {
		// Moved before it has read its configuration, so in every limit
		// before it holds anything (as the agent is).
		_ = os.WriteFile(d+"/cgroup.procs", []byte(strconv.Itoa(cmd.Process.Pid)), 0)
	}
	go func() { _ = cmd.Wait() }() // reap it whenever it ends
	return &egressStart{cmd: cmd, status: bufio.NewReader(pr), pipe: pr}, nil
}

// egressStatusWait bounds each wait for the proxy's next status line. A
// proxy that fails says so on that line, and one that dies closes it, so
// the bound is reached only by a proxy that hangs; it is generous because
// a starved host took over 15 s to start the proxy's binary.
const egressStatusWait = time.Minute

// started waits until the proxy runs and returns its CA.
func (e *egressStart) started() (string, error) {
	h, err := e.next(egressStatusWait)
	if err != nil {
		return "", err
	}
	return h.CA, nil
}

// next reads the proxy's next status line.
func (e *egressStart) next(d time.Duration) (egressHello, error) {
	_ = e.pipe.SetReadDeadline(time.Now().Add(d))
	line, err := e.status.ReadBytes('\n')
	var h egressHello
	if err == nil {
		err = json.Unmarshal(line, &h)
	}
	if err != nil {
		return h, fmt.Errorf("egress proxy: %w", err)
	}
	if h.Err != "" {
		return h, fmt.Errorf("egress proxy: %s", h.Err)
	}
	return h, nil
}

// attached waits until the proxy has connected to the agent.
func (e *egressStart) attached() error {
	defer e.pipe.Close()
	h, err := e.next(egressStatusWait)
	if err == nil && !h.Attached {
		err = errors.New("egress proxy: no attach reported")
	}
	return err
}

func (e *egressStart) kill() {
	_ = e.cmd.Process.Kill()
	e.pipe.Close()
}

// errNoProxyNet says why a policy that needs the proxy cannot be had.
func errNoProxyNet(r *Runtime) error {
	return sberrors.Errorf(sberrors.FailedPrecondition,
		"local: network policy with domain or CIDR entries or brokered secrets needs the egress proxy, which needs network namespaces (isolation L3 or higher); this Runtime gives %s", r.level.Describe())
}
