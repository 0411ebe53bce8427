package telemetry

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// Session keys are often user ids or email addresses: the hash on a span
// must not be the plain SHA-256 of the key (reversed by hashing guesses),
// while the same key hashes the same within the process so its spans
// correlate, and different keys differ.
func TestHashKeyedPerProcess(t *testing.T) {
	const key = "alice@example.com"
	h := Hash(key)
	if len(h) != 32 {
		t.Fatalf("Hash(%q) = %q, want 32 hex digits", key, h)
	}
	if _, err := hex.DecodeString(h); err != nil {
		t.Fatalf("Hash(%q) = %q is not hex: %v", key, h, err)
	}
	if again := Hash(key); again != h {
		t.Errorf("Hash(%q) not stable within the process: %q then %q", key, h, again)
	}
	if other := Hash("bob@example.com"); other == h {
		t.Errorf("two keys hash alike: %q", h)
	}
	plain := sha256.Sum256([]byte(key))
	if strings.HasPrefix(hex.EncodeToString(plain[:]), h) {
		t.Errorf("Hash(%q) = %q is the plain SHA-256 of the key, reversible by guessing", key, h)
	}
	if strings.Contains(h, key) {
		t.Errorf("Hash(%q) = %q holds the key", key, h)
	}
}
