package memory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"syscall"
)

// utilities are the external commands the memory provider answers over the
// sandbox's files when no Handler is registered for the name. The package
// doc lists them with the options they take.
var utilities map[string]Handler

func init() {
	utilities = map[string]Handler{
		"true":  func(context.Context, *Call) int { return 0 },
		"false": func(context.Context, *Call) int { return 1 },
		// echo, printf, pwd, test and [ run as the shell's builtins, also
		// when given as an argv.
		"echo": viaBuiltin, "printf": viaBuiltin, "pwd": viaBuiltin, "test": viaBuiltin, "[": viaBuiltin,
		"sh": runSh, "bash": runSh, "dash": runSh,
		"cat": uCat, "ls": uLs, "mkdir": uMkdir, "rm": uRm, "rmdir": uRmdir, "mv": uMv, "cp": uCp,
		"ln": uLn, "readlink": uReadlink, "realpath": uRealpath, "chmod": uChmod, "touch": uTouch,
		"find": uFind, "grep": uGrep, "tar": uTar, "mktemp": uMktemp, "head": uHead, "tail": uTail,
		"wc": uWc, "sleep": uSleep, "printenv": uPrintenv, "env": uEnv, "basename": uBasename,
		"dirname": uDirname, "stat": uStat, "tee": uTee, "sort": uSort, "yes": uYes, "tr": uTr,
		"base64": uBase64, "sha256sum": uSha256sum, "stty": uStty,
	}
}

func fsOf(c *Call) *vfs { return &vfs{rt: c.Files.rt, id: c.SandboxID, dir: c.Dir} }

// fail prints "name: msg" on stderr and returns code.
func fail(c *Call, code int, format string, args ...any) int {
	fmt.Fprintf(c.Stderr, "%s: %s\n", path.Base(c.Args[0]), fmt.Sprintf(format, args...))
	return code
}

// flags splits GNU-style arguments: single-letter flags (combinable), the
// letters in withValue taking a value, long options (--name or
// --name=value), and "--" ending options. It returns the set flags (a
// value for those that take one) and the operands.
func flags(args []string, withValue string) (map[string][]string, []string, error) {
	set := map[string][]string{}
	var ops []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return set, append(ops, args[i+1:]...), nil
		case strings.HasPrefix(a, "--"):
			k, v, _ := strings.Cut(a[2:], "=")
			set["-"+k] = append(set["-"+k], v)
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				f := string(a[j])
				if strings.Contains(withValue, f) {
					v := a[j+1:]
					if v == "" {
						if i+1 >= len(args) {
							return nil, nil, fmt.Errorf("option requires an argument -- '%s'", f)
						}
						i++
						v = args[i]
					}
					set[f] = append(set[f], v)
					break
				}
				set[f] = append(set[f], "")
			}
		default:
			ops = append(ops, a)
		}
	}
	return set, ops, nil
}

func has(set map[string][]string, names ...string) bool {
	for _, n := range names {
		if _, ok := set[n]; ok {
			return true
		}
	}
	return false
}

func last(set map[string][]string, name string) string {
	if v := set[name]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// copyCtx copies until EOF or the command's end.
func copyCtx(ctx context.Context, w io.Writer, r io.Reader) error {
	_, err := io.Copy(w, readerCtx(ctx, r))
	return err
}

// mkdirAll creates p and its missing parents, following links.
func (v *vfs) mkdirAll(p string, perm fs.FileMode) error {
	abs := v.abs(p)
	parts := splitPath(abs)
	for i := range parts {
		q := "/" + strings.Join(parts[:i+1], "/")
		fi, err := v.stat(q, true)
		if err == nil {
			if !fi.IsDir() {
				if i == len(parts)-1 {
					return pe("mkdir", p, syscall.EEXIST)
				}
				return pe("mkdir", p, syscall.ENOTDIR)
			}
			continue
		}
		if err := v.mkdir(q, perm); err != nil && !errors.Is(err, syscall.EEXIST) {
			return pe("mkdir", p, errors.Unwrap(err))
		}
	}
	return nil
}

// typeLetter is find's %y letter for a mode.
func typeLetter(m fs.FileMode) byte {
	switch {
	case m.IsDir():
		return 'd'
	case m&fs.ModeSymlink != 0:
		return 'l'
	}
	return 'f'
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// inputs returns the data of each operand ("-" or none: stdin).
func inputs(ctx context.Context, c *Call, ops []string, each func(name string, data []byte)) int {
	if len(ops) == 0 {
		ops = []string{"-"}
	}
	code := 0
	for _, p := range ops {
		if p == "-" {
			data, err := io.ReadAll(readerCtx(ctx, c.Stdin))
			if err != nil {
				return 1
			}
			each(p, data)
			continue
		}
		data, err := fsOf(c).readFile(p)
		if err != nil {
			code = fail(c, 1, "%s: %s", p, errText(err))
			continue
		}
		each(p, data)
	}
	return code
}
