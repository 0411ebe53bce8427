package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeToolsBegin and readmeToolsEnd enclose the README's table of the MCP
// tools' arguments.
const (
	readmeToolsBegin = "<!-- mcp-tools:begin -->"
	readmeToolsEnd   = "<!-- mcp-tools:end -->"
)

// toolArgs is one tool's arguments as its input schema gives them.
type toolArgs struct {
	all      []string
	required []string
}

// schemaArgs lists the tools the server offers with --allow-execute and
// the arguments of each, read from the input schemas a client receives.
func schemaArgs(t *testing.T) map[string]toolArgs {
	t.Helper()
	srv, _ := newTestServer(t, memoryURL(t), mcpConfig{AllowExecute: true})
	cs := connect(t, srv, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]toolArgs{}
	for _, tool := range res.Tools {
		b, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: input schema %s: %v", tool.Name, b, err)
		}
		var a toolArgs
		for name := range s.Properties {
			a.all = append(a.all, name)
		}
		slices.Sort(a.all)
		a.required = slices.Sorted(slices.Values(s.Required))
		out[tool.Name] = a
	}
	if len(out) < 8 {
		t.Fatalf("the server lists %d tools with --allow-execute: fewer than expected", len(out))
	}
	return out
}

// readmeArgs parses the README's table: one row per tool, "| `name` |
// args |", each argument `arg`, in bold (**`arg`**) when required, or
// "none".
func readmeArgs(t *testing.T) map[string]toolArgs {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i, j := strings.Index(text, readmeToolsBegin), strings.Index(text, readmeToolsEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md has no table between %q and %q", readmeToolsBegin, readmeToolsEnd)
	}
	row := regexp.MustCompile("^\\| `([a-z_]+)` \\| (.*) \\|$")
	arg := regexp.MustCompile("^(\\*\\*)?`([a-z_]+)`(\\*\\*)?$")
	out := map[string]toolArgs{}
	for _, line := range strings.Split(text[i+len(readmeToolsBegin):j], "\n") {
		m := row.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		var a toolArgs
		if m[2] != "none" {
			for _, f := range strings.Split(m[2], ", ") {
				am := arg.FindStringSubmatch(strings.TrimSpace(f))
				if am == nil || am[1] != am[3] {
					t.Fatalf("README.md: tool %s: cannot read the argument %q (want `name` or **`name`**)", m[1], f)
				}
				a.all = append(a.all, am[2])
				if am[1] != "" {
					a.required = append(a.required, am[2])
				}
			}
		}
		slices.Sort(a.all)
		slices.Sort(a.required)
		if _, dup := out[m[1]]; dup {
			t.Fatalf("README.md lists the tool %s twice", m[1])
		}
		out[m[1]] = a
	}
	return out
}

// TestREADMEListsMCPTools checks that the README's table of the MCP tools
// names every tool and exactly the arguments of its input schema, with
// the required ones marked, so a user (or a model's author) does not have
// to guess names such as file_path for path.
func TestREADMEListsMCPTools(t *testing.T) {
	t.Parallel()
	want := schemaArgs(t)
	got := readmeArgs(t)
	ok := true
	for name, w := range want {
		g, found := got[name]
		switch {
		case !found:
			t.Errorf("README.md does not list the tool %s", name)
			ok = false
		case !slices.Equal(g.all, w.all) || !slices.Equal(g.required, w.required):
			t.Errorf("README.md: tool %s: arguments %v (required %v); its schema has %v (required %v)", name, g.all, g.required, w.all, w.required)
			ok = false
		}
	}
	for name := range got {
		if _, found := want[name]; !found {
			t.Errorf("README.md lists %s, which the server does not offer", name)
			ok = false
		}
	}
	if !ok {
		var b strings.Builder
		for _, name := range slices.Sorted(maps.Keys(want)) {
			w := want[name]
			var args []string
			for _, a := range w.all {
				if slices.Contains(w.required, a) {
					args = append(args, "**`"+a+"`**")
				} else {
					args = append(args, "`"+a+"`")
				}
			}
			if len(args) == 0 {
				args = []string{"none"}
			}
			fmt.Fprintf(&b, "| `%s` | %s |\n", name, strings.Join(args, ", "))
		}
		t.Logf("rows from the schemas (order them as the README reads best):\n%s", b.String())
	}
}
