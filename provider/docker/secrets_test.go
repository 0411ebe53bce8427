package docker_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
)

// engineGet reads an engine endpoint's raw JSON, so a test sees every
// field the engine returns, not only those the client decodes.
func engineGet(ctx context.Context, t *testing.T, raw *client.Client, path string) string {
	t.Helper()
	dial := raw.Dialer()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker"+path, nil)
	require.NoError(t, err)
	res, err := hc.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, "GET %s: %s", path, b)
	return string(b)
}

// What `docker inspect` shows of environment values, as the package doc
// says: neither the container's inspect nor an exec's holds a create-time
// or a per-command value, while the command's arguments are in the exec's
// inspect, and the create-time file is in the container's layer for
// whoever can copy from the container.
func TestSecretsInInspect(t *testing.T) {
	t.Parallel()
	raw := rawClient(t)
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const (
		createSecret = "create-secret-7f3a"
		cmdSecret    = "command-secret-91c2"
		argMarker    = "argument-visible-5d0e"
	)
	sb := create(ctx, t, c, sandbox.CreateOptions{Env: map[string]string{"API_TOKEN": createSecret}})

	// An exec that runs long enough to be inspected while it runs.
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := sb.Exec(ctx, sandbox.Command{
			Args:   []string{"sh", "-c", `echo "$CMD_TOKEN" >/dev/null; echo go; sleep 5`, argMarker},
			Env:    map[string]string{"CMD_TOKEN": cmdSecret},
			Stdout: &notifyWriter{ch: started},
		})
		done <- err
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the exec did not start")
	}

	ins := engineGet(ctx, t, raw, "/containers/"+sb.ID()+"/json")
	assert.NotContains(t, ins, createSecret, "create-time value in the container's inspect")
	assert.NotContains(t, ins, cmdSecret, "per-command value in the container's inspect")
	cins, err := raw.ContainerInspect(ctx, sb.ID(), client.ContainerInspectOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, cins.Container.ExecIDs, "no exec listed while one runs")
	sawArgs := false
	for _, e := range cins.Container.ExecIDs {
		js := engineGet(ctx, t, raw, "/exec/"+e+"/json")
		assert.NotContains(t, js, createSecret, "create-time value in exec %s's inspect", e)
		assert.NotContains(t, js, cmdSecret, "per-command value in exec %s's inspect", e)
		sawArgs = sawArgs || strings.Contains(js, argMarker)
	}
	assert.True(t, sawArgs, "the command's arguments are in its exec's inspect (the doc says so)")
	require.NoError(t, <-done)

	// The limit the doc states: the value is in the container's layer.
	cp, err := raw.CopyFromContainer(ctx, sb.ID(), client.CopyFromContainerOptions{SourcePath: "/.sandboxkit/env"})
	require.NoError(t, err)
	b, err := io.ReadAll(cp.Content)
	cp.Content.Close()
	require.NoError(t, err)
	assert.Contains(t, string(b), createSecret, "the create-time file as docker cp reads it")
}
