// Package blobcache puts content-addressed executables (static helper
// programs the library runs inside sandboxes) into sandboxes, once per
// sandbox and content.
//
// A blob's path in the sandbox ends in its SHA-256, so a file already at
// that path is that blob: callers check for it inside the command they
// already run (a test -x folded into its script, no extra round trip) and
// call Ensure only when it is missing. Ensure writes it with one command (the
// content on stdin, written to a temporary file, its size checked, made
// executable and renamed into place, so a reader never sees half a file),
// at most once per sandbox and path at a time across the process;
// concurrent callers for the same sandbox and path share one upload.
//
// The directory is the caller's choice: it must be on a file system that
// allows execution (a sandbox user's home usually does; /tmp may be
// mounted noexec) and out of reach of anything the sandbox's agent may
// write through a tool that is not a command.
//
// Like every internal package, blobcache serves the layers above and never
// imports the user package: a caller hands it a [Sandbox], the two calls
// it makes, usually a small adapter over its *sandbox.Sandbox.
package blobcache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/sandboxkit/sandbox/internal/pathsafe"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Sandbox is what a Cache needs of a sandbox.
type Sandbox interface {
	// ID identifies the sandbox; the cache remembers uploads per ID.
	ID() string
	// Run runs args (an argv, no shell) with stdin as its standard input
	// and waits for it to end. For a command that ran, exit is its exit
	// status (0 for success, -1 when a signal or a timeout ended it) and
	// stderr the start of its standard error; err is non-nil only when
	// the command could not run or its outcome is unknown.
	Run(ctx context.Context, args []string, stdin io.Reader) (exit int, stderr []byte, err error)
}

// Blob is an executable's content and its address.
type Blob struct {
	name string
	data []byte
	sum  string
}

// New returns a blob named name (a file name without a slash, for people
// reading the sandbox's directory) holding data.
func New(name string, data []byte) *Blob {
	s := sha256.Sum256(data)
	return &Blob{name: name, data: data, sum: hex.EncodeToString(s[:])}
}

// Sum returns the blob's SHA-256 in hexadecimal.
func (b *Blob) Sum() string { return b.sum }

// Path returns where the blob lives under dir: dir/<name>-<first 16 hex
// digits of its SHA-256>.
func (b *Blob) Path(dir string) string {
	return path.Join(dir, b.name+"-"+b.sum[:16])
}

// Cache remembers the uploads in progress and done, per sandbox and path.
// The zero value is ready to use; Default serves the whole process.
type Cache struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	done chan struct{} // closed when the upload ended
	err  error
}

// Default is the process-wide cache.
var Default = &Cache{}

// putScript writes stdin to $1 atomically and makes it executable; $2 is
// the expected size.
const putScript = `set -eu
d=${1%/*}
mkdir -p -- "$d"
t=$(mktemp "$d/.upload.XXXXXX")
trap 'rm -f -- "$t"' EXIT
cat > "$t"
n=$(wc -c < "$t")
[ "$n" -eq "$2" ] || { echo "short upload: $n of $2 bytes" >&2; exit 1; }
chmod 0755 "$t"
mv -f -- "$t" "$1"
trap - EXIT`

// Ensure uploads b to its path under dir in sb unless this cache already
// did so for the same sandbox and path (a caller that found the file
// missing since calls Forget first). It returns the path. Concurrent
// calls for the same sandbox and path wait for one upload; a failed upload
// is not remembered.
func (c *Cache) Ensure(ctx context.Context, sb Sandbox, dir string, b *Blob) (string, error) {
	p := b.Path(dir)
	if !strings.HasPrefix(dir, "/") || pathsafe.Check(dir) != nil {
		return "", sberrors.Errorf(sberrors.InvalidArgument, "blobcache: directory %q must be a clean absolute path", dir)
	}
	k := sb.ID() + "\x00" + p
	for {
		c.mu.Lock()
		if c.m == nil {
			c.m = map[string]*entry{}
		}
		e, ok := c.m[k]
		if !ok {
			e = &entry{done: make(chan struct{})}
			c.m[k] = e
			c.mu.Unlock()
			e.err = put(ctx, sb, p, b.data)
			c.mu.Lock()
			if e.err != nil {
				delete(c.m, k)
			}
			c.mu.Unlock()
			close(e.done)
			return p, e.err
		}
		c.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return "", fmt.Errorf("blobcache: wait for the upload of %s: %w", b.name, ctx.Err())
		}
		if e.err == nil {
			return p, nil
		}
		// That upload failed and was forgotten: try once more ourselves.
	}
}

// Forget drops what the cache knows about the blob at path p in the
// sandbox with the given ID, so that the next Ensure uploads it again.
func (c *Cache) Forget(sandboxID, p string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[sandboxID+"\x00"+p]; ok {
		select {
		case <-e.done:
			delete(c.m, sandboxID+"\x00"+p)
		default: // in progress: its result stands
		}
	}
}

func put(ctx context.Context, sb Sandbox, p string, data []byte) error {
	exit, stderr, err := sb.Run(ctx, []string{"sh", "-c", putScript, "sh", p, strconv.Itoa(len(data))}, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("blobcache: upload %s: %w", path.Base(p), err)
	}
	if exit != 0 {
		return sberrors.Errorf(sberrors.Internal, "blobcache: upload %s: exit %d: %s", path.Base(p), exit, strings.TrimSpace(string(stderr)))
	}
	return nil
}
