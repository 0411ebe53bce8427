package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandboxkit/sandbox"
)

// progressThreshold is the size from which cp draws a progress bar (when
// stderr is a terminal).
const progressThreshold = 8 << 20

// endpoint is one side of a cp: a local path, "-" (stdin or stdout), or a
// path in a sandbox.
type endpoint struct {
	id   string // sandbox id; empty for the local side
	path string // "-" for stdin/stdout on the local side
}

// parseEndpoint reads ID:/path as a sandbox path and anything else as a
// local path. A local path with a colon can be written ./a:b.
func parseEndpoint(s string) (endpoint, error) {
	if s == "" {
		return endpoint{}, usagef("cp: empty path")
	}
	if s == "-" || strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") {
		return endpoint{path: s}, nil
	}
	id, p, ok := strings.Cut(s, ":")
	if !ok {
		return endpoint{path: s}, nil
	}
	if id == "" || p == "" {
		return endpoint{}, usagef("cp: %q: want ID:PATH with a non-empty id and path", s)
	}
	return endpoint{id: id, path: p}, nil
}

func (a *app) cpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy a file into, out of or between sandboxes",
		Long: `cp streams one file. Either side may be ID:PATH, a path in sandbox ID (relative
paths start at the sandbox's home); the other a local path, or - for stdin
(as SRC) or stdout (as DST). A DST ending in / (or a local directory) receives
the file under its own name. A progress bar is drawn on stderr when stderr is a
terminal and the file is large (8 MiB or more).`,
		Example: `  sandbox cp ./main.py sbx-1234:/home/user/main.py
  sandbox cp sbx-1234:out/report.pdf .
  tar cz src | sandbox cp - sbx-1234:src.tgz
  sandbox cp sbx-1234:log.txt - | less`,
		Args: exactArgs(2, "SRC DST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := parseEndpoint(args[0])
			if err != nil {
				return err
			}
			dst, err := parseEndpoint(args[1])
			if err != nil {
				return err
			}
			if src.id == "" && dst.id == "" {
				return usagef("cp: one of SRC and DST must be ID:PATH, got %q and %q", args[0], args[1])
			}
			if src.id != "" && src.path == "-" || dst.id != "" && dst.path == "-" {
				return usagef("cp: - stands for stdin or stdout, not a sandbox path")
			}
			return a.copy(cmd.Context(), src, dst)
		},
	}
}

func (a *app) copy(ctx context.Context, src, dst endpoint) error {
	// Connecting, attaching and Stat are control-plane waits, bounded by
	// --call-timeout; the transfer is bounded by its progress instead (the
	// library's idle bound).
	cctx, end := a.ctl(ctx, "cp: connecting")
	c, err := a.client(cctx)
	if err = end(err); err != nil {
		return err
	}
	defer c.Close()
	attach := func(id string) (*sandbox.Sandbox, error) {
		cctx, end := a.ctl(ctx, "attaching to "+id)
		sb, err := c.Attach(cctx, id)
		return sb, end(err)
	}
	stat := func(sb *sandbox.Sandbox, p string) (sandbox.FileInfo, error) {
		cctx, end := a.ctl(ctx, "stat "+sb.ID()+":"+p)
		fi, err := sb.Stat(cctx, p)
		return fi, end(err)
	}

	// Open the source and learn its size.
	var r io.Reader
	var size int64 = -1
	name := path.Base(filepath.ToSlash(src.path))
	switch {
	case src.id != "":
		sb, err := attach(src.id)
		if err != nil {
			return err
		}
		fi, err := stat(sb, src.path)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return usagef("cp: %s:%s is a directory; cp copies one file", src.id, src.path)
		}
		size = fi.Size
		rc, err := sb.Download(ctx, src.path)
		if err != nil {
			return err
		}
		defer rc.Close()
		r = rc
	case src.path == "-":
		r = a.stdin
		name = ""
	default:
		f, err := os.Open(src.path)
		if err != nil {
			return fmt.Errorf("cp: %w", err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("cp: %w", err)
		}
		if fi.IsDir() {
			return usagef("cp: %s is a directory; cp copies one file", src.path)
		}
		size = fi.Size()
		r = f
	}

	var bar *progress
	if a.stderrTTY && size >= progressThreshold {
		bar = newProgress(a.stderr, size)
		defer bar.finish()
		r = io.TeeReader(r, bar)
	}

	switch {
	case dst.id != "":
		sb, err := attach(dst.id)
		if err != nil {
			return err
		}
		p := dst.path
		if strings.HasSuffix(p, "/") {
			if name == "" {
				return usagef("cp: %s:%s names a directory; give a file name for stdin", dst.id, dst.path)
			}
			p += name
		} else if fi, err := stat(sb, p); err == nil && fi.IsDir() && name != "" {
			p = path.Join(p, name)
		} else if _, ok := errors.AsType[*callTimeoutError](err); ok {
			return err
		}
		return sb.Upload(ctx, p, r)
	case dst.path == "-":
		if _, err := io.Copy(a.stdout, r); err != nil {
			return fmt.Errorf("cp: writing stdout: %w", err)
		}
		return nil
	default:
		p := dst.path
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			p = filepath.Join(p, name)
		}
		return writeLocal(p, r)
	}
}

// writeLocal writes r to p through a temporary file renamed over p, so a
// failed copy leaves p as it was.
func writeLocal(p string, r io.Reader) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*.tmp")
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	_, err = io.Copy(tmp, r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cp: writing %s: %w", p, err)
	}
	return nil
}

// progress draws a one-line progress bar on a terminal, at most every
// 100 ms.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	total int64
	done  int64
	last  time.Time
	start time.Time
}

func newProgress(w io.Writer, total int64) *progress {
	return &progress{w: w, total: total, start: time.Now()}
}

func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += int64(len(b))
	if now := time.Now(); now.Sub(p.last) >= 100*time.Millisecond {
		p.last = now
		p.draw()
	}
	return len(b), nil
}

func (p *progress) draw() {
	const width = 30
	frac := float64(p.done) / float64(p.total)
	if frac > 1 {
		frac = 1
	}
	n := int(frac * width)
	fmt.Fprintf(p.w, "\r[%s%s] %5.1f%% %s / %s", strings.Repeat("=", n), strings.Repeat(" ", width-n),
		frac*100, humanBytes(p.done), humanBytes(p.total))
}

func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw()
	fmt.Fprintln(p.w)
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
