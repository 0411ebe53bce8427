package memory

// Archive and encoding utilities: tar and base64.

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
)

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
