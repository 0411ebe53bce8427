package memory

// Directory-tree utilities: ls, and find's -printf formatting (find's
// expression and walk are in find.go).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"
)

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
