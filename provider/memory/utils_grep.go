package memory

// grep: pattern search over files, directory trees and stdin.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"
)

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

// matchAny reports whether name matches one of the glob patterns.
func matchAny(pats []string, name string) bool {
	for _, p := range pats {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}
