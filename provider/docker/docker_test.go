package docker_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/docker"
)

// TestMain keeps the owner keys of the tests' Runtimes out of the user's
// own state directory: every Runtime of this test process (and its
// children) shares a key under a temporary XDG_STATE_HOME, as the
// processes of one user share theirs.
func TestMain(m *testing.M) {
	if os.Getenv(stateEnv) == "" {
		dir, err := os.MkdirTemp("", "sandboxkit-docker-test-state-")
		if err != nil {
			panic(err)
		}
		os.Setenv("XDG_STATE_HOME", dir)
		os.Setenv(stateEnv, dir)
		goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
			os.RemoveAll(dir)
			os.Exit(code)
		}))
	}
	goleak.VerifyTestMain(m)
}

// stateEnv marks a test process whose XDG_STATE_HOME TestMain set.
const stateEnv = "SANDBOXKIT_DOCKER_TEST_STATE"

// An engine that is not there is Unavailable, and the error names the
// socket so the user knows what to start.
func TestUnreachableEngineNamesSocket(t *testing.T) {
	t.Parallel()
	const sock = "unix:///nonexistent/sandboxkit-test/docker.sock"
	r, err := docker.New(docker.WithHost(sock))
	require.NoError(t, err)
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = r.Ping(ctx)
	require.Error(t, err)
	assert.Equal(t, sandbox.Unavailable, sandbox.CodeOf(err), "error: %v", err)
	assert.Contains(t, err.Error(), "/nonexistent/sandboxkit-test/docker.sock")

	// Opening an engine that is not there leaves no owner key behind.
	keyFile := filepath.Join(t.TempDir(), "key")
	_, err = sandbox.Open(ctx, "docker://?host="+sock+"&keyfile="+url.QueryEscape(keyFile))
	require.Error(t, err)
	assert.Equal(t, sandbox.Unavailable, sandbox.CodeOf(err), "Open: %v", err)
	assert.NoFileExists(t, keyFile)
}

// Bad URL parameters are InvalidArgument, naming the parameter.
func TestOpenBadParameter(t *testing.T) {
	t.Parallel()
	_, err := sandbox.Open(context.Background(), "docker://?imagee=x")
	require.Error(t, err)
	assert.Equal(t, sandbox.InvalidArgument, sandbox.CodeOf(err))
	assert.Contains(t, err.Error(), "imagee")
}

// rawClient is an engine client for looking behind the provider's back.
func rawClient(t *testing.T) *client.Client {
	host, _ := engine(t)
	c, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func newClient(t *testing.T, opts ...docker.Option) *sandbox.Client {
	c := sandbox.NewClient(newRuntime(t, opts...))
	t.Cleanup(func() { c.Close() })
	return c
}

func create(ctx context.Context, t *testing.T, c *sandbox.Client, opts sandbox.CreateOptions) *sandbox.Sandbox {
	if opts.Labels == nil {
		opts.Labels = map[string]string{}
	}
	opts.Labels["dockertest"] = t.Name()
	sb, err := c.Create(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return sb
}

// The container is hardened as the package doc says, and a create-time
// secret is in the commands' environment but not in `docker inspect`.
func TestContainerConfig(t *testing.T) {
	t.Parallel()
	raw := rawClient(t)
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const secret = "s3cret-value-for-inspect"
	sb := create(ctx, t, c, sandbox.CreateOptions{Env: map[string]string{"API_TOKEN": secret, "PLAIN": "p"}})

	ins, err := raw.ContainerInspect(ctx, sb.ID(), client.ContainerInspectOptions{})
	require.NoError(t, err)
	assert.NotContains(t, string(ins.Raw), secret, "the secret is in docker inspect")
	hc := ins.Container.HostConfig
	require.NotNil(t, hc)
	assert.Equal(t, "none", string(hc.NetworkMode))
	assert.Equal(t, []string{"ALL"}, []string(hc.CapDrop))
	assert.Contains(t, hc.SecurityOpt, "no-new-privileges")
	require.NotNil(t, hc.Init)
	assert.True(t, *hc.Init)
	require.NotNil(t, hc.PidsLimit)
	assert.Positive(t, *hc.PidsLimit)
	assert.Equal(t, "container", sb.Info().Isolation)

	r, err := sb.Exec(ctx, sandbox.Command{Shell: `id -u; printenv API_TOKEN PLAIN`})
	require.NoError(t, err)
	assert.Equal(t, "1000\n"+secret+"\np\n", string(r.Stdout), "stderr %q", r.Stderr)

	// A command's own environment wins over the create-time one.
	r, err = sb.Exec(ctx, sandbox.Command{Args: []string{"printenv", "PLAIN"}, Env: map[string]string{"PLAIN": "mine"}})
	require.NoError(t, err)
	assert.Equal(t, "mine\n", string(r.Stdout))
}

// A timeout ends the command's whole process tree, not only its first
// process.
func TestTimeoutEndsProcessTree(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb := create(ctx, t, c, sandbox.CreateOptions{})
	r, err := sb.Exec(ctx, sandbox.Command{Shell: "sleep 311 & sleep 312 & wait", Timeout: 2 * time.Second})
	require.NoError(t, err)
	assert.True(t, r.TimedOut)
	r, err = sb.Exec(ctx, sandbox.Command{Shell: "ps -o args"})
	require.NoError(t, err)
	assert.NotContains(t, string(r.Stdout), "sleep 31", "processes left by the timed-out command")
}

// A cancelled ctx ends the remote command too.
func TestCancelEndsCommand(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb := create(ctx, t, c, sandbox.CreateOptions{})
	cctx, ccancel := context.WithCancel(ctx)
	started := make(chan struct{})
	w := &notifyWriter{ch: started}
	done := make(chan error, 1)
	go func() {
		_, err := sb.Exec(cctx, sandbox.Command{Shell: "echo go; exec sleep 313", Stdout: w})
		done <- err
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the command never started")
	}
	ccancel()
	err := <-done
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.Canceled), "error %v", err)
	r, err := sb.Exec(ctx, sandbox.Command{Shell: "ps -o args"})
	require.NoError(t, err)
	assert.NotContains(t, string(r.Stdout), "sleep 313")
}

type notifyWriter struct {
	ch   chan struct{}
	done bool
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	if !w.done {
		w.done = true
		close(w.ch)
	}
	return len(p), nil
}

// Sandboxes outlive their Client: another Runtime lists them by label and
// sees a lease extended by the first.
func TestPersistentAcrossClients(t *testing.T) {
	t.Parallel()
	c1 := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb := create(ctx, t, c1, sandbox.CreateOptions{Timeout: 5 * time.Minute})
	require.NoError(t, sb.SetTimeout(ctx, time.Hour))
	c2 := newClient(t)
	found := false
	for info, err := range c2.List(ctx, sandbox.ListOptions{Labels: map[string]string{"dockertest": t.Name()}}) {
		require.NoError(t, err)
		if info.ID == sb.ID() {
			found = true
			assert.WithinDuration(t, time.Now().Add(time.Hour), info.LeaseEnd, 5*time.Minute)
			assert.Equal(t, sb.Home(), info.Home)
		}
	}
	assert.True(t, found, "the other client did not list the sandbox")
}

// A sandbox whose lease passed is gone for every client.
func TestLeaseEnds(t *testing.T) {
	t.Parallel()
	raw := rawClient(t)
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb := create(ctx, t, c, sandbox.CreateOptions{Timeout: time.Second})
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := c.Runtime().Get(ctx, sb.ID())
		if sandbox.CodeOf(err) == sandbox.NotFound {
			break
		}
		require.NoError(t, err)
		if time.Now().After(deadline) {
			t.Fatal("the sandbox outlived its 1 s lease by a minute")
		}
		time.Sleep(500 * time.Millisecond)
	}
	_, err := raw.ContainerInspect(ctx, sb.ID(), client.ContainerInspectOptions{})
	assert.Error(t, err, "the container is still on the engine")
}
