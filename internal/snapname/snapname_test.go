package snapname

import (
	"maps"
	"regexp"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9_-]+$`)
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"", nil},
		{"My Env!", nil},
		{"", map[string]string{"Team": "A b", "x": ""}},
		{"--tricky--name--", map[string]string{"k": "v--w"}},
		{"ünïcode ☃", map[string]string{"ü": "☃"}},
	} {
		s, err := Encode(c.name, c.labels, "0123456789ab")
		if err != nil {
			t.Fatal(err)
		}
		if !valid.MatchString(s) {
			t.Fatalf("Encode(%q, %v) = %q: characters a provider refuses", c.name, c.labels, s)
		}
		name, labels, ok := Decode(s)
		if !ok || name != c.name || !maps.Equal(labels, c.labels) {
			t.Fatalf("Decode(Encode(%q, %v)) = %q, %v, %v", c.name, c.labels, name, labels, ok)
		}
	}
	if _, _, ok := Decode("someone-elses--snapshot"); ok {
		t.Fatal("a foreign name decoded")
	}
	if _, err := Encode(strings.Repeat("x", 400), nil, "00"); err == nil {
		t.Fatal("an over-long name was accepted")
	}
}
