package eino_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"
	"go.uber.org/goleak"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Compile-time proof that the scripted model is what an adk agent takes.
var _ model.ToolCallingChatModel = (*scripted)(nil)

// call is one tool call the scripted model makes.
type call struct {
	tool, args string
}

// scripted is a model.ToolCallingChatModel that replays tool calls: each
// Generate records the tool results of the previous turn (by call id,
// "call-N" for the Nth call) and answers with the next call of its
// script, then with a final text once the script is done.
type scripted struct {
	s *script
	// tools are the tools bound with WithTools.
	tools []*schema.ToolInfo
}

type script struct {
	mu      sync.Mutex
	calls   []call
	next    int
	results map[string]string  // tool results by call id
	offered []*schema.ToolInfo // the tools of the last Generate (model.WithTools, or WithTools)
}

func newScripted(calls ...call) *scripted {
	return &scripted{s: &script{calls: calls, results: map[string]string{}}}
}

func (m *scripted) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return &scripted{s: m.s, tools: tools}, nil
}

func (m *scripted) Generate(_ context.Context, in []*schema.Message, opts ...model.Option) (*schema.Message, error) {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offered = model.GetCommonOptions(&model.Options{Tools: m.tools}, opts...).Tools
	for i := len(in) - 1; i >= 0 && in[i].Role == schema.Tool; i-- {
		s.results[in[i].ToolCallID] = in[i].Content
	}
	if s.next >= len(s.calls) {
		return schema.AssistantMessage("done", nil), nil
	}
	c := s.calls[s.next]
	id := fmt.Sprintf("call-%d", s.next)
	s.next++
	return schema.AssistantMessage("", []schema.ToolCall{{ID: id, Type: "function", Function: schema.FunctionCall{Name: c.tool, Arguments: c.args}}}), nil
}

func (m *scripted) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.Generate(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}

// offered returns the tools the agent offered the model last.
func (m *scripted) offered() []*schema.ToolInfo {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	return m.s.offered
}

// result returns the tool result of the i-th call, and whether there was one.
func (m *scripted) result(i int) (string, bool) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	r, ok := m.s.results[fmt.Sprintf("call-%d", i)]
	return r, ok
}

// provider is a way to get sandboxes: a client over a fresh runtime.
type provider struct {
	name   string
	client func(t *testing.T) *sandbox.Client
}

// providers returns memory and local. Local is skipped, saying why, where
// this host cannot run its sandboxes (it needs Linux).
func providers() []provider {
	return []provider{
		{"memory", func(t *testing.T) *sandbox.Client {
			c := sandbox.NewClient(memory.New())
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
		{"local", func(t *testing.T) *sandbox.Client {
			rt, err := local.New(local.WithRoot(t.TempDir()))
			if errors.Is(err, sandbox.ErrUnimplemented) {
				t.Skipf("provider/local cannot isolate sandboxes on this host: %v", err)
			}
			if err != nil {
				t.Fatalf("provider/local: %v", err)
			}
			c := sandbox.NewClient(rt)
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
	}
}

// newManager returns a session manager over c, closed (its sandboxes
// destroyed) when the test ends.
func newManager(t *testing.T, c *sandbox.Client) *session.Manager {
	t.Helper()
	mgr := session.NewManager(c, session.Options{})
	t.Cleanup(func() { _ = mgr.Close(context.Background()) })
	return mgr
}
