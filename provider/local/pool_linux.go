//go:build linux

package local

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

// The warm pool (WithWarmPool) keeps sandboxes started ahead of need, at
// the default settings, in directories <root>/pool-<...> that List does
// not show. Create takes one when its request fits (no NoNetwork, no
// Resources, no template), renames its directory to the new id and writes
// its metadata: the agent, its mounts, its socket and its cgroups follow
// the directory. A pooled sandbox holds an idle agent process.

var poolRE = regexp.MustCompile(`^pool-[0-9a-f]{14}-[0-9a-f]{8}$`)

// ownerFile records which process owns a pooled sandbox, so a later
// Runtime can clean up after one that died.
const ownerFile = "owner"

func poolFits(req *driver.CreateRequest) bool {
	return !req.NoNetwork && !needsProxy(req.Network, len(req.Secrets)) && req.Resources == (driver.Resources{}) && req.Template == "" && len(req.Options) == 0
}

// poolLoop keeps the pool full until the Runtime closes, then destroys
// what is left in it.
func (r *Runtime) poolLoop() {
	defer close(r.poolDone)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-r.stop
		cancel()
	}()
	for {
		for len(r.pool) < cap(r.pool) && ctx.Err() == nil {
			m, err := r.createPooled(ctx)
			if err != nil {
				if ctx.Err() == nil {
					r.log.Warn("sandbox/local: filling the warm pool failed", "err", err)
					_ = sleepCtx(ctx, time.Second)
				}
				break
			}
			r.pool <- m
		}
		select {
		case <-ctx.Done():
			for {
				select {
				case m := <-r.pool:
					r.destroyDir(context.Background(), m)
				default:
					return
				}
			}
		case <-r.poolWake:
		}
	}
}

// createPooled starts one pooled sandbox.
func (r *Runtime) createPooled(ctx context.Context) (*meta, error) {
	id := "pool-" + strings.TrimPrefix(newID(), "sbx-")
	req := &driver.CreateRequest{Timeout: time.Hour}
	netMode, netNote, err := r.networkFor(req)
	if err != nil {
		return nil, err
	}
	m, l, err := r.createDirs(ctx, id, req, netMode, netNote, false)
	if err != nil {
		return nil, err
	}
	defer l.unlock()
	owner := fmt.Sprintf("%d %d", os.Getpid(), procStart(os.Getpid()))
	if err := os.WriteFile(filepath.Join(r.dir(id), ownerFile), []byte(owner), 0o600); err != nil {
		r.destroyDir(context.Background(), m)
		return nil, err
	}
	if err := r.startAgent(ctx, m); err != nil {
		_ = l.write(m)
		r.destroyDir(context.Background(), m)
		return nil, err
	}
	m.State = driver.StateRunning
	if err := l.write(m); err != nil {
		r.destroyDir(context.Background(), m)
		return nil, err
	}
	return m, nil
}

// takePooled turns a pooled sandbox into the sandbox req asks for, or
// returns nil when the pool is empty or the request does not fit: one
// whose network (netMode, from networkFor) is not the pooled sandboxes'
// (with NetworkNone, an explicit allow-all) does not.
func (r *Runtime) takePooled(req *driver.CreateRequest, netMode string) *meta {
	if r.pool == nil || !poolFits(req) {
		return nil
	}
	if pooled, _, err := r.networkFor(&driver.CreateRequest{}); err != nil || pooled != netMode {
		return nil
	}
	for {
		var pm *meta
		select {
		case pm = <-r.pool:
		default:
			return nil
		}
		select {
		case r.poolWake <- struct{}{}:
		default:
		}
		if m := r.adopt(pm, req); m != nil {
			return m
		}
	}
}

// adopt renames a pooled sandbox to a fresh id and writes its metadata.
func (r *Runtime) adopt(pm *meta, req *driver.CreateRequest) *meta {
	if !procAlive(pm.AgentPID, pm.AgentAt) {
		r.destroyDir(context.Background(), pm)
		return nil
	}
	id := newID()
	if err := os.Rename(r.dir(pm.ID), r.dir(id)); err != nil {
		r.destroyDir(context.Background(), pm)
		return nil
	}
	_ = os.Remove(filepath.Join(r.dir(id), ownerFile))
	now := r.now().UTC()
	m := &meta{metaStatic: pm.metaStatic, metaState: pm.metaState}
	m.ID, m.Labels, m.Env = id, maps.Clone(req.Labels), maps.Clone(req.Env)
	m.CreatedAt, m.Lease, m.AutoPause = now, req.Timeout, req.AutoPause
	m.LeaseEnd, m.State = now.Add(req.Timeout), driver.StateRunning
	l, err := r.lockPath(id)
	if err == nil {
		err = l.write(m)
		if err == nil {
			err = r.writeStatic(m)
		}
		l.unlock()
	}
	if err != nil {
		r.destroyDir(context.Background(), m)
		return nil
	}
	return m
}

// sweep removes what dead processes left in the root: pooled sandboxes
// whose owner is gone, directories of interrupted destroys and probes.
func (r *Runtime) sweep() {
	ents, err := os.ReadDir(r.root)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, ".probe-"):
			if !young(filepath.Join(r.root, name)) {
				_ = os.RemoveAll(filepath.Join(r.root, name))
			}
		case strings.HasPrefix(name, ".trash-"):
			if young(filepath.Join(r.root, name)) {
				continue // maybe being destroyed by a live Runtime
			}
			b, _ := os.ReadFile(filepath.Join(r.root, name, stateFile))
			m := &meta{}
			_ = json.Unmarshal(trimState(b), &m.metaState)
			m.ID = strings.TrimPrefix(name, ".trash-")
			r.killAll(context.Background(), m, filepath.Join(r.root, name, "s"))
			_ = r.removeTree(context.Background(), m, filepath.Join(r.root, name))
		case poolRE.MatchString(name):
			if young(filepath.Join(r.root, name)) {
				continue // maybe being created by a live Runtime
			}
			b, err := os.ReadFile(filepath.Join(r.root, name, ownerFile))
			f := strings.Fields(string(b))
			if err == nil && len(f) == 2 {
				pid, _ := strconv.Atoi(f[0])
				start, _ := strconv.ParseUint(f[1], 10, 64)
				if procAlive(pid, start) {
					continue // another live Runtime's pool
				}
			}
			st, _ := os.ReadFile(filepath.Join(r.root, name, stateFile))
			m := &meta{}
			_ = json.Unmarshal(trimState(st), &m.metaState)
			m.ID = name
			r.destroyDir(context.Background(), m)
		}
	}
}

// young reports whether dir changed in the last minute.
func young(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && time.Since(fi.ModTime()) < time.Minute
}
