package pathsafe

import (
	"encoding/json"
	"errors"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// corpus is the shared path corpus in the module's testdata directory.
type corpus struct {
	Accept  map[string]string `json:"accept"`
	Escape  []string          `json:"escape"`
	Invalid []string          `json:"invalid"`
}

func loadCorpus(t *testing.T) corpus {
	t.Helper()
	data, err := os.ReadFile("../../testdata/paths.json")
	require.NoError(t, err)
	var c corpus
	require.NoError(t, json.Unmarshal(data, &c))
	require.NotEmpty(t, c.Accept)
	return c
}

func TestJail(t *testing.T) {
	c := loadCorpus(t)
	for in, rel := range c.Accept {
		got, err := Jail("/w", in)
		if assert.NoError(t, err, "Jail(%q)", in) {
			assert.Equal(t, path.Join("/w", rel), got, "Jail(%q)", in)
		}
	}
	assert.Equal(t, "/w", must(Jail("/w", "/")))
	for _, in := range c.Escape {
		_, err := Jail("/w", in)
		assert.ErrorIs(t, err, ErrEscape, "Jail(%q)", in)
	}
	for _, in := range append(c.Invalid, "", string([]byte{0xff})) {
		_, err := Jail("/w", in)
		assert.ErrorIs(t, err, ErrInvalid, "Jail(%q)", in)
	}
}

func must(s string, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return s
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
