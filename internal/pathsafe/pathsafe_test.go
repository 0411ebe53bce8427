package pathsafe

import (
	"errors"
	"path"
	"strings"
	"testing"
)

func TestJail(t *testing.T) {
	ok := map[string]string{
		"a.txt":               "/w/a.txt",
		"/a.txt":              "/w/a.txt",
		"report..final.md":    "/w/report..final.md",
		"pages/[...slug].tsx": "/w/pages/[...slug].tsx",
		"a/../b":              "/w/b",
		"./a//b/.":            "/w/a/b",
		"/":                   "/w",
		"...":                 "/w/...",
		"..a/b..":             "/w/..a/b..",
		"/etc/passwd":         "/w/etc/passwd",
		"a/b/../../c":         "/w/c",
		"unicode/файл 名前.txt": "/w/unicode/файл 名前.txt",
	}
	for in, want := range ok {
		got, err := Jail("/w", in)
		if err != nil || got != want {
			t.Errorf("Jail(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"..", "../x", "a/../../x", "/../etc", "a/b/../../.."} {
		if _, err := Jail("/w", in); !errors.Is(err, ErrEscape) {
			t.Errorf("Jail(%q) err = %v, want ErrEscape", in, err)
		}
	}
	for _, in := range []string{"", "a\x00b", "a\nb", "a\x7fb", "\x1b[31m", "a\u0085b", string([]byte{0xff})} {
		if _, err := Jail("/w", in); !errors.Is(err, ErrInvalid) {
			t.Errorf("Jail(%q) err = %v, want ErrInvalid", in, err)
		}
	}
}

func TestResolve(t *testing.T) {
	cases := map[string]string{
		"x":           "/home/user/x",
		"~":           "/home/user",
		"~/a/../b":    "/home/user/b",
		"/tmp/../etc": "/etc",
		"/a//b/":      "/a/b",
	}
	for in, want := range cases {
		got, err := Resolve("/home/user", in)
		if err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := Resolve("/home/user", "bad\x00"); !errors.Is(err, ErrInvalid) {
		t.Errorf("NUL accepted: %v", err)
	}
}

func TestWithin(t *testing.T) {
	if !Within("/w", "/w/a") || !Within("/w", "/w") || Within("/w", "/wx") || Within("/w", "/") || !Within("/", "/x") {
		t.Error("Within wrong")
	}
}

func FuzzJail(f *testing.F) {
	for _, s := range []string{"a", "../a", "a/..", "/x/../../y", "report..final.md", "a\x00", "//", "~/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := Jail("/root/w", p)
		if err != nil {
			if !errors.Is(err, ErrEscape) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("unexpected error kind %v", err)
			}
			return
		}
		if !Within("/root/w", got) || path.Clean(got) != got {
			t.Fatalf("Jail(%q) = %q escapes or is not clean", p, got)
		}
		if strings.ContainsRune(got, 0) {
			t.Fatalf("NUL survived in %q", got)
		}
		rel, err := Rel(p)
		if err != nil {
			t.Fatalf("Rel disagrees with Jail on %q: %v", p, err)
		}
		if again, err := Jail("/root/w", rel); err != nil || again != got {
			t.Fatalf("Jail not idempotent on %q: %q vs %q (%v)", p, again, got, err)
		}
	})
}

func TestTempSibling(t *testing.T) {
	a, b := TempSibling("/home/user/d/report.md"), TempSibling("/home/user/d/report.md")
	if a == b {
		t.Errorf("two temporary names are equal: %q", a)
	}
	for _, p := range []string{a, b} {
		if path.Dir(p) != "/home/user/d" || !strings.HasPrefix(path.Base(p), ".report.md.") || !strings.HasSuffix(p, TempSuffix) {
			t.Errorf("TempSibling = %q, want a hidden name next to the target", p)
		}
		if err := Check(p); err != nil {
			t.Errorf("TempSibling = %q: %v", p, err)
		}
	}
	long := "/d/" + strings.Repeat("é", 200)
	if p := TempSibling(long); len(path.Base(p)) > 150 || Check(p) != nil {
		t.Errorf("TempSibling of a long name = %q", p)
	}
}
