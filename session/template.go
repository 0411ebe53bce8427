package session

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"unicode"

	"github.com/sandboxkit/sandbox"
)

// CallOption configures one call on a Session (Exec, Do, WriteFile,
// ReadFile).
type CallOption func(*callConfig)

type callConfig struct {
	template    string
	hasTemplate bool
}

// WithTemplate runs the call in the session's sandbox for template rather
// than in its own (a tool that runs one snippet on another image): the first
// such call creates that sandbox (reattaching one a previous process left,
// set up like the session's own: workspace, packages, template policy),
// later calls reuse it. "" names the provider's default template. The
// session's own template (requested or the fallback it got) is the
// session's own sandbox. See Session.ForTemplate.
func WithTemplate(template string) CallOption {
	return func(c *callConfig) { c.template, c.hasTemplate = template, true }
}

// target returns the session a call with opts runs on.
func (s *Session) target(ctx context.Context, opts []CallOption) (*Session, error) {
	var c callConfig
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if !c.hasTemplate {
		return s, nil
	}
	return s.ForTemplate(ctx, c.template)
}

// maxTemplateLen bounds a per-call template name (it travels as a label
// value).
const maxTemplateLen = 256

// ForTemplate returns the session's sandbox for template, creating it on
// first use: the session of a per-call template. It has the key of s and
// its own sandbox, created from template under the Manager's options (the
// template policy, packages for that template, workspace, OnCreate), and
// labelled with LabelKey+".of" = key and LabelKey+".template" = template
// (not LabelKey itself, so Acquire never takes it for the key's own
// sandbox). A process that restarts reattaches to it: Acquire adopts the
// key's per-call sandboxes with the key's own, and ForTemplate looks for
// one before creating.
//
// The sandbox lives and ends with s: using it counts as using s (the
// reaper leaves both), and Release, reaping and Close of s, or s's sandbox
// found gone, destroy it too; nothing outlives the session. It counts
// towards MaxLive. Releasing the returned session ends only it.
//
// The session's own template (Options.Create.Template, or the template
// its sandbox came from) returns s itself; called on a per-call session,
// ForTemplate answers for its parent. A template name longer than 256
// bytes or holding a control character is refused with InvalidArgument.
func (s *Session) ForTemplate(ctx context.Context, template string) (*Session, error) {
	const op = "template"
	p := s
	if p.parent != nil {
		p = p.parent
	}
	m := p.m
	if template == m.opts.Create.Template || template == p.template {
		return p, nil
	}
	if len(template) > maxTemplateLen || containsControl(template) {
		return nil, m.wrap(op, p.key, p.sb.ID(), sandbox.Errorf(sandbox.InvalidArgument,
			"session: per-call template %q: at most %d bytes without control characters", template, maxTemplateLen))
	}
	for {
		m.mu.Lock()
		ended, v := p.ended, p.variants[template]
		m.mu.Unlock()
		if ended {
			return nil, p.endedErr(op)
		}
		if v != nil {
			return v, nil
		}
		ch := p.flights.DoChan(template, func() (any, error) { return p.acquireVariant(ctx, template) })
		select {
		case r := <-ch:
			if r.Err == nil {
				return r.Val.(*Session), nil
			}
			var ld *leaderDone
			if errors.As(r.Err, &ld) {
				if m.isClosed() {
					return nil, m.wrap(op, p.key, "", sandbox.ErrClosed)
				}
				if ctx.Err() == nil {
					continue // another caller's context ended: try again
				}
				return nil, ld.err
			}
			return nil, r.Err
		case <-ctx.Done():
			return nil, m.wrap(op, p.key, "", ctx.Err())
		}
	}
}

func containsControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

// endedErr reports an operation on a session that has ended.
func (s *Session) endedErr(op string) error {
	return &sandbox.Error{Op: op, Provider: s.m.c.Provider(), SandboxID: s.sb.ID(), Path: s.key,
		Code: sandbox.FailedPrecondition, Err: fmt.Errorf("%w: acquire the key again", ErrEnded)}
}

// acquireVariant runs once per flight: reattach to the sandbox of p's
// per-call template, else create it.
func (p *Session) acquireVariant(callerCtx context.Context, template string) (any, error) {
	const op = "template"
	m := p.m
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, m.wrap(op, p.key, "", sandbox.ErrClosed)
	}
	if v := p.variants[template]; v != nil { // registered by a flight that just ended
		m.mu.Unlock()
		return v, nil
	}
	m.wg.Add(1)
	m.mu.Unlock()
	defer m.wg.Done()
	// p stays in use (never reaped) while its per-call sandbox is made.
	if err := p.begin(op); err != nil {
		return nil, err
	}
	defer p.end()

	ctx, cancel := context.WithCancel(callerCtx)
	defer cancel()
	defer context.AfterFunc(m.base, cancel)()

	sl := slot{key: p.key, template: template, labels: m.variantLabels(p.key, template), parent: p}
	v, err := m.reattach(ctx, sl)
	if err == nil && v == nil {
		v, err = m.create(ctx, sl)
	}
	if err != nil {
		err = m.wrap(op, p.key, "", fmt.Errorf("session: sandbox for template %q: %w", template, err))
		if ctx.Err() != nil {
			return nil, &leaderDone{err}
		}
		return nil, err
	}
	return v, nil
}

// variantLabelKeys returns the label keys that mark a per-call template's
// sandbox: the key it belongs to and the template.
func (m *Manager) variantLabelKeys() (of, template string) {
	return m.opts.LabelKey + ".of", m.opts.LabelKey + ".template"
}

// variantLabels returns the labels of key's sandbox for template.
func (m *Manager) variantLabels(key, template string) map[string]string {
	l := maps.Clone(m.opts.Create.Labels)
	if l == nil {
		l = map[string]string{}
	}
	of, tk := m.variantLabelKeys()
	l[of], l[tk] = key, template
	return l
}

// registerVariant publishes v as p's session for v.perCall.
func (m *Manager) registerVariant(p, v *Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return sandbox.ErrClosed
	}
	if p.ended {
		return fmt.Errorf("session of key %q: %w", p.key, ErrEnded)
	}
	if p.variants[v.perCall] != nil {
		return sandbox.Errorf(sandbox.AlreadyExists, "session: template %q of key %q registered concurrently", v.perCall, p.key)
	}
	if p.variants == nil {
		p.variants = map[string]*Session{}
	}
	p.variants[v.perCall] = v
	m.nvariants++
	return nil
}

// detachVariants ends p's per-call sessions and returns them, for their
// sandboxes to be destroyed.
func (m *Manager) detachVariants(p *Session) []*Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.detachVariantsLocked(p)
}

func (m *Manager) detachVariantsLocked(p *Session) []*Session {
	var vs []*Session
	for t, v := range p.variants {
		v.ended = true
		vs = append(vs, v)
		delete(p.variants, t)
		m.nvariants--
	}
	return vs
}

// adoptVariants attaches, after p was reattached, to the sandboxes of
// p's per-call templates a previous process left, so that they end with
// p rather than leak. They are taken as they are (their setup finished
// before they were labelled as usable: a failed one was destroyed). A
// failed look-up is logged, not returned: ForTemplate looks again.
func (m *Manager) adoptVariants(ctx context.Context, p *Session) {
	of, tk := m.variantLabelKeys()
	labels := maps.Clone(m.opts.Create.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[of] = p.key
	states := []sandbox.State{sandbox.StateRunning, sandbox.StatePaused, sandbox.StateStarting}
	for in, err := range m.c.List(ctx, sandbox.ListOptions{Labels: labels, States: states}) {
		if err != nil {
			m.log.Warn("session: could not look for the key's per-call template sandboxes", "key", p.key, "err", err)
			return
		}
		t, ok := in.Labels[tk]
		if !ok {
			continue
		}
		sb, err := m.c.AttachWith(ctx, in.ID, sandbox.AttachOptions{SecretEnv: m.opts.Create.SecretEnv, Own: true})
		if err != nil {
			m.log.Warn("session: could not attach to a per-call template sandbox", "key", p.key, "id", in.ID, "err", err)
			continue
		}
		v := m.newSession(slot{key: p.key, template: t, parent: p}, sb, false)
		if err := m.registerVariant(p, v); err != nil {
			m.log.Info("session: per-call template sandbox not adopted", "key", p.key, "id", in.ID, "template", t, "err", err)
			continue
		}
		m.log.Info("session: adopted per-call template sandbox", "key", p.key, "id", in.ID, "template", t)
	}
}
