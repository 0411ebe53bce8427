package drivertest

import (
	"strings"
	"testing"
)

// A Skip key that names no subtest would skip nothing, silently: Run
// refuses it, naming the key.
func TestCheckSkipNamesUnknownKeys(t *testing.T) {
	if err := checkSkip(map[string]string{"Codes": "a subtest", "Codes/ReadOnly": "a case"}); err != nil {
		t.Fatalf("checkSkip of known keys: %v", err)
	}
	for _, k := range []string{"Code", "Codes/Nope", "Driver/Codes"} {
		err := checkSkip(map[string]string{"Codes": "fine", k: "misspelt"})
		if err == nil || !strings.Contains(err.Error(), `"`+k+`"`) || strings.Contains(err.Error(), `"Codes"`) {
			t.Errorf("checkSkip with %q: %v, want an error naming it alone", k, err)
		}
	}
}
