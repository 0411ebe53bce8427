package memory

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The memory provider answers shell lines with a deliberately small shell:
// simple commands joined by ";", "&&" and "||", words quoted with '…' or
// "…" (with \ escapes in double quotes and bare words), $NAME and ${NAME}
// expansion, and the redirections >&2, 1>&2, 2>&1, >file, >>file and
// <file. Pipes, subshells, globbing and control flow are not supported and
// exit 2 with a message on stderr: register a Handler for the whole line
// (HandleShell) when a test needs more.

type redirect struct {
	fd     int    // 0, 1 or 2
	toFD   int    // >=0: duplicate onto this fd
	file   string // else this file
	append bool
}

type simpleCmd struct {
	words  []string
	redirs []redirect
}

type token struct {
	text   string
	op     bool // a redirection operator
	quoted bool
}

func lex(line string, env func(string) string) ([]token, error) {
	var toks []token
	var cur strings.Builder
	inWord, quoted := false, false
	flush := func() {
		if inWord {
			toks = append(toks, token{text: cur.String(), quoted: quoted})
			cur.Reset()
			inWord, quoted = false, false
		}
	}
	expand := func(i int) (int, error) {
		// line[i] == '$'
		j := i + 1
		if j < len(line) && line[j] == '{' {
			k := strings.IndexByte(line[j:], '}')
			if k < 0 {
				return 0, fmt.Errorf("unterminated ${")
			}
			cur.WriteString(env(line[j+1 : j+k]))
			return j + k + 1, nil
		}
		k := j
		for k < len(line) && (line[k] == '_' || unicode.IsLetter(rune(line[k])) || (k > j && unicode.IsDigit(rune(line[k])))) {
			k++
		}
		if k == j {
			if j < len(line) && line[j] >= '0' && line[j] <= '9' {
				cur.WriteString(env(line[j : j+1]))
				return j + 1, nil
			}
			if j < len(line) && line[j] == '?' {
				cur.WriteString(env("?"))
				return j + 1, nil
			}
			cur.WriteByte('$')
			return j, nil
		}
		cur.WriteString(env(line[j:k]))
		return k, nil
	}
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			flush()
			i++
		case c == '\'':
			k := strings.IndexByte(line[i+1:], '\'')
			if k < 0 {
				return nil, fmt.Errorf("unterminated single quote")
			}
			cur.WriteString(line[i+1 : i+1+k])
			inWord, quoted = true, true
			i += k + 2
		case c == '"':
			inWord, quoted = true, true
			i++
			for {
				if i >= len(line) {
					return nil, fmt.Errorf("unterminated double quote")
				}
				if line[i] == '"' {
					i++
					break
				}
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte("\"\\$`", line[i+1]) >= 0 {
					cur.WriteByte(line[i+1])
					i += 2
					continue
				}
				if line[i] == '$' {
					var err error
					if i, err = expand(i); err != nil {
						return nil, err
					}
					continue
				}
				cur.WriteByte(line[i])
				i++
			}
		case c == '\\' && i+1 < len(line):
			cur.WriteByte(line[i+1])
			inWord = true
			i += 2
		case c == '$':
			inWord = true
			var err error
			if i, err = expand(i); err != nil {
				return nil, err
			}
		case c == '|' || c == '&' || c == '(' || c == ')' || c == '`' || c == '*' || c == '?':
			return nil, fmt.Errorf("unsupported shell syntax %q", string(c))
		case c == '>' || c == '<' || ((c == '1' || c == '2') && !inWord && i+1 < len(line) && line[i+1] == '>'):
			flush()
			j := i
			if c == '1' || c == '2' {
				j++
			}
			op := line[i : j+1]
			if strings.HasPrefix(line[j:], ">>") {
				op = line[i : j+2]
			} else if strings.HasPrefix(line[j:], ">&") {
				op = line[i : j+2]
			}
			toks = append(toks, token{text: op, op: true})
			i += len(op)
		default:
			cur.WriteByte(c)
			inWord = true
			i++
		}
	}
	flush()
	return toks, nil
}

func parse(toks []token) ([]simpleCmd, error) {
	var cmds []simpleCmd
	var cur simpleCmd
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if !t.op {
			cur.words = append(cur.words, t.text)
			continue
		}
		// a redirection
		r := redirect{fd: 1, toFD: -1}
		text := t.text
		if text[0] == '1' || text[0] == '2' {
			r.fd = int(text[0] - '0')
			text = text[1:]
		}
		switch text {
		case "<":
			r.fd = 0
		case ">>":
			r.append = true
		case ">&":
			if i+1 >= len(toks) || toks[i+1].op {
				return nil, fmt.Errorf("syntax error: %s needs a descriptor", t.text)
			}
			n, err := strconv.Atoi(toks[i+1].text)
			if err != nil || (n != 1 && n != 2) {
				return nil, fmt.Errorf("unsupported redirection %s%s", t.text, toks[i+1].text)
			}
			r.toFD = n
			i++
			cur.redirs = append(cur.redirs, r)
			continue
		}
		if i+1 >= len(toks) || toks[i+1].op {
			return nil, fmt.Errorf("syntax error: %s needs a file", t.text)
		}
		r.file = toks[i+1].text
		i++
		cur.redirs = append(cur.redirs, r)
	}
	if len(cur.words) > 0 {
		cmds = append(cmds, cur)
	} else if len(cur.redirs) > 0 {
		return nil, fmt.Errorf("syntax error: redirection without a command")
	}
	return cmds, nil
}

// exitError ends a shell line with the given code (the exit builtin).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// segment is one simple command's text and the operator after it.
type segment struct {
	text string
	op   string
}

// split cuts line at the top-level ";", "&&" and "||" (outside quotes),
// without expanding anything: expansion happens when each command runs, so
// "$?" sees the previous command's status.
func split(line string) ([]segment, error) {
	var segs []segment
	start := 0
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\\':
			i++
		case c == '\'':
			k := strings.IndexByte(line[i+1:], '\'')
			if k < 0 {
				return nil, fmt.Errorf("unterminated single quote")
			}
			i += k + 1
		case c == '"':
			j := i + 1
			for ; j < len(line) && line[j] != '"'; j++ {
				if line[j] == '\\' {
					j++
				}
			}
			if j >= len(line) {
				return nil, fmt.Errorf("unterminated double quote")
			}
			i = j
		case c == ';', strings.HasPrefix(line[i:], "&&"), strings.HasPrefix(line[i:], "||"):
			op := line[i : i+1]
			if c != ';' {
				op = line[i : i+2]
			}
			segs = append(segs, segment{text: line[start:i], op: op})
			i += len(op) - 1
			start = i + 1
		}
	}
	segs = append(segs, segment{text: line[start:]})
	for i, sg := range segs {
		if strings.TrimSpace(sg.text) == "" {
			if i == len(segs)-1 && i > 0 && segs[i-1].op == ";" {
				segs = segs[:i]
				break
			}
			return nil, fmt.Errorf("syntax error near %q", sg.op)
		}
	}
	return segs, nil
}

// runShell interprets line for call c and returns the exit code.
func (rt *Runtime) runShell(ctx context.Context, c *Call, line string) int {
	last := 0
	env := func(name string) string {
		if name == "?" {
			return strconv.Itoa(last)
		}
		if len(name) == 1 && name[0] >= '0' && name[0] <= '9' {
			if i := int(name[0] - '0'); i < len(c.Positional) {
				return c.Positional[i]
			}
			return ""
		}
		return c.Env[name]
	}
	if strings.TrimSpace(line) == "" {
		return 0
	}
	segs, err := split(line)
	if err == nil {
		// Check the syntax of the whole line before running any of it.
		for _, sg := range segs {
			if _, err = parseOne(sg.text, func(string) string { return "" }); err != nil {
				break
			}
		}
	}
	if err != nil {
		fmt.Fprintf(c.Stderr, "sh: %v\n", err)
		return 2
	}
	skip := false
	for _, sg := range segs {
		if !skip {
			sc, err := parseOne(sg.text, env)
			if err != nil {
				fmt.Fprintf(c.Stderr, "sh: %v\n", err)
				return 2
			}
			code, err := rt.runSimple(ctx, c, sc)
			var ex exitError
			if asExit(err, &ex) {
				return ex.code
			}
			last = code
			if ctx.Err() != nil {
				return last
			}
		}
		switch sg.op {
		case "&&":
			skip = last != 0
		case "||":
			skip = last == 0
		default:
			skip = false
		}
	}
	return last
}

// parseOne lexes and parses the text of one simple command.
func parseOne(text string, env func(string) string) (simpleCmd, error) {
	toks, err := lex(text, env)
	if err != nil {
		return simpleCmd{}, err
	}
	cmds, err := parse(toks)
	if err != nil {
		return simpleCmd{}, err
	}
	if len(cmds) != 1 {
		return simpleCmd{}, fmt.Errorf("syntax error in %q", strings.TrimSpace(text))
	}
	return cmds[0], nil
}

func asExit(err error, target *exitError) bool {
	e, ok := err.(exitError)
	if ok {
		*target = e
	}
	return ok
}

func (rt *Runtime) runSimple(ctx context.Context, parent *Call, sc simpleCmd) (int, error) {
	c := *parent
	c.Args, c.Shell = sc.words, ""
	var opened []*fileSink
	defer func() {
		for _, f := range opened {
			f.commit()
		}
	}()
	for _, r := range sc.redirs {
		switch {
		case r.toFD == 1 && r.fd == 2:
			c.Stderr = c.Stdout
		case r.toFD == 2 && r.fd == 1:
			c.Stdout = c.Stderr
		case r.fd == 0:
			data, err := c.Files.ReadFile(r.file)
			if err != nil {
				fmt.Fprintf(parent.Stderr, "sh: %s: %v\n", r.file, err)
				return 1, nil
			}
			c.Stdin = strings.NewReader(string(data))
		default:
			fsink := &fileSink{files: c.Files, path: r.file, append: r.append}
			opened = append(opened, fsink)
			if r.fd == 1 {
				c.Stdout = fsink
			} else {
				c.Stderr = fsink
			}
		}
	}
	if sc.words[0] == "exit" {
		code := 0
		if len(sc.words) > 1 {
			n, err := strconv.Atoi(sc.words[1])
			if err != nil {
				fmt.Fprintf(c.Stderr, "sh: exit: illegal number: %s\n", sc.words[1])
				return 2, nil
			}
			code = n & 0xff
		}
		return 0, exitError{code}
	}
	return rt.dispatch(ctx, &c), nil
}

// fileSink collects a redirection's output and writes the file when the
// command ends.
type fileSink struct {
	files  *Files
	path   string
	append bool
	buf    strings.Builder
}

func (f *fileSink) Write(p []byte) (int, error) { return f.buf.Write(p) }

func (f *fileSink) commit() {
	data := []byte(f.buf.String())
	if f.append {
		if old, err := f.files.ReadFile(f.path); err == nil {
			data = append(old, data...)
		}
	}
	_ = f.files.WriteFile(f.path, data)
}

// builtins are the commands the memory provider answers without a Handler.
var builtins = map[string]Handler{
	"true":  func(context.Context, *Call) int { return 0 },
	"false": func(context.Context, *Call) int { return 1 },
	"echo": func(_ context.Context, c *Call) int {
		args, nl := c.Args[1:], true
		if len(args) > 0 && args[0] == "-n" {
			args, nl = args[1:], false
		}
		io.WriteString(c.Stdout, strings.Join(args, " "))
		if nl {
			io.WriteString(c.Stdout, "\n")
		}
		return 0
	},
	"printf": func(_ context.Context, c *Call) int {
		if len(c.Args) < 2 {
			fmt.Fprintln(c.Stderr, "printf: usage: printf format [arguments]")
			return 2
		}
		f := strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\\`, `\`).Replace(c.Args[1])
		args := make([]any, 0, len(c.Args)-2)
		for _, a := range c.Args[2:] {
			args = append(args, a)
		}
		io.WriteString(c.Stdout, fmt.Sprintf(f, args...))
		return 0
	},
	"pwd": func(_ context.Context, c *Call) int {
		fmt.Fprintln(c.Stdout, c.Dir)
		return 0
	},
	"printenv": func(_ context.Context, c *Call) int {
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
	},
	"cat": func(ctx context.Context, c *Call) int {
		if len(c.Args) == 1 {
			if _, err := io.Copy(c.Stdout, readerCtx(ctx, c.Stdin)); err != nil {
				return 1
			}
			return 0
		}
		code := 0
		for _, p := range c.Args[1:] {
			data, err := c.Files.ReadFile(p)
			if err != nil {
				fmt.Fprintf(c.Stderr, "cat: %s: %v\n", p, err)
				code = 1
				continue
			}
			c.Stdout.Write(data)
		}
		return code
	},
	"sleep": func(ctx context.Context, c *Call) int {
		if len(c.Args) != 2 {
			fmt.Fprintln(c.Stderr, "sleep: missing operand")
			return 1
		}
		sec, err := strconv.ParseFloat(c.Args[1], 64)
		if err != nil || sec < 0 {
			fmt.Fprintf(c.Stderr, "sleep: invalid time interval '%s'\n", c.Args[1])
			return 1
		}
		t := time.NewTimer(time.Duration(sec * float64(time.Second)))
		defer t.Stop()
		select {
		case <-t.C:
			return 0
		case <-ctx.Done():
			return -1
		}
	},
	"ls": func(_ context.Context, c *Call) int {
		dir := c.Dir
		if len(c.Args) > 1 {
			dir = c.Args[1]
		}
		list, err := c.Files.ReadDir(dir)
		if err != nil {
			fmt.Fprintf(c.Stderr, "ls: cannot access '%s': %v\n", dir, err)
			return 2
		}
		for _, fi := range list {
			fmt.Fprintln(c.Stdout, fi.Name())
		}
		return 0
	},
	"wc": func(_ context.Context, c *Call) int {
		if len(c.Args) != 3 || c.Args[1] != "-c" {
			fmt.Fprintln(c.Stderr, "wc: only 'wc -c FILE' is supported by the memory provider")
			return 2
		}
		data, err := c.Files.ReadFile(c.Args[2])
		if err != nil {
			fmt.Fprintf(c.Stderr, "wc: %s: %v\n", c.Args[2], err)
			return 1
		}
		fmt.Fprintf(c.Stdout, "%d %s\n", len(data), c.Args[2])
		return 0
	},
}

// readerCtx makes reads from r give up when ctx ends, so a cat on an open
// stdin does not outlive its command.
func readerCtx(ctx context.Context, r io.Reader) io.Reader {
	return &ctxReader{ctx: ctx, r: r}
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
