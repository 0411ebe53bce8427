package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

var _ driver.NetworkSetter = (*Runtime)(nil)

// SetNetwork replaces the network policy of a running sandbox. A sandbox
// behind its egress proxy gets the new policy at once: the proxy loads it
// before SetNetwork returns, and it is kept in the sandbox's directory,
// so a proxy started again (after a reboot) or a later Runtime has it. A
// sandbox without network (NoNetwork, deny-all) at L3 and L4 gets the
// proxy started for any other policy, allow-all included, which then
// means every destination through the proxy; its commands get the proxy's
// variables from then on. A sandbox with the isolated network of pasta,
// or the host's, keeps it: any policy but allow-all is FailedPrecondition
// (its routes out cannot be taken back safely while it runs; create it
// with the policy instead), and so is anything but deny-all at L2, which
// has no network namespace for the proxy. Brokered secrets are set at
// Create only. The proxy runs in the sandbox's cgroup, so a sandbox
// paused by the cgroup freezer refuses SetNetwork (ErrPaused) until
// Resume.
func (r *Runtime) SetNetwork(ctx context.Context, id string, p *driver.NetworkPolicy) error {
	if p == nil {
		return sberrors.Errorf(sberrors.InvalidArgument, "local: set-network %s: no policy", id)
	}
	return r.update(id, func(m *meta) error {
		dir := r.dir(m.ID)
		switch mode := m.netMode(); mode {
		case netProxy:
			if m.State == driver.StatePaused && m.Paused == "cgroup" {
				// The proxy runs in the sandbox's cgroup, frozen with it:
				// it could not take the policy before Resume.
				return errPaused(id)
			}
			c, err := readEgressConfig(dir)
			if err != nil {
				return sberrors.Errorf(sberrors.Internal, "local: set-network %s: %w", id, err)
			}
			c.Policy = p.Clone()
			if err := writeEgressConfig(dir, c); err != nil {
				return sberrors.Errorf(sberrors.Internal, "local: set-network %s: %w", id, err)
			}
			running, err := reloadEgress(ctx, dir)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				// The file holds the new policy; a proxy that could not
				// load it keeps the old one: say so rather than pretend.
				return sberrors.Errorf(sberrors.Internal, "local: set-network %s: the egress proxy did not take the policy: %w", id, err)
			}
			if !running && !m.EgressCA && m.State != driver.StatePaused && procAlive(m.AgentPID, m.AgentAt) {
				// The proxy died: start another with the new policy. One
				// with brokered secrets waits for the agent's next start,
				// which installs the new proxy's CA in the sandbox.
				return r.startProxy(ctx, m, c)
			}
			return nil
		case "off":
			if p.Mode == driver.NetworkDenyAll {
				return nil
			}
			if m.Achieved < L3 {
				return sberrors.Errorf(sberrors.FailedPrecondition, "local: set-network %s: network policy %s needs the egress proxy, which needs a network namespace; the sandbox runs at %s", id, p.Mode, m.Achieved.Describe())
			}
			if m.State == driver.StatePaused {
				return errPaused(id)
			}
			return r.startProxy(ctx, m, &egressConfig{Policy: p.Clone(), Hosts: r.egressHosts, Roots: r.egressRoots, Dial: r.egressDial})
		default:
			if p.Mode == driver.NetworkAllowAll && len(p.DenyDomains)+len(p.DenyCIDRs) == 0 {
				return nil
			}
			what := "the host's network"
			if mode == NetworkIsolated {
				what = "the isolated network of pasta"
			}
			return sberrors.Errorf(sberrors.FailedPrecondition, "local: set-network %s: network policy %s cannot be put in force at run time: the sandbox has %s, whose routes out cannot be taken back safely while it runs; create it with the policy (it then runs behind the egress proxy)", id, p.Mode, what)
		}
	})
}

// startProxy puts an egress proxy with configuration c in front of a
// running sandbox that has none (no network, or its proxy died; the
// caller holds its lock), and records it in m.
func (r *Runtime) startProxy(ctx context.Context, m *meta, c *egressConfig) error {
	dir := r.dir(m.ID)
	if !procAlive(m.AgentPID, m.AgentAt) {
		return sberrors.Errorf(sberrors.FailedPrecondition, "local: set-network %s: the sandbox's agent does not run", m.ID)
	}
	if err := writeEgressConfig(dir, c); err != nil {
		return sberrors.Errorf(sberrors.Internal, "local: set-network %s: %w", m.ID, err)
	}
	sp, err := r.spawner()
	if err != nil {
		return err
	}
	resp, err := sp.spawn(ctx, &spawnReq{Op: "egress", Egress: dir, Log: filepath.Join(dir, "agent.log"),
		CgroupV2: m.Cgroups.V2, CgroupV1: m.Cgroups.v1Dirs()})
	if err != nil {
		if !m.Proxy {
			_ = os.Remove(filepath.Join(dir, egressFile))
		}
		if resp.EgressPID > 0 {
			_ = syscall.Kill(resp.EgressPID, syscall.SIGKILL)
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return sberrors.Errorf(sberrors.Internal, "local: set-network %s: starting the egress proxy: %w", m.ID, err)
	}
	m.Proxy, m.EgressPID, m.EgressAt = true, resp.EgressPID, resp.EgressStart
	return nil
}
