package e2b

import (
	"context"
	"testing"

	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/filesystem"
)

// The mode decides where it can: owner bits for the user's own
// directory, group bits for its group's, and the other bits where group
// and other agree (whether or not the user is in the group); w and x are
// both needed.
func TestMayWriteDirFromMode(t *testing.T) {
	t.Parallel()
	u := who{user: "user", group: "user"}
	cases := []struct {
		owner, group string
		mode         uint32
		want         bool
	}{
		{"user", "user", 0o755, true},
		{"user", "user", 0o555, false},
		{"user", "user", 0o655, false}, // no x: cannot create entries
		{"root", "root", 0o755, false},
		{"root", "root", 0o777, true},
		{"root", "user", 0o775, true},
		{"root", "user", 0o757, false}, // group bits apply to a member
		{"user", "root", 0o577, false}, // owner bits apply to the owner
		{"0", "0", 0o755, false},
	}
	r := &Runtime{}
	for _, c := range cases {
		e := &filesystem.EntryInfo{Owner: c.owner, Group: c.group, Mode: c.mode}
		got, err := r.mayWriteDir(context.Background(), "id", &conn{}, u, "/d", e)
		if err != nil || got != c.want {
			t.Errorf("%s:%s %o: %v, %v; want %v", c.owner, c.group, c.mode, got, err, c.want)
		}
	}
	if ok, err := r.mayWriteDir(context.Background(), "id", &conn{}, who{root: true}, "/d", &filesystem.EntryInfo{Owner: "x", Mode: 0o500}); !ok || err != nil {
		t.Errorf("root: %v, %v; want true", ok, err)
	}
}

func TestSticky(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"dtrwxrwxrwx": true, "drwxrwxrwx": false, "-rw-r--r--": false, "": false, "Lrwxrwxrwx": false} {
		if got := sticky(&filesystem.EntryInfo{Permissions: s}); got != want {
			t.Errorf("%q: %v, want %v", s, got, want)
		}
	}
}
