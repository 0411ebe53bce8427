package docker

import (
	"testing"
	"time"
)

// forgetGone drops proven ids a complete listing no longer saw, but keeps
// those proven after the listing began (a Create under way, not yet
// listed), so that Create's clean-up can still remove its container.
func TestForgetGone(t *testing.T) {
	t.Parallel()
	r := &Runtime{}
	since := time.Now()
	r.owned.Store("gone", since.Add(-time.Minute))
	r.owned.Store("listed", since.Add(-time.Minute))
	r.owned.Store("creating", since.Add(time.Millisecond))
	r.forgetGone(since, map[string]bool{"listed": true})
	for id, want := range map[string]bool{"gone": false, "listed": true, "creating": true} {
		if _, ok := r.owned.Load(id); ok != want {
			t.Errorf("%s: kept = %v, want %v", id, ok, want)
		}
	}
}

// The owner name depends on the key and on the container's id, so neither
// another key nor another id gives the same name.
func TestOwnerName(t *testing.T) {
	t.Parallel()
	a := make([]byte, keyBytes)
	b := append(make([]byte, keyBytes-1), 1)
	const id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	if ownerName(a, id) == ownerName(b, id) {
		t.Error("two keys gave one owner name")
	}
	if ownerName(a, id) == ownerName(a, id[:63]+"0") {
		t.Error("two ids gave one owner name")
	}
	if got := ownerName(a, id); len(got) != len(namePrefix)+64 || got[:len(namePrefix)] != namePrefix {
		t.Errorf("owner name %q", got)
	}
}
