package fsbackend

import (
	"strings"
	"testing"
)

// TestCutLineKeepsSecretsWhole checks that the cut of a long grep line,
// and the end of a line the output cap cut, never leave the start of a
// SecretEnv value (or of a line of a multi-line one) in the text.
func TestCutLineKeepsSecretsWhole(t *testing.T) {
	t.Parallel()
	const secret = "tok-5ecret-XYZ-123"
	const pem = "-----BEGIN-----\nzzqq77pp99\n-----END-----"
	// The values come as SecretEnv, or as Secrets (in no environment: a
	// brokered secret's value).
	t.Run("SecretEnv", func(t *testing.T) {
		testCutLineKeeps(t, &FilesystemBackend{opts: Options{SecretEnv: map[string]string{"K": secret, "PEM": pem}}}, secret)
	})
	t.Run("Secrets", func(t *testing.T) {
		testCutLineKeeps(t, &FilesystemBackend{opts: Options{Secrets: []string{secret, pem}}}, secret)
	})
}

func testCutLineKeeps(t *testing.T, b *FilesystemBackend, secret string) {
	for k := 1; k < len(secret); k++ {
		// The value starts k characters before the cut.
		line := strings.Repeat("a", MaxLineChars-k) + secret + "bbbb"
		got := b.cutLine(line, false)
		if got != strings.Repeat("a", MaxLineChars-k)+"..." {
			t.Errorf("value %d characters before the cut: ...%q", k, got[max(0, len(got)-30):])
		}
	}
	// Whole before the cut: kept (the caller redacts it).
	line := strings.Repeat("a", 10) + secret + strings.Repeat("b", MaxLineChars)
	if got := b.cutLine(line, false); !strings.Contains(got, secret) || !strings.HasSuffix(got, "...") {
		t.Errorf("a whole value before the cut is not kept whole: %q", got[:40])
	}
	// An open line (cut by the output cap) ending with a value's start.
	for _, tail := range []string{"t", "tok-5e", secret[:len(secret)-1], "zzqq7"} {
		if got := b.cutLine("aaaa"+tail, true); got != "aaaa..." {
			t.Errorf("open line ending %q: %q, want %q", tail, got, "aaaa...")
		}
		if got := b.cutLine("aaaa"+tail, false); got != "aaaa"+tail {
			t.Errorf("closed short line ending %q: %q, want it whole", tail, got)
		}
	}
	if got := b.cutLine("aaaa"+secret, true); got != "aaaa"+secret {
		t.Errorf("an open line ending with a whole value: %q", got)
	}
	// A line of a multi-line value across the cut.
	line = strings.Repeat("a", MaxLineChars-3) + "zzqq77pp99"
	if got := b.cutLine(line, false); got != strings.Repeat("a", MaxLineChars-3)+"..." {
		t.Errorf("a line of a multi-line value across the cut: ...%q", got[len(got)-20:])
	}
}
