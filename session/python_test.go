package session

import (
	"os/exec"
	"strings"
	"testing"
)

func TestJoinPrelude(t *testing.T) {
	t.Parallel()
	const pre = "P\n"
	for _, tc := range []struct{ name, code, want string }{
		{"no prelude effect without future", "import os\n", "P\nimport os\n"},
		{"single future", "from __future__ import annotations\nx = 1\n", "from __future__ import annotations\nP\nx = 1\n"},
		{"comments and blanks kept on top", "#!/usr/bin/env python3\n# c\n\nfrom __future__ import annotations\n\nx = 1\n",
			"#!/usr/bin/env python3\n# c\n\nfrom __future__ import annotations\n\nP\nx = 1\n"},
		{"docstring first", "'''Doc\nmore'''\nfrom __future__ import division\nx\n", "'''Doc\nmore'''\nfrom __future__ import division\nP\nx\n"},
		{"one-line docstring", "\"Doc.\"\nfrom  __future__  import  annotations\nx\n", "\"Doc.\"\nfrom  __future__  import  annotations\nP\nx\n"},
		{"parenthesized", "from __future__ import (\n    annotations,\n    division,\n)\nx\n", "from __future__ import (\n    annotations,\n    division,\n)\nP\nx\n"},
		{"backslash", "from __future__ import annotations, \\\n    division\nx\n", "from __future__ import annotations, \\\n    division\nP\nx\n"},
		{"two futures", "from __future__ import annotations\nfrom __future__ import division\nx\n", "from __future__ import annotations\nfrom __future__ import division\nP\nx\n"},
		{"future later is not hoisted", "import os\nfrom __future__ import annotations\n", "P\nimport os\nfrom __future__ import annotations\n"},
		{"no trailing newline", "from __future__ import annotations", "from __future__ import annotations\nP\n"},
		{"docstring without future", "\"\"\"Doc.\"\"\"\nx\n", "P\n\"\"\"Doc.\"\"\"\nx\n"},
		{"unterminated docstring", "'''Doc\nfrom __future__ import annotations\n", "P\n'''Doc\nfrom __future__ import annotations\n"},
		{"lookalike module", "from __future__x import y\n", "P\nfrom __future__x import y\n"},
		{"docstring with a comment after", "\"\"\"Doc.\"\"\"  # c\nfrom __future__ import annotations\nx\n", "\"\"\"Doc.\"\"\"  # c\nfrom __future__ import annotations\nP\nx\n"},
		// Not a docstring statement: the line opens another string, whose
		// text looks like a future import.
		{"string expression, not a docstring", "\"\"\"a\"\"\" + \"\"\"\nfrom __future__ import annotations\n\"\"\"\nx\n", "P\n\"\"\"a\"\"\" + \"\"\"\nfrom __future__ import annotations\n\"\"\"\nx\n"},
		{"multi-line docstring then code", "'''a\nb''' + '''\nfrom __future__ import annotations\n'''\n", "P\n'''a\nb''' + '''\nfrom __future__ import annotations\n'''\n"},
	} {
		if got := joinPrelude(tc.code, pre); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
	if got := joinPrelude("from __future__ import annotations\n", ""); got != "from __future__ import annotations\n" {
		t.Errorf("empty prelude changed the code: %q", got)
	}
	if got := joinPrelude("x\n", "P"); got != "P\nx\n" {
		t.Errorf("prelude without newline: %q", got)
	}
}

func FuzzJoinPrelude(f *testing.F) {
	f.Add("from __future__ import annotations\nx\n")
	f.Add("'''a\nb'''\nfrom __future__ import (a,\nb)\n")
	f.Fuzz(func(t *testing.T, code string) {
		got := joinPrelude(code, "P\n")
		head, rest := splitFuture(code)
		if got != head+"P\n"+rest {
			t.Fatalf("joinPrelude is not head+prelude+rest")
		}
		if h := head; h != "" && h[len(h)-1] != '\n' {
			t.Fatalf("head %q does not end a line", h)
		}
		if len(head)+len(rest) < len(code) || len(head)+len(rest) > len(code)+1 {
			t.Fatalf("split lost or invented text: %q + %q from %q", head, rest, code)
		}
	})
}

// TestJoinPreludeCompiles checks with a real python3 that the joined
// program compiles, where naively prepending the prelude does not.
func TestJoinPreludeCompiles(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	compiles := func(src string) bool {
		cmd := exec.Command(py, "-c", "import sys; compile(sys.stdin.read(), 'main.py', 'exec')")
		cmd.Stdin = strings.NewReader(src)
		return cmd.Run() == nil
	}
	const prelude = "import os as _os\n_os.makedirs('/tmp', exist_ok=True)\n"
	for _, code := range []string{
		"from __future__ import annotations\nx: int = 1\n",
		"#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n'''Doc.\n\nMore.'''\n\nfrom __future__ import (\n    annotations,\n    division,\n)\nfrom __future__ import generator_stop\nimport sys\n",
		"\"Doc.\"\nfrom __future__ import annotations, \\\n    division\nprint(1)\n",
	} {
		if compiles(prelude + code) {
			t.Fatalf("test case compiles without hoisting, so it proves nothing:\n%s", code)
		}
		if got := joinPrelude(code, prelude); !compiles(got) {
			t.Errorf("joined program does not compile:\n%s", got)
		}
	}
}

// TestJoinPreludeRuns checks with a real python3 that the prelude runs
// before the program, whatever the program's head looks like: a string
// expression whose text looks like a future import once kept the prelude
// inside a string literal.
func TestJoinPreludeRuns(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	const prelude = "print('PRELUDE RAN')\n"
	for _, code := range []string{
		"\"\"\"a\"\"\" + \"\"\"\nfrom __future__ import annotations\n\"\"\"\nprint('PROGRAM RAN')\n",
		"\"\"\"Doc.\"\"\"\nfrom __future__ import annotations\nprint('PROGRAM RAN')\n",
	} {
		out, err := exec.Command(py, "-c", joinPrelude(code, prelude)).CombinedOutput()
		if err != nil || string(out) != "PRELUDE RAN\nPROGRAM RAN\n" {
			t.Errorf("program %q joined: output %q (%v), want the prelude's line, then the program's", code, out, err)
		}
	}
}
