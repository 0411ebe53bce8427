package memory

// Shell and process utilities: sh/bash/dash, the builtins run as an argv
// (echo, printf, pwd, test, [), sleep, printenv and env.

import (
	"context"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"
)

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

// uStty answers "stty size" on an emulated terminal (from LINES and
// COLUMNS, which the terminal sets); anything else, or no terminal, is
// the error stty gives without a tty.
func uStty(_ context.Context, c *Call) int {
	rows, cols := c.Env["LINES"], c.Env["COLUMNS"]
	if len(c.Args) == 2 && c.Args[1] == "size" && rows != "" && cols != "" {
		fmt.Fprintf(c.Stdout, "%s %s\n", rows, cols)
		return 0
	}
	return fail(c, 1, "'standard input': Inappropriate ioctl for device")
}
