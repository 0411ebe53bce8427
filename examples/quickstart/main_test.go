package main

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The README's main job must keep working on the default provider and on
// the fake.
func TestQuickstart(t *testing.T) {
	for _, url := range []string{"", "memory://"} {
		if err := run(url); err != nil {
			t.Errorf("run(%q): %v", url, err)
		}
	}
}
