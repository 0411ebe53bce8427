package fsbackend

import (
	"context"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"

	"github.com/stretchr/testify/require"
)

// newMemory returns a backend over a fresh memory sandbox, whose shell and
// utilities run the backend's helper over the in-memory files, and the
// memory Runtime for counting round trips and injecting faults.
func newMemory(ctx context.Context, opts Options) (*FilesystemBackend, *memory.Runtime, *sandbox.Sandbox, error) {
	rt := memory.New()
	client := sandbox.NewClient(rt)
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		return nil, nil, nil, err
	}
	b, err := New(sb, opts)
	return b, rt, sb, err
}

// newMemoryEnv is the behavioural tests' environment over provider/memory.
func newMemoryEnv(t *testing.T, opts Options) *env {
	t.Helper()
	sb, err := sandbox.NewClient(memory.New()).Create(context.Background(), sandbox.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	e := &env{sb: sb, opts: opts}
	if e.opts.BaseDir == "" {
		e.opts.BaseDir = memory.Home + "/workspace"
	}
	e.base, e.out = e.opts.BaseDir, memory.Home+"/outside"
	e.sh(t, "mkdir -p "+e.out)
	e.b, err = New(sb, e.opts)
	require.NoError(t, err)
	t.Cleanup(func() { e.b.Close() })
	return e
}
