package fsbackend

import "testing"

func TestArchivePathRefusesInjectedLines(t *testing.T) {
	t.Parallel()
	ok := &opResult{kv: map[string][]string{"pbase": {"/home/user/workspace"}, "tar": {"/home/user/workspace/.fsbackend/tmp/snapshot.Ab12"}}}
	if got, err := archivePath(ok); err != nil || got != "/home/user/workspace/.fsbackend/tmp/snapshot.Ab12" {
		t.Fatalf("genuine archive refused: %q %v", got, err)
	}
	bad := map[string]map[string][]string{
		// A workspace named "x\ntar=/home/user/important" adds a line.
		"injected line": {"pbase": {"/home/user/x"}, "tar": {"/home/user/important", "/home/user/x\ntar=/home/user/important/.fsbackend/tmp/snapshot.1"}},
		"outside tmp":   {"pbase": {"/home/user/workspace"}, "tar": {"/home/user/important"}},
		"dot-dot":       {"pbase": {"/home/user/workspace"}, "tar": {"/home/user/workspace/.fsbackend/tmp/../../../important"}},
		"other name":    {"pbase": {"/home/user/workspace"}, "tar": {"/home/user/workspace/.fsbackend/tmp/other"}},
		"two pbases":    {"pbase": {"/a", "/home/user/workspace"}, "tar": {"/a/.fsbackend/tmp/snapshot.1"}},
		"no archive":    {"pbase": {"/home/user/workspace"}},
	}
	for name, kv := range bad {
		if got, err := archivePath(&opResult{kv: kv}); err == nil {
			t.Errorf("%s: accepted %q", name, got)
		}
	}
}
