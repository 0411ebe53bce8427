package backend

import (
	"errors"
	"io/fs"
	"path"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNumberLines(t *testing.T) {
	tests := []struct {
		content       string
		offset, limit int
		want          string
		total         int
	}{
		{"", 0, 0, "", 0},
		{"a\nb\nc\n", 0, 0, "     1\ta\n     2\tb\n     3\tc", 3},
		{"a\nb\nc", 1, 1, "     2\tb", 3},
		{"a\nb\nc", 3, 10, "", 3},
		{"a\n\nb", -5, 2, "     1\ta\n     2\t", 3},
	}
	for _, tt := range tests {
		got, total := NumberLines(tt.content, tt.offset, tt.limit)
		if got != tt.want || total != tt.total {
			t.Errorf("NumberLines(%q, %d, %d) = %q, %d; want %q, %d", tt.content, tt.offset, tt.limit, got, total, tt.want, tt.total)
		}
	}
}

func TestCharWindow(t *testing.T) {
	tests := []struct {
		content     string
		offset, max int
		want        string
	}{
		{"", 0, 10, ""},
		{"", 5, 10, ""},
		{"héllo wörld", 0, 5, "héllo"},
		{"héllo wörld", 6, 0, "wörld"},
		{"héllo wörld", 6, 100, "wörld"},
		{"héllo wörld", 11, 5, EndOfFile},
		{"héllo wörld", 50, 5, EndOfFile},
	}
	for _, tt := range tests {
		if got, _ := CharWindow(tt.content, tt.offset, tt.max); got != tt.want {
			t.Errorf("CharWindow(%q, %d, %d) = %q; want %q", tt.content, tt.offset, tt.max, got, tt.want)
		}
	}
}

func TestReplace(t *testing.T) {
	out, n, e := Replace("f", "a b a", "b", "c", false)
	if e != nil || out != "a c a" || n != 1 {
		t.Fatalf("unique: %q %d %v", out, n, e)
	}
	if _, _, e := Replace("f", "a b a", "a", "c", false); e == nil || e.Code != CodeAmbiguousMatch {
		t.Fatalf("ambiguous: %v", e)
	}
	out, n, e = Replace("f", "a b a", "a", "c", true)
	if e != nil || out != "c b c" || n != 2 {
		t.Fatalf("all: %q %d %v", out, n, e)
	}
	if _, _, e := Replace("f", "a b a", "z", "c", true); e == nil || e.Code != CodeNoMatch {
		t.Fatalf("no match: %v", e)
	}
	if _, _, e := Replace("f", "a", "", "c", true); e == nil || e.Code != CodeNoMatch {
		t.Fatalf("empty old: %v", e)
	}
}

func TestMatchGlob(t *testing.T) {
	tests := []struct {
		pattern, p string
		want       bool
	}{
		{"*.go", "main.go", true},
		{"*.go", "a/b/main.go", true},
		{"*.go", "main.gox", false},
		{"src/*.go", "src/a.go", true},
		{"src/*.go", "src/x/a.go", false},
		{"src/**/*.go", "src/a.go", true},
		{"src/**/*.go", "src/x/y/a.go", true},
		{"**/*.md", "docs/report..final.md", true},
		{"/src/*.go", "src/a.go", true},
		{"./src/*.go", "src/a.go", true},
		{"*.{go,md}", "x/readme.md", true},
		{"*.{go,md}", "x/readme.txt", false},
		{"app/\\[...slug\\]", "app/[...slug]", true},
		{"**", "any/thing", true},
	}
	for _, tt := range tests {
		got, err := MatchGlob(tt.pattern, tt.p)
		if err != nil || got != tt.want {
			t.Errorf("MatchGlob(%q, %q) = %v, %v; want %v", tt.pattern, tt.p, got, err, tt.want)
		}
	}
	for _, bad := range []string{"[", "a/[", "{a,b", "a}"} {
		if _, err := MatchGlob(bad, "a/b"); !errors.Is(err, path.ErrBadPattern) {
			t.Errorf("MatchGlob(%q) error = %v; want ErrBadPattern", bad, err)
		}
	}
}

func TestIsText(t *testing.T) {
	for _, s := range []string{"", "hello\n", "tab\tcr\r\n", "ünïcødé ✓", "\ufeffbom"} {
		if !IsText([]byte(s)) {
			t.Errorf("IsText(%q) = false", s)
		}
	}
	for _, s := range []string{"a\x00b", "\xff\xfe", "esc\x1b[0m", "\u0085"} {
		if IsText([]byte(s)) {
			t.Errorf("IsText(%q) = true", s)
		}
	}
}

func TestErrorMatchesFS(t *testing.T) {
	if !errors.Is(NotFound("a"), fs.ErrNotExist) || !errors.Is(PermissionDenied("a"), fs.ErrPermission) ||
		!errors.Is(InvalidPath("a", "x"), fs.ErrInvalid) || errors.Is(IsDirectory("a"), fs.ErrNotExist) {
		t.Fatal("Error.Is does not match the io/fs sentinels")
	}
	if got := NotFound("a.txt").Text(); got != "Error: file 'a.txt' not found" {
		t.Fatalf("Text = %q", got)
	}
}

func TestResultText(t *testing.T) {
	cases := []struct{ got, want string }{
		{(&LsResult{Files: []FileInfo{{Path: "a"}, {Path: "d", IsDir: true}}}).Text(), "a\nd/"},
		{(&LsResult{}).Text(), "No files found"},
		{(&GrepResult{Matches: []GrepMatch{{Path: "a.txt", Line: 3, Text: "x"}}, Truncated: true}).Text(), "a.txt:3:x\n[results truncated at 1 matches]"},
		{(&GrepResult{}).Text(), "No matches found"},
		{(&GrepResult{Matches: []GrepMatch{
			{Path: "a.txt", Line: 1, Text: "before", Context: true}, {Path: "a.txt", Line: 2, Text: "hit"},
			{Path: "a.txt", Line: 3, Text: "after", Context: true}, {Path: "a.txt", Line: 9, Text: "hit"},
			{Path: "b.txt", Line: 10, Text: "hit"}, {Path: "b.txt", Line: 11, Text: "after", Context: true},
		}, Truncated: true}).Text(), "a.txt-1-before\na.txt:2:hit\na.txt-3-after\n--\na.txt:9:hit\n--\nb.txt:10:hit\nb.txt-11-after\n[results truncated at 3 matches]"},
		{(&GrepResult{Skipped: []string{"big.bin", "hl.txt"}}).Text(), "No matches found\n[not searched (too large, or a hard link): big.bin, hl.txt]"},
		{(&ExecuteResult{Output: "out", ExitCode: 2}).Text(), "out\n[Command exited with code 2]"},
		{(&ExecuteResult{Output: "out\n", ExitCode: -1, Signal: "SIGKILL"}).Text(), "out\n[Command killed by signal SIGKILL]"},
		{(&ExecuteResult{Output: "", TimedOut: true, ExitCode: -1, Truncated: true}).Text(), "[Command timed out]\n[Output truncated]"},
		{(&WriteResult{Path: "a", Bytes: 3}).Text(), "Wrote 3 bytes to a"},
		{(&EditResult{Path: "a", Occurrences: 2}).Text(), "Replaced 2 occurrence(s) in a"},
		{(&ReadResult{Error: IsDirectory("d")}).Text(), "Error: 'd' is a directory, not a file"},
	}
	for i, c := range cases {
		if c.got != c.want {
			t.Errorf("case %d: %q; want %q", i, c.got, c.want)
		}
	}
}
