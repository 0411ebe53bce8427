package daytona

import (
	"context"
	"maps"

	"github.com/sandboxkit/sandbox"
)

// keyedAttempts bounds CreateKeyed's create-or-attach rounds (a sandbox
// holding the name may be deleted, or end in error, between them).
const keyedAttempts = 3

// CreateKeyed implements sandbox.KeyedCreator, so that Client.GetOrCreate
// makes at most one sandbox per key across processes: the sandbox is
// named after the key ("sbx-" and the key, or the OptName option when
// set), Daytona keeps names unique, and a 409 for a taken name means
// another caller created it first: CreateKeyed then attaches to that
// sandbox, waiting for it to start if it is still starting. A sandbox
// under the name that ended in error is deleted and the create tried
// again.
func (r *Runtime) CreateKeyed(ctx context.Context, key string, req *sandbox.CreateRequest) (sandbox.Info, bool, error) {
	named := *req
	named.Options = maps.Clone(req.Options)
	if named.Options == nil {
		named.Options = map[string]string{}
	}
	name := named.Options[OptName]
	if name == "" {
		name = "sbx-" + key
		named.Options[OptName] = name
	}
	var err error
	for range keyedAttempts {
		var in sandbox.Info
		in, err = r.Create(ctx, &named)
		if err == nil || sandbox.CodeOf(err) != sandbox.AlreadyExists {
			return in, true, err
		}
		var got sandbox.Info
		got, err = r.attachNamed(ctx, name)
		switch {
		case err == nil:
			return got, false, nil
		case sandbox.CodeOf(err) != sandbox.NotFound || ctx.Err() != nil:
			return sandbox.Info{}, false, err
		}
		// Gone between the 409 and the look-up: create again.
	}
	return sandbox.Info{}, false, err
}

// attachNamed returns the sandbox holding name once it is started (or
// paused: the portable layer resumes it). One in error is deleted and
// reported NotFound, so that the caller creates again.
func (r *Runtime) attachNamed(ctx context.Context, name string) (sandbox.Info, error) {
	sb, err := r.getDTO(ctx, name)
	if err != nil {
		return sandbox.Info{}, r.clean(err)
	}
	in := r.info(sb)
	switch in.State {
	case sandbox.StateStarting:
		if in, err = r.waitStarted(ctx, sb); err != nil {
			return sandbox.Info{}, r.clean(err)
		}
	case sandbox.StateError:
		if err := r.Destroy(ctx, sb.Id); err != nil {
			return sandbox.Info{}, err
		}
		return sandbox.Info{}, sandbox.Errorf(sandbox.NotFound, "daytona: sandbox %s named %s ended in error and was deleted: %w", sb.Id, name, sandbox.ErrNotFound)
	}
	if in.State == sandbox.StateRunning {
		r.home(ctx, &in)
	}
	if in.Home == "" {
		in.Home = defaultHome
	}
	return in, nil
}
