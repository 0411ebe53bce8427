package e2b

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/filesystem"
	"github.com/sandboxkit/sandbox/sberrors"
)

// envd acts as root on files; the contract wants the sandbox user's
// rights. The checks below refuse, before anything is written, a change
// the sandbox's user could not make (see the package doc's Files).

// who is the sandbox's user as envd names file owners.
type who struct {
	user, group string // "" when unknown
	root        bool
}

// identity returns who the sandbox's user is: the owner and group of its
// home, looked up once per sandbox (Create already does it).
func (r *Runtime) identity(ctx context.Context, id string, c *conn) (who, error) {
	if r.cfg.user == "root" {
		return who{user: "root", group: "root", root: true}, nil
	}
	if c.owner == "" {
		if c.home != "" {
			// Looked up, but this envd names no owner.
			return who{}, nil
		}
		if _, err := r.home(ctx, id, c); err != nil {
			return who{}, err
		}
		if nc := r.cached(id); nc != nil {
			c = nc
		}
	}
	return who{user: c.owner, group: c.group, root: c.owner == "root" || c.owner == "0"}, nil
}

// sticky reports whether envd's entry has the sticky bit, which envd's
// numeric mode leaves out but its permission string shows ("dtrwxrwxrwx").
func sticky(e *filesystem.EntryInfo) bool {
	s := e.GetPermissions()
	return len(s) > 9 && strings.ContainsAny(s[:len(s)-9], "t")
}

// abs makes p absolute against the home, as envd resolves it.
func abs(c *conn, p string) string {
	switch {
	case p == "~":
		return c.home
	case strings.HasPrefix(p, "~/"):
		return path.Join(c.home, p[2:])
	case !path.IsAbs(p):
		return path.Join(c.home, p)
	}
	return path.Clean(p)
}

// writableScript exits 0 when the user running it may create and remove
// entries of directory $1.
const writableScript = `test -w "$1" && test -x "$1"`

// mayWriteDir reports whether u may create and remove entries of the
// directory d, described by e: from owner, group and mode where they say,
// else by asking a command run as the user.
func (r *Runtime) mayWriteDir(ctx context.Context, id string, c *conn, u who, d string, e *filesystem.EntryInfo) (bool, error) {
	return r.mayAccess(ctx, id, c, u, d, e, 3, writableScript)
}

// mayAccess reports whether u has the permission bits want (4 read, 2
// write, 1 search) on p, described by e: from owner, group and mode where
// they say, else by running script (which exits 0 when the user may) as
// the user.
func (r *Runtime) mayAccess(ctx context.Context, id string, c *conn, u who, p string, e *filesystem.EntryInfo, want uint32, script string) (bool, error) {
	if u.root {
		return true, nil
	}
	mode := e.GetMode()
	has := func(shift uint) bool { return (mode>>shift)&want == want }
	switch {
	case u.user != "" && e.GetOwner() == u.user:
		return has(6), nil
	case u.group != "" && e.GetGroup() == u.group:
		return has(3), nil
	case u.user != "" && has(3) == has(0):
		// In the group or not, the answer is the same.
		return has(0), nil
	}
	// The user may be in the entry's group through a supplementary
	// group, which Stat does not tell: ask.
	st, err := r.Exec(ctx, id, &driver.Command{Args: []string{"sh", "-c", script, "sh", p}, Dir: c.home,
		Env: map[string]string{}, Stdout: io.Discard, Stderr: io.Discard, Timeout: 30 * time.Second})
	if err != nil {
		return false, err
	}
	return st.ExitCode == 0, nil
}

// mayRead checks that the sandbox's user may read the file p: search its
// directory and read the file, following links as the kernel does (envd
// reads as root). Where p is missing, not a file, or has a file in its
// path, envd's own answer says so: no check then.
func (r *Runtime) mayRead(ctx context.Context, id string, c *conn, op, p string) error {
	if r.cfg.rootFiles {
		return nil
	}
	u, err := r.identity(ctx, id, c)
	if err != nil || u.root {
		return err
	}
	if nc := r.cached(id); nc != nil {
		c = nc
	}
	settled := func(err error) error {
		switch {
		case errors.Is(err, errLinkLoop):
			return sberrors.Errorf(sberrors.InvalidArgument, "e2b: %s %s: %v", op, p, err)
		case sberrors.CodeOf(err) == sberrors.NotFound || sberrors.CodeOf(err) == sberrors.Internal:
			return nil // envd answers
		}
		return err
	}
	f, e, err := r.follow(ctx, id, c, abs(c, p))
	if err != nil {
		return settled(err)
	}
	if e.GetType() != filesystem.FileType_FILE_TYPE_FILE {
		return nil
	}
	d, de, err := r.follow(ctx, id, c, path.Dir(f))
	if err != nil {
		return settled(err)
	}
	ok, err := r.mayAccess(ctx, id, c, u, d, de, 1, `test -x "$1"`)
	if err != nil {
		return err
	}
	if !ok {
		return deniedTo(op, p, "search", d, u)
	}
	if ok, err = r.mayAccess(ctx, id, c, u, f, e, 4, `test -r "$1"`); err != nil {
		return err
	}
	if !ok {
		return deniedTo(op, p, "read", f, u)
	}
	return nil
}

// ownedBy reports whether u owns envd's entry e.
func ownedBy(u who, e *filesystem.EntryInfo) bool { return u.user != "" && e.GetOwner() == u.user }

// denied is the error for a change of p the sandbox's user may not make
// because of directory d.
func denied(op, p, d string, u who) error { return deniedTo(op, p, "write", d, u) }

// deniedTo is the error for an operation on p the sandbox's user may not
// do because it may not verb what (a file or directory).
func deniedTo(op, p, verb, what string, u who) error {
	name := u.user
	if name == "" {
		name = "the sandbox's user"
	}
	return sberrors.Errorf(sberrors.PermissionDenied, "e2b: %s %s: %s may not %s %s (the SDK applies the user's permissions; see WithRootFileAccess)", op, p, name, verb, what)
}

// mayCreate checks that the sandbox's user may create p: it finds the
// nearest existing directory at or above start (p's parent for a file;
// p itself for MkdirAll, where existingOK says an existing p needs no
// change) and checks that the user may write it. When start exists, is
// sticky and replaced names an existing entry of it, the user must own
// that entry or the directory. Where something other than a directory is
// in the way, envd's own answer says so: no check then.
func (r *Runtime) mayCreate(ctx context.Context, id string, c *conn, op, p, start, replaced string, existingOK bool) error {
	if r.cfg.rootFiles {
		return nil
	}
	u, err := r.identity(ctx, id, c)
	if err != nil || u.root {
		return err
	}
	if nc := r.cached(id); nc != nil {
		c = nc
	}
	start = abs(c, start)
	for d, first := start, true; ; first = false {
		rd, e, err := r.follow(ctx, id, c, d)
		switch {
		case sberrors.CodeOf(err) == sberrors.NotFound && rd != "/":
			// Missing (or a link to something missing, which envd
			// would create as root): what decides is the nearest
			// existing directory above the real path.
			d = path.Dir(rd)
			continue
		case errors.Is(err, errLinkLoop):
			return sberrors.Errorf(sberrors.InvalidArgument, "e2b: %s %s: %v", op, p, err)
		case err != nil:
			if errors.Is(err, sberrors.ErrStaleTransport) || errors.Is(err, sberrors.ErrPaused) ||
				sberrors.CodeOf(err) == sberrors.Canceled || sberrors.CodeOf(err) == sberrors.DeadlineExceeded || ctx.Err() != nil {
				return err
			}
			return nil // a file in the path (envd: internal "not a directory"): envd answers
		case e.GetType() != filesystem.FileType_FILE_TYPE_DIRECTORY:
			return nil
		case existingOK && first:
			return nil
		}
		ok, err := r.mayWriteDir(ctx, id, c, u, rd, e)
		if err != nil {
			return err
		}
		if !ok {
			return denied(op, p, rd, u)
		}
		if replaced != "" && first && sticky(e) && !ownedBy(u, e) {
			t, err := r.statEntry(ctx, id, c, path.Join(rd, path.Base(abs(c, replaced))))
			if err == nil && !ownedBy(u, t) {
				return denied(op, p, rd, u)
			}
		}
		return nil
	}
}

// maxLinks bounds the symbolic links followed to one directory, as
// Linux's MAXSYMLINKS does.
const maxLinks = 40

// errLinkLoop is the error for a path that runs through more than
// maxLinks symbolic links (a loop, most likely).
var errLinkLoop = errors.New("too many levels of symbolic links")

// follow stats d as envd does (an lstat) and, while d is a symbolic link,
// its target (envd gives it absolute; a relative one is resolved against
// the link's directory, as the kernel does): the rights that decide a
// change through a link are the real directory's, not the link's (whose
// mode is always 0777). It returns the last path it stated, with its
// entry or error.
func (r *Runtime) follow(ctx context.Context, id string, c *conn, d string) (string, *filesystem.EntryInfo, error) {
	for hops := 0; ; hops++ {
		e, err := r.statEntry(ctx, id, c, d)
		if err != nil || e.GetType() != filesystem.FileType_FILE_TYPE_SYMLINK {
			return d, e, err
		}
		t := e.GetSymlinkTarget()
		if t == "" {
			return d, nil, sberrors.Errorf(sberrors.PermissionDenied, "e2b: %s: symbolic link whose target envd does not tell; the user's rights cannot be checked (see WithRootFileAccess)", d)
		}
		if hops >= maxLinks {
			return d, nil, fmt.Errorf("%s: %w", d, errLinkLoop)
		}
		if !path.IsAbs(t) {
			t = path.Join(path.Dir(d), t)
		}
		d = path.Clean(t)
	}
}

// mayRemove checks that the sandbox's user may remove (or move away) p,
// described by e: its directory must be writable by the user and, when
// sticky, the user must own p or the directory.
func (r *Runtime) mayRemove(ctx context.Context, id string, c *conn, op, p string, e *filesystem.EntryInfo) error {
	if r.cfg.rootFiles {
		return nil
	}
	u, err := r.identity(ctx, id, c)
	if err != nil || u.root {
		return err
	}
	if nc := r.cached(id); nc != nil {
		c = nc
	}
	d, de, err := r.follow(ctx, id, c, path.Dir(abs(c, p)))
	if errors.Is(err, errLinkLoop) {
		return sberrors.Errorf(sberrors.InvalidArgument, "e2b: %s %s: %v", op, p, err)
	}
	if err != nil {
		return err
	}
	ok, err := r.mayWriteDir(ctx, id, c, u, d, de)
	if err != nil {
		return err
	}
	if !ok || (sticky(de) && !ownedBy(u, de) && !ownedBy(u, e)) {
		return denied(op, p, d, u)
	}
	return nil
}

// mayRename checks that the sandbox's user may move from to to: remove
// from (mayRemove) and create to, replacing what is there (mayCreate;
// envd creates missing parents of to).
func (r *Runtime) mayRename(ctx context.Context, id string, c *conn, op, from, to string) error {
	if r.cfg.rootFiles {
		return nil
	}
	e, err := r.statEntry(ctx, id, c, from)
	if sberrors.CodeOf(err) == sberrors.NotFound {
		return nil // envd's Move answers not_found
	}
	if err != nil {
		return err
	}
	if err := r.mayRemove(ctx, id, c, op, from, e); err != nil {
		return err
	}
	return r.mayCreate(ctx, id, c, op, to, path.Dir(to), to, false)
}

// removeTree removes the directory p and everything below it with "rm
// -rf" run as the sandbox's user, so each entry below p is removed with
// the user's rights, not envd's root ones. rm's refusal is
// PermissionDenied naming p and the entry rm names.
func (r *Runtime) removeTree(ctx context.Context, id string, c *conn, op, p string, u who) error {
	if nc := r.cached(id); nc != nil {
		c = nc
	}
	var stderr limitedBuffer
	st, err := r.Exec(ctx, id, &driver.Command{Args: []string{"rm", "-rf", "--", abs(c, p)}, Dir: c.home,
		Env: map[string]string{}, Stdout: io.Discard, Stderr: &stderr, Timeout: 10 * time.Minute})
	if err != nil {
		return err
	}
	if st.ExitCode == 0 {
		return nil
	}
	msg, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
	msg = iox.Printable(msg, 300)
	name := u.user
	if name == "" {
		name = "the sandbox's user"
	}
	if strings.Contains(msg, "ermission denied") || strings.Contains(msg, "not permitted") {
		return sberrors.Errorf(sberrors.PermissionDenied, "e2b: %s %s: %s may not remove everything below it (%s; the SDK applies the user's permissions; see WithRootFileAccess)", op, p, name, msg)
	}
	return sberrors.Errorf(sberrors.Internal, "e2b: %s %s: rm -rf exited %d: %s", op, p, st.ExitCode, msg)
}

// limitedBuffer keeps the first 4 KiB written to it and drops the rest.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if n := 4096 - len(l.b); n > 0 {
		l.b = append(l.b, p[:min(n, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
