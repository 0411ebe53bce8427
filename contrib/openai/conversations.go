package openai

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/session"
)

// Conversations hands out Tools for one sandbox per conversation key,
// over a session.Manager (which creates, reattaches, extends and reaps the
// sandboxes). It is safe for concurrent use. Close releases the Tools; the
// manager, and the sandboxes it holds, stay the caller's.
type Conversations struct {
	m    *session.Manager
	opts Options

	mu     sync.Mutex
	tools  map[string]*Tools // by conversation key
	closed bool
}

// NewConversations returns Conversations over m; each key's Tools use
// opts (Options.Workspace empty means the session's workspace).
func NewConversations(m *session.Manager, opts Options) *Conversations {
	return &Conversations{m: m, opts: opts, tools: map[string]*Tools{}}
}

// Tools returns the Tools of the conversation key, acquiring its session
// (and so its sandbox) on first use. After the session's sandbox was lost
// (a call failed with session.ErrGone), the next call gets Tools over a
// fresh sandbox.
func (c *Conversations) Tools(ctx context.Context, key string) (*Tools, error) {
	if c.m == nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "openai: Conversations without a session.Manager")
	}
	if key == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "openai: empty conversation key")
	}
	s, err := c.m.Acquire(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("openai: conversation %q: %w", key, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("openai: Conversations is closed")
	}
	if t := c.tools[key]; t != nil {
		if t.sess == s {
			return t, nil
		}
		_ = t.Close() // the session was replaced: its sandbox is gone
	}
	t, err := NewSession(s, c.opts)
	if err != nil {
		return nil, err
	}
	c.tools[key] = t
	return t, nil
}

// Close releases every Tools handed out. It does not close the manager.
func (c *Conversations) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for k, t := range c.tools {
		errs = append(errs, t.Close())
		delete(c.tools, k)
	}
	return errors.Join(errs...)
}
