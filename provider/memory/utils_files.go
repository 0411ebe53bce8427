package memory

// File utilities: cat, mkdir, rm, rmdir, mv, cp, ln, readlink, realpath,
// chmod, touch, mktemp, stat, basename and dirname.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
)

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

// operands drops a leading "--" (the end of options) from args.
func operands(args []string) []string {
	if len(args) > 0 && args[0] == "--" {
		return args[1:]
	}
	return args
}

// uBasename prints NAME without its directory and, when given, SUFFIX, as
// coreutils does ("--" ends the options; "/" stays "/").
func uBasename(_ context.Context, c *Call) int {
	ops := operands(c.Args[1:])
	if len(ops) < 1 {
		return fail(c, 1, "missing operand")
	}
	if len(ops) > 2 {
		return fail(c, 1, "extra operand '%s'", ops[2])
	}
	b := ops[0]
	if b != "" {
		b = path.Base(b)
	}
	if len(ops) == 2 && b != ops[1] {
		b = strings.TrimSuffix(b, ops[1])
	}
	fmt.Fprintln(c.Stdout, b)
	return 0
}

// uDirname prints each NAME with its last component removed, as coreutils
// does: trailing slashes are not a component ("/a/b/" gives "/a"), a name
// without a slash gives ".", and "--" ends the options.
func uDirname(_ context.Context, c *Call) int {
	ops := operands(c.Args[1:])
	if len(ops) < 1 {
		return fail(c, 1, "missing operand")
	}
	for _, a := range ops {
		fmt.Fprintln(c.Stdout, dirOf(a))
	}
	return 0
}

// dirOf is dirname(1) of one name.
func dirOf(a string) string {
	s := strings.TrimRight(a, "/")
	if s == "" {
		if a == "" {
			return "."
		}
		return "/"
	}
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return "."
	}
	if d := strings.TrimRight(s[:i], "/"); d != "" {
		return d
	}
	return "/"
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
