package memory

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
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
		"base64": uBase64,
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

// viaBuiltin runs a shell builtin given as an argv, without shell parsing:
// the script "$@" runs the arguments as one command.
func viaBuiltin(ctx context.Context, c *Call) int {
	sc := *c
	sc.Shell, sc.bash = `"$@"`, false
	sc.Positional = append([]string{"sh"}, c.Args...)
	return c.Files.rt.runShell(ctx, &sc, sc.Shell, false)
}

// runSh is sh and bash: "-c script [name [arg...]]", a script file, or a
// script read from stdin. -e, -u, -x and friends are passed to set.
func runSh(ctx context.Context, c *Call) int {
	sc := *c
	sc.bash = path.Base(c.Args[0]) == "bash"
	var setOpts []string
	args := c.Args[1:]
	script, fromC := "", false
	for len(args) > 0 && len(args[0]) > 1 && (args[0][0] == '-' || args[0][0] == '+') && args[0] != "--" {
		a := args[0]
		args = args[1:]
		for _, ch := range a[1:] {
			switch ch {
			case 'c':
				fromC = true
			case 'l', 'i', 's':
			default:
				setOpts = append(setOpts, string(a[0])+string(ch))
			}
		}
	}
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	switch {
	case fromC:
		if len(args) == 0 {
			return fail(c, 2, "-c: option requires an argument")
		}
		script, args = args[0], args[1:]
		if len(args) > 0 {
			sc.Positional = args
		} else {
			sc.Positional = []string{path.Base(c.Args[0])}
		}
	case len(args) > 0:
		data, err := fsOf(c).readFile(args[0])
		if err != nil {
			return fail(c, 127, "%s: %s", args[0], errText(err))
		}
		script, sc.Positional = string(data), args
	default:
		data, err := io.ReadAll(readerCtx(ctx, c.Stdin))
		if err != nil {
			return 1
		}
		script, sc.Positional = string(data), []string{path.Base(c.Args[0])}
	}
	if len(setOpts) > 0 {
		script = "set " + strings.Join(setOpts, " ") + "\n" + script
	}
	sc.Shell, sc.Args = script, nil
	if fromC {
		return c.Files.rt.run(ctx, &sc)
	}
	return c.Files.rt.runShell(ctx, &sc, script, sc.bash)
}

// copyCtx copies until EOF or the command's end.
func copyCtx(ctx context.Context, w io.Writer, r io.Reader) error {
	_, err := io.Copy(w, readerCtx(ctx, r))
	return err
}

func uCat(ctx context.Context, c *Call) int {
	_, ops, err := flags(c.Args[1:], "")
	if err != nil {
		return fail(c, 1, "%v", err)
	}
	if len(ops) == 0 {
		ops = []string{"-"}
	}
	code := 0
	for _, p := range ops {
		if p == "-" {
			if err := copyCtx(ctx, c.Stdout, c.Stdin); err != nil {
				return 1
			}
			continue
		}
		data, err := fsOf(c).readFile(p)
		if err != nil {
			code = fail(c, 1, "%s: %s", p, errText(err))
			continue
		}
		if _, err := c.Stdout.Write(data); err != nil {
			return 1
		}
	}
	return code
}

func uLs(_ context.Context, c *Call) int {
	set, ops, err := flags(c.Args[1:], "")
	if err != nil {
		return fail(c, 2, "%v", err)
	}
	all, almost, long, dirOnly := has(set, "a"), has(set, "A"), has(set, "l"), has(set, "d")
	if len(ops) == 0 {
		ops = []string{"."}
	}
	v := fsOf(c)
	code := 0
	line := func(name string, fi *statInfo) {
		if !long {
			fmt.Fprintln(c.Stdout, name)
			return
		}
		fmt.Fprintf(c.Stdout, "%s 1 user user %d %s %s\n", fi.mode.String(), fi.size, fi.mt.Format("Jan _2 15:04"), name)
	}
	var files, dirs []string
	for _, p := range ops {
		fi, err := v.stat(p, true)
		if err != nil {
			if lfi, lerr := v.stat(p, false); lerr == nil {
				line(p, lfi) // a dangling link
				continue
			}
			code = fail(c, 2, "cannot access '%s': %s", p, errText(err))
			continue
		}
		if fi.IsDir() && !dirOnly {
			dirs = append(dirs, p)
		} else {
			files = append(files, p)
			line(p, fi)
		}
	}
	for i, d := range dirs {
		if len(ops) > 1 {
			if i > 0 || len(files) > 0 {
				fmt.Fprintln(c.Stdout)
			}
			fmt.Fprintf(c.Stdout, "%s:\n", d)
		}
		list, err := v.readDir(d)
		if err != nil {
			code = fail(c, 2, "cannot open directory '%s': %s", d, errText(err))
			continue
		}
		if all {
			if fi, err := v.stat(d, true); err == nil {
				line(".", fi)
				line("..", fi)
			}
		}
		for _, e := range list {
			if strings.HasPrefix(e.name, ".") && !all && !almost {
				continue
			}
			line(e.name, e.info)
		}
	}
	return code
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

func parseMode(s string, old fs.FileMode) (fs.FileMode, bool) {
	if n, err := strconv.ParseUint(s, 8, 32); err == nil {
		return fs.FileMode(n) & fs.ModePerm, true
	}
	m := old.Perm()
	for _, clause := range strings.Split(s, ",") {
		i := 0
		var who fs.FileMode
		for ; i < len(clause) && strings.IndexByte("ugoa", clause[i]) >= 0; i++ {
			who |= map[byte]fs.FileMode{'u': 0o700, 'g': 0o070, 'o': 0o007, 'a': 0o777}[clause[i]]
		}
		if who == 0 {
			who = 0o777 &^ 0o022
		}
		if i >= len(clause) || strings.IndexByte("+-=", clause[i]) < 0 {
			return 0, false
		}
		op := clause[i]
		var bits fs.FileMode
		for _, ch := range clause[i+1:] {
			switch ch {
			case 'r':
				bits |= 0o444
			case 'w':
				bits |= 0o222
			case 'x', 'X':
				bits |= 0o111
			default:
				return 0, false
			}
		}
		switch op {
		case '+':
			m |= bits & who
		case '-':
			m &^= bits & who
		case '=':
			m = m&^who | bits&who
		}
	}
	return m, true
}

func uMkdir(_ context.Context, c *Call) int {
	set, ops, err := flags(c.Args[1:], "m")
	if err != nil {
		return fail(c, 1, "%v", err)
	}
	if len(ops) == 0 {
		return fail(c, 1, "missing operand")
	}
	perm := fs.FileMode(0o777)
	if m := last(set, "m"); m != "" {
		var ok bool
		if perm, ok = parseMode(m, 0o777); !ok {
			return fail(c, 1, "invalid mode '%s'", m)
		}
	}
	v := fsOf(c)
	code := 0
	for _, p := range ops {
		var err error
		if has(set, "p", "-parents") {
			err = v.mkdirAll(p, perm)
		} else {
			err = v.mkdir(p, perm)
		}
		if err != nil {
			code = fail(c, 1, "cannot create directory '%s': %s", p, errText(err))
		}
	}
	return code
}

func uRm(_ context.Context, c *Call) int {
	set, ops, err := flags(c.Args[1:], "")
	if err != nil {
		return fail(c, 1, "%v", err)
	}
	force, rec := has(set, "f", "-force"), has(set, "r", "R", "-recursive")
	if len(ops) == 0 && !force {
		return fail(c, 1, "missing operand")
	}
	code := 0
	for _, p := range ops {
		if err := fsOf(c).remove(p, rec, has(set, "d")); err != nil {
			if force && errors.Is(err, syscall.ENOENT) {
				continue
			}
			code = fail(c, 1, "cannot remove '%s': %s", p, errText(err))
		}
	}
	return code
}

func uRmdir(_ context.Context, c *Call) int {
	_, ops, err := flags(c.Args[1:], "")
	if err != nil || len(ops) == 0 {
		return fail(c, 1, "missing operand")
	}
	code := 0
	v := fsOf(c)
	for _, p := range ops {
		fi, err := v.stat(p, false)
		if err == nil && !fi.IsDir() {
			err = pe("rmdir", p, syscall.ENOTDIR)
		}
		if err == nil {
			err = v.remove(p, false, true)
		}
		if err != nil {
			code = fail(c, 1, "failed to remove '%s': %s", p, errText(err))
		}
	}
	return code
}

// target returns where src lands when dst is an existing directory.
func (v *vfs) into(src, dst string, noDeref bool) string {
	if fi, err := v.stat(dst, !noDeref); err == nil && fi.IsDir() {
		return strings.TrimSuffix(dst, "/") + "/" + path.Base(src)
	}
	return dst
}

func uMv(_ context.Context, c *Call) int {
	set, ops, err := flags(c.Args[1:], "")
	if err != nil {
		return fail(c, 1, "%v", err)
	}
	if len(ops) < 2 {
		return fail(c, 1, "missing file operand")
	}
	v := fsOf(c)
	dst := ops[len(ops)-1]
	srcs := ops[:len(ops)-1]
	if len(srcs) > 1 {
		if fi, err := v.stat(dst, true); err != nil || !fi.IsDir() {
			return fail(c, 1, "target '%s' is not a directory", dst)
		}
	}
	code := 0
	for _, s := range srcs {
		to := dst
		if !has(set, "T") {
			to = v.into(s, dst, false)
		}
		if err := v.rename(s, to); err != nil {
			code = fail(c, 1, "cannot move '%s' to '%s': %s", s, to, errText(err))
		}
	}
	return code
}

func uCp(_ context.Context, c *Call) int {
	set, ops, err := flags(c.Args[1:], "")
	if err != nil {
		return fail(c, 1, "%v", err)
	}
	if len(ops) < 2 {
		return fail(c, 1, "missing file operand")
	}
	rec := has(set, "r", "R", "a", "-recursive", "-archive")
	v := fsOf(c)
	dst := ops[len(ops)-1]
	code := 0
	var cp func(src, to string) error
	cp = func(src, to string) error {
		fi, err := v.stat(src, true)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			if !rec {
				return fmt.Errorf("-r not specified; omitting directory '%s'", src)
			}
			if err := v.mkdir(to, fi.mode.Perm()); err != nil && !errors.Is(err, syscall.EEXIST) {
				return err
			}
			list, err := v.readDir(src)
			if err != nil {
				return err
			}
			for _, e := range list {
				if err := cp(src+"/"+e.name, to+"/"+e.name); err != nil {
					return err
				}
			}
			return nil
		}
		data, err := v.readFile(src)
		if err != nil {
			return err
		}
		n, err := v.openWrite(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.mode.Perm())
		if err != nil {
			return err
		}
		v.appendTo(n, data)
		return nil
	}
	for _, s := range ops[:len(ops)-1] {
		if err := cp(s, v.into(s, dst, false)); err != nil {
			code = fail(c, 1, "%s", errText(err))
		}
	}
	return code
}

func uLn(_ context.Context, c *Call) int {
	set, ops, err := flags(c.Args[1:], "")
	if err != nil {
		return fail(c, 1, "%v", err)
	}
	if !has(set, "s", "-symbolic") {
		return fail(c, 1, "hard links are not supported by the memory provider (every file has one link); use ln -s")
	}
	if len(ops) != 2 {
		return fail(c, 1, "give a target and a link name")
	}
	v := fsOf(c)
	target, name := ops[0], ops[1]
	name = v.into(target, name, has(set, "n", "-no-dereference"))
	if has(set, "f", "-force") {
		if fi, err := v.stat(name, false); err == nil && !fi.IsDir() {
			_ = v.remove(name, false, false)
		}
	}
	if err := v.symlink(target, name); err != nil {
		return fail(c, 1, "failed to create symbolic link '%s': %s", name, errText(err))
	}
	return 0
}

// canonical resolves p physically. mode 'f': every element but the last
// must exist; 'e': all must; 'm': none need to.
func (v *vfs) canonical(p string, mode byte) (string, error) {
	phys, err := v.resolve(p, true, mode == 'e')
	if err == nil || mode != 'm' {
		return phys, err
	}
	// -m: resolve the longest existing prefix, append the rest lexically.
	parts := splitPath(v.abs(p))
	for i := len(parts) - 1; i >= 0; i-- {
		head := "/" + strings.Join(parts[:i], "/")
		if ph, err := v.resolve(head, true, true); err == nil {
			return path.Join(append([]string{ph}, parts[i:]...)...), nil
		}
	}
	return path.Clean(v.abs(p)), nil
}

func uReadlink(_ context.Context, c *Call) int {
	set, ops, err := flags(c.Args[1:], "")
	if err != nil || len(ops) == 0 {
		return fail(c, 1, "missing operand")
	}
	nl := "\n"
	if has(set, "n") {
		nl = ""
	}
	v := fsOf(c)
	code := 0
	for _, p := range ops {
		var out string
		var err error
		switch {
		case has(set, "f", "-canonicalize"):
			out, err = v.canonical(p, 'f')
		case has(set, "e", "-canonicalize-existing"):
			out, err = v.canonical(p, 'e')
		case has(set, "m", "-canonicalize-missing"):
			out, err = v.canonical(p, 'm')
		default:
			out, err = v.readlink(p)
		}
		if err != nil {
			code = 1
			if has(set, "v") {
				fail(c, 1, "%s: %s", p, errText(err))
			}
			continue
		}
		fmt.Fprint(c.Stdout, out+nl)
	}
	return code
}

func uRealpath(_ context.Context, c *Call) int {
	set, ops, err := flags(c.Args[1:], "")
	if err != nil || len(ops) == 0 {
		return fail(c, 1, "missing operand")
	}
	mode := byte('f')
	if has(set, "e") {
		mode = 'e'
	} else if has(set, "m") {
		mode = 'm'
	}
	code := 0
	for _, p := range ops {
		out, err := fsOf(c).canonical(p, mode)
		if err != nil {
			code = fail(c, 1, "%s: %s", p, errText(err))
			continue
		}
		fmt.Fprintln(c.Stdout, out)
	}
	return code
}

func uChmod(_ context.Context, c *Call) int {
	// Options are -R, -f, -v and --; "-w" and friends are modes.
	var ops []string
	for i, a := range c.Args[1:] {
		if a == "--" {
			ops = append(ops, c.Args[i+2:]...)
			break
		}
		if a != "-R" && a != "-f" && a != "-v" {
			ops = append(ops, a)
		}
	}
	if len(ops) < 2 {
		return fail(c, 1, "missing operand")
	}
	v := fsOf(c)
	code := 0
	for _, p := range ops[1:] {
		fi, err := v.stat(p, true)
		if err == nil {
			m, ok := parseMode(ops[0], fi.mode)
			if !ok {
				return fail(c, 1, "invalid mode: '%s'", ops[0])
			}
			err = v.chmod(p, m)
		}
		if err != nil {
			code = fail(c, 1, "cannot access '%s': %s", p, errText(err))
		}
	}
	return code
}

func uTouch(_ context.Context, c *Call) int {
	_, ops, err := flags(c.Args[1:], "")
	if err != nil || len(ops) == 0 {
		return fail(c, 1, "missing file operand")
	}
	code := 0
	for _, p := range ops {
		if err := fsOf(c).touch(p); err != nil {
			code = fail(c, 1, "cannot touch '%s': %s", p, errText(err))
		}
	}
	return code
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

// findPrintf expands a find -printf format for one file.
func findPrintf(v *vfs, f, p, rel string, depth int, fi *statInfo) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		ch := f[i]
		if ch == '\\' && i+1 < len(f) {
			i++
			switch f[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case '0':
				b.WriteByte(0)
			case '\\':
				b.WriteByte('\\')
			default:
				b.WriteByte('\\')
				b.WriteByte(f[i])
			}
			continue
		}
		if ch != '%' || i+1 >= len(f) {
			b.WriteByte(ch)
			continue
		}
		i++
		switch f[i] {
		case '%':
			b.WriteByte('%')
		case 'p':
			b.WriteString(p)
		case 'P':
			b.WriteString(rel)
		case 'f':
			b.WriteString(path.Base(p))
		case 'h':
			b.WriteString(path.Dir(p))
		case 's':
			b.WriteString(strconv.FormatInt(fi.size, 10))
		case 'y':
			b.WriteByte(typeLetter(fi.mode))
		case 'Y':
			t := typeLetter(fi.mode)
			if t == 'l' {
				t = 'N'
				if tfi, err := v.stat(p, true); err == nil {
					t = typeLetter(tfi.mode)
				} else if errors.Is(err, syscall.ELOOP) {
					t = 'L'
				}
			}
			b.WriteByte(t)
		case 'T', 'A', 'C':
			if i+1 < len(f) && f[i+1] == '@' {
				i++
				fmt.Fprintf(&b, "%d.%09d0", fi.mt.Unix(), fi.mt.Nanosecond())
			} else {
				b.WriteString(fi.mt.Format(time.ANSIC))
			}
		case 'i':
			b.WriteString(strconv.FormatUint(fi.ino, 10))
		case 'n':
			b.WriteByte('1')
		case 'm':
			b.WriteString(strconv.FormatUint(uint64(fi.mode.Perm()), 8))
		case 'M':
			b.WriteString(fi.mode.String())
		case 'd':
			b.WriteString(strconv.Itoa(depth))
		case 'D':
			b.WriteString(strconv.FormatUint(fi.dev, 10))
		case 'u', 'g':
			_, name := uidOf(fi.root)
			b.WriteString(name)
		case 'U':
			uid, _ := uidOf(fi.root)
			b.WriteString(strconv.Itoa(uid))
		case 'G':
			gid := os.Getgid()
			if fi.root {
				gid = 0
			}
			b.WriteString(strconv.Itoa(gid))
		case 'l':
			if fi.mode&fs.ModeSymlink != 0 {
				t, _ := v.readlink(p)
				b.WriteString(t)
			}
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}

// breToERE turns a POSIX basic regular expression into Go syntax.
func breToERE(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case '(', ')', '{', '}', '|', '+', '?':
				b.WriteByte(s[i])
			default:
				b.WriteByte('\\')
				b.WriteByte(s[i])
			}
			continue
		}
		if strings.IndexByte("(){}|+?", ch) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(ch)
	}
	return b.String()
}

func uGrep(ctx context.Context, c *Call) int {
	set, ops, err := flags(c.Args[1:], "emfABCD")
	if err != nil {
		return fail(c, 2, "%v", err)
	}
	pats := set["e"]
	if len(pats) == 0 {
		if len(ops) == 0 {
			return fail(c, 2, "no pattern given")
		}
		pats, ops = strings.Split(ops[0], "\n"), ops[1:]
	}
	// -P (Perl) is read as Go's regexp, RE2, the nearest syntax at hand.
	fixed, ext, fold := has(set, "F", "-fixed-strings"), has(set, "E", "-extended-regexp", "P", "-perl-regexp"), has(set, "i", "-ignore-case")
	var res []*regexp.Regexp
	for _, p := range pats {
		switch {
		case fixed:
			p = regexp.QuoteMeta(p)
		case !ext:
			p = breToERE(p)
		}
		if has(set, "w") {
			p = `\b(?:` + p + `)\b`
		}
		if has(set, "x") {
			p = `^(?:` + p + `)$`
		}
		if fold {
			p = "(?i)" + p
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return fail(c, 2, "invalid pattern: %v", err)
		}
		res = append(res, re)
	}
	rec := has(set, "r", "R", "-recursive", "-dereference-recursive")
	deref := has(set, "R", "-dereference-recursive")
	invert, count, list, quiet := has(set, "v"), has(set, "c"), has(set, "l"), has(set, "q", "-quiet", "-silent")
	lineNo, null, skipBin, noMsg := has(set, "n"), has(set, "Z", "-null"), has(set, "I"), has(set, "s")
	maxCount := -1
	if m := last(set, "m"); m != "" {
		if maxCount, err = strconv.Atoi(m); err != nil {
			return fail(c, 2, "invalid max count")
		}
	}
	// Context lines, as GNU and busybox grep print them: -C N (or
	// --context=N) for both sides, -B N and -A N (--before-context,
	// --after-context) for one, overriding -C.
	ctxArg := func(names ...string) (int, error) {
		n := -1
		for _, name := range names {
			if v := last(set, name); v != "" || has(set, name) {
				k, err := strconv.Atoi(v)
				if err != nil || k < 0 {
					return 0, fmt.Errorf("%s: invalid context length argument", v)
				}
				n = k
			}
		}
		return n, nil
	}
	both, err := ctxArg("C", "-context")
	if err != nil {
		return fail(c, 2, "%v", err)
	}
	before, err := ctxArg("B", "-before-context")
	if err != nil {
		return fail(c, 2, "%v", err)
	}
	after, err := ctxArg("A", "-after-context")
	if err != nil {
		return fail(c, 2, "%v", err)
	}
	if before < 0 {
		before = max(both, 0)
	}
	if after < 0 {
		after = max(both, 0)
	}
	groupSep := "--"
	if v := set["-group-separator"]; len(v) > 0 {
		groupSep = v[len(v)-1]
	}
	noGroupSep := has(set, "-no-group-separator")
	printedAny := false // a line was printed, in any file: the next group is separated
	if len(ops) == 0 {
		if rec {
			ops = []string{"."}
		} else {
			ops = []string{"-"}
		}
	}
	names := (len(ops) > 1 || rec) && !has(set, "h")
	if has(set, "H") {
		names = true
	}
	matched, errored := false, false
	v := fsOf(c)
	out := bufio.NewWriter(c.Stdout)
	defer out.Flush()
	sep := ":"
	if null {
		sep = "\x00"
	}
	match := func(line string) bool {
		for _, re := range res {
			if re.MatchString(line) {
				return !invert
			}
		}
		return invert
	}
	grepData := func(name string, data []byte) {
		if bytes.IndexByte(data, 0) >= 0 {
			if skipBin {
				return
			}
			for _, l := range strings.Split(string(data), "\n") {
				if match(l) {
					matched = true
					if !quiet {
						fmt.Fprintf(out, "Binary file %s matches\n", name)
					}
					return
				}
			}
			return
		}
		n := 0
		text := strings.TrimSuffix(string(data), "\n")
		if len(data) == 0 {
			text = ""
		}
		lines := strings.Split(text, "\n")
		if len(data) == 0 {
			lines = nil
		}
		show := !quiet && !count && !list
		// printLine writes line i (0-based), marked ':' for a match and
		// '-' for context, as grep -A/-B/-C do.
		printed := -1 // the last line printed in this file
		printLine := func(i int, mark string) {
			if names {
				if null {
					out.WriteString(name + "\x00")
				} else {
					out.WriteString(name + mark)
				}
			}
			if lineNo {
				fmt.Fprintf(out, "%d%s", i+1, mark)
			}
			out.WriteString(lines[i] + "\n")
			printed, printedAny = i, true
		}
		pendingAfter := 0
		for i, l := range lines {
			if maxCount >= 0 && n >= maxCount {
				// Trailing context of the last match is still printed.
				if show && pendingAfter > 0 && !match(l) {
					printLine(i, "-")
					pendingAfter--
					continue
				}
				break
			}
			if !match(l) {
				if show && pendingAfter > 0 {
					printLine(i, "-")
					pendingAfter--
				}
				continue
			}
			n++
			matched = true
			if !show {
				continue
			}
			from := max(i-before, printed+1)
			if (before > 0 || after > 0) && printedAny && !noGroupSep && (printed < 0 || from > printed+1) {
				out.WriteString(groupSep + "\n")
			}
			for j := from; j < i; j++ {
				printLine(j, "-")
			}
			printLine(i, ":")
			pendingAfter = after
		}
		switch {
		case quiet:
		case list && n > 0:
			out.WriteString(name)
			if null {
				out.WriteByte(0)
			} else {
				out.WriteByte('\n')
			}
		case count:
			if names {
				out.WriteString(name + sep)
			}
			fmt.Fprintf(out, "%d\n", n)
		}
	}
	report := func(p string, err error) {
		errored = true
		if !noMsg {
			out.Flush()
			fail(c, 2, "%s: %s", p, errText(err))
		}
	}
	var walk func(p string, top bool)
	walk = func(p string, top bool) {
		if ctx.Err() != nil {
			return
		}
		fi, err := v.stat(p, top || deref)
		if err != nil {
			if !top && fi == nil {
				if lfi, lerr := v.stat(p, false); lerr == nil && lfi.mode&fs.ModeSymlink != 0 {
					return // a link met while recursing is skipped
				}
			}
			report(p, err)
			return
		}
		if fi.mode&fs.ModeSymlink != 0 {
			return
		}
		if fi.IsDir() {
			if !rec {
				if !noMsg {
					out.Flush()
					fail(c, 2, "%s: Is a directory", p)
				}
				return
			}
			list, err := v.readDir(p)
			if err != nil {
				report(p, err)
				return
			}
			for _, e := range list {
				if e.info.IsDir() && matchAny(set["-exclude-dir"], e.name) {
					continue
				}
				if !e.info.IsDir() && (matchAny(set["-exclude"], e.name) || len(set["-include"]) > 0 && !matchAny(set["-include"], e.name)) {
					continue
				}
				walk(strings.TrimSuffix(p, "/")+"/"+e.name, false)
			}
			return
		}
		data, err := v.readFile(p)
		if err != nil {
			report(p, err)
			return
		}
		grepData(p, data)
	}
	for _, p := range ops {
		if p == "-" {
			data, err := io.ReadAll(readerCtx(ctx, c.Stdin))
			if err != nil {
				return 2
			}
			grepData(cmpOr(last(set, "-label"), "(standard input)"), data)
			continue
		}
		walk(p, true)
	}
	if ctx.Err() != nil {
		return -1
	}
	switch {
	case errored && !(quiet && matched):
		return 2
	case matched:
		return 0
	}
	return 1
}

func uTar(ctx context.Context, c *Call) int {
	args := c.Args[1:]
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		args = append([]string{"-" + args[0]}, args[1:]...) // "tar cf x ."
	}
	set, ops, err := flags(args, "fCXT")
	if err != nil {
		return fail(c, 2, "%v", err)
	}
	file := last(set, "f")
	if file == "" {
		file = last(set, "-file")
	}
	v := fsOf(c)
	if dir := last(set, "C"); dir != "" {
		d, err := v.resolve(dir, true, true)
		if err != nil {
			return fail(c, 2, "%s: Cannot open: %s", dir, errText(err))
		}
		v = &vfs{rt: v.rt, id: v.id, dir: d}
	}
	switch {
	case has(set, "c", "-create"):
		if len(ops) == 0 {
			return fail(c, 2, "Cowardly refusing to create an empty archive")
		}
		excludes := set["-exclude"]
		for _, x := range set["X"] {
			data, err := fsOf(c).readFile(x)
			if err != nil {
				return fail(c, 2, "%s: Cannot open: %s", x, errText(err))
			}
			for _, l := range strings.Split(string(data), "\n") {
				if l != "" {
					excludes = append(excludes, l)
				}
			}
		}
		literal := has(set, "-no-wildcards")
		for _, t := range set["T"] {
			data, err := fsOf(c).readFile(t)
			if err != nil {
				return fail(c, 2, "%s: Cannot open: %s", t, errText(err))
			}
			sep := "\n"
			if has(set, "-null") {
				sep = "\x00"
			}
			for _, l := range strings.Split(string(data), sep) {
				if l != "" {
					ops = append(ops, l)
				}
			}
		}
		excluded := func(name string) bool {
			for _, pat := range excludes {
				pat = strings.TrimSuffix(pat, "/")
				if literal {
					if name == pat {
						return true
					}
					continue
				}
				if ok, _ := path.Match(pat, name); ok {
					return true
				}
				if ok, _ := path.Match(pat, path.Base(name)); ok && !strings.Contains(pat, "/") {
					return true
				}
			}
			return false
		}
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		code := 0
		var add func(p, name string) error
		add = func(p, name string) error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if excluded(name) {
				return nil
			}
			fi, err := v.stat(p, false)
			if err != nil {
				code = fail(c, 2, "%s: Cannot stat: %s", p, errText(err))
				return nil
			}
			h := &tar.Header{Name: name, Mode: int64(fi.mode.Perm()), ModTime: fi.mt, Uname: "user", Gname: "user"}
			switch typeLetter(fi.mode) {
			case 'd':
				h.Typeflag, h.Name = tar.TypeDir, strings.TrimSuffix(name, "/")+"/"
				if err := tw.WriteHeader(h); err != nil {
					return err
				}
				list, err := v.readDir(p)
				if err != nil {
					code = fail(c, 2, "%s: Cannot open: %s", p, errText(err))
					return nil
				}
				for _, e := range list {
					if err := add(strings.TrimSuffix(p, "/")+"/"+e.name, strings.TrimSuffix(name, "/")+"/"+e.name); err != nil {
						return err
					}
				}
				return nil
			case 'l':
				t, _ := v.readlink(p)
				h.Typeflag, h.Linkname = tar.TypeSymlink, t
				return tw.WriteHeader(h)
			}
			data, err := v.readFile(p)
			if err != nil {
				code = fail(c, 2, "%s: Cannot open: %s", p, errText(err))
				return nil
			}
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			_, err = tw.Write(data)
			return err
		}
		for _, p := range ops {
			if err := add(p, p); err != nil {
				return fail(c, 2, "%v", err)
			}
		}
		if err := tw.Close(); err != nil {
			return fail(c, 2, "%v", err)
		}
		if file == "" || file == "-" {
			if _, err := c.Stdout.Write(buf.Bytes()); err != nil {
				return 2
			}
			return code
		}
		n, err := fsOf(c).openWrite(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fail(c, 2, "%s: Cannot open: %s", file, errText(err))
		}
		fsOf(c).appendTo(n, buf.Bytes())
		return code
	case has(set, "x", "-extract", "t", "-list"):
		var r io.Reader
		if file == "" || file == "-" {
			r = readerCtx(ctx, c.Stdin)
		} else {
			data, err := fsOf(c).readFile(file)
			if err != nil {
				return fail(c, 2, "%s: Cannot open: %s", file, errText(err))
			}
			r = bytes.NewReader(data)
		}
		tr := tar.NewReader(r)
		listOnly := has(set, "t", "-list")
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return 0
			}
			if err != nil {
				return fail(c, 2, "%v", err)
			}
			if listOnly {
				fmt.Fprintln(c.Stdout, h.Name)
				continue
			}
			name := strings.TrimSuffix(h.Name, "/")
			if clean := path.Clean("/" + name); clean == "/" {
				continue
			} else if strings.HasPrefix(name, "/") || strings.Contains("/"+name+"/", "/../") {
				fail(c, 2, "%s: Member name contains '..' or is absolute", h.Name)
				continue
			}
			if err := v.mkdirAll(path.Dir(name), 0o755); err != nil && path.Dir(name) != "." {
				return fail(c, 2, "%s: Cannot mkdir: %s", path.Dir(name), errText(err))
			}
			switch h.Typeflag {
			case tar.TypeDir:
				if err := v.mkdirAll(name, fs.FileMode(h.Mode)); err != nil {
					return fail(c, 2, "%s: Cannot mkdir: %s", name, errText(err))
				}
			case tar.TypeSymlink:
				_ = v.remove(name, false, false)
				if err := v.symlink(h.Linkname, name); err != nil {
					return fail(c, 2, "%s: Cannot create symlink: %s", name, errText(err))
				}
			case tar.TypeReg:
				data, err := io.ReadAll(tr)
				if err != nil {
					return fail(c, 2, "%v", err)
				}
				n, err := v.openWrite(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fs.FileMode(h.Mode))
				if err != nil {
					return fail(c, 2, "%s: Cannot open: %s", name, errText(err))
				}
				v.appendTo(n, data)
			}
		}
	}
	return fail(c, 2, "you must give one of -c, -x or -t")
}

const tempChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func uMktemp(_ context.Context, c *Call) int {
	set, ops, err := flags(c.Args[1:], "p")
	if err != nil {
		return fail(c, 1, "%v", err)
	}
	tmpl := "tmp.XXXXXXXXXX"
	if len(ops) > 0 {
		tmpl = ops[0]
	}
	dir := last(set, "p")
	if dir == "" && len(ops) == 0 || has(set, "t") {
		dir = cmpOr(c.Env["TMPDIR"], "/tmp")
	}
	if dir != "" && !strings.HasPrefix(tmpl, "/") {
		tmpl = strings.TrimSuffix(dir, "/") + "/" + tmpl
	}
	xs := len(tmpl) - len(strings.TrimRight(tmpl, "X"))
	if xs < 3 {
		return fail(c, 1, "too few X's in template '%s'", tmpl)
	}
	v := fsOf(c)
	for range 100 {
		b := []byte(tmpl[:len(tmpl)-xs])
		for range xs {
			n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(tempChars))))
			b = append(b, tempChars[n.Int64()])
		}
		p := string(b)
		var err error
		if has(set, "d", "-directory") {
			err = v.mkdir(p, 0o700)
		} else {
			_, err = v.openWrite(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		}
		if errors.Is(err, syscall.EEXIST) {
			continue
		}
		if err != nil {
			return fail(c, 1, "failed to create file via template '%s': %s", tmpl, errText(err))
		}
		fmt.Fprintln(c.Stdout, p)
		return 0
	}
	return fail(c, 1, "failed to create file via template '%s': File exists", tmpl)
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

// lines splits data into lines, each keeping its newline.
func lines(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			out = append(out, data)
			break
		}
		out = append(out, data[:i+1])
		data = data[i+1:]
	}
	return out
}

func headTail(ctx context.Context, c *Call, tail bool) int {
	args := slices.Clone(c.Args[1:])
	for i, a := range args { // "head -5"
		if len(a) > 1 && a[0] == '-' && a[1] >= '0' && a[1] <= '9' {
			args[i] = "-n" + a[1:]
		}
	}
	set, ops, err := flags(args, "nc")
	if err != nil {
		return fail(c, 1, "%v", err)
	}
	n, bytesMode := 10, false
	spec := last(set, "n")
	if s := last(set, "c"); s != "" {
		spec, bytesMode = s, true
	}
	fromStart := false
	if spec != "" {
		if tail && strings.HasPrefix(spec, "+") {
			fromStart = true
		}
		if n, err = strconv.Atoi(strings.TrimPrefix(spec, "+")); err != nil || n < 0 {
			return fail(c, 1, "invalid number: '%s'", spec)
		}
	}
	if !tail && (len(ops) == 0 || len(ops) == 1 && ops[0] == "-") {
		// Streamed: head stops reading once it has what it prints, so
		// "yes | head" ends.
		in := readerCtx(ctx, c.Stdin)
		if bytesMode {
			_, err := io.Copy(c.Stdout, io.LimitReader(in, int64(n)))
			return boolCode(err != nil)
		}
		br := bufio.NewReader(in)
		for range n {
			l, err := br.ReadBytes('\n')
			c.Stdout.Write(l)
			if err != nil {
				break
			}
		}
		return 0
	}
	return inputs(ctx, c, ops, func(name string, data []byte) {
		if len(ops) > 1 {
			fmt.Fprintf(c.Stdout, "==> %s <==\n", name)
		}
		if bytesMode {
			switch {
			case !tail:
				data = data[:min(n, len(data))]
			case fromStart:
				data = data[min(max(n-1, 0), len(data)):]
			default:
				data = data[len(data)-min(n, len(data)):]
			}
			c.Stdout.Write(data)
			return
		}
		ls := lines(data)
		switch {
		case !tail:
			ls = ls[:min(n, len(ls))]
		case fromStart:
			ls = ls[min(max(n-1, 0), len(ls)):]
		default:
			ls = ls[len(ls)-min(n, len(ls)):]
		}
		c.Stdout.Write(bytes.Join(ls, nil))
	})
}

func boolCode(failed bool) int {
	if failed {
		return 1
	}
	return 0
}

// uYes writes its line until its output is closed or the command ends.
func uYes(ctx context.Context, c *Call) int {
	line := "y\n"
	if len(c.Args) > 1 {
		line = strings.Join(c.Args[1:], " ") + "\n"
	}
	chunk := []byte(strings.Repeat(line, max(1, 4096/len(line))))
	for ctx.Err() == nil {
		if _, err := c.Stdout.Write(chunk); err != nil {
			return 1
		}
	}
	return -1
}

func uHead(ctx context.Context, c *Call) int { return headTail(ctx, c, false) }
func uTail(ctx context.Context, c *Call) int { return headTail(ctx, c, true) }

func uWc(ctx context.Context, c *Call) int {
	set, ops, err := flags(c.Args[1:], "")
	if err != nil {
		return fail(c, 1, "%v", err)
	}
	l, w, b := has(set, "l"), has(set, "w"), has(set, "c")
	if !l && !w && !b {
		l, w, b = true, true, true
	}
	var tl, tw, tb int
	show := func(nl, nw, nb int, name string) {
		var f []string
		if l {
			f = append(f, strconv.Itoa(nl))
		}
		if w {
			f = append(f, strconv.Itoa(nw))
		}
		if b {
			f = append(f, strconv.Itoa(nb))
		}
		if name != "-" && name != "" {
			f = append(f, name)
		}
		fmt.Fprintln(c.Stdout, strings.Join(f, " "))
	}
	code := inputs(ctx, c, ops, func(name string, data []byte) {
		nl, nw, nb := bytes.Count(data, []byte("\n")), len(bytes.Fields(data)), len(data)
		tl, tw, tb = tl+nl, tw+nw, tb+nb
		if len(ops) == 0 {
			name = ""
		}
		show(nl, nw, nb, name)
	})
	if len(ops) > 1 {
		show(tl, tw, tb, "total")
	}
	return code
}

// uBase64 is GNU base64: encode (lines of -w N columns, 76 by default, 0 for
// one line) or decode with -d, of one FILE or stdin.
func uBase64(ctx context.Context, c *Call) int {
	set, ops, err := flags(c.Args[1:], "w")
	if err != nil {
		return fail(c, 1, "%v", err)
	}
	if len(ops) > 1 {
		return fail(c, 1, "extra operand '%s'", ops[1])
	}
	wrap := 76
	if w, ok := set["w"]; ok {
		if wrap, err = strconv.Atoi(w[len(w)-1]); err != nil || wrap < 0 {
			return fail(c, 1, "invalid wrap size: '%s'", w[len(w)-1])
		}
	}
	decode := has(set, "d") || has(set, "-decode")
	code := 0
	rc := inputs(ctx, c, ops, func(_ string, data []byte) {
		if decode {
			clean := bytes.Map(func(r rune) rune {
				if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
					return -1
				}
				return r
			}, data)
			out, err := base64.StdEncoding.DecodeString(string(clean))
			c.Stdout.Write(out)
			if err != nil {
				code = fail(c, 1, "invalid input")
			}
			return
		}
		enc := base64.StdEncoding.EncodeToString(data)
		if wrap == 0 {
			if enc != "" {
				fmt.Fprintln(c.Stdout, enc)
			}
			return
		}
		for len(enc) > wrap {
			fmt.Fprintln(c.Stdout, enc[:wrap])
			enc = enc[wrap:]
		}
		if enc != "" {
			fmt.Fprintln(c.Stdout, enc)
		}
	})
	return max(code, rc)
}

func uSleep(ctx context.Context, c *Call) int {
	if len(c.Args) < 2 {
		return fail(c, 1, "missing operand")
	}
	var total time.Duration
	for _, a := range c.Args[1:] {
		mult := time.Second
		switch {
		case strings.HasSuffix(a, "s"):
			a = a[:len(a)-1]
		case strings.HasSuffix(a, "m"):
			a, mult = a[:len(a)-1], time.Minute
		case strings.HasSuffix(a, "h"):
			a, mult = a[:len(a)-1], time.Hour
		}
		sec, err := strconv.ParseFloat(a, 64)
		if err != nil || sec < 0 {
			return fail(c, 1, "invalid time interval '%s'", a)
		}
		total += time.Duration(sec * float64(mult))
	}
	t := time.NewTimer(total)
	defer t.Stop()
	select {
	case <-t.C:
		return 0
	case <-ctx.Done():
		return -1
	}
}

func uPrintenv(_ context.Context, c *Call) int {
	if len(c.Args) == 1 {
		for _, k := range sortedKeys(c.Env) {
			fmt.Fprintf(c.Stdout, "%s=%s\n", k, c.Env[k])
		}
		return 0
	}
	code := 0
	for _, k := range c.Args[1:] {
		v, ok := c.Env[k]
		if !ok {
			code = 1
			continue
		}
		fmt.Fprintln(c.Stdout, v)
	}
	return code
}

// uEnv prints the environment, or runs a command with assignments added.
func uEnv(ctx context.Context, c *Call) int {
	args := c.Args[1:]
	env := map[string]string{}
	if len(args) > 0 && (args[0] == "-i" || args[0] == "-") {
		args = args[1:]
	} else {
		for k, v := range c.Env {
			env[k] = v
		}
	}
	for len(args) > 0 {
		if k, v, ok := strings.Cut(args[0], "="); ok && k != "" {
			env[k] = v
			args = args[1:]
			continue
		}
		break
	}
	if len(args) == 0 {
		for _, k := range sortedKeys(env) {
			fmt.Fprintf(c.Stdout, "%s=%s\n", k, env[k])
		}
		return 0
	}
	sc := *c
	sc.Args, sc.Env = args, env
	return c.Files.rt.dispatch(ctx, &sc)
}

func uBasename(_ context.Context, c *Call) int {
	if len(c.Args) < 2 {
		return fail(c, 1, "missing operand")
	}
	b := path.Base(c.Args[1])
	if len(c.Args) > 2 && b != c.Args[2] {
		b = strings.TrimSuffix(b, c.Args[2])
	}
	fmt.Fprintln(c.Stdout, b)
	return 0
}

func uDirname(_ context.Context, c *Call) int {
	if len(c.Args) < 2 {
		return fail(c, 1, "missing operand")
	}
	for _, a := range c.Args[1:] {
		fmt.Fprintln(c.Stdout, path.Dir(a))
	}
	return 0
}

// uStat supports -L and -c FORMAT (%n %s %i %h %d %D %a %A %f %F %Y %X %Z
// %u %g %U %G %N), or a short default line.
func uStat(_ context.Context, c *Call) int {
	set, ops, err := flags(c.Args[1:], "c")
	if err != nil || len(ops) == 0 {
		return fail(c, 1, "missing operand")
	}
	format := last(set, "c")
	if format == "" {
		format = last(set, "-format")
	}
	if f := last(set, "-printf"); f != "" {
		format = f
	}
	v := fsOf(c)
	code := 0
	for _, p := range ops {
		fi, err := v.stat(p, has(set, "L", "-dereference"))
		if err != nil {
			code = fail(c, 1, "cannot statx '%s': %s", p, errText(err))
			continue
		}
		if format == "" {
			fmt.Fprintf(c.Stdout, "  File: %s\n  Size: %d\tInode: %d\tLinks: 1\tAccess: (%04o/%s)\n", p, fi.size, fi.ino, fi.mode.Perm(), fi.mode)
			continue
		}
		var b strings.Builder
		for i := 0; i < len(format); i++ {
			if format[i] != '%' || i+1 >= len(format) {
				b.WriteByte(format[i])
				continue
			}
			i++
			switch format[i] {
			case 'n':
				b.WriteString(p)
			case 'N':
				b.WriteString("'" + p + "'")
			case 's':
				b.WriteString(strconv.FormatInt(fi.size, 10))
			case 'i':
				b.WriteString(strconv.FormatUint(fi.ino, 10))
			case 'h':
				b.WriteByte('1')
			case 'd':
				b.WriteString(strconv.FormatUint(fi.dev, 10))
			case 'D':
				b.WriteString(strconv.FormatUint(fi.dev, 16))
			case 'a':
				b.WriteString(strconv.FormatUint(uint64(fi.mode.Perm()), 8))
			case 'A':
				b.WriteString(fi.mode.String())
			case 'f':
				b.WriteString(strconv.FormatUint(uint64(unixMode(fi.mode)), 16))
			case 'F':
				b.WriteString(map[byte]string{'f': "regular file", 'd': "directory", 'l': "symbolic link"}[typeLetter(fi.mode)])
			case 'Y', 'X', 'Z', 'W':
				b.WriteString(strconv.FormatInt(fi.mt.Unix(), 10))
			case 'u', 'g':
				uid, _ := uidOf(fi.root)
				b.WriteString(strconv.Itoa(uid))
			case 'U', 'G':
				_, name := uidOf(fi.root)
				b.WriteString(name)
			case '%':
				b.WriteByte('%')
			default:
				b.WriteByte('%')
				b.WriteByte(format[i])
			}
		}
		fmt.Fprintln(c.Stdout, b.String())
	}
	return code
}

func uTee(ctx context.Context, c *Call) int {
	set, ops, err := flags(c.Args[1:], "")
	if err != nil {
		return fail(c, 1, "%v", err)
	}
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if has(set, "a", "-append") {
		flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	ws := []io.Writer{c.Stdout}
	code := 0
	for _, p := range ops {
		n, err := fsOf(c).openWrite(p, flag, 0o644)
		if err != nil {
			code = fail(c, 1, "%s: %s", p, errText(err))
			continue
		}
		ws = append(ws, &memWriter{v: fsOf(c), n: n})
	}
	if err := copyCtx(ctx, io.MultiWriter(ws...), c.Stdin); err != nil {
		return 1
	}
	return code
}

func uSort(ctx context.Context, c *Call) int {
	set, ops, err := flags(c.Args[1:], "")
	if err != nil {
		return fail(c, 2, "%v", err)
	}
	var all []string
	code := inputs(ctx, c, ops, func(_ string, data []byte) {
		for _, l := range lines(data) {
			all = append(all, strings.TrimSuffix(string(l), "\n"))
		}
	})
	if has(set, "n") {
		num := func(s string) float64 { f, _ := strconv.ParseFloat(strings.Fields(s + " 0")[0], 64); return f }
		slices.SortStableFunc(all, func(a, b string) int {
			x, y := num(a), num(b)
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return strings.Compare(a, b)
		})
	} else {
		slices.Sort(all)
	}
	if has(set, "r") {
		slices.Reverse(all)
	}
	if has(set, "u") {
		all = slices.Compact(all)
	}
	for _, l := range all {
		fmt.Fprintln(c.Stdout, l)
	}
	return code
}

// trSet expands a tr set: ranges a-z and the escapes \n \t \0 \\.
func trSet(s string) []byte {
	var raw []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			raw = append(raw, map[byte]byte{'n': '\n', 't': '\t', '0': 0, 'r': '\r', '\\': '\\'}[s[i]])
			if s[i] != 'n' && s[i] != 't' && s[i] != '0' && s[i] != 'r' && s[i] != '\\' {
				raw[len(raw)-1] = s[i]
			}
			continue
		}
		raw = append(raw, s[i])
	}
	var out []byte
	for i := 0; i < len(raw); i++ {
		if i+2 < len(raw) && raw[i+1] == '-' && raw[i] <= raw[i+2] {
			for ch := int(raw[i]); ch <= int(raw[i+2]); ch++ {
				out = append(out, byte(ch))
			}
			i += 2
			continue
		}
		out = append(out, raw[i])
	}
	return out
}

// uTr translates (tr SET1 SET2) or deletes (tr -d SET1) bytes of stdin.
func uTr(ctx context.Context, c *Call) int {
	set, ops, err := flags(c.Args[1:], "")
	if err != nil {
		return fail(c, 1, "%v", err)
	}
	del := has(set, "d")
	if (del && len(ops) != 1) || (!del && len(ops) != 2) {
		return fail(c, 1, "missing operand")
	}
	var table [256]int
	for i := range table {
		table[i] = i
	}
	from := trSet(ops[0])
	var to []byte
	if !del {
		to = trSet(ops[1])
		if len(to) == 0 {
			return fail(c, 1, "when not truncating set1, string2 must be non-empty")
		}
	}
	for i, b := range from {
		if del {
			table[b] = -1
		} else {
			table[b] = int(to[min(i, len(to)-1)])
		}
	}
	in := readerCtx(ctx, c.Stdin)
	buf := make([]byte, 32<<10)
	for {
		n, rerr := in.Read(buf)
		out := buf[:0]
		for _, b := range buf[:n] {
			if t := table[b]; t >= 0 {
				out = append(out, byte(t))
			}
		}
		if _, err := c.Stdout.Write(out); err != nil {
			return 1
		}
		if rerr == io.EOF {
			return 0
		}
		if rerr != nil {
			return 1
		}
	}
}

// matchAny reports whether name matches one of the glob patterns.
func matchAny(pats []string, name string) bool {
	for _, p := range pats {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}
