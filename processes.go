package sandbox

import (
	"context"
	"slices"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

// ProcessInfo describes a process running in a sandbox (Sandbox.Processes).
type ProcessInfo struct {
	// PID identifies the process within its sandbox.
	PID int
	// Args is its command line, where the provider sees it.
	Args []string
	// StartedAt is when it started; zero when the provider does not say.
	StartedAt time.Time
	// Handle is true when the process is one this SDK started with
	// Sandbox.Start (or a terminal): Sandbox.AttachProcess can follow it
	// by PID, and so Wait, Signal and Kill it.
	Handle bool
	// Terminal is the terminal's ID when the process runs on one.
	Terminal string
}

// processInfoOf converts a driver's ProcessInfo, copying Args.
func processInfoOf(p driver.ProcessInfo) ProcessInfo {
	return ProcessInfo{PID: p.PID, Args: slices.Clone(p.Args), StartedAt: p.StartedAt, Handle: p.Handle, Terminal: p.Terminal}
}

// Processes lists the processes running in the sandbox, sorted by PID;
// a process that has exited is not in it. The secret values the handle
// knows are redacted from the command lines (a shell expands them into a
// program's arguments): the sandbox's (CreateOptions.SecretEnv) and the
// SecretEnv of every command and terminal started through this handle; a
// handle that did not start a process does not know that command's own
// secrets. Providers that cannot list
// processes (Capabilities.ProcessList false) return an error matching
// ErrUnimplemented.
func (s *Sandbox) Processes(ctx context.Context) (_ []ProcessInfo, err error) {
	const op = "processes"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	pl, ok := s.c.rt.(driver.ProcessLister)
	if !ok {
		return nil, s.wrap(op, "", ErrUnimplemented)
	}
	var list []driver.ProcessInfo
	ctx, end := bound(ctx, op, s.c.calls.Lookup)
	err = end(s.c.retry(ctx, op, true, nil, func() error {
		var err error
		list, err = pl.Processes(ctx, s.id)
		return err
	}))
	if err != nil {
		return nil, s.wrap(op, "", err)
	}
	secrets := s.knownSecrets(nil)
	out := make([]ProcessInfo, len(list))
	for i, p := range list {
		out[i] = processInfoOf(p)
		for j, a := range out[i].Args {
			out[i].Args[j] = string(redact([]byte(a), secrets))
		}
	}
	slices.SortFunc(out, func(a, b ProcessInfo) int { return a.PID - b.PID })
	return out, nil
}
