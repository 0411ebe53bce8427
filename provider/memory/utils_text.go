package memory

// Text and stream utilities: head, tail, wc, tee, sort, tr, yes and
// sha256sum.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

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

// uSha256sum prints "HEX  NAME" for each input, as GNU sha256sum does
// ("-" names standard input), so the checks real sandboxes run work here.
func uSha256sum(ctx context.Context, c *Call) int {
	_, ops, err := flags(c.Args[1:], "")
	if err != nil {
		return fail(c, 1, "%v", err)
	}
	return inputs(ctx, c, ops, func(name string, data []byte) {
		fmt.Fprintf(c.Stdout, "%x  %s\n", sha256.Sum256(data), name)
	})
}
