// Package pathsafe holds the path rules shared by the portable layer, the
// providers and the filesystem backend. Paths are slash-separated. Checks
// are element-wise: a name such as "report..final.md" or "[...slug]" is an
// ordinary name; only an element that is exactly ".." moves up, and a ".."
// that would climb above the root is an escape.
package pathsafe

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/sandboxkit/sandbox/internal/iox"
)

// ErrEscape reports a path whose ".." elements climb above its root.
var ErrEscape = errors.New("path escapes its root")

// ErrInvalid reports a path that is empty, not UTF-8, or holds NUL or
// another control character.
var ErrInvalid = errors.New("invalid path")

// Check rejects an empty path, invalid UTF-8, NUL and control characters
// (U+0000–U+001F, U+007F and the C1 range U+0080–U+009F).
func Check(p string) error {
	if p == "" {
		return fmt.Errorf("%w: empty", ErrInvalid)
	}
	if !utf8.ValidString(p) {
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalid)
	}
	for i, r := range p {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			return fmt.Errorf("%w: control character %U at byte %d", ErrInvalid, r, i)
		}
	}
	return nil
}

// The limits of Linux on a path given to a system call: PATH_MAX is 4096
// bytes with the terminating NUL, so a path holds at most MaxPath bytes;
// NAME_MAX is 255 bytes for one name element. Every provider runs Linux
// underneath, so a longer path or name fails in the sandbox with
// ENAMETOOLONG; the portable layer and the memory fake refuse it first.
const (
	MaxPath = 4095
	MaxName = 255
)

// ErrTooLong reports a path over MaxPath bytes or with a name element over
// MaxName bytes (ENAMETOOLONG).
var ErrTooLong = errors.New("file name too long")

// CheckLength rejects a path longer than MaxPath bytes or holding a name
// element longer than MaxName bytes. Its message stays short: a long name
// is shown shortened (see iox.Shorten), never whole.
func CheckLength(p string) error {
	if len(p) > MaxPath {
		return fmt.Errorf("%w: the path is %d bytes, over the limit of %d (PATH_MAX)", ErrTooLong, len(p), MaxPath)
	}
	for e := range strings.SplitSeq(p, "/") {
		if len(e) > MaxName {
			return fmt.Errorf("%w: the name %q is %d bytes, over the limit of %d (NAME_MAX)", ErrTooLong, iox.Shorten(e, 64), len(e), MaxName)
		}
	}
	return nil
}

// Resolve returns the absolute, cleaned form of p inside a sandbox whose
// relative paths start at home (an absolute path). Absolute paths are kept:
// the whole sandbox filesystem is the caller's. "~" and "~/x" mean home.
// A path that is, as given or resolved, over the limits of CheckLength is
// refused with ErrTooLong.
func Resolve(home, p string) (string, error) {
	if err := Check(p); err != nil {
		return "", err
	}
	if err := CheckLength(p); err != nil {
		return "", err
	}
	switch {
	case p == "~":
		p = home
	case strings.HasPrefix(p, "~/"):
		p = path.Join(home, p[2:])
	case !strings.HasPrefix(p, "/"):
		p = path.Join(home, p)
	}
	p = path.Clean(p)
	if err := CheckLength(p); err != nil {
		return "", err
	}
	return p, nil
}

// Jail maps p, a path given by an untrusted caller, to a path under root.
// An absolute p is re-rooted (its leading slashes are dropped), never passed
// through. Elements "." and "" are skipped; ".." removes the previous
// element and is an escape when there is none. The result is root joined
// with the remaining elements; it never leaves root lexically. (Symlinks
// are not resolved here: callers that touch a real filesystem must also
// resolve them, for example with os.Root.)
func Jail(root, p string) (string, error) {
	if err := Check(p); err != nil {
		return "", err
	}
	rel, err := Rel(p)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return path.Clean(root), nil
	}
	return path.Join(root, rel), nil
}

// Rel returns p as a clean relative path ("." for the root) after the
// element-wise walk described at Jail.
func Rel(p string) (string, error) {
	if err := Check(p); err != nil {
		return "", err
	}
	elems := make([]string, 0, 8)
	for _, e := range strings.Split(p, "/") {
		switch e {
		case "", ".":
		case "..":
			if len(elems) == 0 {
				return "", fmt.Errorf("%w: %q", ErrEscape, p)
			}
			elems = elems[:len(elems)-1]
		default:
			elems = append(elems, e)
		}
	}
	if len(elems) == 0 {
		return ".", nil
	}
	return strings.Join(elems, "/"), nil
}

// Within reports whether the clean absolute path p is root or below it.
func Within(root, p string) bool {
	root, p = path.Clean(root), path.Clean(p)
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == root || strings.HasPrefix(p, root+"/")
}
