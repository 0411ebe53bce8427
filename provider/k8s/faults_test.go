//go:build unix

package k8s_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/k8s"
	"github.com/sandboxkit/sandbox/sberrors"
)

func claimCount(t *testing.T, cl *cluster) int {
	t.Helper()
	l, err := cl.ext.ExtensionsV1beta1().SandboxClaims(testNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// A claim that never becomes Ready ends Create at the ready timeout; the
// claim is deleted and the error carries its Ready condition's reason.
func TestNeverReadyClaim(t *testing.T) {
	e := newEnv(t, k8s.WithReadyTimeout(1500*time.Millisecond))
	start := time.Now()
	_, err := e.c.Create(context.Background(), sandbox.CreateOptions{Template: neverTemplate})
	if err == nil {
		t.Fatal("Create of a never-Ready claim succeeded")
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("Create took %v, want about the 1.5 s ready timeout", took)
	}
	if sberrors.CodeOf(err) != sberrors.DeadlineExceeded {
		t.Errorf("code %v, want DeadlineExceeded: %v", sberrors.CodeOf(err), err)
	}
	for _, want := range []string{"DependenciesNotReady", "Insufficient memory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if n := claimCount(t, e.cl); n != 0 {
		t.Errorf("%d claims left after a failed create, want 0", n)
	}
}

// A Create whose context is cancelled while the claim is not Ready
// returns Canceled, and the claim is deleted in the background.
func TestCancelledCreateLeavesNoClaim(t *testing.T) {
	cl := newCluster(t)
	rt := newRuntime(t, cl)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for claimCount(t, cl) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	_, err := rt.Create(ctx, &driver.CreateRequest{Template: neverTemplate, Timeout: time.Minute})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if err := rt.Close(); err != nil { // waits for the background deletion
		t.Fatal(err)
	}
	if n := claimCount(t, cl); n != 0 {
		t.Errorf("%d claims left after a cancelled create, want 0", n)
	}
}

// With the router unreachable, a file call is Unavailable after exactly
// one retry (the refused dial is a stale transport: nothing was sent).
func TestRouterUnreachable(t *testing.T) {
	cl := newCluster(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	router := l.Addr().String()
	l.Close() // nothing listens there now
	var routerDials atomic.Int32
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == router {
			routerDials.Add(1)
			return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused")}
		}
		return cl.dial(ctx, network, addr)
	}
	rt := newRuntime(t, cl, k8s.WithRouterURL("http://"+router), k8s.WithDialer(dial), k8s.WithRoot("/"))
	c := sandbox.NewClient(rt)
	defer c.Close()
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	_, err = sb.ReadFile(ctx, "/x")
	if sberrors.CodeOf(err) != sberrors.Unavailable {
		t.Fatalf("ReadFile through an unreachable router: code %v, want Unavailable: %v", sberrors.CodeOf(err), err)
	}
	if n := routerDials.Load(); n != 2 {
		t.Errorf("%d dials to the router, want 2 (the call and one stale retry)", n)
	}
}

// A pod that died under a live claim is Unavailable (degraded), a
// destroyed sandbox NotFound (gone).
func TestPodDiedVersusGone(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb, err := e.c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	e.cl.killPod(sb.ID())
	_, err = sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	if code := sberrors.CodeOf(err); code != sberrors.Unavailable {
		t.Errorf("exec on a dead pod: code %v, want Unavailable: %v", code, err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.Attach(ctx, sb.ID())
	if code := sberrors.CodeOf(err); code != sberrors.NotFound {
		t.Errorf("Attach after Destroy: code %v, want NotFound: %v", code, err)
	}
}

// Destroy deletes the claim with foreground propagation; the lease is the
// claim's shutdown time and only ever moves later.
func TestDestroyForegroundAndLease(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb, err := e.c.Create(ctx, sandbox.CreateOptions{Timeout: 10 * time.Minute, Labels: map[string]string{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	shutdown := func() time.Time {
		c, err := e.cl.ext.ExtensionsV1beta1().SandboxClaims(testNS).Get(ctx, sb.ID(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Labels["team"] != "a" {
			t.Errorf("claim labels %v lack team=a", c.Labels)
		}
		return c.Spec.Lifecycle.ShutdownTime.Time
	}
	first := shutdown()
	if d := time.Until(first); d < 9*time.Minute || d > 11*time.Minute {
		t.Errorf("shutdown time %v from now, want about 10m", d)
	}
	if err := e.rt.SetTimeout(ctx, sb.ID(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := shutdown(); !got.Equal(first) {
		t.Errorf("a shorter lease moved the shutdown time from %v to %v", first, got)
	}
	if err := e.rt.SetTimeout(ctx, sb.ID(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := shutdown(); time.Until(got) < 59*time.Minute {
		t.Errorf("extended shutdown time is %v from now, want about 1h", time.Until(got))
	}
	e.cl.ext.ClearActions()
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, a := range e.cl.ext.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && d.GetName() == sb.ID() {
			found = true
			if p := d.GetDeleteOptions().PropagationPolicy; p == nil || *p != metav1.DeletePropagationForeground {
				t.Errorf("delete propagation %v, want Foreground", p)
			}
		}
	}
	if !found {
		t.Error("Destroy sent no delete of the claim")
	}
}

// The URL names the namespace and the options; unknown or bad ones are
// refused, naming them.
func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ url, want string }{
		{"k8s://Bad_NS?template=x", "namespace"},
		{"k8s://ns?tempalte=x", "tempalte"},
		{"k8s://ns?rest_port=99999", "rest_port"},
		{"k8s://ns?router_url=ftp://x", "router_url"},
		{"k8s://ns?ready_timeout=-1s", "ready_timeout"},
	} {
		_, err := sandbox.Open(ctx, tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want an error naming %q", tc.url, err, tc.want)
		}
	}
	_ = strconv.Itoa
}

// Removing a symbolic link to a directory removes the link, not the
// directory's contents (sandboxd's DELETE resolves links first).
func TestRemoveLinkKeepsTarget(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb, err := e.c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	if r, err := sb.Exec(ctx, sandbox.Command{Shell: "mkdir d && echo keep > d/f && ln -s d link"}); err != nil || r.ExitCode != 0 {
		t.Fatalf("setup: %v %+v", err, r)
	}
	if err := sb.Remove(ctx, "link"); err != nil {
		t.Fatal(err)
	}
	if got, err := sb.ReadFile(ctx, "d/f"); err != nil || string(got) != "keep\n" {
		t.Errorf("d/f after removing link -> d: %q, %v", got, err)
	}
	if _, err := sb.Stat(ctx, "link"); sberrors.CodeOf(err) != sberrors.NotFound {
		t.Errorf("Stat(link) after Remove: %v, want NotFound", err)
	}
	if err := sb.Remove(ctx, "missing"); sberrors.CodeOf(err) != sberrors.NotFound {
		t.Errorf("Remove(missing): %v, want NotFound", err)
	}
}
