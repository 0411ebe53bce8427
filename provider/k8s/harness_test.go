//go:build unix

package k8s_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sandboxv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	agentsfake "sigs.k8s.io/agent-sandbox/clients/k8s/clientset/versioned/fake"
	extfake "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/clientset/versioned/fake"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/sandboxkit/sandbox/internal/sigreset"
)

// The data plane of the tests is the real sandboxd, built once per test
// run from the module cache (go.mod lists it as a tool, so its packages
// are in go.sum) and started per sandbox on 127.0.0.1 with a temporary
// root directory. The control plane is the generated fake clientsets,
// with a controller stand-in (cluster, below) that follows the rules of
// the agent-sandbox controllers.

var (
	sandboxdBin string
	buildErr    error
)

// TestMain builds sandboxd before any test starts: built by the first pod
// instead, its build (minutes with a cold build cache) ran under the
// deadline of the creates waiting for that pod, and a fresh machine's
// first make test failed them all.
func TestMain(m *testing.M) {
	buildDir, err := os.MkdirTemp("", "k8s-sandboxd-")
	if err != nil {
		buildErr = err
	} else {
		sandboxdBin, buildErr = buildSandboxd(buildDir)
	}
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// buildSandboxd builds sandboxd from the module cache into dir.
func buildSandboxd(dir string) (string, error) {
	// Traversable by the unprivileged user sandboxd runs as on a root
	// host (startDaemon).
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "sandboxd")
	cmd := exec.Command("go", "build", "-o", bin, "sigs.k8s.io/agent-sandbox/packages/sandboxd/cmd/sandboxd")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build sandboxd: %v\n%s", err, out)
	}
	return bin, nil
}

// sandboxdPath returns the sandboxd TestMain built, failing t if the build
// failed.
func sandboxdPath(t *testing.T) string {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return sandboxdBin
}

// daemon is one running sandboxd.
type daemon struct {
	cmd        *exec.Cmd
	rest, grpc int
	done       chan struct{}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// unprivileged is the uid and gid sandboxd runs as when the tests run as
// root (nobody on Debian).
const unprivileged = 65534

// startDaemon runs sandboxd on loopback with root as its --root-dir.
func startDaemon(t *testing.T, root string, env []string) (*daemon, error) {
	bin := sandboxdPath(t)
	for attempt := 0; ; attempt++ {
		d := &daemon{rest: freePort(t), grpc: freePort(t), done: make(chan struct{})}
		d.cmd = exec.Command(bin, "--listen-host=127.0.0.1", "--rest-port="+strconv.Itoa(d.rest),
			"--grpc-port="+strconv.Itoa(d.grpc), "--root-dir="+root, "--shutdown-timeout=2s")
		d.cmd.Dir = root
		// A pod's environment: its own home and the system's PATH (the
		// test's PATH may hold directories the unprivileged user cannot
		// search, which turns "command not found" into exit 126).
		d.cmd.Env = append(append(os.Environ(), "HOME="+root, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"), env...)
		d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if os.Geteuid() == 0 {
			// sandboxd runs the suite's commands with its own rights and
			// no isolation: in a pod that is the container's, here it is
			// the host's. As root, the hostile parts of the suite would
			// act on the host itself, so sandboxd runs as an unprivileged
			// user that owns only its root directory.
			if err := os.Chown(root, unprivileged, unprivileged); err != nil {
				return nil, err
			}
			d.cmd.SysProcAttr.Credential = &syscall.Credential{Uid: unprivileged, Gid: unprivileged, NoSetGroups: true}
		}
		// As in a pod, no signal starts ignored, whatever this test
		// process was started with (nohup, a script's background job):
		// sandboxd's commands would inherit it.
		sigreset.Unignore()
		sigreset.UnblockCmd(d.cmd) // nor blocked
		if err := d.cmd.Start(); err != nil {
			return nil, err
		}
		go func() { _ = d.cmd.Wait(); close(d.done) }()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(d.rest) + "/v1/health")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return d, nil
				}
			}
			select {
			case <-d.done:
				deadline = time.Time{}
			case <-time.After(20 * time.Millisecond):
			}
		}
		d.stop()
		if attempt == 3 {
			return nil, fmt.Errorf("sandboxd did not become healthy")
		}
	}
}

// stop ends sandboxd and its children (the pod's termination).
func (d *daemon) stop() {
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	<-d.done
}

// cluster stands in for the agent-sandbox controllers and the kubelet over
// the fake clientsets. Its rules, from the controllers' source at v1.0.1:
//   - extensions/controllers/sandboxclaim_controller.go (reconcile,
//     computeReadyCondition, computeAndSetStatus): a claim gets a Sandbox
//     from its warm pool; claim.status.sandbox mirrors the Sandbox's name,
//     status.podIPs and status.serviceFQDN; the claim's Ready condition
//     mirrors the Sandbox's Ready condition; a missing warm pool is Ready
//     False; a claim past its lifecycle.shutdownTime with the
//     DeleteForeground policy is deleted.
//   - controllers/sandbox_controller.go: operatingMode Suspended ends the
//     pod (Ready False, reason SandboxSuspended, podIPs cleared) and keeps
//     its volumes; Running starts a pod again.
//
// A pod here is a sandboxd process whose --root-dir is the sandbox's
// volume (kept while suspended); its pod IP is a made-up address the
// test dialer maps to the daemon's loopback ports.
type cluster struct {
	t      *testing.T
	ns     string
	agents *agentsfake.Clientset
	ext    *extfake.Clientset
	base   string

	mu      sync.Mutex
	pods    map[string]*pod // by claim name
	nextIP  int
	byIP    map[string]*daemon
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}
}

type pod struct {
	ip     string
	root   string
	d      *daemon
	paused bool
}

const (
	testNS       = "sbx"
	testTemplate = "python"
	testPool     = "python-pool"
	// neverTemplate's pods are never scheduled: its claims stay
	// Ready=False with the scheduler's reason.
	neverTemplate = "never"
	neverPool     = "never-pool"
)

func newCluster(t *testing.T) *cluster {
	pools := []*extv1beta1.SandboxWarmPool{
		{ObjectMeta: metav1.ObjectMeta{Name: testPool, Namespace: testNS}, Spec: extv1beta1.SandboxWarmPoolSpec{TemplateRef: extv1beta1.SandboxTemplateRef{Name: testTemplate}}},
		{ObjectMeta: metav1.ObjectMeta{Name: neverPool, Namespace: testNS}, Spec: extv1beta1.SandboxWarmPoolSpec{TemplateRef: extv1beta1.SandboxTemplateRef{Name: neverTemplate}}},
	}
	ext := extfake.NewSimpleClientset()
	for _, p := range pools {
		if _, err := ext.ExtensionsV1beta1().SandboxWarmPools(testNS).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &cluster{t: t, ns: testNS, agents: agentsfake.NewSimpleClientset(), ext: ext, base: podsDir(t),
		pods: map[string]*pod{}, byIP: map[string]*daemon{}, cancel: cancel, done: make(chan struct{})}
	go c.loop(ctx)
	t.Cleanup(c.stop)
	return c
}

// podsDir is the directory the pods' root directories go under: like
// t.TempDir, but traversable by the unprivileged user sandboxd runs as.
func podsDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "k8s-pods-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (c *cluster) stop() {
	c.cancel()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pods {
		if p.d != nil {
			p.d.stop()
		}
	}
	c.pods = map[string]*pod{}
}

// dial maps pod IPs to their daemons' loopback ports: 8080 is sandboxd's
// REST port, 9090 its gRPC port, as in the pod. A pod that is gone
// refuses the connection, as a dead pod IP does.
func (c *cluster) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	d := c.byIP[host]
	c.mu.Unlock()
	if d == nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	target := d.rest
	if port == "9090" {
		target = d.grpc
	}
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(target))
}

// loop reconciles every 20 ms until the cluster stops.
func (c *cluster) loop(ctx context.Context) {
	defer close(c.done)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		c.reconcile(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *cluster) reconcile(ctx context.Context) {
	claims, err := c.ext.ExtensionsV1beta1().SandboxClaims(c.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	live := map[string]bool{}
	for i := range claims.Items {
		cl := &claims.Items[i]
		live[cl.Name] = true
		c.reconcileClaim(ctx, cl)
	}
	// A deleted claim takes its Sandbox and pod with it (owner references,
	// foreground propagation).
	c.mu.Lock()
	var gone []*pod
	for name, p := range c.pods {
		if !live[name] {
			gone = append(gone, p)
			delete(c.pods, name)
			delete(c.byIP, p.ip)
			_ = c.agents.AgentsV1beta1().Sandboxes(c.ns).Delete(ctx, name, metav1.DeleteOptions{})
		}
	}
	c.mu.Unlock()
	for _, p := range gone {
		if p.d != nil {
			p.d.stop()
		}
	}
}

func (c *cluster) setReady(ctx context.Context, cl *extv1beta1.SandboxClaim, status metav1.ConditionStatus, reason, msg string, ip string) {
	cl = cl.DeepCopy()
	meta.SetStatusCondition(&cl.Status.Conditions, metav1.Condition{
		Type: string(sandboxv1beta1.SandboxConditionReady), Status: status, Reason: reason, Message: msg,
		ObservedGeneration: cl.Generation,
	})
	cl.Status.SandboxStatus.Name = cl.Name
	if ip != "" {
		cl.Status.SandboxStatus.PodIPs = []string{ip}
		cl.Status.SandboxStatus.ServiceFQDN = cl.Name + "." + c.ns + ".svc.cluster.local"
	} else {
		cl.Status.SandboxStatus.PodIPs = nil
	}
	_, _ = c.ext.ExtensionsV1beta1().SandboxClaims(c.ns).UpdateStatus(ctx, cl, metav1.UpdateOptions{})
}

func (c *cluster) reconcileClaim(ctx context.Context, cl *extv1beta1.SandboxClaim) {
	if lc := cl.Spec.Lifecycle; lc != nil && lc.ShutdownTime != nil && time.Now().After(lc.ShutdownTime.Time) {
		if lc.ShutdownPolicy == extv1beta1.ShutdownPolicyDelete || lc.ShutdownPolicy == extv1beta1.ShutdownPolicyDeleteForeground {
			_ = c.ext.ExtensionsV1beta1().SandboxClaims(c.ns).Delete(ctx, cl.Name, metav1.DeleteOptions{})
			return
		}
	}
	pool, err := c.ext.ExtensionsV1beta1().SandboxWarmPools(c.ns).Get(ctx, cl.Spec.WarmPoolRef.Name, metav1.GetOptions{})
	if err != nil {
		c.setReadyOnce(ctx, cl, "WarmPoolNotFound", "warm pool "+cl.Spec.WarmPoolRef.Name+" not found")
		return
	}
	if pool.Spec.TemplateRef.Name == neverTemplate {
		// The Sandbox's pod is unschedulable: the claim mirrors the
		// Sandbox's Ready=False, DependenciesNotReady.
		c.setReadyOnce(ctx, cl, sandboxv1beta1.SandboxReasonDependenciesNotReady, "Pod is Pending: 0/3 nodes are available: 3 Insufficient memory")
		return
	}
	sbs := c.agents.AgentsV1beta1().Sandboxes(c.ns)
	sb, err := sbs.Get(ctx, cl.Name, metav1.GetOptions{})
	if err != nil {
		sb, err = sbs.Create(ctx, &sandboxv1beta1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Name: cl.Name, Namespace: c.ns},
			Spec:       sandboxv1beta1.SandboxSpec{OperatingMode: sandboxv1beta1.SandboxOperatingModeRunning},
		}, metav1.CreateOptions{})
		if err != nil {
			return
		}
	}
	c.mu.Lock()
	p := c.pods[cl.Name]
	if p == nil {
		p = &pod{root: filepath.Join(c.base, cl.Name, "workspace")}
		c.pods[cl.Name] = p
	}
	c.mu.Unlock()
	suspended := sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended
	switch {
	case suspended && p.d != nil:
		c.mu.Lock()
		delete(c.byIP, p.ip)
		d := p.d
		p.d, p.ip = nil, ""
		c.mu.Unlock()
		d.stop()
		c.setReady(ctx, cl, metav1.ConditionFalse, sandboxv1beta1.SandboxReasonSuspended, "Sandbox is suspended", "")
	case suspended:
		if cond := meta.FindStatusCondition(cl.Status.Conditions, string(sandboxv1beta1.SandboxConditionReady)); cond == nil || cond.Reason != sandboxv1beta1.SandboxReasonSuspended {
			c.setReady(ctx, cl, metav1.ConditionFalse, sandboxv1beta1.SandboxReasonSuspended, "Sandbox is suspended", "")
		}
	case p.d == nil:
		if err := os.MkdirAll(p.root, 0o755); err != nil {
			return
		}
		// The controller injects the claim's env into the pod's container
		// (SandboxClaimSpec.Env); sandboxd's commands inherit it.
		var env []string
		for _, e := range cl.Spec.Env {
			env = append(env, e.Name+"="+e.Value)
		}
		d, err := startDaemon(c.t, p.root, env)
		if err != nil {
			c.setReady(ctx, cl, metav1.ConditionFalse, sandboxv1beta1.SandboxReasonDependenciesNotReady, err.Error(), "")
			return
		}
		c.mu.Lock()
		c.nextIP++
		p.d, p.ip = d, fmt.Sprintf("10.77.%d.%d", c.nextIP/250, c.nextIP%250+1)
		c.byIP[p.ip] = d
		ip := p.ip
		c.mu.Unlock()
		c.setReady(ctx, cl, metav1.ConditionTrue, sandboxv1beta1.SandboxReasonDependenciesReady, "Pod is Ready", ip)
	default:
		if len(cl.Status.SandboxStatus.PodIPs) == 0 {
			c.setReady(ctx, cl, metav1.ConditionTrue, sandboxv1beta1.SandboxReasonDependenciesReady, "Pod is Ready", p.ip)
		}
	}
}

// setReadyOnce sets Ready=False with reason unless it is set already.
func (c *cluster) setReadyOnce(ctx context.Context, cl *extv1beta1.SandboxClaim, reason, msg string) {
	if cond := meta.FindStatusCondition(cl.Status.Conditions, string(sandboxv1beta1.SandboxConditionReady)); cond != nil && cond.Reason == reason {
		return
	}
	c.setReady(ctx, cl, metav1.ConditionFalse, reason, msg, "")
}

// killPod ends a claim's pod without the controller noticing yet (a pod
// that died under a live claim).
func (c *cluster) killPod(name string) {
	c.mu.Lock()
	p := c.pods[name]
	var d *daemon
	if p != nil {
		d = p.d
		delete(c.byIP, p.ip)
	}
	c.mu.Unlock()
	if d != nil {
		d.stop()
	}
}
