package daytona

import (
	"context"
	"maps"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

// keyedAttempts bounds CreateKeyed's create-or-attach rounds (a sandbox
// holding the name may be deleted, or end in error, between them).
const keyedAttempts = 3

// CreateKeyed implements driver.KeyedCreator, so that Client.GetOrCreate
// makes at most one sandbox per key across processes: the sandbox is
// named after the key ("sbx-" and the key, or the OptName option when
// set), Daytona keeps names unique, and a 409 for a taken name means
// another caller created it first: CreateKeyed then attaches to that
// sandbox, waiting for it to start if it is still starting. A sandbox
// under the name that ended in error is deleted and the create tried
// again.
func (r *Runtime) CreateKeyed(ctx context.Context, key string, req *driver.CreateRequest) (driver.Info, bool, error) {
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
		var in driver.Info
		in, err = r.Create(ctx, &named)
		if err == nil || sberrors.CodeOf(err) != sberrors.AlreadyExists {
			return in, true, err
		}
		var got driver.Info
		got, err = r.attachNamed(ctx, name)
		switch {
		case err == nil:
			return got, false, nil
		case sberrors.CodeOf(err) != sberrors.NotFound || ctx.Err() != nil:
			return driver.Info{}, false, err
		}
		// Gone between the 409 and the look-up: create again.
	}
	return driver.Info{}, false, err
}

// attachNamed returns the sandbox holding name once it is started (or
// paused: the portable layer resumes it). One in error is deleted and
// reported NotFound, so that the caller creates again.
func (r *Runtime) attachNamed(ctx context.Context, name string) (driver.Info, error) {
	sb, err := r.getDTO(ctx, name)
	if err != nil {
		return driver.Info{}, r.clean(err)
	}
	in := r.info(sb)
	switch in.State {
	case driver.StateStarting:
		if in, err = r.waitStarted(ctx, sb); err != nil {
			return driver.Info{}, r.clean(err)
		}
	case driver.StateError:
		if err := r.Destroy(ctx, sb.Id); err != nil {
			return driver.Info{}, err
		}
		return driver.Info{}, sberrors.Errorf(sberrors.NotFound, "daytona: sandbox %s named %s ended in error and was deleted: %w", sb.Id, name, sberrors.ErrNotFound)
	}
	if in.State == driver.StateRunning {
		r.home(ctx, &in)
	}
	if in.Home == "" {
		in.Home = defaultHome
	}
	return in, nil
}
