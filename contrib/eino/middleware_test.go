package eino_test

import (
	"context"
	"testing"
	"time"

	"github.com/cloudwego/eino/adk"
	fsmw "github.com/cloudwego/eino/adk/middlewares/filesystem"
	"github.com/stretchr/testify/require"

	eino "github.com/sandboxkit/sandbox/contrib/eino"
)

// TestPlainMiddlewareEndsRunOnToolFailure records why NewMiddleware
// exists: eino's own filesystem middleware, given the Backend directly,
// turns a Backend error (here a missing file) into the tool's Go error and
// the agent's run ends; through NewMiddleware the model gets the error as
// the tool's result and the run goes on.
func TestPlainMiddlewareEndsRunOnToolFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mgr := newManager(t, providers()[0].client(t))
	b, err := eino.New(mgr, eino.Options{})
	require.NoError(t, err)
	defer b.Close()

	plain, err := fsmw.New(ctx, &fsmw.MiddlewareConfig{Backend: b})
	require.NoError(t, err)
	wrapped, err := eino.NewMiddleware(ctx, b, nil)
	require.NoError(t, err)

	for _, tc := range []struct {
		name    string
		mw      adk.ChatModelAgentMiddleware
		endsRun bool
	}{{"eino", plain, true}, {"NewMiddleware", wrapped, false}} {
		t.Run(tc.name, func(t *testing.T) {
			m := newScripted(call{"read_file", `{"file_path":"missing.txt"}`}, call{"ls", `{}`})
			agent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{Name: "a", Description: "a", Model: m, Handlers: []adk.ChatModelAgentMiddleware{tc.mw}})
			require.NoError(t, err)
			last, errs := runAgent(ctx, agent, false, "conv")
			if tc.endsRun {
				require.NotEmpty(t, errs)
				require.ErrorContains(t, errs[0], "file 'missing.txt' not found")
				_, ok := m.result(1)
				require.False(t, ok, "the run ended at the failure")
				return
			}
			require.Empty(t, errs)
			require.Equal(t, "done", last)
			got, _ := m.result(0)
			require.Equal(t, "Error: file 'missing.txt' not found", got)
			got, _ = m.result(1)
			require.Equal(t, "No files found", got)
		})
	}
}

// TestSessionsPerConversation: each conversation key gets a sandbox of its
// own; a context without a key ends the run (nothing the model does can
// name one); a sandbox lost behind the manager's back is reported to the
// model and replaced at the next call; the file backends of ended sessions
// are dropped.
func TestSessionsPerConversation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mgr := newManager(t, providers()[0].client(t))
	b, err := eino.New(mgr, eino.Options{})
	require.NoError(t, err)
	defer b.Close()
	mw, err := eino.NewMiddleware(ctx, b, nil)
	require.NoError(t, err)
	agentFor := func(m *scripted) adk.Agent {
		a, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{Name: "a", Description: "a", Model: m, Handlers: []adk.ChatModelAgentMiddleware{mw}})
		require.NoError(t, err)
		return a
	}

	ma := newScripted(call{"write_file", `{"file_path":"mine.txt","content":"a's"}`}, call{"read_file", `{"file_path":"mine.txt"}`})
	_, errs := runAgent(ctx, agentFor(ma), false, "conv-a")
	require.Empty(t, errs)
	got, _ := ma.result(1)
	require.Equal(t, "     1\ta's", got)

	mb := newScripted(call{"read_file", `{"file_path":"mine.txt"}`})
	_, errs = runAgent(ctx, agentFor(mb), false, "conv-b")
	require.Empty(t, errs)
	got, _ = mb.result(0)
	require.Equal(t, "Error: file 'mine.txt' not found", got, "conv-b has a sandbox of its own")
	require.Equal(t, 2, mgr.Len())

	// No key: the run ends with ErrNoSessionKey.
	agent := agentFor(newScripted(call{"ls", `{}`}))
	it := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent}).Query(ctx, "hi")
	var runErr error
	for ev, ok := it.Next(); ok; ev, ok = it.Next() {
		if ev.Err != nil {
			runErr = ev.Err
		}
	}
	require.ErrorIs(t, runErr, eino.ErrNoSessionKey)

	// A sandbox lost behind the manager's back: the model is told, and
	// the next call works in a fresh one.
	sa, ok := mgr.Lookup("conv-a")
	require.True(t, ok)
	require.NoError(t, sa.Sandbox().Destroy(ctx))
	mg := newScripted(call{"read_file", `{"file_path":"mine.txt"}`}, call{"write_file", `{"file_path":"again.txt","content":"x"}`}, call{"ls", `{}`})
	_, errs = runAgent(ctx, agentFor(mg), false, "conv-a")
	require.Empty(t, errs)
	got, _ = mg.result(0)
	require.Contains(t, got, "Error: read_file failed:")
	require.Contains(t, got, "The sandbox was lost")
	got, _ = mg.result(1)
	require.Equal(t, "Updated file again.txt", got)
	got, _ = mg.result(2)
	require.Equal(t, "again.txt", got)
	sa2, ok := mgr.Lookup("conv-a")
	require.True(t, ok)
	require.NotEqual(t, sa.ID(), sa2.ID())

	// Released sessions' file backends are dropped when another is made.
	require.Equal(t, 2, eino.Entries(b))
	sb, _ := mgr.Lookup("conv-b")
	require.NoError(t, mgr.Release(ctx, sb))
	_, errs = runAgent(ctx, agentFor(newScripted(call{"ls", `{}`})), false, "conv-c")
	require.Empty(t, errs)
	require.Equal(t, 2, eino.Entries(b), "conv-a and conv-c; conv-b dropped")

	// A closed Backend ends the run.
	require.NoError(t, b.Close())
	_, errs = runAgent(ctx, agentFor(newScripted(call{"ls", `{}`})), false, "conv-a")
	require.NotEmpty(t, errs)
}
