package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox"
)

// A package requirement: a name, optional extras, optional comma-separated
// version specifiers. Nothing else: no spaces, URLs, paths, options,
// environment markers or shell metacharacters (other than the < and > of a
// specifier, which reach pip as argv, never through a shell).
const (
	pkgName = `[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?`
	pkgSpec = `(?:===|==|!=|~=|>=|<=|<|>)[A-Za-z0-9][A-Za-z0-9+._-]*(?:\.\*)?`
)

var packageRE = regexp.MustCompile(`^` + pkgName + `(?:\[` + pkgName + `(?:,` + pkgName + `)*\])?(?:` + pkgSpec + `(?:,` + pkgSpec + `)*)?$`)

const maxPackageLen = 200

// ValidatePackages checks that every name is a plain package requirement
// such as "numpy", "numpy==1.26.4", "pandas>=2,<3" or "requests[socks]~=2.31".
// The error (InvalidArgument) names the first offending entry.
func ValidatePackages(names []string) error {
	for i, n := range names {
		if len(n) > maxPackageLen || !packageRE.MatchString(n) {
			q := n
			if len(q) > 80 {
				q = q[:80] + "..."
			}
			return sandbox.Errorf(sandbox.InvalidArgument,
				"session: invalid package %q (entry %d): want a name with optional [extras] and version specifiers, without spaces or shell metacharacters", q, i)
		}
	}
	return nil
}

// ErrTemplateMismatch matches errors refusing a package that
// Options.PackageTemplates ties to another template than the one the
// sandbox runs (the requested template was missing and the fallback was
// used, or the sandbox was made from another template or alias). Such
// errors have Code FailedPrecondition.
var ErrTemplateMismatch = errors.New("session: the sandbox's template is not the one a package needs")

// normalizePackage returns the name of a package requirement (validated
// or not) as pip compares names: lower case, runs of "-", "_" and "." as
// one "-".
func normalizePackage(req string) string {
	name := pkgNameRE.FindString(req)
	return strings.ToLower(pkgSepRE.ReplaceAllString(name, "-"))
}

var (
	pkgNameRE = regexp.MustCompile(`^` + pkgName)
	pkgSepRE  = regexp.MustCompile(`[-_.]+`)
)

// checkPackageTemplates applies the built-in rule of
// Options.PackageTemplates to pkgs on s's sandbox.
func (m *Manager) checkPackageTemplates(s *Session, pkgs []string) error {
	if len(m.opts.PackageTemplates) == 0 {
		return nil
	}
	for _, p := range pkgs {
		need, ok := m.packageTemplates[normalizePackage(p)]
		if !ok || need == s.template {
			continue
		}
		got := fmt.Sprintf("template %q", s.template)
		if s.template == "" {
			got = "the provider's default template"
		}
		why := ""
		if !s.usedRequested {
			why = fmt.Sprintf(" (the fallback: the requested template %q was missing)", m.requested(s))
		}
		return sandbox.Errorf(sandbox.FailedPrecondition, "session: package %q needs template %q, but sandbox %s runs %s%s: %w",
			p, need, s.sb.ID(), got, why, ErrTemplateMismatch)
	}
	return nil
}

// requested returns the template s's sandbox was asked for.
func (m *Manager) requested(s *Session) string {
	if s.parent != nil {
		return s.perCall
	}
	return m.opts.Create.Template
}

// ensurePackages selects, validates and installs the session's packages.
// For an attached sandbox it installs only when the setup marker left by
// the process that created it is missing or lists other packages.
func (m *Manager) ensurePackages(ctx context.Context, s *Session) error {
	pkgs := m.opts.Packages
	if m.opts.SelectPackages != nil {
		var err error
		if pkgs, err = m.opts.SelectPackages(s.template); err != nil {
			return fmt.Errorf("session: SelectPackages(%q): %w", s.template, err)
		}
		if err := ValidatePackages(pkgs); err != nil {
			return err
		}
	}
	if err := m.checkPackageTemplates(s, pkgs); err != nil {
		return err
	}
	shipped := m.opts.TemplatePackages[s.template]
	var want []string
	for _, p := range pkgs {
		if !slices.Contains(shipped, p) && !slices.Contains(want, p) {
			want = append(want, p)
		}
	}
	if len(want) == 0 {
		return nil
	}
	marker := []byte(strings.Join(want, "\n") + "\n")
	if s.adopted {
		if got, err := s.sb.ReadFile(ctx, s.markerPath()); err == nil && bytes.Equal(got, marker) {
			s.mu.Lock()
			s.packages = want
			s.mu.Unlock()
			return nil
		}
	}
	if err := m.install(ctx, s, want, 0); err != nil {
		return err
	}
	if err := s.sb.WriteFile(ctx, s.markerPath(), marker); err != nil {
		m.log.Warn("session: could not write the setup marker", "key", s.key, "id", s.sb.ID(), "err", err)
	}
	s.mu.Lock()
	s.packages = want
	s.mu.Unlock()
	return nil
}

// installTimeout is the install command's timeout: t, the per-call one
// (see InstallOptions.Timeout), else Options.InstallTimeout.
func (m *Manager) installTimeout(ctx context.Context, t time.Duration) time.Duration {
	if t == 0 {
		t = m.opts.InstallTimeout
	}
	if t > 0 {
		return t
	}
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return NoTimeoutBound
}

// install runs the install command for pkgs (validated) in s's sandbox,
// after extending the lease to outlive it; perCall is the call's own
// timeout (zero: Options.InstallTimeout).
func (m *Manager) install(ctx context.Context, s *Session, want []string, perCall time.Duration) error {
	timeout := m.installTimeout(ctx, perCall)
	lease := max(s.leaseNow(), timeout+leaseSlack)
	if ml := m.c.Capabilities().MaxLease; ml > 0 {
		lease = min(lease, ml)
	}
	if err := s.sb.SetTimeout(ctx, lease); err != nil && ctx.Err() == nil {
		m.log.Warn("session: lease extension before install failed", "key", s.key, "id", s.sb.ID(), "err", err)
	}
	argv := append(slices.Clone(m.opts.InstallCommand), want...)
	res, err := s.sb.Exec(ctx, sandbox.Command{Args: argv, Timeout: timeout})
	switch {
	case err != nil:
		return fmt.Errorf("session: installing packages %q: %w", want, err)
	case res.TimedOut:
		return sandbox.Errorf(sandbox.DeadlineExceeded, "session: installing packages %q timed out after %v (%s timeout)",
			want, res.Timeout, res.TimeoutBy)
	case res.ExitCode != 0:
		return sandbox.Errorf(sandbox.Internal, "session: installing packages %q failed with exit code %d: %s",
			want, res.ExitCode, tail(res.Stderr, 2048))
	}
	m.log.Info("session: installed packages", "key", s.key, "id", s.sb.ID(), "packages", want)
	return nil
}

// InstallOptions configures one InstallPackagesWith call. The zero value
// installs as the setup does.
type InstallOptions struct {
	// Timeout bounds this call's install command, whatever
	// Options.InstallTimeout says: a package known to build from source
	// gets longer than the Manager's default, a quick one shorter. Zero
	// means Options.InstallTimeout; negative means no timeout of its own
	// (bounded by ctx's deadline, or by NoTimeoutBound when ctx has none),
	// as for Options.InstallTimeout.
	Timeout time.Duration
}

// InstallPackages installs pkgs in the session's sandbox now, with the
// setup's policy (names validated against injection, Options.InstallCommand
// as an argv, Options.InstallTimeout), for a sandbox already acquired, for
// example a shared one that needs more packages than the setup gave it.
// Packages already installed by the setup or an earlier call are skipped.
// Like every Session operation it extends the lease first and tells a gone
// sandbox from a degraded one. It is InstallPackagesWith with zero
// InstallOptions.
func (s *Session) InstallPackages(ctx context.Context, pkgs ...string) error {
	return s.InstallPackagesWith(ctx, pkgs, InstallOptions{})
}

// InstallPackagesWith is InstallPackages with per-call options: the
// install command's timeout (InstallOptions.Timeout) is this call's own,
// not the Manager's.
//
// A package that Options.PackageTemplates ties to a template other than
// the sandbox's is refused, matching ErrTemplateMismatch, before anything
// is installed; unlike at setup, the sandbox, which serves the session's
// other work, is kept.
func (s *Session) InstallPackagesWith(ctx context.Context, pkgs []string, opts InstallOptions) error {
	if err := ValidatePackages(pkgs); err != nil {
		return s.m.wrap("install", s.key, s.sb.ID(), err)
	}
	if err := s.m.checkPackageTemplates(s, pkgs); err != nil {
		return s.m.wrap("install", s.key, s.sb.ID(), err)
	}
	s.mu.Lock()
	var want []string
	for _, p := range pkgs {
		if !slices.Contains(s.packages, p) && !slices.Contains(want, p) {
			want = append(want, p)
		}
	}
	s.mu.Unlock()
	if len(want) == 0 {
		return nil
	}
	err := s.do(ctx, "install", 0, func(ctx context.Context, _ *sandbox.Sandbox) error {
		return s.m.install(ctx, s, want, opts.Timeout)
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	for _, p := range want {
		if !slices.Contains(s.packages, p) {
			s.packages = append(s.packages, p)
		}
	}
	s.mu.Unlock()
	return nil
}

// tail returns the last n bytes of b as text, trimmed.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
