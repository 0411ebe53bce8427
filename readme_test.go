package sandbox_test

import (
	"bytes"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeBlock is one ```go block of README.md.
type readmeBlock struct {
	line int // of the opening fence, 1-based
	code string
}

// readmeGoBlocks returns README.md's ```go blocks in order.
func readmeGoBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []readmeBlock
	var cur *readmeBlock
	var code strings.Builder
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &readmeBlock{line: i + 1}
			code.Reset()
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.code = code.String()
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			code.WriteString(line)
			code.WriteByte('\n')
		}
	}
	if cur != nil {
		t.Fatalf("README.md:%d: a ```go block is never closed", cur.line)
	}
	return blocks
}

// isProgram reports whether a README block is a whole file rather than a
// fragment of a function body.
func isProgram(code string) bool {
	return strings.HasPrefix(strings.TrimSpace(code), "package ")
}

// TestREADMEGoBlocksParse checks that every ```go block of README.md is Go
// as gofmt writes it: a complete program as a file, any other block as the
// body of a function returning error (so a fragment may `return err`). A
// reader copies these; one that does not parse, or that gofmt would
// rewrite, is a bug in the documentation.
func TestREADMEGoBlocksParse(t *testing.T) {
	t.Parallel()
	blocks := readmeGoBlocks(t)
	programs := 0
	for _, b := range blocks {
		src := b.code
		if isProgram(src) {
			programs++
		} else {
			var body strings.Builder
			for _, l := range strings.SplitAfter(strings.TrimRight(src, "\n"), "\n") {
				if strings.TrimSpace(l) != "" {
					body.WriteString("\t")
				}
				body.WriteString(l)
			}
			src = "package p\n\nfunc _() error {\n" + body.String() + "\n}\n"
		}
		if _, err := parser.ParseFile(token.NewFileSet(), "README.md", src, parser.ParseComments); err != nil {
			t.Errorf("README.md:%d: the ```go block does not parse: %v\n%s", b.line, err, src)
			continue
		}
		formatted, err := format.Source([]byte(src))
		if err != nil {
			t.Errorf("README.md:%d: gofmt: %v", b.line, err)
			continue
		}
		if !bytes.Equal(formatted, []byte(src)) {
			t.Errorf("README.md:%d: the ```go block is not gofmt-formatted; gofmt writes:\n%s", b.line, formatted)
		}
	}
	if programs == 0 {
		t.Errorf("README.md has no complete Go program (a ```go block starting with package); the main example should be one")
	}
}

// TestREADMEProgramsVet vets each complete program of README.md against
// this module, so that its calls, types and imports stay those of the
// current API. Each program is vetted as a file from a temporary
// directory, with the go command started in this module's directory: it
// builds with this module's dependencies (and the workspace's, in a
// workspace), the ones the test run itself built, so nothing is written
// into the tree and nothing is fetched, even where the module cache holds
// only what the run downloaded. (A module of its own for each program
// made the go command choose other versions, and read go.mod files the
// run never needed, which a fresh machine did not have.)
func TestREADMEProgramsVet(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("vetting README programs compiles the providers they import")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	vetted := 0
	for _, b := range readmeGoBlocks(t) {
		if !isProgram(b.code) {
			continue
		}
		vetted++
		file := filepath.Join(t.TempDir(), "main.go")
		if err := os.WriteFile(file, []byte(b.code), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(goTool, "vet", file)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOFLAGS=", "GOPROXY=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("README.md:%d: go vet of the program failed: %v\n%s", b.line, err, out)
		}
	}
	if vetted == 0 {
		t.Fatal("README.md has no complete Go program to vet")
	}
}
