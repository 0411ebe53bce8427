package docker

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

// The egress proxy of a sandbox whose policy needs one (an allow-list,
// deny entries, brokered secrets, or allow-all on a Runtime that joins no
// network; see needsProxy). The container then runs on the engine's none
// network, which has a loopback and no route out; never on a bridge. A
// helper process (this binary re-executed as egressArg0, in a session of
// its own, so that it outlives the Runtime and the program as the
// container does) enters the container's network namespace just long
// enough to listen on 127.0.0.1:egressPort there, and serves what it
// accepts with the proxy of package internal/egress, which runs in the
// host's network namespace: it checks each destination against the
// policy, resolves names itself, brokers secrets and connects out. A
// program in the sandbox that ignores the proxy reaches nothing.
//
// The helper gets its configuration (the policy, the secrets' values) on
// a pipe, never on its command line or in its environment, and holds it
// in memory only. It ends when the container's main process does
// (Destroy, the reaper, the engine stopping the container) and Destroy
// kills it as well; it is found by its command line, which names the
// container (egressArg0 and the container's id), so that any Runtime,
// in any process, finds it without state of its own.
//
// Entering another network namespace needs root in the host's user
// namespace, and the container's process must be visible in this host's
// /proc: the engine must run on this host (a unix socket whose peer is a
// process here) and the OCI runtime must be runc-like (gVisor's runsc has
// a network stack of its own, outside the namespace). Elsewhere the
// policies that need the proxy are refused with FailedPrecondition.
const (
	egressArg0 = "sandboxkit-docker-egress"
	// egressPort is the proxy's port on the sandbox's loopback.
	egressPort = 3128
	// egressBundle is the trust bundle of a sandbox with brokered
	// secrets: the image's CA certificates and the proxy's CA;
	// egressCAOnly is the proxy's CA alone. Both belong to root, 0444.
	egressBundle = stateDir + "/ca-certificates.crt"
	egressCAOnly = stateDir + "/egress-ca.pem"
	// egressImageBundle is where images keep their CA certificates
	// (Debian, Ubuntu, Alpine, busybox images that have any).
	egressImageBundle = "/etc/ssl/certs/ca-certificates.crt"
)

// Labels of a sandbox behind the proxy.
const (
	labelPolicy = "dev.sandboxkit.network-policy" // the policy, JSON, as Info reports it
	labelProxy  = "dev.sandboxkit.egress"         // "1": the sandbox is behind the proxy; "ca": with brokered secrets
)

// egressConfig is what the helper of one sandbox runs with, sent on its
// configuration pipe.
type egressConfig struct {
	Policy  *driver.NetworkPolicy   `json:"policy"`
	Secrets []driver.BrokeredSecret `json:"secrets,omitempty"`
	// Hosts, Roots and Dial: WithEgressHosts, WithEgressRootCAs,
	// WithEgressDialOverride.
	Hosts map[string][]netip.Addr           `json:"hosts,omitempty"`
	Roots string                            `json:"roots,omitempty"`
	Dial  map[netip.AddrPort]netip.AddrPort `json:"dial,omitempty"`
}

// egressHello is what the helper writes on its status pipe once it
// listens in the sandbox: its CA, or why it cannot run.
type egressHello struct {
	CA  string `json:"ca,omitempty"`
	Err string `json:"err,omitempty"`
}

// needsProxy reports whether a sandbox with policy p and secrets needs
// the egress proxy on a Runtime joining network netMode when allowed:
// anything but deny-all and an allow-all the joined network gives.
func needsProxy(p *driver.NetworkPolicy, secrets int, netMode string) bool {
	if secrets > 0 {
		return true
	}
	if p == nil {
		return false
	}
	switch p.Mode {
	case driver.NetworkDenyAll:
		return false
	case driver.NetworkAllowAll:
		return len(p.DenyDomains)+len(p.DenyCIDRs) > 0 || netMode == "none"
	}
	return true
}

// proxyEnv returns the variables every command of a sandbox behind the
// proxy gets: the proxy, and with brokered secrets the trust bundle that
// holds the proxy's CA (the names local's sandboxes get).
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

// policyLabel encodes the policy Info reports for a sandbox behind the
// proxy; policyOf decodes it (nil when absent or unreadable).
func policyLabel(p *driver.NetworkPolicy) string {
	b, _ := json.Marshal(p)
	return string(b)
}

func policyOf(labels map[string]string) *driver.NetworkPolicy {
	s, ok := labels[labelPolicy]
	if !ok {
		return nil
	}
	var p driver.NetworkPolicy
	if json.Unmarshal([]byte(s), &p) != nil {
		return nil
	}
	return &p
}

func init() { Init() }

// Init runs the sandbox's egress helper when the binary was re-executed
// as one (recognised by its argv[0]) and then exits the process; in every
// other case it returns at once. The package's init function calls it, so
// programs need not; a program that wants the hook explicit may call it
// first thing in main or TestMain.
func Init() {
	if len(os.Args) > 0 && os.Args[0] == egressArg0 {
		egressMain()
	}
}

// validEgressName reports whether name may be a WithEgressHosts name.
func validEgressName(name string) (string, bool) {
	n := strings.ToLower(strings.TrimSuffix(name, "."))
	return n, n != "" && !strings.ContainsAny(n, " /*")
}

// attachProxy starts the egress helper of the running container id with
// configuration cfg; with ca (brokered secrets) it then writes the trust
// bundle and the proxy's CA into the container, root's and read-only for
// the sandbox's user, where proxyEnv's variables point.
func (r *Runtime) attachProxy(ctx context.Context, id string, cfg *egressConfig, ca bool) error {
	ins, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return r.wrap(ctx, "create: egress proxy", err)
	}
	st := ins.Container.State
	if st == nil || st.Pid <= 0 {
		return fmt.Errorf("docker: create: egress proxy: the container's process is not running: %w", sberrors.ErrUnavailable)
	}
	pem, err := startEgress(ctx, id, st.Pid, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("docker: create: egress proxy: %w", ctx.Err())
		}
		return fmt.Errorf("docker: create: %w: %w", err, sberrors.ErrUnavailable)
	}
	if !ca {
		return nil
	}
	bundle := r.imageBundle(ctx, id)
	if len(bundle) > 0 && bundle[len(bundle)-1] != '\n' {
		bundle = append(bundle, '\n')
	}
	bundle = append(bundle, pem...)
	now := time.Now()
	entries := []tarEntry{
		{name: egressBundle, mode: 0o444, mtime: now, body: bundle},
		{name: egressCAOnly, mode: 0o444, mtime: now, body: []byte(pem)},
	}
	if _, err := r.cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: stateDir, Content: tarOf(stateDir, entries)}); err != nil {
		return r.wrap(ctx, "create: writing the egress proxy's CA", err)
	}
	return nil
}

// imageBundle returns the CA certificates of the container's image
// (egressImageBundle), empty when it has none.
// A symbolic link (as some images make it) is followed, a few times.
func (r *Runtime) imageBundle(ctx context.Context, id string) []byte {
	p := egressImageBundle
	for range 4 {
		b, link := r.readImageFile(ctx, id, p)
		if link == "" {
			return b
		}
		if !path.IsAbs(link) {
			link = path.Join(path.Dir(p), link)
		}
		p = link
	}
	return nil
}

// readImageFile returns the regular file p of the container, or the
// target of the symbolic link p.
func (r *Runtime) readImageFile(ctx context.Context, id, p string) ([]byte, string) {
	res, err := r.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: p})
	if err != nil {
		return nil, ""
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, ""
		}
		if h.Typeflag == tar.TypeSymlink {
			return nil, h.Linkname
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(io.LimitReader(tr, 16<<20))
			if err != nil {
				return nil, ""
			}
			return b, ""
		}
	}
}
