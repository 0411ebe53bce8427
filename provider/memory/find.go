package memory

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
)

// find's expression: operators ! -not ( ) -a -and -o -or; tests -name
// -iname -path -wholename -type -inum -links -size -empty -true -false;
// actions -print -print0 -printf -fprint -fprint0 -fprintf -prune and
// -exec ... ; / {} +; global options -mindepth -maxdepth -xdev -mount
// -depth (ignored: the walk is pre-order).

// findFile is the file an expression is evaluated on.
type findFile struct {
	p, rel string
	depth  int
	fi     *statInfo
	prune  bool
}

type findExpr func(f *findFile) bool

type findParser struct {
	c        *Call
	v        *vfs
	args     []string
	i        int
	min, max int
	action   bool
	finals   []func() int // -exec ... {} + runs once at the end
	err      error
	ctx      context.Context
}

func (fp *findParser) peek() string {
	if fp.i < len(fp.args) {
		return fp.args[fp.i]
	}
	return ""
}

func (fp *findParser) next() (string, bool) {
	if fp.i >= len(fp.args) {
		return "", false
	}
	fp.i++
	return fp.args[fp.i-1], true
}

func (fp *findParser) fail(format string, args ...any) findExpr {
	if fp.err == nil {
		fp.err = fmt.Errorf(format, args...)
	}
	return func(*findFile) bool { return false }
}

func (fp *findParser) parseOr() findExpr {
	l := fp.parseAnd()
	for fp.peek() == "-o" || fp.peek() == "-or" {
		fp.i++
		r := fp.parseAnd()
		ll := l
		l = func(f *findFile) bool { return ll(f) || r(f) }
	}
	return l
}

func (fp *findParser) parseAnd() findExpr {
	l := fp.parseUnary()
	for {
		t := fp.peek()
		if t == "" || t == ")" || t == "-o" || t == "-or" || fp.err != nil {
			return l
		}
		if t == "-a" || t == "-and" {
			fp.i++
		}
		r := fp.parseUnary()
		ll := l
		l = func(f *findFile) bool { return ll(f) && r(f) }
	}
}

func (fp *findParser) parseUnary() findExpr {
	t, ok := fp.next()
	if !ok {
		return fp.fail("expected an expression")
	}
	switch t {
	case "!", "-not":
		e := fp.parseUnary()
		return func(f *findFile) bool { return !e(f) }
	case "(":
		e := fp.parseOr()
		if t, _ := fp.next(); t != ")" {
			return fp.fail("missing ')'")
		}
		return e
	}
	return fp.primary(t)
}

// cmpNum parses find's numeric argument: +N (more), -N (less), N.
func cmpNum(s string) (func(int64) bool, error) {
	op := byte(0)
	if s != "" && (s[0] == '+' || s[0] == '-') {
		op, s = s[0], s[1:]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, err
	}
	switch op {
	case '+':
		return func(v int64) bool { return v > n }, nil
	case '-':
		return func(v int64) bool { return v < n }, nil
	}
	return func(v int64) bool { return v == n }, nil
}

func (fp *findParser) arg(name string) (string, bool) {
	v, ok := fp.next()
	if !ok {
		fp.fail("missing argument to '%s'", name)
	}
	return v, ok
}

// output opens a -fprint file (created or truncated).
func (fp *findParser) output(name string) io.Writer {
	n, err := fp.v.openWrite(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		fp.fail("%s: %s", name, errText(err))
		return io.Discard
	}
	return &memWriter{v: fp.v, n: n}
}

func (fp *findParser) primary(t string) findExpr {
	c := fp.c
	switch t {
	case "-mindepth", "-maxdepth":
		s, _ := fp.arg(t)
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return fp.fail("invalid argument '%s' to %s", s, t)
		}
		if t == "-mindepth" {
			fp.min = n
		} else {
			fp.max = n
		}
		return func(*findFile) bool { return true }
	case "-xdev", "-mount", "-depth", "-true", "-noleaf":
		return func(*findFile) bool { return true }
	case "-false":
		return func(*findFile) bool { return false }
	case "-name", "-iname", "-path", "-wholename", "-ipath":
		pat, _ := fp.arg(t)
		fold := t == "-iname" || t == "-ipath"
		whole := t == "-path" || t == "-wholename" || t == "-ipath"
		if fold {
			pat = strings.ToLower(pat)
		}
		return func(f *findFile) bool {
			s := path.Base(f.p)
			if whole {
				s = f.p
			}
			if fold {
				s = strings.ToLower(s)
			}
			ok, _ := path.Match(pat, s)
			return ok
		}
	case "-type":
		ty, _ := fp.arg(t)
		if len(ty) != 1 || strings.IndexByte("fdl", ty[0]) < 0 {
			return fp.fail("unknown argument to -type: %s", ty)
		}
		return func(f *findFile) bool { return typeLetter(f.fi.mode) == ty[0] }
	case "-inum", "-links":
		s, _ := fp.arg(t)
		cmp, err := cmpNum(s)
		if err != nil {
			return fp.fail("invalid argument '%s' to %s", s, t)
		}
		if t == "-links" {
			return func(*findFile) bool { return cmp(1) }
		}
		return func(f *findFile) bool { return cmp(int64(f.fi.ino)) }
	case "-size":
		s, _ := fp.arg(t)
		unit := int64(512)
		if s != "" {
			switch s[len(s)-1] {
			case 'c':
				unit, s = 1, s[:len(s)-1]
			case 'w':
				unit, s = 2, s[:len(s)-1]
			case 'b':
				s = s[:len(s)-1]
			case 'k':
				unit, s = 1<<10, s[:len(s)-1]
			case 'M':
				unit, s = 1<<20, s[:len(s)-1]
			case 'G':
				unit, s = 1<<30, s[:len(s)-1]
			}
		}
		cmp, err := cmpNum(s)
		if err != nil {
			return fp.fail("invalid argument to -size")
		}
		return func(f *findFile) bool { return cmp((f.fi.size + unit - 1) / unit) }
	case "-empty":
		return func(f *findFile) bool {
			if f.fi.IsDir() {
				list, err := fp.v.readDir(f.p)
				return err == nil && len(list) == 0
			}
			return typeLetter(f.fi.mode) == 'f' && f.fi.size == 0
		}
	case "-readable", "-writable", "-executable":
		// As GNU find: the sandbox user's rights, as access(2) checks
		// them (following a link).
		return func(f *findFile) bool {
			return fp.v.access(f.p, t == "-readable", t == "-writable", t == "-executable") == nil
		}
	case "-prune":
		return func(f *findFile) bool { f.prune = true; return true }
	case "-print", "-print0", "-fprint", "-fprint0":
		fp.action = true
		w := c.Stdout
		if t == "-fprint" || t == "-fprint0" {
			name, _ := fp.arg(t)
			w = fp.output(name)
		}
		end := "\n"
		if strings.HasSuffix(t, "0") {
			end = "\x00"
		}
		return func(f *findFile) bool { io.WriteString(w, f.p+end); return true }
	case "-printf", "-fprintf":
		fp.action = true
		w := c.Stdout
		if t == "-fprintf" {
			name, _ := fp.arg(t)
			w = fp.output(name)
		}
		format, _ := fp.arg(t)
		return func(f *findFile) bool {
			io.WriteString(w, findPrintf(fp.v, format, f.p, f.rel, f.depth, f.fi))
			return true
		}
	case "-exec", "-execdir", "-ok":
		fp.action = true
		var argv []string
		for {
			a, ok := fp.next()
			if !ok {
				return fp.fail("missing argument to '%s'", t)
			}
			if a == ";" {
				break
			}
			if a == "+" && len(argv) > 0 && argv[len(argv)-1] == "{}" {
				argv = argv[:len(argv)-1]
				var batch []string
				fp.finals = append(fp.finals, func() int {
					if len(batch) == 0 {
						return 0
					}
					return fp.run(append(append([]string{}, argv...), batch...))
				})
				return func(f *findFile) bool { batch = append(batch, f.p); return true }
			}
			argv = append(argv, a)
		}
		if len(argv) == 0 {
			return fp.fail("missing argument to '%s'", t)
		}
		return func(f *findFile) bool {
			a := make([]string, len(argv))
			for i, s := range argv {
				a[i] = strings.ReplaceAll(s, "{}", f.p)
			}
			return fp.run(a) == 0
		}
	}
	return fp.fail("unknown predicate '%s' (see the memory package's documentation for find)", t)
}

// run runs an -exec command.
func (fp *findParser) run(argv []string) int {
	sc := *fp.c
	sc.Args = argv
	return fp.c.Files.rt.dispatch(fp.ctx, &sc)
}

func uFind(ctx context.Context, c *Call) int {
	args := c.Args[1:]
	for len(args) > 0 && (args[0] == "-P" || args[0] == "-H" || args[0] == "-L") {
		args = args[1:] // links are never followed below the roots
	}
	var roots []string
	for len(args) > 0 && (!strings.HasPrefix(args[0], "-") || args[0] == "-") && args[0] != "!" && args[0] != "(" {
		roots = append(roots, args[0])
		args = args[1:]
	}
	if len(roots) == 0 {
		roots = []string{"."}
	}
	v := fsOf(c)
	fp := &findParser{c: c, v: v, args: args, max: -1, ctx: ctx}
	expr := func(*findFile) bool { return true }
	if len(args) > 0 {
		expr = fp.parseOr()
		if fp.err == nil && fp.i < len(args) {
			fp.fail("unexpected '%s'", args[fp.i])
		}
	}
	if fp.err != nil {
		return fail(c, 1, "%v", fp.err)
	}
	if !fp.action {
		e := expr
		expr = func(f *findFile) bool {
			if e(f) {
				io.WriteString(c.Stdout, f.p+"\n")
			}
			return true
		}
	}
	code := 0
	var walk func(f *findFile)
	walk = func(f *findFile) {
		if ctx.Err() != nil {
			return
		}
		if f.depth >= fp.min {
			expr(f)
		}
		if !f.fi.IsDir() || f.prune || (fp.max >= 0 && f.depth >= fp.max) {
			return
		}
		list, err := v.readDir(f.p)
		if err != nil {
			code = fail(c, 1, "'%s': %s", f.p, errText(err))
			return
		}
		for _, e := range list {
			q := strings.TrimSuffix(f.p, "/") + "/" + e.name
			r := e.name
			if f.rel != "" {
				r = f.rel + "/" + e.name
			}
			walk(&findFile{p: q, rel: r, depth: f.depth + 1, fi: e.info})
		}
	}
	for _, root := range roots {
		fi, err := v.stat(root, false)
		if err == nil && fi.mode&fs.ModeSymlink != 0 && strings.HasSuffix(root, "/") {
			fi, err = v.stat(root, true)
		}
		if err != nil {
			code = fail(c, 1, "'%s': %s", root, errText(err))
			continue
		}
		walk(&findFile{p: root, fi: fi})
	}
	for _, f := range fp.finals {
		if f() != 0 {
			code = 1
		}
	}
	if ctx.Err() != nil {
		return -1
	}
	return code
}
